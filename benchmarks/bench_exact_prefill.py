"""What the exact verify costs a prompt's prefill (issue 29, patch 0016).

A batch-invariant CUDA context runs the attention of batches of up to 16 rows through the vector
kernel, one row per block (the first version did so at every row count, prompts included, and
cost long prompts 1.4-2.1x; docs/benchmarks.md). This times the first
token of an AR request (prefill + one decode) for prompts of several lengths on a fast and an exact
engine in one process, alternating, and prints the medians and exact / fast; then whether the two
engines' greedy AR answers to those prompts are the same tokens.

    python benchmarks/bench_exact_prefill.py --target T.gguf --draft D.gguf --gpu-layers 99 \
        --lengths 64,256,1024,2048 --reps 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

TEXT = (
    "Write a detailed report on the water supply of a small town: where the water comes from, how it "
    "is treated, stored and pumped, who pays for the pipes, and what the town should change first. "
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--gpu-layers", type=int, default=99)
    ap.add_argument("--lengths", default="64,256,1024,2048", help="prompt lengths in tokens")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ar-tokens", type=int, default=64, help="AR tokens compared between the engines")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    lengths = [int(x) for x in a.lengths.split(",")]
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=max(lengths) + 256, n_gpu_layers=a.gpu_layers)
    engines = {
        "fast": Engine.load(cfg.replace(exact=False), preflight=PAIR_PREFLIGHT),
        "exact": Engine.load(cfg.replace(exact=True), preflight=PAIR_PREFLIGHT),
    }
    base = engines["fast"].tokenize(TEXT * 200)
    once = GenerationSettings(mode="ar", max_tokens=1, stop_at_eog=False)
    times: dict[tuple[str, int], list[float]] = {(k, n): [] for k in engines for n in lengths}
    for _ in range(a.reps + 1):  # the first round warms every shape up and is not counted
        for n in lengths:
            for kind, eng in engines.items():
                eng.reset()
                t = time.perf_counter()
                eng.generate(base[:n], once)
                times[(kind, n)].append(time.perf_counter() - t)
    rows = []
    print("| prompt tokens | fast ms | exact ms | exact / fast |")
    print("|---|---|---|---|")
    for n in lengths:
        f = statistics.median(times[("fast", n)][1:]) * 1e3
        e = statistics.median(times[("exact", n)][1:]) * 1e3
        rows.append({"tokens": n, "fast_ms": round(f, 3), "exact_ms": round(e, 3), "ratio": round(e / f, 3)})
        print(f"| {n} | {f:.2f} | {e:.2f} | {e / f:.3f} |")
    # the two engines' AR on the same prompts: equal where the exact engine's one-row decodes and
    # prompt kernels are the fast engine's (the exact verify only changes batches of 2-16 rows)
    same = {}
    greedy = GenerationSettings(mode="ar", max_tokens=a.ar_tokens, stop_at_eog=False)
    for n in lengths:
        outs = []
        for eng in engines.values():
            eng.reset()
            outs.append(list(eng.generate(base[:n], greedy).tokens))
        same[n] = outs[0] == outs[1]
    print("exact AR == fast AR (" + str(a.ar_tokens) + " tokens): " + ", ".join(f"{n}: {same[n]}" for n in lengths))
    for eng in engines.values():
        eng.close()
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"reps": a.reps, "rows": rows, "ar_equal": {str(n): v for n, v in same.items()}}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
