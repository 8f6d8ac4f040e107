"""Tree shape on a pair: mean commit length per step for tree settings that do not change cost.

Commit length depends on the tree's shape, not on the device, so this runs on the CPU. It varies,
one at a time against the engine's defaults: how deep the greedy chain is seeded (a fraction of
the node budget), candidates per position (K), a temperature on the drafter's logits for scoring,
and scoring normalised over the M best candidates only (what a backend top-k sampler returns).

    python benchmarks/bench_tree_shape.py [--target T --draft D] [--prompts 15] [--budgets 5,6,7]
    python benchmarks/bench_tree_shape.py --target T --draft D --val code,math,chat --prompts 10 \
        --budgets 15 --fracs 0.3,0.5,0.7 --ks 4,6,8 --temps 0.7,1.5 --renorms ""

``--val`` takes the prompts from the validation split of the shipped training prompts (the
category's first N, rendered with the target's chat template): tree settings are choices, and
choices are made there, never on a public benchmark. ``--suite`` (mt-bench, gsm8k, humaneval: the
first N of a public suite) reports a choice made on the validation split; it never makes one.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path

import numpy as np

from engine_bridge.bench.suites import load_suite
from engine_bridge.runtime import tree as tree_mod
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

_top, _seeded = tree_mod.top_candidates, tree_mod.seeded_chain_len
knobs = {"chain_frac": None, "temp": 1.0, "renorm": 0}
VAL = Path(__file__).resolve().parents[1] / "resources" / "prompts" / "train" / "prompts.jsonl.xz"


def val_prompts(eng, categories: list[str], n: int) -> list[str]:
    """The first ``n`` validation-split requests of each category, as chat-templated prompts."""
    with lzma.open(VAL, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    out = []
    for cat in categories:
        texts = [r["text"] for r in rows if r["split"] == "val" and r["category"] == cat][:n]
        out += [eng.format_chat([{"role": "user", "content": t}]) for t in texts]
    return out


def seeded_chain_len(budget: int) -> int:
    # patched into the tree module, so that the engine's leaf count (tree.max_leaves, the KV
    # sequences it allocates) follows the seeded chain as well: a shorter chain leaves room for
    # more branches, which a leaf cap sized for the default would cut
    if knobs["chain_frac"] is not None:
        return max(1, round(budget * knobs["chain_frac"]))
    return _seeded(budget)


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
    ap.add_argument(
        "--val", default="", help="categories of the validation split (e.g. code,math,chat), --prompts each"
    )
    ap.add_argument("--suite", default="", help="a public suite's first --prompts prompts (to report, not to choose)")
    ap.add_argument("--no-chain", action="store_true", help="skip the chain rows")
    ap.add_argument("--fracs", default="0.15,0.3,0.5,0.7", help="seeded-chain fractions of the budget")
    ap.add_argument("--ks", default="2,3,4,6", help="candidates per position")
    ap.add_argument("--temps", default="0.7,1.5,2.0", help="scoring temperatures")
    ap.add_argument("--renorms", default="4,8,32", help="scoring normalised over the M best")
    a = ap.parse_args(argv)
    nums = lambda s, f: [f(x) for x in s.split(",") if x.strip()]  # noqa: E731
    prompts = [json.loads(x)["prompt"] for x in open(a.prompt_file) if x.strip()][: a.prompts]
    budgets = [int(x) for x in a.budgets.split(",")]
    top = budgets[-1]
    tree_mod.seeded_chain_len, tree_mod.top_candidates = seeded_chain_len, top_candidates
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=2048, n_threads=a.threads)
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        if a.val:
            prompts = val_prompts(eng, a.val.split(","), a.prompts)
        elif a.suite:
            prompts = [p.render(eng.format_chat) for p in load_suite(a.suite).prompts[: a.prompts]]

        def row(label, mode, budget, **kw):
            print(f"{label:34s} {commit_len(eng, prompts, mode, budget, a.max_tokens, **kw):.3f}", flush=True)

        for b in [] if a.no_chain else sorted(set(budgets + [4, 8, 15])) if not (a.val or a.suite) else budgets:
            row(f"chain {b}", "chain", b)
        for b in budgets:
            for frac in nums(a.fracs, float):
                knobs["chain_frac"] = frac
                row(f"tree {b} chain seeded to {frac:.2f}", "tree", b)
        knobs["chain_frac"] = None
        for k in nums(a.ks, int):
            row(f"tree {top} K={k}", "tree", top, k=k)
        for t in nums(a.temps, float):
            knobs["temp"] = t
            row(f"tree {top} scoring temperature {t}", "tree", top)
        knobs["temp"] = 1.0
        for m in nums(a.renorms, int):
            knobs["renorm"] = m
            row(f"tree {top} normalised over {m}", "tree", top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
