"""The host time of a drafter's inject: copying a step's accepted rows of the target's layer inputs
out of llama.cpp and building the drafter's batch, without the decode itself (the context's
``process`` is replaced by a no-op while timed). What a speculative step spends in Python between
the verify and the draft, whatever the device.

    python benchmarks/bench_inject_host.py --target T.gguf --draft D.gguf [--rows 3] [--iters 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import native  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--rows", type=int, default=3, help="accepted rows injected per step")
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    with Engine.load(EngineConfig(target=a.target, draft=a.draft, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
        # a chain run leaves the target's last verify batch (8 rows, extraction on) in its buffers
        eng.generate("The capital of France is", GenerationSettings(mode="chain", budget=7, max_tokens=16))
        d = eng.drafter
        real = native.Context.process
        native.Context.process = lambda self, b: None
        try:
            per_round = []
            for _ in range(a.rounds):
                t = time.perf_counter()
                for _ in range(a.iters):
                    d.inject(eng.target_ctx, 0, a.rows, 0)
                per_round.append((time.perf_counter() - t) / a.iters * 1e6)
        finally:
            native.Context.process = real
    print(
        f"inject of {a.rows} rows, host only: {statistics.median(per_round):.1f} us "
        f"(rounds: {', '.join(f'{x:.1f}' for x in per_round)})"
    )


if __name__ == "__main__":
    main()
