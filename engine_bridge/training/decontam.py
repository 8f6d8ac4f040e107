"""Decontamination: refuse training prompts that overlap a public evaluation set.

The rule (the project's: never train, never pick a checkpoint, on MT-Bench, AlpacaEval, Vicuna-80,
HumanEval, MBPP, the GSM8K or MATH test splits):

* text is normalised to lower-case alphanumeric words (``[^\\W_]+``), so case, whitespace and
  punctuation changes do not hide a copy;
* a training text that shares any 13-word sequence with an evaluation item is contaminated;
* a short evaluation item (8 to 12 words) is matched as a whole word sequence anywhere in a
  training text; any text (training or evaluation, whatever its length) also counts as a hit when
  its whole normalised word sequence equals an evaluation item's (so "Hello?" cannot be a copy of
  a three-word evaluation prompt either way, but an exact copy is always caught).

Only 64-bit fingerprints of the evaluation sets ship (``resources/prompts/public/decontam.npz``),
built by ``public_sets_build`` from the sets' public repositories; the arrays are sorted so a lookup
is a binary search. numpy and the standard library only.

    from engine_bridge.training import decontam
    decontam.require_clean(texts)      # raises ContaminationError naming the first hits
    decontam.check(texts)              # {"n": ..., "hits": [{"index", "set", "kind", "ngram"}, ...]}

    python -m engine_bridge.training.decontam FILE.jsonl ...   # a prompt file (--prompts format); exit 1 on hits
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import numpy as np

from ..common.resources import resource

N = 13  # the n-gram length of the overlap rule
SHORT_MIN = 8  # evaluation items of SHORT_MIN..N-1 words are matched as whole sequences
_P = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the rolling n-gram hash
_WORD_RE = re.compile(r"[^\W_]+")


class ContaminationError(ValueError):
    """Training texts overlap a public evaluation set; the message names the first hits."""


def words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower())


@lru_cache(maxsize=1 << 20)
def _word_hash(w: str) -> int:
    return int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")


def _ngram_hashes(ws: list[str], n: int) -> np.ndarray:
    """64-bit hashes of every n-word window of ``ws`` (empty when shorter); the length is mixed in."""
    if len(ws) < n:
        return np.zeros(0, dtype=np.uint64)
    w = np.fromiter((_word_hash(x) for x in ws), dtype=np.uint64, count=len(ws))
    h = np.zeros(len(ws) - n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i in range(n):
            h = h * _P + w[i : len(ws) - n + 1 + i]
        h ^= np.uint64(n) * np.uint64(0xD6E8FEB86659FD93)
    return h


def full_hash(ws: list[str]) -> int:
    """The fingerprint of a whole normalised text (the exact-copy rule)."""
    return int(_ngram_hashes(ws, len(ws))[0]) if ws else 0


@dataclass(frozen=True)
class Fingerprints:
    sets: tuple[str, ...]  # evaluation set names; bit i of a mask = sets[i]
    gram: np.ndarray  # uint64, sorted: 13-gram hashes
    gram_mask: np.ndarray  # uint32: which sets hold each
    short: np.ndarray  # uint64, sorted: whole sequences of 8..12-word items
    short_mask: np.ndarray
    short_lens: tuple[int, ...]  # the lengths present in ``short``
    full: np.ndarray  # uint64, sorted: whole normalised texts of every item
    full_mask: np.ndarray
    info: dict  # per set: items, source, licence

    def names(self, mask: int) -> list[str]:
        return [s for i, s in enumerate(self.sets) if mask >> i & 1]


def _lookup(keys: np.ndarray, masks: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions in q that are present, their masks)."""
    if not len(keys) or not len(q):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint32)
    i = np.searchsorted(keys, q)
    i[i >= len(keys)] = 0
    ok = keys[i] == q
    return np.nonzero(ok)[0], masks[i[ok]]


def build(items: dict[str, list[str]], info: dict | None = None) -> Fingerprints:
    """Fingerprints of evaluation items, ``{set name: [text, ...]}``."""
    sets = tuple(items)
    if len(sets) > 32:
        raise ValueError("at most 32 evaluation sets")
    acc: dict[str, dict[int, int]] = {"gram": {}, "short": {}, "full": {}}
    lens: set[int] = set()
    for b, name in enumerate(sets):
        bit = 1 << b
        for text in items[name]:
            ws = words(text)
            if not ws:
                continue
            for h in _ngram_hashes(ws, N).tolist():
                acc["gram"][h] = acc["gram"].get(h, 0) | bit
            if SHORT_MIN <= len(ws) < N:
                h = full_hash(ws)
                acc["short"][h] = acc["short"].get(h, 0) | bit
                lens.add(len(ws))
            h = full_hash(ws)
            acc["full"][h] = acc["full"].get(h, 0) | bit

    def arrays(d):
        k = np.array(sorted(d), dtype=np.uint64)
        return k, np.array([d[int(x)] for x in k], dtype=np.uint32)

    g, gm = arrays(acc["gram"])
    s, sm = arrays(acc["short"])
    f, fm = arrays(acc["full"])
    return Fingerprints(sets, g, gm, s, sm, tuple(sorted(lens)), f, fm, dict(info or {}))


def save(fp: Fingerprints, path: str | Path) -> None:
    import json

    np.savez_compressed(
        path,
        sets=np.array(
            json.dumps({"sets": fp.sets, "info": fp.info, "n": N, "short_min": SHORT_MIN, "short_lens": fp.short_lens})
        ),
        gram=fp.gram,
        gram_mask=fp.gram_mask,
        short=fp.short,
        short_mask=fp.short_mask,
        full=fp.full,
        full_mask=fp.full_mask,
    )


def default_path() -> Path:
    return resource("prompts", "public", "decontam.npz")


@lru_cache(maxsize=4)
def load(path: str | Path | None = None) -> Fingerprints:
    import json

    p = Path(path) if path else default_path()
    if not p.is_file():
        raise FileNotFoundError(
            f"{p}: the evaluation-set fingerprints are missing "
            "(python -m engine_bridge.training.public_sets_build rebuilds them)"
        )
    z = np.load(p)
    head = json.loads(str(z["sets"]))
    if head.get("n") != N:
        raise ValueError(f"{p}: fingerprints of {head.get('n')}-grams, this check uses {N}-grams")
    return Fingerprints(
        tuple(head["sets"]),
        z["gram"],
        z["gram_mask"],
        z["short"],
        z["short_mask"],
        tuple(head["short_lens"]),
        z["full"],
        z["full_mask"],
        head.get("info", {}),
    )


def check(texts: Iterable[str], fingerprints: Fingerprints | None = None, max_hits: int | None = None) -> dict:
    """Which texts hit which evaluation set: {"n", "n_hit", "sets", "hits": [{"index", "set",
    "kind" ("13-gram" | "short item" | "exact"), "ngram" (the shared words)}]}; one hit per text."""
    fp = fingerprints or load()
    hits: list[dict] = []
    n = 0
    for idx, text in enumerate(texts):
        n += 1
        if max_hits is not None and len(hits) >= max_hits:
            continue
        ws = words(text)
        if not ws:
            continue
        hit = None
        pos, masks = _lookup(fp.full, fp.full_mask, np.array([full_hash(ws)], dtype=np.uint64))
        if len(pos):
            hit = ("exact", int(masks[0]), " ".join(ws))
        if hit is None and len(ws) >= N:
            pos, masks = _lookup(fp.gram, fp.gram_mask, _ngram_hashes(ws, N))
            if len(pos):
                hit = ("13-gram", int(masks[0]), " ".join(ws[pos[0] : pos[0] + N]))
        if hit is None:
            for k in fp.short_lens:
                pos, masks = _lookup(fp.short, fp.short_mask, _ngram_hashes(ws, k))
                if len(pos):
                    hit = ("short item", int(masks[0]), " ".join(ws[pos[0] : pos[0] + k]))
                    break
        if hit is not None:
            kind, mask, gram = hit
            hits.append({"index": idx, "sets": fp.names(mask), "set": fp.names(mask)[0], "kind": kind, "ngram": gram})
    sets: dict[str, int] = {}
    for h in hits:
        for s in h["sets"]:
            sets[s] = sets.get(s, 0) + 1
    return {"n": n, "n_hit": len(hits), "sets": sets, "hits": hits}


def describe_hits(report: dict, labels: list[str] | None = None, first: int = 3) -> str:
    out = []
    for h in report["hits"][:first]:
        where = labels[h["index"]] if labels else f"text {h['index']}"
        out.append(f'{where} matches {", ".join(h["sets"])} ({h["kind"]}: "{h["ngram"]}")')
    more = report["n_hit"] - min(first, report["n_hit"])
    return "; ".join(out) + (f"; and {more} more" if more > 0 else "")


def require_clean(
    texts: Iterable[str],
    labels: list[str] | None = None,
    what: str = "the training prompts",
    fingerprints: Fingerprints | None = None,
) -> dict:
    """The report of ``check``; raises ContaminationError naming the first hits when there are any."""
    texts = list(texts)
    rep = check(texts, fingerprints)
    if rep["n_hit"]:
        raise ContaminationError(
            f"{what}: {rep['n_hit']} of {rep['n']} overlap a public evaluation set, which is never trained on "
            f"({', '.join(f'{s}: {c}' for s, c in rep['sets'].items())}). First: {describe_hits(rep, labels)}. "
            "Remove them and try again."
        )
    return rep


def main(argv=None) -> int:
    """``python -m engine_bridge.training.decontam FILE.jsonl ...``: checks prompt files (the
    ``--prompts`` format) against the evaluation sets; exit 1 and the hits listed when any overlap."""
    import argparse
    import sys

    from .prompt_files import PromptFileError, read_extra_prompts

    ap = argparse.ArgumentParser(
        description="check prompt files (JSONL: text / prompt / messages) against the public evaluation sets"
    )
    ap.add_argument("files", nargs="+")
    ap.add_argument("--show", type=int, default=20, help="hits to list")
    a = ap.parse_args(argv)
    bad = 0
    for f in a.files:
        try:
            rows = read_extra_prompts(f)
        except PromptFileError as e:
            print(f"{f}: {e}", file=sys.stderr)
            return 2
        rep = check([r["text"] for r in rows])
        print(f"{f}: {rep['n']} prompts, {rep['n_hit']} overlap an evaluation set {rep['sets'] or ''}")
        for h in rep["hits"][: a.show]:
            print(f'  line {rows[h["index"]]["line"]}: {", ".join(h["sets"])} ({h["kind"]}: "{h["ngram"]}")')
        bad += rep["n_hit"]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
