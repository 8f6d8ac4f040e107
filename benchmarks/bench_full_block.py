"""Whole drafter blocks against budget-sized ones: mean commit length per category (issue 27).

The drafter's block is non-causal (its mask rows attend to each other), so its length shapes every
draft in it. `DFLASH_DRAFT_FULL_BLOCK=1` decodes the whole block whatever the budget; this script
runs both in one process, on the drafter's held-out validation prompts (the training sources'
validation split, never a public evaluation set), checks that every run's tokens are the same both
ways, and prints the mean commit length per category, mode and side. Commit length does not depend
on the device, so it runs on the CPU.

    python benchmarks/bench_full_block.py [--per-category 16] [--max-tokens 96] [--modes chain:7,tree:7]
"""

from __future__ import annotations

import argparse
import collections
import json
import time

from engine_bridge.common.resources import resource
from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=None, help="target GGUF (default: the default pair's, from the models cache)")
    ap.add_argument("--draft", default=None, help="drafter GGUF (default: the shipped SmolLM2 drafter)")
    ap.add_argument("--prompts", default=None, help="prompts JSONL (default: the drafter's validation prompts)")
    ap.add_argument("--per-category", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--modes", default="chain:7,tree:7", help="mode:budget pairs")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    target = args.target or registry_models.cached()
    draft = args.draft or smollm2_drafter()
    if target is None or draft is None:
        raise SystemExit("the default pair is not in the models cache: run `dflash-studio fetch-default`")
    path = args.prompts or resource("models/smollm2/prompts.jsonl")
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    by_cat: dict[str, list[dict]] = collections.defaultdict(list)
    for r in rows:
        by_cat[r.get("category", "all")].append(r)
    chosen = [r for c in sorted(by_cat) for r in by_cat[c][: args.per_category]]
    modes = [(m, int(b)) for m, b in (p.split(":") for p in args.modes.split(","))]

    eng = Engine.load(EngineConfig(target=target, draft=draft, n_ctx=2048, n_threads=args.threads), check=False)
    sums: dict[tuple, list[int]] = collections.defaultdict(lambda: [0, 0])
    t0 = time.time()
    try:
        for r in chosen:
            toks = eng.tokenize_chat(r["messages"][:1])
            for mode, budget in modes:
                out = []
                for full in (False, True):
                    eng.drafter.full_block = full
                    res = eng.generate(toks, GenerationSettings(mode=mode, budget=budget, max_tokens=args.max_tokens))
                    key = (r.get("category", "all"), mode, budget, full)
                    sums[key][0] += len(res.tokens)
                    sums[key][1] += len(res.steps)
                    out.append(res.tokens)
                if out[0] != out[1]:
                    raise SystemExit(f"{r.get('id')}: {mode} {budget}: the tokens differ between the sides")
    finally:
        eng.close()
    print(f"{len(chosen)} prompts, {args.max_tokens} tokens, {time.time() - t0:.0f} s; tokens identical both ways")
    print("| category | mode | budget-sized block | whole block |")
    print("|---|---|---|---|")
    for cat in sorted(by_cat):
        for mode, budget in modes:
            a, b = sums[(cat, mode, budget, False)], sums[(cat, mode, budget, True)]
            if a[1] and b[1]:
                print(f"| {cat} | {mode} {budget} | {a[0] / a[1]:.3f} | {b[0] / b[1]:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
