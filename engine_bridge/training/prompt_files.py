"""A user's own training prompts (``train-drafter --prompts FILE.jsonl``, the Train tab's field, the
``decontam`` command): read and checked line by line, stdlib only, so the prepare stage and the
contamination checker share it without importing each other."""

from __future__ import annotations

import json
from pathlib import Path

from .chat_prompts import CATEGORIES


class PromptFileError(ValueError):
    """A user's prompt file that cannot be used; the message names the line."""


def read_extra_prompts(path: str | Path) -> list[dict]:
    """A user's JSONL prompts: one object per line with "text" or "prompt" (a string) or "messages"
    (the first user turn is the prompt), and an optional "category" (one of ``CATEGORIES``; default
    chat). Blank lines and lines starting with ``#`` are skipped. Raises PromptFileError naming the
    first bad line."""
    path = Path(path)
    if not path.is_file():
        raise PromptFileError(f"{path}: no such prompt file")
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise PromptFileError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        where = f"{path.name} line {n}"
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as e:
            raise PromptFileError(
                f"{where}: not JSON ({e.msg}); each line must be one JSON object "
                '{"text": ...} or {"prompt": ...} or {"messages": [...]}'
            ) from None
        if not isinstance(obj, dict):
            raise PromptFileError(f"{where}: each line must be a JSON object, got {type(obj).__name__}")
        text = obj.get("text", obj.get("prompt"))
        if text is None and "messages" in obj:
            msgs = obj["messages"]
            if not isinstance(msgs, list):
                raise PromptFileError(f"{where}: 'messages' must be a list of {{role, content}} objects")
            text = next((m.get("content") for m in msgs if isinstance(m, dict) and m.get("role") == "user"), None)
            if text is None:
                raise PromptFileError(f"{where}: 'messages' has no user message")
        if not isinstance(text, str) or not text.strip():
            raise PromptFileError(
                f"{where}: give a non-empty string in 'text', 'prompt' or the first user message of 'messages'"
            )
        cat = obj.get("category", "chat")
        if cat not in CATEGORIES:
            raise PromptFileError(f"{where}: unknown category {cat!r}; use one of {', '.join(CATEGORIES)}")
        out.append(
            {
                "id": f"user-{n:06d}",
                "category": cat,
                "text": text.strip(),
                "source": f"user:{path.name}",
                "template": "user",
                "line": n,
            }
        )
    if not out:
        raise PromptFileError(f"{path}: no prompts in the file")
    return out
