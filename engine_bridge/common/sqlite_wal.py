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
