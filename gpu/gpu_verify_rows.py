"""What a target verify of n rows costs, in autoregressive tokens (issue 13).

The target decodes n rows (every row an output, layer-input extraction on, the backend greedy
sampler attached: exactly as a chain step's verify) at a fixed position after the prompt, then the
rows are trimmed again, so the KV length holds from one decode to the next. Each row count runs as
a block of decodes (a fixed-budget chain verifies the same row count every step), the blocks in
ROUNDS interleaved rounds (a drift of the machine spreads over all row counts); the first WARMUP
decodes of a block are dropped (graph capture), the rest give the median and lower quartile
(process + synchronize). n = 1 is an autoregressive decode, so cost(n) = t(n) / t(1).

The build's toggles (DFLASH_MULTIROW_GRAPHS, DFLASH_MMVQ_MAX_ROWS, GGML_CUDA_DISABLE_GRAPHS) are
read once per process: gpu/gpu_verify_cost.sh runs this once per setting.

Usage: python gpu/gpu_verify_rows.py --target T --draft D [--rows 1,2,4,8,16] [--iters 20] [--rounds 2]
       [--json out.json] [--label after]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine_bridge.runtime.config import EngineConfig  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

WARMUP = 5
PROMPT = "The history of the city begins with a small settlement on the river, where"
TOGGLES = ("DFLASH_MULTIROW_GRAPHS", "DFLASH_MMVQ_MAX_ROWS", "GGML_CUDA_DISABLE_GRAPHS", "DFLASH_GRAPH_STATS")


def time_rows(eng: Engine, pos: int, last: int, n: int, iters: int) -> list[float]:
    ctx, b = eng.target_ctx, eng.target_batch
    out = []
    for i in range(WARMUP + iters):
        b.clear()
        for j in range(n):
            b.add_token(last if j == 0 else (last + j) % 1000 + 10, pos + j, 0, True)
        t0 = time.perf_counter()
        ctx.process(b)
        ctx.synchronize()
        dt = time.perf_counter() - t0
        ctx.seq_rm(0, pos, -1)
        if i >= WARMUP:
            out.append(dt)
    return out


def lower_quartile(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 4]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--rows", default="1,2,4,8,16")
    ap.add_argument("--iters", type=int, default=20, help="timed decodes per block")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--label", default="")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = [int(x) for x in a.rows.split(",") if x]
    if 1 not in rows:
        rows = [1] + rows
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=4096, flash_attn="on")
    res = {"label": a.label, "env": {k: os.environ.get(k) for k in TOGGLES}, "rows": {}}
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        tokens = eng.tokenize(PROMPT)
        eng._prefill(tokens[:-1], need_features=True)  # as a chain run leaves it: features on
        eng.target_ctx.set_backend_greedy(eng.config.backend_sampling, n_seqs=1)
        pos, last = len(tokens) - 1, tokens[-1]
        times: dict[int, list[float]] = {n: [] for n in rows}
        for _ in range(a.rounds):
            for n in rows:
                times[n] += time_rows(eng, pos, last, n, a.iters)
        for n, ts in times.items():
            res["rows"][n] = {
                "ms_median": 1e3 * statistics.median(ts),
                "ms_p25": 1e3 * lower_quartile(ts),
                "ms_min": 1e3 * min(ts),
                "iters": len(ts),
            }
    base = res["rows"][1]["ms_median"]
    print(f"{a.label:8} {'rows':>4} {'ms med':>8} {'ms p25':>8} {'AR tok':>7}")
    for n, r in res["rows"].items():
        r["ar_tokens"] = r["ms_median"] / base
        print(f"{a.label:8} {n:>4} {r['ms_median']:>8.3f} {r['ms_p25']:>8.3f} {r['ar_tokens']:>7.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
