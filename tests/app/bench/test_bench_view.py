"""The Bench tab on a real tiny pair: run a two-row sweep, watch progress and plot, export, cancel."""

from __future__ import annotations

import base64
import json
import re

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from app.bench.bench_view import BenchView
from engine_bridge.bench.runner import DEFAULT_BLOCK
from engine_bridge.bench.schema import validate

RUN_TIMEOUT_MS = 120_000


@pytest.fixture
def view(qtbot, tiny_pair):
    v = BenchView()
    qtbot.addWidget(v)
    # one thread: OpenMP spinning on every core of a small shared box makes tiny runs crawl
    v.set_pair(tiny_pair[0], tiny_pair[1], {"n_ctx": 512, "n_batch": 256, "n_ubatch": 64, "n_threads": 1})
    v.suite_combo.setCurrentText("math")
    v.limit_spin.setValue(2)
    v.reps_spin.setValue(2)
    v.tokens_spin.setValue(10)
    v.show()
    yield v
    v.shutdown()
    assert not v.running


def test_bench_tab_runs_a_sweep_and_exports(qtbot, view, tmp_path):
    assert view.objectName() == "benchView"
    assert view.findChild(type(view.plot), "benchPlot") is view.plot
    assert not view.export_buttons["json"].isEnabled()
    view.budget_edit.setText("2,5")
    with qtbot.waitSignal(view.runFinished, timeout=RUN_TIMEOUT_MS) as done:
        qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
        assert view.running and not view.run_button.isEnabled() and view.cancel_button.isEnabled()
        qtbot.waitUntil(lambda: view.progress_bar.value() > 0, timeout=RUN_TIMEOUT_MS)
        assert "ETA" in view.status_label.text()
    report = done.args[0]
    qtbot.waitUntil(lambda: not view.running, timeout=10_000)
    assert validate(report) == []
    assert [r["id"] for r in report["rows"]] == ["ar", "c0", "c1"]
    assert [r["budget"] for r in report["rows"]] == [0, 2, 5]
    assert all(r["status"] == "ok" for r in report["rows"])
    assert view.progress_bar.value() == view.progress_bar.maximum() == 3 * 2 * 2
    assert view.status_label.text().startswith("done")
    # the table shows the report's rows and figures
    assert view.table.rowCount() == 3
    headers = [view.table.horizontalHeaderItem(i).text() for i in range(view.table.columnCount())]
    ts_col = headers.index("tok/s")
    for i, r in enumerate(report["rows"]):
        assert view.table.item(i, 0).text() == r["id"]
        assert view.table.item(i, ts_col).text() == f"{r['avg_ts']:.2f}"
    # the plot ends on the rows' means (with their intervals)
    assert view.bar_heights() == pytest.approx([r["avg_ts"] for r in report["rows"]])
    # a different baseline re-flags the deltas without running again
    view.baseline_combo.setCurrentIndex(1)
    view.baseline_combo.activated.emit(1)
    assert view.report["settings"]["baseline_row"] == "c0" and view.report["rows"][1]["is_baseline"]
    # exports
    assert all(b.isEnabled() for b in view.export_buttons.values())
    out = {k: view.export(k, tmp_path / f"bench.{k}") for k in ("json", "csv", "md", "html")}
    assert json.loads(out["json"].read_text())["rows"][0]["avg_ts"] == report["rows"][0]["avg_ts"]
    assert out["csv"].read_text().count("\n") == 4
    assert "| c1 |" in out["md"].read_text()
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", out["html"].read_text())
    assert len(images) == 3
    for data in images:
        img = QImage.fromData(base64.b64decode(data), "PNG")
        assert not img.isNull() and img.width() > 100 and img.height() > 50


def test_cancel_keeps_what_finished(qtbot, view):
    view.reps_spin.setValue(3)
    view.budget_edit.setText("2,3,4")
    seen = []

    def cancel_after_first(_):
        seen.append(1)
        if len(seen) == 1:
            view.cancel()

    # cancel as soon as one generation has been timed (progress > 0)
    view.progress_bar.valueChanged.connect(cancel_after_first)
    with qtbot.waitSignal(view.runFinished, timeout=RUN_TIMEOUT_MS) as done:
        assert view.start()
    report = done.args[0]
    qtbot.waitUntil(lambda: not view.running, timeout=10_000)
    assert report["status"] == "cancelled"
    assert 1 <= len(report["runs"]) < 4 * 3 * 2
    assert all(r["status"] == "cancelled" for r in report["rows"][1:])
    assert view.status_label.text().startswith("cancelled")
    assert view.export_buttons["html"].isEnabled()
    assert view.run_button.isEnabled() and not view.cancel_button.isEnabled()


def test_prompts_per_turn_reach_the_run(qtbot, view):
    """The tab's "Prompts per turn" is the bench's round_prompts: with 1, the rows take the suite's
    prompts one at a time in turn, and the report says so."""
    # default: blocks of 10 prompts, each row in turn (0 in the box: the whole suite)
    assert view.build_spec().round_prompts == DEFAULT_BLOCK == 10
    view.block_spin.setValue(1)
    view.budget_edit.setText("2")
    with qtbot.waitSignal(view.runFinished, timeout=RUN_TIMEOUT_MS) as done:
        assert view.start()
    report = done.args[0]
    qtbot.waitUntil(lambda: not view.running, timeout=10_000)
    assert report["settings"]["round_prompts"] == 1
    assert all(r["status"] == "ok" for r in report["rows"])
    # runs arrive prompt by prompt, each row in turn, repetition by repetition
    order = [(r["rep"], r["prompt_id"], r["row_id"]) for r in report["runs"]]
    prompts = list(dict.fromkeys(p for _, p, _ in order))
    assert order == [(rep, p, row) for rep in range(2) for p in prompts for row in ("ar", "c0")]


def test_bad_inputs_are_reported_not_run(qtbot, view):
    view.budget_edit.setText("4,zero")
    assert not view.start()
    assert "budget" in view.status_label.text() and not view.running
    fresh = BenchView()
    qtbot.addWidget(fresh)
    assert not fresh.start()
    assert "choose a target" in fresh.status_label.text()


def test_the_bench_refuses_a_pair_the_pair_tab_refused_and_tells_drafter_files_apart(
    qtbot, make_window, tiny_pair, tmp_path
):
    """Issue 33, item 3: Run is disabled with the Pair tab's reasons, and the Pair label names the folder."""
    from app_helpers import wait_report
    from engine_bridge.models import synth

    target, _ = tiny_pair
    good = synth.write_drafter_for(target, tmp_path / "good" / "drafter.gguf", synth.DrafterSpec(n_layer=1))
    bad = synth.write_drafter_for(
        target, tmp_path / "nomask" / "drafter.gguf", synth.DrafterSpec(n_layer=1, with_mask_token=False)
    )
    w = make_window()
    w.pairing.set_pair(str(target), str(bad))
    report = wait_report(qtbot, w)
    assert not report.ok and "mask_token" in [c.name for c in report.failures]
    assert not w.pairing.load_button.isEnabled()
    bench = w.bench
    qtbot.waitUntil(lambda: not bench.run_button.isEnabled(), timeout=10_000)
    status = bench.status_label.text()
    assert status.startswith("The Pair tab's check refuses this pair (") and "mask_token" in status
    assert all(c.reason in status for c in report.failures)
    assert bench.start() is False and not bench.running
    assert bench.pair_label.text() == f"{target.parent.name}/{target.name} + nomask/drafter.gguf"

    w.pairing.set_pair(str(target), str(good))
    assert wait_report(qtbot, w).ok
    qtbot.waitUntil(bench.run_button.isEnabled, timeout=10_000)
    assert bench.refusal() is None and not bench.status_label.text()
    assert bench.pair_label.text().endswith(" + good/drafter.gguf")


def test_a_first_bench_measures_the_budget_chat_starts_with(qtbot, tiny_pair, monkeypatch):
    """The budget field starts at chat's default for chain (5 on a GPU build, 7 on a CPU one), and a
    single tree row without a budget takes tree's default."""
    from engine_bridge.runtime import llama_ffi

    for backend, chain_budget in (("cuda", 5), ("cpu", 7)):
        monkeypatch.setattr(llama_ffi, "build_info", lambda b=backend: {"backend": b})
        v = BenchView()
        qtbot.addWidget(v)
        v.set_pair(tiny_pair[0], tiny_pair[1], {"n_ctx": 512})
        assert v.budget_edit.text() == str(chain_budget)
        spec = v.build_spec()
        assert (spec.verify_mode, spec.budget, spec.sweep) == ("chain", chain_budget, {})
        v.budget_edit.setText("")
        v.verify_edit.setText("tree")
        spec = v.build_spec()
        assert (spec.verify_mode, spec.budget) == ("tree", 7)
        v.shutdown()
