"""Prompt suites for the bench: the built-in sets in resources/prompts/ and users' JSONL files.

One JSON object per line::

    {"id": "code-01", "prompt": "Write a function ..."}                 # raw text, sent as is
    {"id": "chat-01", "messages": [{"role": "user", "content": "..."}]}  # rendered with the
                                                                         # target's chat template

``id`` is optional in user files (``line-N`` is used); ``text`` is accepted as an alias of
``prompt``. Blank lines and lines starting with ``#`` are skipped. Every problem is reported with
its line number, all at once, so a user fixes a file in one pass.

A suite's SHA-256 goes into the report: it pins exactly which prompts were measured.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..common.resources import resource

ROLES = ("system", "user", "assistant")


class SuiteError(ValueError):
    """A suite that cannot be used; the message lists every problem found."""


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str | None = None
    messages: tuple[tuple[str, str], ...] | None = None  # (role, content) pairs

    @property
    def kind(self) -> str:
        return "chat" if self.messages is not None else "text"

    def render(self, format_chat: Callable[[list[dict]], str]) -> str:
        """The string sent to the engine (chat prompts go through the target's template)."""
        if self.messages is None:
            return self.text or ""
        return format_chat([{"role": r, "content": c} for r, c in self.messages])

    def preview(self, width: int = 60) -> str:
        s = self.text if self.messages is None else self.messages[-1][1]
        s = " ".join((s or "").split())
        return s if len(s) <= width else s[: width - 1] + "…"


@dataclass(frozen=True)
class Suite:
    name: str
    source: str  # file path
    sha256: str
    prompts: tuple[Prompt, ...]

    def head(self, n: int | None) -> "Suite":
        """The first ``n`` prompts (quick runs); the hash still names the whole file."""
        if n is None or n >= len(self.prompts):
            return self
        return Suite(self.name, self.source, self.sha256, self.prompts[:n])

    def describe(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "sha256": self.sha256,
            "n_prompts": len(self.prompts),
            "prompt_ids": [p.id for p in self.prompts],
        }


#: public benchmark suites (resources/prompts/public/, README.md there): measured, never trained on
PUBLIC_SUITES = {
    "mt-bench": "public/mt_bench.jsonl",
    "gsm8k": "public/gsm8k_test.jsonl",
    "humaneval": "public/humaneval.jsonl",
}


def builtin_dir() -> Path:
    return resource("prompts")


def builtin_names() -> list[str]:
    return sorted(
        [p.stem for p in builtin_dir().glob("*.jsonl")]
        + [n for n, rel in PUBLIC_SUITES.items() if (builtin_dir() / rel).is_file()]
    )


def load_suite(name_or_path: str | os.PathLike) -> Suite:
    """A built-in suite by name (``code``, ``math``, ``chat``; the public ``mt-bench``, ``gsm8k``,
    ``humaneval``) or a JSONL file by path."""
    p = Path(name_or_path)
    name = None
    if p.suffix != ".jsonl" and not p.exists():
        name = str(name_or_path)
        cand = builtin_dir() / PUBLIC_SUITES.get(name, f"{name}.jsonl")
        if not cand.exists():
            raise SuiteError(
                f"unknown suite {str(name_or_path)!r}: built-in suites are "
                f"{', '.join(builtin_names())}, or give a .jsonl file"
            )
        p = cand
    if not p.is_file():
        raise SuiteError(f"{p}: no such file")
    data = p.read_bytes()
    prompts = parse_jsonl(data.decode("utf-8", "replace"), source=str(p))
    return Suite(name or p.stem, str(p), hashlib.sha256(data).hexdigest(), tuple(prompts))


def parse_jsonl(text: str, source: str = "<string>") -> list[Prompt]:
    prompts: list[Prompt] = []
    errors: list[str] = []
    seen: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"line {n}: not JSON ({exc.msg})")
            continue
        try:
            prompt = _prompt_from(obj, n)
        except ValueError as exc:
            errors.append(f"line {n}: {exc}")
            continue
        if prompt.id in seen:
            errors.append(f"line {n}: duplicate id {prompt.id!r}")
            continue
        seen.add(prompt.id)
        prompts.append(prompt)
    if not prompts and not errors:
        errors.append("no prompts")
    if errors:
        raise SuiteError(f"{source}: " + "; ".join(errors))
    return prompts


def _prompt_from(obj, n: int) -> Prompt:
    if not isinstance(obj, dict):
        raise ValueError("each line must be a JSON object")
    pid = obj.get("id", f"line-{n}")
    if not isinstance(pid, (str, int)) or str(pid).strip() == "":
        raise ValueError("'id' must be a non-empty string")
    pid = str(pid)
    text = obj.get("prompt", obj.get("text"))
    msgs = obj.get("messages")
    if (text is None) == (msgs is None):
        raise ValueError("give exactly one of 'prompt' (or 'text') and 'messages'")
    if text is not None:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("'prompt' must be a non-empty string")
        return Prompt(pid, text=text)
    if not isinstance(msgs, list) or not msgs:
        raise ValueError("'messages' must be a non-empty list")
    pairs = []
    for m in msgs:
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise ValueError(f"each message needs a role ({', '.join(ROLES)}) and a string content")
        pairs.append((m["role"], m["content"]))
    if pairs[-1][0] != "user":
        raise ValueError("the last message must be the user's (the model answers it)")
    return Prompt(pid, messages=tuple(pairs))
