"""One way to open the app's SQLite stores (conversations, library): WAL mode and a busy timeout.

Several processes may open one store at once (the app and the CLI, two app windows). Readers and
a writer then work side by side, and a second writer waits for the first instead of failing. But
switching a new database file to WAL needs a lock that SQLite does not wait for: a second process
opening the same fresh file at that moment got "database is locked" at once (found by
tests/faults). So the switch is made only when the file is not in WAL mode yet, and retried until
the timeout.
"""

from __future__ import annotations

import os
import sqlite3
import time

#: Seconds a connection waits for another process's write (and for the WAL switch).
BUSY_TIMEOUT_S = 30.0


def connect(path: str | os.PathLike, timeout: float = BUSY_TIMEOUT_S, **kwargs) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=timeout, **kwargs)
    try:
        deadline = time.monotonic() + timeout
        pause = 0.005
        while db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            try:
                db.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.2)
    except BaseException:
        db.close()
        raise
    return db


def quick_check(db: sqlite3.Connection) -> None:
    """Raises sqlite3.DatabaseError when SQLite's quick check finds the file damaged (a truncated or
    overwritten store can open and fail only later, page by page)."""
    rows = [r[0] for r in db.execute("PRAGMA quick_check").fetchall()]
    if rows != ["ok"]:
        raise sqlite3.DatabaseError("damaged: " + "; ".join(str(r) for r in rows[:3]))


def version(db: sqlite3.Connection) -> int:
    """The store's version: SQLite's user_version."""
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def move_aside(path: str | os.PathLike) -> str:
    """Renames an unreadable store, with its -wal and -shm files, to ``<name>.unreadable-<time>``
    beside it; never deletes it. Returns the new path. OSError when it cannot be renamed."""
    path = os.fspath(path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside, n = f"{path}.unreadable-{stamp}", 1
    while os.path.exists(aside):
        aside, n = f"{path}.unreadable-{stamp}-{n}", n + 1
    os.replace(path, aside)
    for suffix in ("-wal", "-shm"):         # the journal belongs to the moved file
        if os.path.exists(path + suffix):
            os.replace(path + suffix, aside + suffix)
    return aside
