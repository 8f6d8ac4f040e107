"""The shipped real training prompt set (resources/prompts/train/): prompts from public, permissively
licensed repositories, built by ``real_prompts_build`` (SOURCES.md there lists every source, its
licence and counts). Standard library only.

Each record: {"id", "category", "source", "split" ("train" | "val"), "text"}. The split is a hash of
the text (about 2 % ``val``): checkpoint choice and held-out figures use ``val`` only, training uses
``train`` only.
"""

from __future__ import annotations

import json
import lzma
import random
from functools import lru_cache
from pathlib import Path

from ..common.resources import resource

SPLITS = ("train", "val")


def folder() -> Path:
    return resource("prompts", "train")


@lru_cache(maxsize=2)
def _all(path: str) -> tuple[dict, ...]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"{p}: the shipped prompt set is missing (python -m engine_bridge.training.real_prompts_build rebuilds it)"
        )
    with lzma.open(p, "rt", encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())


def load(split: str | None = "train", category: str | None = None, path: str | Path | None = None) -> list[dict]:
    """Records of one split (``None``: both), optionally of one category, in the file's order (by id)."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: {', '.join(SPLITS)}")
    rows = _all(str(path or folder() / "prompts.jsonl.xz"))
    return [
        dict(r)
        for r in rows
        if (split is None or r["split"] == split) and (category is None or r["category"] == category)
    ]


def sources() -> dict:
    """The builder's record: sources (repository, commit, licence), counts, what was dropped."""
    return json.loads((folder() / "sources.json").read_text())


def sample(
    n_per_category: int, split: str = "train", seed: int = 0, categories: tuple[str, ...] | None = None
) -> list[dict]:
    """Up to ``n_per_category`` records of each category (all of a category that has fewer), drawn
    with a seeded generator, so a prepare stage gets the same prompts on every machine. Within a
    category the draw is spread over sources in proportion to their size."""
    rows = load(split)
    by_cat: dict[str, list[dict]] = {}
    for r in rows:
        by_cat.setdefault(r["category"], []).append(r)
    out = []
    for cat in categories or sorted(by_cat):
        pool = by_cat.get(cat, [])
        rng = random.Random(f"{seed}:{split}:{cat}")
        out += pool if len(pool) <= n_per_category else rng.sample(pool, n_per_category)
    return out
