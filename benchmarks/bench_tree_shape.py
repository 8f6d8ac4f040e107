"""Tree shape on a pair: mean commit length per step for tree settings that do not change cost.

Commit length depends on the tree's shape, not on the device, so this runs on the CPU. It varies,
one at a time against the engine's defaults: how deep the greedy chain is seeded (a fraction of
the node budget), candidates per position (K), a temperature on the drafter's logits for scoring,
and scoring normalised over the M best candidates only (what a backend top-k sampler returns).

    python benchmarks/bench_tree_shape.py [--target T --draft D] [--prompts 15] [--budgets 5,6,7]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from engine_bridge.runtime import tree as tree_mod
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

_build, _top = tree_mod.build_tree, tree_mod.top_candidates
knobs = {"chain_frac": None, "temp": 1.0, "renorm": 0}


def build_tree(tokens, logp, budget, chain_len=None, leaf_cap=None):
    if knobs["chain_frac"] is not None:
        chain_len = max(1, round(budget * knobs["chain_frac"]))
    return _build(tokens, logp, budget, chain_len=chain_len, leaf_cap=leaf_cap)


def top_candidates(logits, k):
    x = np.ascontiguousarray(logits / knobs["temp"]) if knobs["temp"] != 1.0 else logits
    m = knobs["renorm"]
    tokens, logp = _top(x, max(k, m))
    if m:  # normalised over the m best only
        logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
    return tokens[:, :k], logp[:, :k]


def commit_len(eng, prompts, mode, budget, max_tokens, k=4) -> float:
    gen = steps = 0
    for p in prompts:
        eng.reset()
        r = eng.generate(p, GenerationSettings(mode=mode, budget=budget, max_tokens=max_tokens, tree_top_k=k))
        gen += r.summary.n_generated
        steps += r.summary.n_steps
    return gen / steps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="resources/models/target.gguf")
    ap.add_argument("--draft", default="resources/models/drafter.gguf")
    ap.add_argument("--prompt-file", default="resources/models/prompts.jsonl")
    ap.add_argument("--prompts", type=int, default=15)
    ap.add_argument("--budgets", default="5,6,7")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    prompts = [json.loads(x)["prompt"] for x in open(a.prompt_file) if x.strip()][: a.prompts]
    budgets = [int(x) for x in a.budgets.split(",")]
    top = budgets[-1]
    tree_mod.build_tree, tree_mod.top_candidates = build_tree, top_candidates
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=2048, n_threads=a.threads)
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:

        def row(label, mode, budget, **kw):
            print(f"{label:34s} {commit_len(eng, prompts, mode, budget, a.max_tokens, **kw):.3f}", flush=True)

        for b in sorted(set(budgets + [4, 8, 15])):
            row(f"chain {b}", "chain", b)
        for b in budgets:
            for frac in (0.15, 0.3, 0.5, 0.7):
                knobs["chain_frac"] = frac
                row(f"tree {b} chain seeded to {frac:.2f}", "tree", b)
        knobs["chain_frac"] = None
        for k in (2, 3, 4, 6):
            row(f"tree {top} K={k}", "tree", top, k=k)
        for t in (0.7, 1.5, 2.0):
            knobs["temp"] = t
            row(f"tree {top} scoring temperature {t}", "tree", top)
        knobs["temp"] = 1.0
        for m in (4, 8, 32):
            knobs["renorm"] = m
            row(f"tree {top} normalised over {m}", "tree", top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
