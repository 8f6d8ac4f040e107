"""Settings and conversations survive a restart; closing mid-generation stops the worker cleanly."""

from __future__ import annotations

import json
import sqlite3

from app_helpers import ANSWER_TIMEOUT_MS, LOAD_TIMEOUT_MS, ask, load_pair
from PySide6.QtCore import QThread

from app.shell.app_settings import StudioSettings, open_settings


def test_settings_and_conversations_survive_a_restart(qtbot, make_window, tiny_pair, settings_file):
    w = make_window(max_tokens=10)
    load_pair(qtbot, w, tiny_pair)
    w.side_tabs.setCurrentWidget(w.settings_panel)
    w.settings_panel.budget.setValue(7)
    w.settings_panel.temperature.setValue(0.0)
    w.settings_panel.top_k.setValue(12)
    w.chat.highlight_box.setChecked(False)
    res = ask(qtbot, w, "Remember me")
    w.close()
    assert w.engine._thread.isFinished()

    saved = StudioSettings.load(open_settings(settings_file))
    assert (saved.budget, saved.top_k, saved.highlight_drafts) == (7, 12, False)
    assert saved.target == str(tiny_pair[0]) and saved.drafter == str(tiny_pair[1])

    w2 = make_window()
    assert w2.settings_panel.budget.value() == 7 and w2.settings_panel.top_k.value() == 12
    assert not w2.chat.highlight_box.isChecked()
    assert w2.pairing.target.path == str(tiny_pair[0])
    # the last conversation is open again, with the answer's provenance
    assert [m.content for m in w2.chat.transcript.messages] == ["Remember me", res.text]
    restored = w2.chat.transcript.messages[1]
    assert len(restored.tokens) == 10 and restored.steps and restored.summary["n_generated"] == 10
    assert w2.conversations.count() == 1
    # the saved pair is reopened by itself once its check passes
    qtbot.waitUntil(lambda: w2.engine.state == "ready", timeout=LOAD_TIMEOUT_MS)
    w2.chat.highlight_box.setChecked(True)
    spans = w2.chat.transcript.token_spans()
    assert spans and w2.chat.transcript.tooltip_for_position(spans[0].start).startswith("step 1 ")


def test_closing_during_generation_exits_cleanly(qtbot, make_window, tiny_pair, store_file):
    w = make_window(max_tokens=4000)
    load_pair(qtbot, w, tiny_pair)
    thread: QThread = w.engine._thread
    w.chat.input.setPlainText("A long answer, please")
    w.chat.send_button.click()
    qtbot.waitUntil(lambda: len(w.chat.transcript.messages[-1].tokens) >= 3, timeout=ANSWER_TIMEOUT_MS)
    assert w.engine.state == "generating"
    # a crash now would lose nothing committed: the answer is already in the store, growing
    db = sqlite3.connect(store_file)
    early = db.execute("SELECT content FROM messages WHERE role='assistant'").fetchall()
    assert len(early) == 1 and early[0][0]
    w.close()  # must stop the generation and join the worker thread
    assert thread.isFinished()
    assert w._closed
    qtbot.wait(100)  # late queued replies must be harmless
    rows = db.execute("SELECT role, content, tokens FROM messages ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["user", "assistant"]
    shown = w.chat.transcript.messages[-1]
    assert rows[1][1] == shown.content and len(json.loads(rows[1][2])) == len(shown.tokens) >= 3


def test_closing_while_a_check_runs_and_nothing_loaded(qtbot, make_window, tiny_pair):
    w = make_window()
    w.pairing.set_pair(str(tiny_pair[0]), str(tiny_pair[1]))
    w.close()
    assert w.engine._thread.isFinished()
    assert not w.tasks.running()


def test_an_engine_that_does_not_stop_in_time_is_reported_without_holding_the_exit(
    qtbot, make_window, tiny_pair, capfd, monkeypatch
):
    """A modal box at close waited for a click: under Xvfb `--screenshot` hung with "The engine did not
    stop in time." until make test's timeout. The closing window now says it on stderr and goes on
    (the conftest fails any test that shows a modal box)."""
    w = make_window()
    load_pair(qtbot, w, tiny_pair)
    real = w.engine.shutdown
    monkeypatch.setattr(w.engine, "shutdown", lambda: real() and False)  # joined, but reported late
    w.close()
    assert w._closed and w.engine._thread.isFinished()
    assert "the engine did not stop within 30 s; closing anyway" in capfd.readouterr().err
