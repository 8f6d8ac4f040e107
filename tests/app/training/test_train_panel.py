"""The Train tab: a real (tiny, CPU) drafter training started from the tab on a tiny synthetic target.

Progress and loss points arrive while it runs, Cancel stops it with the app still answering, a
broken target file ends in a clear message, and a finished training's pair is loaded by the main
window. Everything is real: engine_bridge.training on PyTorch's CPU build, llama.cpp for the load.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.training.train_panel import TrainPanel, default_output

from app_helpers import ask, load_pair

torch = pytest.importorskip("torch")

RUN_TIMEOUT_MS = 300_000
#: a tiny CPU run: 2 prompts per category, short answers, a few small steps (the trainer's own knobs)
TINY = dict(n_per_category=2, max_new=16, gen_batch=8, batch=2, anchors=4, ckpt_every=1e9, val_seqs=8)


@pytest.fixture(scope="session")
def tiny_target(tiny_llama_pair) -> Path:
    """The session's tiny llama target (Phi-3 vocabulary, ChatML template, synthetic weights, a real GGUF)."""
    return tiny_llama_pair[0]


@pytest.fixture
def panel(qtbot):
    p = TrainPanel()
    qtbot.addWidget(p)
    p.show()
    yield p
    assert p.shutdown(), "the training thread did not stop"
    assert not p.running


# -- inputs (no training) -----------------------------------------------------------------------------
def test_inputs_are_checked_before_anything_runs(qtbot, panel, tmp_path, tiny_target):
    qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    assert not panel.running and "choose a target" in panel.status_label.text()
    panel.target_edit.setText(str(tmp_path / "missing.gguf"))
    assert panel.start() is False and "not a file" in panel.status_label.text()
    taken = tmp_path / "taken.gguf"
    taken.write_bytes(b"an earlier drafter")
    panel.target_edit.setText(str(tiny_target))
    panel.out_edit.setText(str(taken))
    assert panel.start() is False and "already exists" in panel.status_label.text()
    assert taken.read_bytes() == b"an earlier drafter"  # nothing overwritten
    assert panel.start_button.isEnabled() and not panel.cancel_button.isEnabled()


def test_a_bad_prompt_file_is_refused_in_the_status_line(qtbot, panel, tmp_path, tiny_target):
    import json

    from engine_bridge.common.resources import resource

    panel.target_edit.setText(str(tiny_target))
    panel.out_edit.setText(str(tmp_path / "d.gguf"))
    mine = tmp_path / "mine.jsonl"
    panel.prompts_edit.setText(str(tmp_path / "missing.jsonl"))
    assert panel.start() is False and "no such prompt file" in panel.status_label.text()
    mine.write_text('{"text": "Plan a picnic for six people."}\n{"text": "unfinished"\n')
    panel.prompts_edit.setText(str(mine))
    assert panel.start() is False and "mine.jsonl line 2: not JSON" in panel.status_label.text()
    q = json.loads(resource("prompts", "public", "humaneval.jsonl").read_text().splitlines()[3])
    mine.write_text(
        json.dumps({"text": "Plan a picnic for six people."})
        + "\n"
        + json.dumps({"text": q["messages"][0]["content"], "category": "code"})
        + "\n"
    )
    assert panel.start() is False and "mine.jsonl line 2 matches humaneval" in panel.status_label.text()
    mine.write_text(json.dumps({"text": "Plan a picnic for six people."}) + "\n")
    req = panel.build_request()
    assert req.prompts == mine and not panel.running
    assert not (tmp_path / "d.gguf").exists()


def test_default_output_never_overwrites(tmp_path, tiny_target):
    first = default_output(tiny_target, tmp_path)
    assert first == tmp_path / f"{tiny_target.stem}-dflash.gguf"
    first.write_bytes(b"x")
    assert default_output(tiny_target, tmp_path) == tmp_path / f"{tiny_target.stem}-dflash-2.gguf"


def test_current_pair_target_is_offered(qtbot, panel, tiny_target):
    assert not panel.current_button.isEnabled()
    panel.set_current_target(str(tiny_target))
    assert panel.target_edit.text() == str(tiny_target)  # an empty field takes it
    panel.target_edit.setText("/elsewhere/other.gguf")
    panel.set_current_target(str(tiny_target))
    assert panel.target_edit.text() == "/elsewhere/other.gguf"  # a typed choice is kept
    qtbot.mouseClick(panel.current_button, Qt.MouseButton.LeftButton)
    assert panel.target_edit.text() == str(tiny_target)


def tiny_options(panel: TrainPanel, **extra) -> None:
    panel.layers_spin.setValue(1)
    panel.block_combo.setCurrentText("8")
    panel.gen_seconds_spin.setValue(60)
    panel.seconds_spin.setValue(120)
    panel.device_combo.setCurrentText("cpu")
    panel.extra_options = dict(TINY, **extra)


# -- real training ------------------------------------------------------------------------------------
def test_training_from_the_tab_shows_progress_and_loads_the_pair(qtbot, make_window, tiny_target):
    w = make_window(max_tokens=8)
    panel = w.train
    w.show_page(panel)
    panel.set_current_target(str(tiny_target))
    tiny_options(panel, max_steps=12)
    events = []
    panel.progressed.connect(events.append)
    with qtbot.waitSignal(w.pairLoaded, timeout=RUN_TIMEOUT_MS) as loaded:
        qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
        assert panel.running and panel.cancel_button.isEnabled() and not panel.start_button.isEnabled()
        qtbot.waitUntil(lambda: len(panel.losses) >= 1, timeout=RUN_TIMEOUT_MS)
        assert "ETA" in panel.stage_label.text() and "loss" in panel.stage_label.text()
    info = loaded.args[0]
    out = Path(info.config.draft)
    assert out.exists() and info.config.target == tiny_target
    stages = [e.get("stage") for e in events if e.get("stage")]
    assert stages.index("prepare") < stages.index("generate") < stages.index("train") < stages.index("export")
    gen = [e for e in events if e.get("stage") == "generate"]
    assert gen[-1]["done"] == gen[-1]["total"] > 0
    train = [e for e in events if e.get("stage") == "train"]
    assert [e["step"] for e in train] == sorted(e["step"] for e in train) and train[-1]["step"] == 12
    assert all(e["eta_s"] is not None for e in train)
    # the held-out figure shown is the engine's walk (drafts accepted per chain-7 step)
    scored = [e for e in train if e.get("val_accepted") is not None]
    assert scored and all(0 <= e["val_walk"] <= 7 for e in scored)
    # every loss point is on the curve (the throttle merges redraws, never points)
    qtbot.waitUntil(lambda: len(panel.curve.getData()[1] if panel.curve.getData()[1] is not None else []) == len(train))
    assert list(panel.curve.getData()[1]) == pytest.approx([e["loss"] for e in train])
    assert panel.losses[-1] < panel.losses[0]  # it learned something
    assert panel.log_view.toPlainText().count("train: step") >= 2
    qtbot.waitUntil(lambda: not panel.running)
    assert panel.progress_bar.value() == panel.progress_bar.maximum()
    # the main window paired and loaded it: status bar, settings, and a chat answer through the drafter
    assert out.name in w.status.pair.text() and w.settings.drafter == str(out)
    assert w.pairing.drafter.path == str(out)
    from engine_bridge.models.library import Library

    assert Library().made_by_app(out) == "trained drafter"  # the library's Forget may delete it
    result = ask(qtbot, w, "Hello")
    assert result.summary.n_generated > 0 and result.summary.mode == "chain"


def test_cancel_stops_training_and_the_app_stays_up(qtbot, make_window, tiny_target, tiny_llama_pair):
    w = make_window(max_tokens=8)
    panel = w.train
    panel.target_edit.setText(str(tiny_target))
    tiny_options(panel)  # no step cap: only Cancel ends it before 120 s
    panel.seconds_spin.setValue(3600)
    with qtbot.waitSignal(panel.trainingCancelled, timeout=RUN_TIMEOUT_MS):
        assert panel.start()
        qtbot.waitUntil(lambda: len(panel.losses) >= 1, timeout=RUN_TIMEOUT_MS)
        # the UI thread is free while it trains: a click on another tab is handled at once
        w.tabs.setCurrentIndex(0)
        assert w.tabs.currentIndex() == 0 and panel.running
        qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
        assert "cancelling" in panel.status_label.text()
    qtbot.waitUntil(lambda: not panel.running, timeout=30_000)
    out = panel._request.out
    assert not out.exists()  # nothing exported, nothing loaded
    assert "cancelled" in panel.status_label.text() and panel.start_button.isEnabled()
    assert w.engine.state == "empty"
    # the app goes on: a pair loads and answers
    load_pair(qtbot, w, tiny_llama_pair)
    assert ask(qtbot, w, "Hi").summary.n_generated > 0


def test_a_broken_target_ends_in_a_clear_message(qtbot, panel, tiny_target, tmp_path):
    broken = tmp_path / "broken-target.gguf"
    broken.write_bytes(tiny_target.read_bytes()[:4096])  # a truncated GGUF
    panel.target_edit.setText(str(broken))
    tiny_options(panel, max_steps=2)
    with qtbot.waitSignal(panel.trainingFailed, timeout=RUN_TIMEOUT_MS) as failed:
        assert panel.start()
    message = failed.args[0]
    assert "broken-target.gguf" in message, message
    qtbot.waitUntil(lambda: not panel.running)
    assert panel.status_label.text() == message and "b00020" in panel.status_label.styleSheet()
    assert panel.start_button.isEnabled() and not panel._request.out.exists()


def test_cuda_without_a_device_is_a_clear_error(qtbot, panel, tiny_target):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    panel.target_edit.setText(str(tiny_target))
    tiny_options(panel, max_steps=2)
    panel.device_combo.setCurrentText("cuda")
    with qtbot.waitSignal(panel.trainingFailed, timeout=RUN_TIMEOUT_MS) as failed:
        assert panel.start()
    assert "no CUDA device" in failed.args[0]
    assert "--device cpu" in failed.args[0] or "cpu" in failed.args[0]


def test_the_gpu_count_reaches_the_trainer_and_is_checked(qtbot, panel, tiny_target):
    """The GPUs box goes into the request (the trainer then runs a process per GPU, as
    ``train-drafter --gpus``); more GPUs than torch sees is refused before any preparation."""
    from engine_bridge.training.train_chat import check_gpus

    panel.target_edit.setText(str(tiny_target))
    tiny_options(panel)
    assert panel.build_request().gpus == 1
    panel.gpus_spin.setValue(4)
    assert panel.build_request().gpus == 4
    check_gpus("cpu", 4)  # on the CPU, processes stand in for GPUs
    n = torch.cuda.device_count()
    want = max(2, n + 1)
    with pytest.raises(ValueError, match=f"{want} GPUs asked for, but torch sees {n}"):
        check_gpus("cuda", want)
