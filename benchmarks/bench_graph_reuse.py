"""How often the target's and the drafter's llama.cpp graphs are kept from step to step (issue 28).

llama.cpp rebuilds and re-allocates a context's graph when a decode's batch differs in shape from the
previous one. This runs the default pair (or --target/--draft) on a few prompts per mode and prints,
per mode: steps, the target's decodes that kept their graph (RunSummary.graphs_reused), the
drafter's (llama_perf_context), and the median draft / inject / verify phases. Run it once per side
of a switch, each in its own process, e.g.:

    python benchmarks/bench_graph_reuse.py                          # the engine's defaults
    DFLASH_TREE_FIXED_OUTPUTS=0 python benchmarks/bench_graph_reuse.py   # the tree's old batch
    DFLASH_NO_OUTPUT_SCHED=0 python benchmarks/bench_graph_reuse.py      # patch 0008 off

``--inject-micro``: the drafter alone, 300 calls each: a 3-row feature inject and a 7-draft block,
each after its own kind (graph kept) and after the other (rebuilt without patch 0008), medians.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

PROMPTS = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Give me three tips for staying healthy.",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=None, help="target GGUF (default: the default pair's, from the models cache)")
    ap.add_argument("--draft", default=None, help="drafter GGUF (default: the shipped SmolLM2 drafter)")
    ap.add_argument("--modes", default="chain:7,tree:15", help="mode:budget pairs")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--inject-micro", action="store_true", help="time the drafter's inject and block alone")
    args = ap.parse_args()
    target = args.target or registry_models.cached()
    draft = args.draft or smollm2_drafter()
    if target is None or draft is None:
        raise SystemExit("the default pair is not in the models cache: run `dflash-studio fetch-default`")
    eng = Engine.load(EngineConfig(target=target, draft=draft, n_ctx=2048, n_threads=args.threads), check=False)
    try:
        if args.inject_micro:
            return _inject_micro(eng)
        for mode, budget in ((m, int(b)) for m, b in (p.split(":") for p in args.modes.split(","))):
            steps, n_steps, tgt, dft = [], 0, 0, 0
            for text in PROMPTS:
                toks = eng.tokenize_chat([{"role": "user", "content": text}])
                d0 = eng.drafter.ctx.graph_reuses()
                res = eng.generate(toks, GenerationSettings(mode=mode, budget=budget, max_tokens=args.max_tokens))
                dft += eng.drafter.ctx.graph_reuses() - d0
                tgt += res.summary.graphs_reused
                n_steps += len(res.steps)
                steps += res.steps[1:]
            med = {
                p: 1e3 * statistics.median(getattr(s, f"t_{p}") for s in steps) for p in ("draft", "inject", "verify")
            }
            print(
                f"{mode} {budget}: {n_steps} steps; graphs kept: target {tgt}, drafter {dft}; "
                f"median ms: draft {med['draft']:.3f}, inject {med['inject']:.3f}, verify {med['verify']:.3f}"
            )
    finally:
        eng.close()
    return 0


def _inject_micro(eng, calls: int = 300) -> int:
    d = eng.drafter
    feats = np.random.default_rng(0).standard_normal((64, d.n_embd_enc)).astype(np.float32) * 0.1
    d.inject_features(feats, 40, 0, 0, True)
    pos = 40

    def block():
        d._decode_block(1, pos, 7)
        d.ctx.synchronize()
        d.ctx.seq_rm(0, pos, -1)

    def inject():
        d.inject_features(feats, 3, pos, 0, True)
        d.ctx.seq_rm(0, pos, -1)

    for name, before, timed in (
        ("block after a block", None, block),
        ("inject after an inject", None, inject),
        ("block after an inject", inject, block),
        ("inject after a block", block, inject),
    ):
        ts = []
        for _ in range(calls):
            if before is not None:
                before()
            t = time.perf_counter()
            timed()
            ts.append(time.perf_counter() - t)
        print(f"{name:24s} median {1e3 * statistics.median(ts[calls // 6 :]):.3f} ms")
    print(f"two schedulers: {d.two_schedulers}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
