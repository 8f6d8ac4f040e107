"""The host time of filling a tree step's verify batch (patch 0026, issue 28): the batches a real
tree run builds (recorded from ``Batch.add_token_sets``), each filled again and again entry by entry
(``add_token_seqs``: three ctypes calls an entry, one more per extra sequence) and in one call
(``llama_batch_ext_add_token_sets``), without decoding them. What a tree step spends in Python
before its verify, whatever the device; both ways alternate in rounds, in one process.

    python benchmarks/bench_tree_fill.py --target T.gguf --draft D.gguf [--budget 15] [--iters 500]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import llama_ffi, native  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402

PROMPTS = (
    "Write a Python function that checks whether a string is a palindrome.",
    "A farmer has 17 sheep and buys 5 more each week. How many sheep does he have after 6 weeks?",
    "Explain the difference between a list and a tuple in Python.",
)


def fill_by_entry(b, tokens, positions, sets, outputs) -> None:
    b.clear()
    for t, p, q, o in zip(tokens, positions, sets, outputs, strict=True):
        b.add_token_seqs(t, p, q, o)


def fill_one_call(b, tokens, positions, sets, outputs) -> None:
    b.clear()
    b.add_token_sets(tokens, positions, sets, outputs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--budget", type=int, default=15)
    ap.add_argument("--iters", type=int, default=500, help="fills per recorded batch, way and round")
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    assert llama_ffi.token_sets_api() is not None, "this engine lacks patch 0026 (or DFLASH_BULK_BATCH=0)"
    recorded: list[tuple] = []
    real = native.Batch.add_token_sets

    def record(self, tokens, positions, sets, outputs):
        recorded.append((list(tokens), list(positions), [list(q) for q in sets], list(outputs)))
        return real(self, tokens, positions, sets, outputs)

    cfg = EngineConfig(target=a.target, draft=a.draft, n_threads=2)
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        native.Batch.add_token_sets = record
        try:
            s = GenerationSettings(mode="tree", budget=a.budget, max_tokens=48)
            for p in PROMPTS:
                eng.generate(eng.tokenize_chat([{"role": "user", "content": p}]), s)
        finally:
            native.Batch.add_token_sets = real
        batches = [r for r in recorded if len(r[0]) > 1]
        b = eng.target_batch
        ways = {"by_entry": fill_by_entry, "one_call": fill_one_call}
        us: dict[str, list[float]] = {w: [] for w in ways}
        for _ in range(a.rounds):
            for w, f in ways.items():
                for args in batches:
                    t0 = time.perf_counter()
                    for _ in range(a.iters):
                        f(b, *args)
                    us[w].append((time.perf_counter() - t0) / a.iters * 1e6)
        b.clear()
        eng.reset()
    n_entries = statistics.fmean(len(r[0]) for r in batches)
    n_seqs = statistics.fmean(sum(len(q) for q in r[2]) for r in batches)
    print(f"{len(batches)} tree batches, {n_entries:.1f} entries and {n_seqs:.1f} sequence ids each, tree {a.budget}")
    for w, v in us.items():
        print(f"{w:9} median {statistics.median(v):7.1f} us a batch (min {min(v):.1f}, max {max(v):.1f})")


if __name__ == "__main__":
    main()
