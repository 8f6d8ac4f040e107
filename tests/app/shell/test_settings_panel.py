"""Settings: K/V pairs the build cannot run are disabled with the reason; reload on request; modes."""

from __future__ import annotations

from app_helpers import LOAD_TIMEOUT_MS, load_pair, wait_report

from app.diagnostics.profiler_view import KEYS
from app.shell.settings_panel import tree_supported


def _item(combo, name):
    return combo.model().item(combo.findData(name))


def test_kv_types_the_model_cannot_run_are_disabled_with_reasons(qtbot, make_window, tiny_pair):
    w = make_window()
    w.pairing.set_pair(str(tiny_pair[0]), str(tiny_pair[1]))
    wait_report(qtbot, w)
    qtbot.waitUntil(
        lambda: w.advisor.target_info is not None and w.advisor.drafter_info is not None, timeout=LOAD_TIMEOUT_MS
    )
    p = w.settings_panel
    tk, tv = p.kv[("target", "k")], p.kv[("target", "v")]
    # head_dim 16: 32-value blocks cannot be used with flash attention (auto resolves to on for CPU)
    assert _item(tk, "f16").isEnabled() and _item(tv, "bf16").isEnabled()
    q8v = _item(tv, "q8_0")
    assert not q8v.isEnabled() and "head_dim 16" in q8v.toolTip()
    assert not _item(tk, "q4_0").isEnabled() and "head_dim" in _item(tk, "q4_0").toolTip()
    assert not _item(p.kv[("drafter", "v")], "q8_0").isEnabled()
    # flash attention off: a quantised K works, a quantised V needs flash attention
    p.flash_attn.setCurrentIndex(p.flash_attn.findData("off"))
    assert _item(tk, "q8_0").isEnabled()
    assert not _item(tv, "q8_0").isEnabled() and "flash attention" in _item(tv, "q8_0").toolTip()
    tk.setCurrentIndex(tk.findData("q8_0"))
    assert w.settings.target_k == "q8_0" and w.settings.flash_attn == "off"
    assert wait_report(qtbot, w).ok  # the pairing check agrees


def test_a_change_that_needs_a_reload_says_so_and_reloads_on_request(qtbot, make_window, tiny_pair):
    w = make_window(n_ctx=2048)
    load_pair(qtbot, w, tiny_pair)
    p = w.settings_panel
    w.side_tabs.setCurrentWidget(p)
    assert not p.banner.isVisible()
    p.temperature.setValue(0.5)  # generation settings need no reload
    assert not p.banner.isVisible()
    p.n_ctx.setValue(3072)
    assert p.banner.isVisible() and "context size" in p.banner_text.text()
    assert p.apply_button.text() == "Reload now"
    with qtbot.waitSignal(w.pairLoaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        p.apply_button.click()
    assert loaded.args[0].describe["n_ctx"] == 3072
    assert not p.banner.isVisible()
    p.n_ctx.setValue(2048)
    assert p.banner.isVisible()
    p.n_ctx.setValue(3072)  # back to what is loaded: nothing pending
    assert not p.banner.isVisible()


def test_verify_modes_offer_tree_only_when_the_engine_has_it(qtbot, make_window):
    w = make_window()
    modes = [w.settings_panel.mode.itemData(i) for i in range(w.settings_panel.mode.count())]
    assert modes[0] == "chain" and "ar" in modes
    assert ("tree" in modes) == tree_supported()


def test_autoregressive_mode_runs_without_drafts(qtbot, make_window, tiny_pair):
    from app_helpers import ask

    w = make_window(max_tokens=6)
    load_pair(qtbot, w, tiny_pair)
    p = w.settings_panel
    p.mode.setCurrentIndex(p.mode.findData("ar"))
    res = ask(qtbot, w, "Plain decoding")
    assert res.summary.mode == "ar" and res.summary.n_drafted == 0
    assert not any(s.draft for s in w.chat.transcript.token_spans())
    # 6 tokens: the prefill's, then 5 decode steps (the plots show decode steps)
    assert w.plots.step_count() == 5 and "autoregressive" in w.plots.summary.text()
    assert w.chat.transcript.token_spans()[0].highlighted is False


def test_tree_mode_runs_when_the_engine_offers_it(qtbot, make_window, tiny_pair):
    import pytest
    from app_helpers import ask

    if not tree_supported():
        pytest.skip("this engine has no tree verification yet")
    w = make_window(max_tokens=10, budget=8)
    load_pair(qtbot, w, tiny_pair)
    p = w.settings_panel
    p.mode.setCurrentIndex(p.mode.findData("tree"))
    res = ask(qtbot, w, "Branch out")
    assert res.summary.mode == "tree" and res.summary.n_generated == 10
    nodes = [w.profiler.model.value(r, KEYS.index("tree_nodes")) for r in range(w.profiler.row_count())]
    assert w.profiler.row_count() == len(res.steps) and max(nodes) > 0


def test_gpu_split_settings_show_what_each_gpu_holds_and_need_a_reload(qtbot, make_window, tiny_pair):
    w = make_window(n_ctx=2048)
    load_pair(qtbot, w, tiny_pair)
    p = w.settings_panel
    w.side_tabs.setCurrentWidget(p)
    # this machine has no GPU: the panel says so
    p.refresh_devices()
    assert "No GPU" in p.devices_view.text()
    # two described GPUs (the panel plans over whatever its source lists)
    gib = 2**30
    gpus = [
        {"name": "CUDA0", "description": "GPU A", "memory_free": 8 * gib, "memory_total": 8 * gib},
        {"name": "CUDA1", "description": "GPU B", "memory_free": 8 * gib, "memory_total": 8 * gib},
    ]
    p.gpu_source = lambda: gpus
    p.tensor_split.setText("1,3")
    p.tensor_split.editingFinished.emit()
    assert w.settings.tensor_split == "1,3"
    text = p.devices_view.text()
    assert "GPU0  GPU A: 8.00 GiB free" in text and "Fits:" in text
    assert "target: GPU0 (GPU A): layers 0" in text and "drafter: GPU1 (GPU B)" in text  # beside the output
    assert p.banner.isVisible() and "GPU split" in p.banner_text.text()
    # the drafter on GPU 0 instead
    p.draft_gpu.setValue(0)
    assert "drafter: GPU0 (GPU A)" in p.devices_view.text() and "drafter GPU" in p.banner_text.text()
    # a GPU too small: the numbers and the fix
    gpus[0]["memory_free"] = 1 << 20
    p.split_mode.setCurrentIndex(p.split_mode.findData("row"))
    text = p.devices_view.text()
    assert "Does not fit" in text and "GPU0 (GPU A) would hold" in text and "--tensor-split" in text
    # a split that does not read: said beside the field, and the settings keep the last good one
    p.tensor_split.setText("3,x")
    p.tensor_split.editingFinished.emit()
    assert p.split_error.isVisible() and "numbers separated by commas" in p.split_error.text()
    assert w.settings.tensor_split == "1,3"
    cfg = w.settings.engine_config()
    assert cfg.target_placement.tensor_split == (1.0, 3.0) and cfg.target_placement.split_mode == "row"
    assert cfg.draft_placement.main_gpu == 0


def test_the_exact_verify_is_a_load_setting_and_reaches_the_engine(qtbot, make_window, tiny_pair):
    """Issue 29: the user chooses the exact verify in settings; it needs a reload, and the reloaded
    engine runs with it (its describe says so), then chats as before."""
    w = make_window(n_ctx=2048)
    load_pair(qtbot, w, tiny_pair)
    p = w.settings_panel
    w.side_tabs.setCurrentWidget(p)
    assert not p.exact.isChecked() and w.settings.exact_verify is False
    p.exact.setChecked(True)
    assert w.settings.exact_verify is True
    assert p.banner.isVisible() and "exact verify" in p.banner_text.text()
    with qtbot.waitSignal(w.pairLoaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        p.apply_button.click()
    assert loaded.args[0].describe["exact"] is True
    assert not p.banner.isVisible()


def test_the_drafter_window_is_a_load_setting_held_to_what_the_engine_takes(qtbot, make_window, tiny_pair):
    """The drafter's window: 512 cells by default, 0 for the whole context; a value the engine
    would refuse (1-127) is raised to 128; a change needs a reload, and the reloaded drafter runs
    with it."""
    w = make_window(n_ctx=2048)
    load_pair(qtbot, w, tiny_pair)
    p = w.settings_panel
    w.side_tabs.setCurrentWidget(p)
    assert p.draft_window.value() == 512 and w.settings.engine_config().draft_window == 512
    p.draft_window.setValue(100)
    assert w.settings.draft_window == 128 and w.settings.engine_config().draft_window == 128
    assert p.banner.isVisible() and "drafter window" in p.banner_text.text()
    p.draft_window.setValue(0)
    assert w.settings.draft_window == 0
    with qtbot.waitSignal(w.pairLoaded, timeout=LOAD_TIMEOUT_MS) as loaded:
        p.apply_button.click()
    assert loaded.args[0].describe["draft_window"] == 0
    assert not p.banner.isVisible()


def test_a_budget_at_its_modes_default_follows_the_mode_and_a_chosen_one_stays(qtbot, make_window, monkeypatch):
    """On a GPU build chain's default budget is 5 and tree's 7 (runtime.default_mode): switching the
    mode moves a budget still at the old mode's default to the new one's, and leaves a chosen one."""
    from engine_bridge.runtime import llama_ffi

    assert tree_supported()  # this engine verifies trees
    monkeypatch.setattr(llama_ffi, "build_info", lambda: {"backend": "cuda"})
    w = make_window(mode="chain", budget=5)
    p = w.settings_panel
    p.mode.setCurrentIndex(p.mode.findData("tree"))
    assert (w.settings.mode, w.settings.budget, p.budget.value()) == ("tree", 7, 7)
    p.mode.setCurrentIndex(p.mode.findData("chain"))
    assert (w.settings.mode, w.settings.budget) == ("chain", 5)
    p.budget.setValue(9)  # the user's choice
    p.mode.setCurrentIndex(p.mode.findData("tree"))
    assert (w.settings.mode, w.settings.budget) == ("tree", 9)
    monkeypatch.setattr(llama_ffi, "build_info", lambda: {"backend": "cpu"})  # every mode's default 7
    p.budget.setValue(7)
    p.mode.setCurrentIndex(p.mode.findData("chain"))
    assert (w.settings.mode, w.settings.budget) == ("chain", 7)
