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
    for suffix in ("-wal", "-shm"):  # the journal belongs to the moved file
        if os.path.exists(path + suffix):
            os.replace(path + suffix, aside + suffix)
    return aside


def migrate(db: sqlite3.Connection, to_version: int, step) -> int:
    """Brings the store up to ``to_version`` under one write lock and returns the version it had.

    ``step(db, version)`` makes the changes from ``version`` to ``version + 1``. The version is read
    again after the lock is taken: two processes (or two of the app's worker threads) opening a fresh
    store at once both read version 0, and the second one's migration then ran after the first had
    already written rows into the new tables, and its clean-up deleted them (a library file added in
    that moment was lost; seen on CI as a library that showed one drafter of two). A store already
    at or past ``to_version`` is not locked at all: opening stays a read."""
    found = version(db)
    if found >= to_version:
        return found
    if db.in_transaction:
        db.commit()
    db.execute("BEGIN IMMEDIATE")  # waits (the busy timeout) for another opener's migration
    try:
        found = version(db)
        for v in range(found, to_version):
            step(db, v)
        if found < to_version:
            db.execute(f"PRAGMA user_version={to_version}")
        db.commit()
    except BaseException:
        db.rollback()
        raise
    return found


def execute_script(db: sqlite3.Connection, script: str) -> None:
    """Runs ``script`` statement by statement inside the open transaction (``executescript`` would
    commit it first, and so drop migrate's lock). Statements are split at ';' (our schemas have
    none inside a string or a comment)."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)
