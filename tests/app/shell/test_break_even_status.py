"""The status bar shows the break-even commit length next to the measured one; settings offer auto."""

from __future__ import annotations

from app_helpers import ask, load_pair

from app.shell.app_settings import StudioSettings
from app.shell.status_bar import StudioStatusBar


def test_status_bar_shows_measured_and_break_even_commit_lengths(qtbot):
    bar = StudioStatusBar()
    qtbot.addWidget(bar)
    label = bar.break_even
    bar.set_break_even(1.3, 5.9, "chain 7")
    assert label.text() == "commit 1.30 / break-even 5.90 (chain 7)"
    assert "does not pay" in label.toolTip() and "5.90 autoregressive steps" in label.toolTip()
    bar.set_break_even(4.0, 2.5, "chain 4")
    assert "4.00" in label.text() and "2.50" in label.text() and "pays" in label.toolTip()
    assert "does not" not in label.toolTip()
    bar.set_break_even(0.0, 3.2, "chain 1")        # nothing measured yet for it
    assert label.text() == "commit – / break-even 3.20 (chain 1)" and "not measured" in label.toolTip()
    bar.set_break_even(0.0, 0.0)                   # no cost table: nothing shown
    assert label.text() == ""


def test_auto_mode_answer_puts_both_numbers_in_the_status_bar(qtbot, make_window, tiny_pair):
    from engine_bridge.runtime import calibration
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

    s = StudioSettings(target=str(tiny_pair[0]), drafter=str(tiny_pair[1]), n_ctx=2048, mode="auto", max_tokens=32)
    # calibrate the configuration the app will load (a short table; the app reads it from the cache)
    with Engine.load(s.engine_config(), preflight=PAIR_PREFLIGHT) as eng:
        calibration.ensure(eng, chain_budgets=(1, 4), tree_budgets=(4,), steps=3, rounds=1)
    w = make_window(n_ctx=2048, mode="auto", max_tokens=32)
    combo = w.settings_panel.mode
    assert combo.findData("auto") >= 0 and combo.currentData() == "auto"
    load_pair(qtbot, w, tiny_pair)
    res = ask(qtbot, w, "Hello")
    sm = res.summary
    assert sm.mode == "auto" and sm.auto_note.startswith("auto: ") and sm.break_even > 0
    text = w.status.break_even.text()
    assert f"break-even {sm.break_even:.2f}" in text and sm.break_even_label in text
    assert text.startswith("commit ")
    assert sm.auto_note in w.chat.status.text()
