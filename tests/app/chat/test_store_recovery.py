"""A damaged, newer, read-only or oddly filled chat store never stops the app (issue 32).

Real SQLite files: a store made by the app, then damaged the way a disk, a crash or another
version damages it. The store must open, say what happened, and never delete the user's file.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from app.chat.conversations import STORE_VERSION, ConversationStore, Message, StoreError


def _filled(path: Path, n: int = 3) -> int:
    store = ConversationStore(path)
    cid = store.create()
    for i in range(n):
        store.add(cid, Message("user", f"question {i} " + "x" * 2000))
        store.add(cid, Message("assistant", f"answer {i}", tokens=[("answer", "target", 0)], steps={0: (3, 1, 2)}))
    store.close()
    return cid


def _asides(path: Path) -> list[Path]:
    return sorted(
        p
        for p in path.parent.iterdir()
        if p.name.startswith(path.name + ".unreadable-") and not p.name.endswith(("-wal", "-shm"))
    )


def test_new_store_is_versioned(tmp_path):
    path = tmp_path / "c.sqlite3"
    ConversationStore(path).close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION >= 1


def test_unversioned_store_migrates_forward_and_keeps_its_messages(tmp_path):
    path = tmp_path / "c.sqlite3"
    cid = _filled(path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=0")  # as every store before versioning was
    db.commit()
    db.close()
    store = ConversationStore(path)
    assert store.persistent and not store.notices
    assert len(store.messages(cid)) == 6
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION


@pytest.mark.parametrize("damage", ["garbage", "truncated", "zeroed_pages"])
def test_unreadable_store_is_moved_aside_never_deleted(tmp_path, damage):
    path = tmp_path / "c.sqlite3"
    _filled(path, n=40)
    data = path.read_bytes()
    if damage == "garbage":
        bad = b"this is not a database at all\n" * 200
    elif damage == "truncated":
        bad = data[: len(data) // 2]
    else:
        bad = data[:4096] + b"\0" * (len(data) - 4096)  # the header survives, the pages do not
    path.write_bytes(bad)

    store = ConversationStore(path)
    assert store.persistent
    assert store.list() == []
    asides = _asides(path)
    assert len(asides) == 1 and asides[0].read_bytes() == bad  # moved with the time, not deleted
    assert store.moved_to == asides[0]
    assert any(str(asides[0]) in n and "moved" in n for n in store.notices), store.notices
    cid = store.create()  # and the new store works
    store.add(cid, Message("user", "hello again"))
    assert [m.content for m in ConversationStore(path).messages(cid)] == ["hello again"]


def test_newer_store_is_refused_untouched_and_the_session_runs_without_history(tmp_path):
    path = tmp_path / "c.sqlite3"
    _filled(path)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={STORE_VERSION + 5}")
    db.commit()
    db.close()
    before = path.read_bytes()
    store = ConversationStore(path)
    assert not store.persistent and store.list() == []
    assert any("newer" in n and str(STORE_VERSION + 5) in n for n in store.notices), store.notices
    cid = store.create()  # the session still chats, in memory
    store.add(cid, Message("user", "hi"))
    store.close()
    assert path.read_bytes() == before and not _asides(path)


@pytest.mark.parametrize(
    "column,value",
    [
        ("tokens", "{not json"),
        ("tokens", "5"),
        ("tokens", '[["piece", "target"]]'),
        ("steps", "[1, 2, 3]"),
        ("steps", '{"0": [1, 2]}'),
        ("summary", '"a string"'),
    ],
)
def test_a_row_that_does_not_decode_is_skipped_and_reported(tmp_path, column, value):
    path = tmp_path / "c.sqlite3"
    cid = _filled(path)
    db = sqlite3.connect(path)
    bad_id = db.execute("SELECT id FROM messages WHERE role='assistant' ORDER BY id LIMIT 1").fetchone()[0]
    db.execute(f"UPDATE messages SET {column}=? WHERE id=?", (value, bad_id))
    db.commit()
    db.close()
    store = ConversationStore(path)
    msgs = store.messages(cid)
    assert len(msgs) == 5 and bad_id not in [m.id for m in msgs]
    assert any(f"Message {bad_id}" in n for n in store.take_notices())


def _make_read_only(*paths: Path, on: bool = True) -> None:
    # root writes through permission bits, not through the immutable attribute
    for p in paths:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "+i" if on else "-i", str(p)], check=True)
        else:
            os.chmod(p, (0o555 if p.is_dir() else 0o444) if on else stat.S_IRWXU)


def test_read_only_store_opens_read_only(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "c.sqlite3"
    _filled(path)
    before = path.read_bytes()
    _make_read_only(path, folder)
    try:
        store = ConversationStore(path)
        assert store.read_only and store.persistent
        assert [c.title for c in store.list()] == ["question 0 " + "x" * 48 + "…"]
        assert len(store.messages(store.list()[0].id)) == 6
        assert any("read-only" in n for n in store.notices), store.notices
        with pytest.raises(StoreError, match="read-only"):
            store.add(store.list()[0].id, Message("user", "more"))
        store.close()
    finally:
        _make_read_only(path, folder, on=False)
    assert path.read_bytes() == before


def test_read_only_folder_without_a_store_runs_without_history(tmp_path):
    folder = tmp_path / "ro-empty"
    folder.mkdir()
    _make_read_only(folder)
    try:
        store = ConversationStore(folder / "c.sqlite3")
        assert not store.persistent and any("read-only" in n for n in store.notices)
        store.add(store.create(), Message("user", "kept for this session"))
    finally:
        _make_read_only(folder, on=False)


def test_a_refused_write_says_why(tmp_path):
    path = tmp_path / "c.sqlite3"
    store = ConversationStore(path)
    cid = store.create()
    # another process (the app of a newer version, a tool) drops the table under us
    db = sqlite3.connect(path)
    db.execute("DROP TABLE messages")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="refused the write"):
        store.add(cid, Message("user", "hi"))


# --- the window -----------------------------------------------------------------------------------


def test_window_starts_on_a_garbage_store_and_says_where_it_went(make_window, store_file):
    store_file.write_bytes(b"\x00garbage, not SQLite\n" * 500)
    w = make_window()
    aside = _asides(store_file)
    assert len(aside) == 1
    assert str(aside[0]) in w.chat.status.text() and "moved" in w.chat.status.text()
    assert w.conversations.ids() == []


def test_window_opens_the_last_conversation_without_its_broken_row(make_window, store_file, settings_file):
    from app.chat.chat_session import CONVERSATION_KEY
    from app.shell.app_settings import open_settings

    cid = _filled(store_file)
    db = sqlite3.connect(store_file)
    bad_id = db.execute("SELECT id FROM messages WHERE role='assistant' ORDER BY id LIMIT 1").fetchone()[0]
    db.execute("UPDATE messages SET tokens='[[1, 2' WHERE id=?", (bad_id,))
    db.commit()
    db.close()
    qs = open_settings(settings_file)
    qs.setValue(CONVERSATION_KEY, cid)
    qs.sync()
    w = make_window()
    assert len(w.chat.transcript.messages) == 5
    assert f"Message {bad_id}" in w.chat.status.text()


def test_window_runs_without_history_on_a_newer_store(make_window, store_file):
    _filled(store_file)
    db = sqlite3.connect(store_file)
    db.execute(f"PRAGMA user_version={STORE_VERSION + 1}")
    db.commit()
    db.close()
    w = make_window()
    assert "newer DFlash Studio" in w.chat.status.text()
    assert w.conversations.ids() == [] and not w.store.persistent
