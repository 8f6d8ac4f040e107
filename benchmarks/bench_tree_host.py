"""Where a tree step's host time goes (issue 28): real tree runs of the given pair, each host-side
piece of ``Generation._tree_step`` timed per call -- the drafter's candidates ranked
(``rank_candidates`` / ``top_candidates``), the tree built (``build_tree``), its sequence sets
(``DraftTree.leaf_sets``) and the winning branch kept in the target's cache (``keep_path``, with how
many KV calls it made). What each costs on the host whatever the device; the decodes are not in it.

On a CPU engine these are the costs right after a decode that ran on the same cores, with cold
caches: on this project's 2-vCPU machine (2026-12-06) ``rank_candidates`` took 98 us a tree step
as the step calls it and 18 us when called again at once on the same rows (11 us in a loop). So
compare sides within one run here; a GPU host's figures need a GPU run.

    python benchmarks/bench_tree_host.py --target T.gguf --draft D.gguf [--budget 15] [--tokens 96]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import tree as tree_mod  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402

PROMPTS = (
    "Write a Python function that checks whether a string is a palindrome.",
    "A farmer has 17 sheep and buys 5 more each week. How many sheep does he have after 6 weeks?",
    "Explain the difference between a list and a tuple in Python.",
    "Give me three tips for writing a clear email to a busy manager.",
)


class Timed:
    """Replaces ``owner.name`` with a wrapper that records each call's wall time (us)."""

    def __init__(self, owner, name: str):
        self.owner, self.name, self.real, self.us = owner, name, getattr(owner, name), []

    def __enter__(self):
        real, us = self.real, self.us

        def wrapper(*args, **kw):
            t0 = time.perf_counter()
            try:
                return real(*args, **kw)
            finally:
                us.append((time.perf_counter() - t0) * 1e6)

        setattr(self.owner, self.name, wrapper)
        return self

    def __exit__(self, *exc):
        setattr(self.owner, self.name, self.real)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--budget", type=int, default=15)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=0, help="the target's context (0: the engine's default)")
    a = ap.parse_args()
    cfg = EngineConfig(target=a.target, draft=a.draft, n_threads=a.threads, n_ctx=a.n_ctx)
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        kv_calls = [0]
        ctx = eng.target_ctx
        real_rm, real_cp = ctx.seq_rm, ctx.seq_cp

        def count_rm(*a_):
            kv_calls[0] += 1
            return real_rm(*a_)

        def count_cp(*a_):
            kv_calls[0] += 1
            return real_cp(*a_)

        ctx.seq_rm, ctx.seq_cp = count_rm, count_cp
        pieces = [
            Timed(tree_mod, "rank_candidates"),
            Timed(tree_mod, "top_candidates"),
            Timed(tree_mod, "build_tree"),
            Timed(tree_mod.DraftTree, "leaf_sets"),
            Timed(tree_mod, "keep_path"),
        ]
        s = GenerationSettings(mode="tree", budget=a.budget, max_tokens=a.tokens)
        steps = 0
        for p in pieces:
            p.__enter__()
        try:
            for prompt in PROMPTS:
                r = eng.generate(eng.tokenize_chat([{"role": "user", "content": prompt}]), s)
                steps += r.summary.n_steps
        finally:
            for p in reversed(pieces):
                p.__exit__()
            ctx.seq_rm, ctx.seq_cp = real_rm, real_cp
        print(f"tree {a.budget}, {steps} steps, target context {ctx.n_ctx} cells")
        for p in pieces:
            if p.us:
                print(
                    f"{p.name:16} {len(p.us):5} calls  median {statistics.median(p.us):7.1f} us  "
                    f"mean {statistics.fmean(p.us):7.1f} us"
                )
        keep = next(p for p in pieces if p.name == "keep_path")
        if keep.us:
            print(f"target KV calls (seq_rm / seq_cp): {kv_calls[0]}, {kv_calls[0] / len(keep.us):.1f} a keep_path")


if __name__ == "__main__":
    main()
