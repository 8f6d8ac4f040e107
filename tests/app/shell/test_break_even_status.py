"""The status bar shows the break-even commit length next to the measured one; settings offer auto."""

from __future__ import annotations

from app_helpers import ask, load_pair
from PySide6.QtCore import Qt

from app.shell.app_settings import StudioSettings
from app.shell.status_bar import StudioStatusBar


def test_status_bar_shows_measured_and_break_even_commit_lengths(qtbot):
    bar = StudioStatusBar()
    qtbot.addWidget(bar)
    label = bar.break_even
    bar.set_break_even(1.3, 5.9, "chain 7")
    assert label.text() == "speculation is slower here: 0.22× (chain 7) —"  # in words (issue 33)
    assert "commit 1.30 / break-even 5.90" in label.toolTip()
    assert "does not pay" in label.toolTip() and "5.90 autoregressive steps" in label.toolTip()
    bar.set_break_even(4.0, 2.5, "chain 4")
    assert "4.00" in label.text() and "2.50" in label.text() and "pays" in label.toolTip()
    assert "does not" not in label.toolTip()
    bar.set_break_even(0.0, 3.2, "chain 1")  # nothing measured yet for it
    assert label.text() == "commit – / break-even 3.20 (chain 1)" and "not measured" in label.toolTip()
    bar.set_break_even(0.0, 0.0)  # no cost table: nothing shown
    assert label.text() == ""


def test_slower_speculation_is_said_in_words_with_a_one_click_switch_to_auto(qtbot, make_window):
    """Issue 33, item 2: "commit 1.57 / break-even 10.60" in orange told a new user nothing."""
    w = make_window(mode="chain", budget=15)
    bar = w.status
    bar.set_break_even(1.57, 10.60, "chain 15", "chain")
    assert bar.break_even.text() == "speculation is slower here: 0.15× (chain 15) —"
    button = bar.switch_to_auto
    assert not button.isHidden() and button.text() == "switch to auto"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert w.settings.mode == "auto" and w.settings_panel.mode.currentData() == "auto"
    assert StudioSettings.load(w.qsettings).mode == "auto"  # saved like a choice made in Settings
    assert button.isHidden() and "auto" in bar.currentMessage()
    # in auto already: said in words, nothing to switch to
    bar.set_break_even(1.57, 10.60, "chain 15", "auto")
    assert bar.break_even.text() == "speculation is slower here: 0.15× (chain 15)" and button.isHidden()
    # when it pays, the numbers, and no button
    bar.set_break_even(4.0, 2.5, "chain 4", "chain")
    assert bar.break_even.text() == "commit 4.00 / break-even 2.50 (chain 4)" and button.isHidden()


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
    text, tip = w.status.break_even.text(), w.status.break_even.toolTip()
    assert f"break-even {sm.break_even:.2f}" in tip and sm.break_even_label in text
    # the numbers when it pays (or is not measured yet); in words when it does not (auto: no switch offered)
    slower = 0 < sm.break_even_commit <= sm.break_even
    assert text.startswith("speculation is slower here: " if slower else "commit ")
    assert w.status.switch_to_auto.isHidden()
    assert sm.auto_note in w.chat.status.text()


def test_a_first_auto_answer_shows_its_calibration_in_the_chat_instead_of_a_silent_wait(
    qtbot, make_window, tiny_pair, monkeypatch
):
    """Auto's first answer on a pair and machine measures their step costs before its first token
    (6.8 s on a 2-vCPU machine with the default pair): the chat's status line says so, step by step, and
    goes back to "generating" once tokens come; the next answer (cached costs) says nothing of it."""
    w = make_window(n_ctx=2048, mode="auto", max_tokens=16)
    load_pair(qtbot, w, tiny_pair)
    shown: list[str] = []
    real = w.chat.show_status
    monkeypatch.setattr(w.chat, "show_status", lambda text, error=False: (shown.append(text), real(text, error)))
    ask(qtbot, w, "Hello")
    said = [t for t in shown if t.startswith("auto measures what a step costs here")]
    assert said and said[0].startswith(
        "auto measures what a step costs here, once per pair and machine: AR: step costs 1/"
    )
    done = [int(t.rsplit(" ", 1)[1].split("/")[0]) for t in said]
    assert done == list(range(1, len(said) + 1))  # one line per configuration measured, in order
    last = shown.index(said[-1])
    assert any(t.startswith("generating (auto") for t in shown[last + 1 :])  # restored once tokens came
    assert not w.chat.status.text().startswith("auto measures")
    shown.clear()
    ask(qtbot, w, "Hello again")
    assert not [t for t in shown if t.startswith("auto measures")]
    # a re-check (the steps disagreed with the cached costs) says why; another request's lines are not shown
    why = "AR steps take 2.00 ms here; the calibration says 1.00 ms"
    shown.clear()
    w.session._on_generate_progress(w.session._run + 1, f"calibrating again: {why}")
    assert not shown
    w.session._on_generate_progress(w.session._run, f"calibrating again: {why}")
    assert shown == [f"auto measures the step costs again ({why})…"]
