"""Conversations in SQLite in the user's data folder.

Each message is committed the moment it exists: the user's turn on send, the assistant's as soon
as its first tokens arrive, then updated while it streams (at most once a second) and when it
ends. WAL mode, one transaction per write: a crash loses at most the last second of an answer.
Assistant messages also keep their token provenance and per-step counts, so a reopened
conversation still shows which tokens came from the drafter and each token's tooltip.
"""

from __future__ import annotations

import json
import time
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
    steps TEXT,           -- JSON {step: [drafted, accepted, committed]}
    summary TEXT,         -- JSON RunSummary.to_dict()
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
"""

TITLE_CHARS = 60


@dataclass
class Message:
    role: str
    content: str
    tokens: list[tuple[str, str, int]] = field(default_factory=list)   # (piece, source, step)
    steps: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # step -> drafted, accepted, committed
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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # WAL and a busy timeout: the app and another process (a second window, a test) may write at once
        self._db = sqlite_wal.connect(self.path)
        self._db.execute("PRAGMA synchronous=NORMAL")     # WAL + NORMAL: durable across an app crash
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    # -- conversations ------------------------------------------------------------------------------
    def create(self, title: str = "New chat") -> int:
        now = time.time()
        with self._db:
            cur = self._db.execute("INSERT INTO conversations(title, created, updated) VALUES (?, ?, ?)",
                                   (title, now, now))
        return int(cur.lastrowid)

    def list(self) -> list[Conversation]:
        rows = self._db.execute("SELECT id, title, updated FROM conversations ORDER BY updated DESC, id DESC")
        return [Conversation(*r) for r in rows]

    def rename(self, conversation_id: int, title: str) -> None:
        with self._db:
            self._db.execute("UPDATE conversations SET title=? WHERE id=?", (title, conversation_id))

    def delete(self, conversation_id: int) -> None:
        with self._db:
            self._db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))

    # -- messages -------------------------------------------------------------------------------------
    def messages(self, conversation_id: int) -> list[Message]:
        rows = self._db.execute(
            "SELECT id, role, content, tokens, steps, summary FROM messages WHERE conversation_id=? ORDER BY id",
            (conversation_id,))
        out = []
        for mid, role, content, tokens, steps, summary in rows:
            out.append(Message(
                role, content,
                tokens=[tuple(t) for t in json.loads(tokens)] if tokens else [],
                steps={int(k): tuple(v) for k, v in json.loads(steps).items()} if steps else {},
                summary=json.loads(summary) if summary else None, id=mid))
        return out

    def add(self, conversation_id: int, message: Message) -> int:
        now = time.time()
        with self._db:
            cur = self._db.execute(
                "INSERT INTO messages(conversation_id, role, content, tokens, steps, summary, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, message.role, message.content,
                 json.dumps(message.tokens) if message.tokens else None,
                 json.dumps({str(k): v for k, v in message.steps.items()}) if message.steps else None,
                 json.dumps(message.summary) if message.summary else None, now))
            self._db.execute("UPDATE conversations SET updated=? WHERE id=?", (now, conversation_id))
            # the first user message names the conversation
            if message.role == "user":
                self._db.execute(
                    "UPDATE conversations SET title=? WHERE id=? AND title='New chat'",
                    (title_from(message.content), conversation_id))
        message.id = int(cur.lastrowid)
        return message.id

    def update(self, message: Message) -> None:
        """Rewrites a stored message (an answer that grew while streaming, or got its summary)."""
        with self._db:
            self._db.execute(
                "UPDATE messages SET content=?, tokens=?, steps=?, summary=? WHERE id=?",
                (message.content, json.dumps(message.tokens) if message.tokens else None,
                 json.dumps({str(k): v for k, v in message.steps.items()}) if message.steps else None,
                 json.dumps(message.summary) if message.summary else None, message.id))

    def delete_message(self, message_id: int) -> None:
        with self._db:
            self._db.execute("DELETE FROM messages WHERE id=?", (message_id,))
