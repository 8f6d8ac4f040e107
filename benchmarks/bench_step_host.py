"""Host time per decode step outside llama.cpp's decodes: each step's wall clock less the time inside
its ``Context.process`` calls (the target's and the drafter's). On a CPU build ``llama_process`` is
synchronous, so what is left is the Python and FFI time of a step; on a GPU the device waits through
most of it (less what ``DFLASH_OVERLAP_COMMIT`` hides). A decode leaves the CPU's caches cold, so
these figures read above a warm micro-benchmark of the same calls.

    python benchmarks/bench_step_host.py --target T.gguf --draft D.gguf [--modes ar,chain] [--budget 5]
        [--reps 9] [--max-tokens 128] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import generation, native  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


class StepClock:
    """Times each decode step and the ``process`` calls inside it (those of the prefill are left out)."""

    def __init__(self) -> None:
        self.in_step = False
        self.inside_ns = 0  # in process(), during steps
        self.step_ns = 0
        self.steps = 0

    def install(self) -> None:
        real_process, real_step_fn = native.Context.process, generation.Generation._step_function
        clock = self

        def process(ctx, batch):
            t = time.perf_counter_ns()
            real_process(ctx, batch)
            if clock.in_step:
                clock.inside_ns += time.perf_counter_ns() - t

        def step_function(gen):
            step = real_step_fn(gen)

            def timed(last, t0):
                clock.in_step = True
                t = time.perf_counter_ns()
                try:
                    return step(last, t0)
                finally:
                    clock.step_ns += time.perf_counter_ns() - t
                    clock.steps += 1
                    clock.in_step = False

            return timed

        native.Context.process = process
        generation.Generation._step_function = step_function

    def host_us_per_step(self) -> float:
        return (self.step_ns - self.inside_ns) / max(1, self.steps) / 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--modes", default="ar,chain")
    ap.add_argument("--budget", type=int, default=5)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    clock = StepClock()
    clock.install()
    cfg = EngineConfig(target=a.target, draft=a.draft, n_threads=a.threads)
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        text = eng.format_chat([{"role": "user", "content": PROMPT}])
        for mode in a.modes.split(","):
            s = GenerationSettings(mode=mode, budget=a.budget, max_tokens=a.max_tokens, stop_at_eog=False)
            eng.reset()
            eng.generate(text, s)  # warm-up
            per_rep = []
            for _ in range(a.reps):
                clock.inside_ns = clock.step_ns = clock.steps = 0
                eng.reset()
                eng.generate(text, s)
                per_rep.append(clock.host_us_per_step())
            label = mode if mode == "ar" else f"{mode} {a.budget}"
            print(
                f"{label}: host time per step outside process(): median {statistics.median(per_rep):.1f} us "
                f"({clock.steps} steps a run; runs {', '.join(f'{x:.1f}' for x in per_rep)})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
