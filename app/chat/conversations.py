"""Conversations in SQLite in the user's data folder.

Each message is committed the moment it exists: the user's turn on send, the assistant's as soon
as its first tokens arrive, then updated while it streams (at most once a second) and when it
ends. WAL mode, one transaction per write: a crash loses at most the last second of an answer.
Assistant messages also keep their token provenance and per-step counts, so a reopened
conversation still shows which tokens came from the drafter and each token's tooltip.

A store that cannot be trusted never stops the app (issue 32). Its version is SQLite's
``user_version``, migrated forward on open. A file that is not a database, or fails SQLite's
quick check, is moved aside (renamed with the time, never deleted) and a fresh one is started; a
store of a newer version is left untouched and this session keeps no history; a file or folder
that cannot be written opens read-only; a message row that does not decode is skipped. Each of
these leaves a sentence in ``notices`` for the window to show. A write that fails raises
``StoreError`` with a reason the user can act on (disk full, read-only).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from engine_bridge.common import sqlite_wal

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    tokens TEXT,          -- JSON [[piece, source, step], ...] (assistant messages)
    steps TEXT,           -- JSON {step: [drafted, accepted, committed(, [top-2 margin per token])]}
    summary TEXT,         -- JSON RunSummary.to_dict()
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
"""

TITLE_CHARS = 60
#: The store's version (PRAGMA user_version). 0 is a store from before versioning (same tables).
STORE_VERSION = 1
#: version -> SQL that brings a store of that version to the next one
MIGRATIONS: dict[int, str] = {0: SCHEMA}


class StoreError(Exception):
    """A write the store refused; the message says why in words a user can act on."""


@dataclass
class Message:
    role: str
    content: str
    tokens: list[tuple[str, str, int]] = field(default_factory=list)  # (piece, source, step)
    # step -> (drafted, accepted, committed), or with a fourth item: the target's top-2 logit margin
    # of each token the step committed (GenerationSettings.record_margins)
    steps: dict[int, tuple] = field(default_factory=dict)
    summary: dict | None = None
    id: int | None = None

    def as_chat(self) -> dict:
        return {"role": self.role, "content": self.content}


@dataclass
class Conversation:
    id: int
    title: str
    updated: float


def default_path() -> Path:
    from engine_bridge.common.paths import data_dir

    return data_dir() / "conversations.sqlite3"


def title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


class ConversationStore:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_path()
        self.notices: list[str] = []  # what the window should tell the user about the store
        self.persistent = True  # False: this session's chats live in memory only
        self.read_only = False
        self.moved_to: Path | None = None  # where an unreadable store was moved
        self._db = self._open()

    # -- opening ----------------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return self._in_memory(
                f"The chat store's folder {self.path.parent} cannot be created "
                f"({exc.strerror or exc}); this session keeps no history."
            )
        if not _writable(self.path):
            return self._open_read_only()
        try:
            return self._open_writable()
        except _Newer as exc:
            return self._in_memory(str(exc))
        except sqlite3.OperationalError as exc:
            # locked beyond the timeout, an I/O error: not proof of damage, so the file stays put
            return self._in_memory(
                f"The chat store {self.path} cannot be opened ({exc}); this session keeps no history."
            )
        except sqlite3.DatabaseError as exc:
            return self._move_aside(str(exc))

    def _open_writable(self) -> sqlite3.Connection:
        # WAL and a busy timeout: the app and another process (a second window, a test) may write at once
        db = sqlite_wal.connect(self.path)
        try:
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across an app crash
            db.execute("PRAGMA foreign_keys=ON")
            sqlite_wal.quick_check(db)
            self._migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    def _open_read_only(self) -> sqlite3.Connection:
        if not self.path.exists():
            return self._in_memory(
                f"The chat store's folder {self.path.parent} is read-only; this session keeps no history."
            )
        try:
            # immutable: no -wal/-shm files are made (the folder may be read-only too)
            db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            sqlite_wal.quick_check(db)
            version = sqlite_wal.version(db)
            if version > STORE_VERSION:
                db.close()
                raise _Newer(self.path, version)
        except _Newer as exc:
            return self._in_memory(str(exc))
        except sqlite3.DatabaseError as exc:
            return self._in_memory(
                f"The chat store {self.path} is read-only and cannot be read ({exc}); "
                "it is left as it is, and this session keeps no history."
            )
        self.read_only = True
        self.notices.append(
            f"The chat store {self.path} is read-only: your conversations are shown, new messages are not saved."
        )
        return db

    def _migrate(self, db: sqlite3.Connection) -> None:
        version = sqlite_wal.version(db)
        if version > STORE_VERSION:
            raise _Newer(self.path, version)
        sqlite_wal.migrate(db, STORE_VERSION, lambda db, v: sqlite_wal.execute_script(db, MIGRATIONS[v]))

    def _move_aside(self, why: str) -> sqlite3.Connection:
        try:
            aside = Path(sqlite_wal.move_aside(self.path))
            db = self._open_writable()
        except (OSError, sqlite3.Error, _Newer) as exc:
            return self._in_memory(
                f"The chat store {self.path} cannot be read ({why}) nor moved aside ({exc}); "
                "this session keeps no history."
            )
        self.moved_to = aside
        self.notices.append(
            f"The chat store could not be read ({why}). It was moved to {aside} and a new, empty one started."
        )
        return db

    def _in_memory(self, notice: str) -> sqlite3.Connection:
        self.persistent = False
        self.notices.append(notice)
        db = sqlite3.connect(":memory:")
        db.execute("PRAGMA foreign_keys=ON")
        db.executescript(SCHEMA)
        return db

    def take_notices(self) -> list[str]:
        """The notices not shown yet (and forgets them)."""
        out, self.notices = self.notices, []
        return out

    @contextmanager
    def _writing(self):
        """One transaction; a refused write becomes a StoreError saying why."""
        try:
            with self._db:
                yield
        except sqlite3.Error as exc:
            raise StoreError(_write_failure(self.path, exc)) from exc
        except UnicodeEncodeError as exc:  # a lone surrogate (text from outside Qt): SQLite takes UTF-8 only
            raise StoreError(
                f"the message holds a character that is not valid Unicode text (a lone surrogate "
                f"at character {exc.start}); nothing was saved"
            ) from exc

    def close(self) -> None:
        self._db.close()

    # -- conversations ------------------------------------------------------------------------------
    def create(self, title: str = "New chat") -> int:
        now = time.time()
        with self._writing():
            cur = self._db.execute(
                "INSERT INTO conversations(title, created, updated) VALUES (?, ?, ?)", (title, now, now)
            )
        return int(cur.lastrowid)

    def list(self) -> list[Conversation]:
        try:
            rows = self._db.execute("SELECT id, title, updated FROM conversations ORDER BY updated DESC, id DESC")
            return [Conversation(*r) for r in rows]
        except sqlite3.DatabaseError as exc:  # damage past the quick check
            self.notices.append(f"The chat store {self.path} cannot list its conversations ({exc}).")
            return []

    def rename(self, conversation_id: int, title: str) -> None:
        with self._writing():
            self._db.execute("UPDATE conversations SET title=? WHERE id=?", (title, conversation_id))

    def delete(self, conversation_id: int) -> None:
        with self._writing():
            self._db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))

    # -- messages -------------------------------------------------------------------------------------
    def messages(self, conversation_id: int) -> list[Message]:
        """The conversation's messages; a row that does not decode is skipped and noted."""
        rows = self._db.execute(
            "SELECT id, role, content, tokens, steps, summary FROM messages WHERE conversation_id=? ORDER BY id",
            (conversation_id,),
        )
        out = []
        for mid, role, content, tokens, steps, summary in rows:
            try:
                out.append(_decode(mid, role, content, tokens, steps, summary))
            except (ValueError, TypeError, KeyError, AttributeError, sqlite3.Error) as exc:
                self.notices.append(f"Message {mid} of this conversation could not be read and is not shown ({exc}).")
        return out

    def add(self, conversation_id: int, message: Message) -> int:
        now = time.time()
        with self._writing():
            cur = self._db.execute(
                "INSERT INTO messages(conversation_id, role, content, tokens, steps, summary, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    message.role,
                    message.content,
                    json.dumps(message.tokens) if message.tokens else None,
                    json.dumps({str(k): v for k, v in message.steps.items()}) if message.steps else None,
                    json.dumps(message.summary) if message.summary else None,
                    now,
                ),
            )
            self._db.execute("UPDATE conversations SET updated=? WHERE id=?", (now, conversation_id))
            # the first user message names the conversation
            if message.role == "user":
                self._db.execute(
                    "UPDATE conversations SET title=? WHERE id=? AND title='New chat'",
                    (title_from(message.content), conversation_id),
                )
        message.id = int(cur.lastrowid)
        return message.id

    def update(self, message: Message) -> None:
        """Rewrites a stored message (an answer that grew while streaming, or got its summary)."""
        with self._writing():
            self._db.execute(
                "UPDATE messages SET content=?, tokens=?, steps=?, summary=? WHERE id=?",
                (
                    message.content,
                    json.dumps(message.tokens) if message.tokens else None,
                    json.dumps({str(k): v for k, v in message.steps.items()}) if message.steps else None,
                    json.dumps(message.summary) if message.summary else None,
                    message.id,
                ),
            )

    def delete_message(self, message_id: int) -> None:
        with self._writing():
            self._db.execute("DELETE FROM messages WHERE id=?", (message_id,))


class _Newer(Exception):
    def __init__(self, path: Path, version: int):
        super().__init__(
            f"The chat store {path} was written by a newer DFlash Studio (store version {version}; this "
            f"one reads up to {STORE_VERSION}). It is left untouched; this session keeps no history."
        )


def _writable(path: Path) -> bool:
    # WAL needs to create -wal and -shm files beside the store
    folder_ok = os.access(path.parent, os.W_OK | os.X_OK)
    return folder_ok and (not path.exists() or os.access(path, os.R_OK | os.W_OK))


def _write_failure(path: Path, exc: sqlite3.Error) -> str:
    text = str(exc)
    if "full" in text:
        return f"the disk holding {path} is full; free some space and send again"
    if "readonly" in text or "read-only" in text:
        return f"the chat store {path} is read-only; nothing can be saved to it"
    return f"the chat store {path} refused the write ({text})"


def _decode(mid, role, content, tokens, steps, summary) -> Message:
    if not isinstance(role, str) or not isinstance(content, str):
        raise TypeError("role and content must be text")
    toks = []
    for t in json.loads(tokens) if tokens else []:
        piece, source, step = t
        if not isinstance(piece, str) or not isinstance(source, str) or not isinstance(step, int):
            raise TypeError(f"token entry {t!r} is not [piece, source, step]")
        toks.append((piece, source, step))
    step_map = {}
    for k, v in (json.loads(steps) if steps else {}).items():
        drafted, accepted, committed = (int(x) for x in v[:3])
        if len(v) > 4 or (len(v) == 4 and not isinstance(v[3], list)):
            raise TypeError(f"step entry {v!r} is not [drafted, accepted, committed(, margins)]")
        step_map[int(k)] = (drafted, accepted, committed) + ((tuple(float(m) for m in v[3]),) if len(v) == 4 else ())
    info = json.loads(summary) if summary else None
    if info is not None and not isinstance(info, dict):
        raise TypeError("the run summary is not an object")
    return Message(role, content, tokens=toks, steps=step_map, summary=info, id=mid)
