"""The pieces of a speculative step, one at a time, for Nsight Compute and for wall-clock timing (issue 28).

Phases (each a loop of the same operation, the KV length held from one iteration to the next):

  ar        one target row, layer-input extraction off (an AR run's decode), argmax on the device
  verify8   a chain-7 verify: 8 target rows, every row an output, extraction on, device argmax
  verify16  a chain-15 / tree-15 verify: 16 rows, the same
  draft8    the drafter's block for 7 drafts (8 rows: [last, mask x 7]), its argmax read back
  draft16   the block for 15 drafts (16 rows)
  inject    --keep rows of target features (read from the last 8-row verify) into the drafter's KV
  arx       one target row with layer-input extraction on (an AR step that keeps the drafter's
            features: auto's "host" path)
  toggle    one target row, extraction switched on and off every iteration (auto's "redecode" path
            switching between AR and speculation; patch 0007 makes a switch rebuild one graph)
  chain7    whole steps of a real chain run at budget 7 (Engine.generate; two steps in the range)
  tree15    whole steps of a real tree run at node budget 15

--time: every phase in this process, no profiler: median wall ms per iteration (process + the
synchronisation that ends the phase in the decoding loop), written to --json.
--profile PHASE: WARMUP iterations (CUDA graphs captured), then cudaProfilerStart, --iters
iterations, cudaProfilerStop; run under `ncu --profile-from-start off` so only those are profiled
(gpu/gpu_ncu.sh). The build's toggles (DFLASH_MMVQ_MAX_ROWS ...) are read once per process.

Usage: python gpu/gpu_step_profile.py --target T --draft D (--time [--json J] | --profile PHASE [--iters 2]) [--context N]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402

PHASES = ("ar", "verify8", "verify16", "draft8", "draft16", "inject", "arx", "toggle", "chain7", "tree15")
LOOPS = PHASES[:8]  # the phases timed as loops (the rest are whole steps of a run)
WARMUP = 6
PROMPT = "The history of the city begins with a small settlement on the river, where"


def profiler():
    """(start, stop) of the CUDA profiler range, through the CUDA runtime ggml loaded (or the driver)."""
    for line in open("/proc/self/maps"):
        if "libcudart.so" in line:
            rt = ctypes.CDLL(line.split()[-1])
            return rt.cudaProfilerStart, rt.cudaProfilerStop
    try:
        drv = ctypes.CDLL("libcuda.so.1")
    except OSError:  # a CPU build: nothing to profile
        return (lambda: 0), (lambda: 0)
    return drv.cuProfilerStart, drv.cuProfilerStop


def long_prompt(eng: Engine, n: int) -> list[int]:
    """PROMPT's paragraph repeated to n tokens (cut there): the KV length the loops then hold."""
    one = eng.tokenize(" " + PROMPT, add_special=False) if n else []
    toks = eng.tokenize(PROMPT)
    while len(toks) < n:
        toks += one
    return toks[:n] if n else toks


class Bench:
    def __init__(self, eng: Engine, keep: int, context: int = 0):
        self.e, self.keep = eng, keep
        self.t, self.d = eng.target_ctx, eng.drafter
        toks = long_prompt(eng, context)
        self.context = context
        eng._prefill(toks[:-1], need_features=True)  # as a chain run leaves it
        self.t.set_backend_greedy(eng.config.backend_sampling, n_seqs=1)
        self.d.ctx.set_backend_greedy(eng.config.backend_sampling)
        self.pos, self.last = len(toks) - 1, toks[-1]
        self.toks = toks

    def rows(self, n: int, features: bool) -> None:
        self.e._set_extraction(features)
        b = self.t_batch()
        b.clear()
        for j in range(n):
            b.add_token(self.last if j == 0 else (self.last + j) % 1000 + 10, self.pos + j, 0, True)
        self.t.process(b)
        self.t.synchronize()
        self.t.sampled_token(0)
        self.t.seq_rm(0, self.pos, -1)

    def t_batch(self):
        return self.e.target_batch

    def draft(self, n: int) -> None:
        self.d.draft(self.last, self.pos, n)  # reads the argmax (sync), drops the block's K/V

    def inject(self) -> None:
        self.d.inject(self.t, 0, self.keep, self.pos, sync=True)
        self.d.ctx.seq_rm(0, self.pos, -1)

    def op(self, phase: str):
        return {
            "ar": lambda: self.rows(1, False),
            "verify8": lambda: self.rows(8, True),
            "verify16": lambda: self.rows(16, True),
            "draft8": lambda: self.draft(7),
            "draft16": lambda: self.draft(15),
            "inject": self.inject,
            "arx": lambda: self.rows(1, True),
            "toggle": self.toggle,
        }[phase]

    def toggle(self) -> None:
        self._on = not getattr(self, "_on", False)
        self.rows(1, self._on)

    def loop(self, phase: str, iters: int, around=None, prime: bool = True) -> list[float]:
        if phase == "inject" and prime:
            self.rows(8, True)  # the features the inject reads
        f = self.op(phase)
        for _ in range(WARMUP):
            f()
        if around:
            self.rc_start = around[0]()
        out = []
        for _ in range(iters):
            t0 = time.perf_counter()
            f()
            out.append(time.perf_counter() - t0)
        if around:
            around[1]()
        return out

    def steps(self, phase: str, n_steps: int, around=None) -> list:
        """Whole steps of a real run; the profiler range (if any) covers steps WARMUP+1 .. WARMUP+n_steps."""
        mode, budget = ("chain", 7) if phase == "chain7" else ("tree", 15)
        n_tok = WARMUP + n_steps + 4  # a step commits ~1 token on random weights; a repeated long prompt up to a block
        s = GenerationSettings(
            mode=mode, budget=budget, max_tokens=n_tok * (budget + 1 if self.context else 1), stop_at_eog=False
        )
        self.e.generate(self.toks, s.replace(max_tokens=16))  # warm-up run: graphs captured
        seen = []

        def on_step(rec):
            seen.append(rec)
            if around and len(seen) == WARMUP:
                around[0]()
            if around and len(seen) == WARMUP + n_steps:
                around[1]()

        self.e.generate(self.toks, s, on_step=on_step)
        return seen[WARMUP : WARMUP + n_steps]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--keep", type=int, default=4, help="rows the inject phase writes (a math chain-7 step keeps ~3.4)")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--profile", choices=PHASES)
    ap.add_argument("--iters", type=int, default=2, help="iterations (steps) in the profiler range")
    ap.add_argument("--timed", type=int, default=50, help="--time: iterations per phase and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40, help="--time: steps timed per chain7 / tree15 run")
    ap.add_argument("--context", type=int, default=0, help="prompt tokens before the loops (0: PROMPT alone)")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=4096, flash_attn="on")
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        bench = Bench(eng, a.keep, a.context)
        if a.profile:
            around = profiler()
            if a.profile in ("chain7", "tree15"):
                recs = bench.steps(a.profile, a.iters, around)
                info = {"phase": a.profile, "iters": len(recs), "committed": [r.committed for r in recs]}
            else:
                bench.loop(a.profile, a.iters, around)
                info = {"phase": a.profile, "iters": a.iters}
            info["profiler_start_rc"] = getattr(bench, "rc_start", None)
            print("PROFILED " + json.dumps(info), flush=True)
            if a.json:
                Path(a.json).write_text(json.dumps(info) + "\n")
            return 0
        res: dict = {"keep": a.keep, "context": len(bench.toks), "phases": {}}
        times: dict[str, list[float]] = {p: [] for p in LOOPS}
        for _ in range(a.rounds):  # rounds interleave: drift spreads over all
            for p in times:
                times[p] += bench.loop(p, a.timed)
        for p, ts in times.items():
            res["phases"][p] = {"ms_median": 1e3 * statistics.median(ts), "ms_min": 1e3 * min(ts), "n": len(ts)}
        for p in ("chain7", "tree15"):
            recs = bench.steps(p, a.steps)
            res["phases"][p] = {
                "ms_median": 1e3 * statistics.median(r.wall for r in recs),
                "n": len(recs),
                "phase_ms": {
                    k: 1e3 * statistics.median(getattr(r, "t_" + k) for r in recs)
                    for k in ("draft", "inject", "verify", "accept", "other")
                },
                "committed": statistics.fmean(r.committed for r in recs),
            }
        base = res["phases"]["ar"]["ms_median"]
        for p, r in res["phases"].items():
            r["ar_tokens"] = r["ms_median"] / base
            print(f"{p:9} {r['ms_median']:8.3f} ms  {r['ar_tokens']:5.2f} AR tokens", flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
