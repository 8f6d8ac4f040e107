"""What a slot per verify width saves (patch 0017, issues 28 and 29), in one process.

The target decodes the patterns a speculative run makes, every row an output as in a verify:
``request`` (a chat prompt, then 12 verifies of 8 rows: a chain-7 request, whose first verify
follows the prompt's batch) and ``probe`` (24 verifies of 8 rows, then 2 of 16: auto probing
chain 15 while it runs chain 7). Each pattern runs with the row slots on (``llama_set_row_slots(16)``)
and off (1: patch 0009's one-row slot only), sides alternating, and the script prints the median
milliseconds per pattern, the ratio, and the graphs the target reused. No timed test reads it.

Usage: PYTHONPATH=. python benchmarks/bench_row_slots.py --target T.gguf --draft D.gguf
       [--gpu-layers 0] [--threads 2] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import llama_ffi
from engine_bridge.runtime.config import EngineConfig
from engine_bridge.runtime.engine import Engine
from engine_bridge.runtime.native import Batch

PROMPT = "Write a Python function that merges two sorted lists into one sorted list, with a docstring."
PATTERNS = {"request": [8] * 12, "probe": [8] * 24 + [16] * 2}


def one(eng, widths: list[int]) -> tuple[float, int]:
    """A prompt's batch, then ``widths`` decodes (timed, with the device synchronised at each end):
    seconds and the graphs reused."""
    ctx = eng.target_ctx
    ctx.clear()
    toks = eng.tokenize_chat([{"role": "user", "content": PROMPT}])
    b = Batch(ctx)
    for i, t in enumerate(toks):
        b.add_token(t, i, 0, i == len(toks) - 1)
    ctx.process(b)
    ctx.logits(1)  # (synchronises)
    pos, reused0 = len(toks), ctx.graph_reuses()
    t0 = time.perf_counter()
    for rows in widths:
        b.clear()
        for i in range(rows):
            b.add_token(2 + (pos + i) % 1000, pos + i, 0, True)
        ctx.process(b)
        ctx.logits(rows)  # a verify reads its rows (synchronises)
        pos += rows
    return time.perf_counter() - t0, ctx.graph_reuses() - reused0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--gpu-layers", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=2048, n_threads=a.threads, n_gpu_layers=a.gpu_layers)
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        ptr = eng.target_ctx.ptr
        if not llama_ffi.set_row_slots(ptr, 16):
            raise SystemExit("this engine was built without patch 0017 (llama_set_row_slots)")
        times: dict[tuple[str, int], list[float]] = {}
        reused: dict[tuple[str, int], int] = {}
        for slots in (16, 1):  # warm-up: every graph of each side built once
            llama_ffi.set_row_slots(ptr, slots)
            for widths in PATTERNS.values():
                one(eng, widths)
        for rnd in range(a.rounds):
            for slots in (16, 1) if rnd % 2 == 0 else (1, 16):
                llama_ffi.set_row_slots(ptr, slots)
                for name, widths in PATTERNS.items():
                    one(eng, widths)  # the switch rebuilt every graph: this run builds them again
                    s, r = one(eng, widths)
                    times.setdefault((name, slots), []).append(s)
                    reused[(name, slots)] = r
        print(f"{a.target}, gpu layers {a.gpu_layers}, {a.rounds} rounds, sides alternating")
        print("| pattern | decodes | slots off (1): ms, reused | on (16): ms, reused | on / off |")
        print("|---|---|---|---|---|")
        for name, widths in PATTERNS.items():
            off, on = (1e3 * statistics.median(times[(name, s)]) for s in (1, 16))
            print(
                f"| {name} | {len(widths)} | {off:.3f}, {reused[(name, 1)]} | {on:.3f}, {reused[(name, 16)]} | "
                f"{on / off:.3f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
