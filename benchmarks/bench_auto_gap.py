"""Auto's host time between AR steps against plain AR's (issue 29), on any device.

Auto as a user runs it, but with its probes off and the drafter fed (the "host" feature path), so
that every step is an AR step and the two modes differ only by auto's own work between steps: the
policy's choice, the feature row kept for the drafter, the text-kind tracker. Per mode: the median
and lower quartile of the time from one step's record to the next, less the step's own wall time
(step callbacks), over every step after the first. The modes alternate per round, one process.

Usage: PYTHONPATH=. python benchmarks/bench_auto_gap.py --target T.gguf --draft D.gguf
       [--prompts 3] [--max-tokens 48] [--rounds 2] [--threads 2] [--gpu-layers 0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import auto_mode
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

ROOT = Path(__file__).resolve().parent.parent


def gaps(eng, text: str, mode: str, max_tokens: int) -> list[float]:
    ends: list[float] = []
    eng.reset()
    res = eng.generate(
        text,
        GenerationSettings(mode=mode, budget=7, max_tokens=max_tokens, stop_at_eog=False),
        on_step=lambda rec: ends.append(time.perf_counter()),
    )
    return [b - a - rec.wall for a, b, rec in zip(ends, ends[1:], res.steps[1:])]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--prompts", type=int, default=3, help="first N MT-Bench first turns")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gpu-layers", type=int, default=None, help="default: the engine's (all on a GPU build)")
    a = ap.parse_args(argv)
    kw = {} if a.gpu_layers is None else {"n_gpu_layers": a.gpu_layers, "draft_n_gpu_layers": a.gpu_layers}
    eng = Engine.load(
        EngineConfig(target=Path(a.target), draft=Path(a.draft), n_threads=a.threads, **kw), preflight=PAIR_PREFLIGHT
    )
    rows = (ROOT / "resources/prompts/public/mt_bench.jsonl").read_text().splitlines()[: a.prompts]
    texts = [json.loads(r)["messages"][0]["content"] for r in rows]
    pol = auto_mode.AutoPolicy
    real = (pol._ar_probe, pol.needs_drafter)
    pol._ar_probe = lambda self: None  # every step AR...
    pol.needs_drafter = lambda self: True  # ...with the drafter fed, as where speculation could pay
    try:
        eng.auto_keep_features = "host"
        eng.generate(texts[0], GenerationSettings(mode="auto", budget=7, max_tokens=8))  # calibration, warm-up
        out: dict[str, list[float]] = {"ar": [], "auto": []}
        for _ in range(a.rounds):
            for mode in out:
                for text in texts:
                    out[mode] += gaps(eng, text, mode, a.max_tokens)
    finally:
        pol._ar_probe, pol.needs_drafter = real
        eng.close()
    for mode, g in out.items():
        g.sort()
        print(
            f"{mode:5} gap between steps: median {1e6 * statistics.median(g):.1f} us, "
            f"lower quartile {1e6 * g[len(g) // 4]:.1f} us ({len(g)} steps)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
