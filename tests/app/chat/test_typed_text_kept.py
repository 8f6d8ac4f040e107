"""Typed text is never lost at Send (issue 32).

The input box was cleared before the store took the message: with a full disk or a store of
another schema the message vanished and the error went only to stderr. Real store, real window,
real engine on the tiny pair; the store is made to refuse by SQLite itself.
"""

from __future__ import annotations

import sqlite3

from app_helpers import ANSWER_TIMEOUT_MS, ask, load_pair


def _send(w, text):
    w.chat.input.setPlainText(text)
    w.chat.send_button.click()


def test_send_without_a_pair_keeps_the_text(make_window):
    w = make_window()
    w.chat.send_button.setEnabled(True)  # as when a pair was loaded and then failed
    _send(w, "my carefully typed question")
    assert w.chat.input.toPlainText() == "my carefully typed question"


def test_a_full_disk_keeps_the_text_and_says_why(qtbot, make_window, tiny_pair, store_file):
    w = make_window(max_tokens=8)
    load_pair(qtbot, w, tiny_pair)
    ask(qtbot, w, "first question")  # the conversation exists and has pages
    pages = w.store._db.execute("PRAGMA page_count").fetchone()[0]
    w.store._db.execute(f"PRAGMA max_page_count={pages}")  # SQLite now answers SQLITE_FULL
    before = len(w.chat.transcript.messages)
    _send(w, "second question " + "x" * 20000)
    assert w.chat.input.toPlainText().startswith("second question ")
    assert "full" in w.chat.status.text()
    assert len(w.chat.transcript.messages) == before
    # once there is room again, the same text sends and the box empties
    w.store._db.execute("PRAGMA max_page_count=1073741823")
    with qtbot.waitSignal(w.answerFinished, timeout=ANSWER_TIMEOUT_MS):
        w.chat.send_button.click()
    assert w.chat.input.toPlainText() == ""
    rows = sqlite3.connect(store_file).execute("SELECT content FROM messages WHERE role='user'").fetchall()
    assert [r[0][:16] for r in rows] == ["first question", "second question "]


def test_a_store_of_another_schema_keeps_the_text(qtbot, make_window, tiny_pair, store_file):
    w = make_window(max_tokens=8)
    load_pair(qtbot, w, tiny_pair)
    db = sqlite3.connect(store_file)
    db.execute("DROP TABLE messages")  # another program rewrote the store under us
    db.commit()
    db.close()
    _send(w, "do not lose me")
    assert w.chat.input.toPlainText() == "do not lose me"
    assert "refused" in w.chat.status.text() and "messages" in w.chat.status.text()
    assert w.chat.transcript.messages == []
