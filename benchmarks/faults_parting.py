"""The storm's hardest parting, replayed (issue 19): tree runs of the default pair with the storm's f16
drafter variant, from a clean cache, against the target alone; where a run parts, the target's lead
for its own token under every replay of near_tie (linear batch shapes, the prompt split, the tree
step's own batch "tree", and the run's batches in order "run").

    python benchmarks/faults_parting.py [--budgets 12,24] [--top-k 2] [--max-tokens 48] [--threads 1]

A "run" gap <= 0 says the target itself, reading the K/V the run's own tree batches wrote, picks what
the run committed: batch rounding, not a loss.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "faults"), str(ROOT / "tests" / "engine_bridge")]

from fault_storm import NEAR_TIE_Q8, quantize_drafter, storm_prompts  # noqa: E402

from engine_bridge.models.demo import demo_pair  # noqa: E402
from engine_bridge.runtime import near_tie  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", default="12,24")
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    target, drafter = demo_pair()
    variant = quantize_drafter(drafter, Path(tempfile.mkdtemp()) / "storm-drafter-f16.gguf", "f16", overwrite=True)
    cfg = EngineConfig(target=target, draft=variant, n_ctx=1024, n_batch=256, n_ubatch=64, n_threads=a.threads)
    t0 = time.monotonic()
    print("| storm prompt | tree budget | parts at | AR margin | near-tie | smallest linear lead | tree | run |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|")
    with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
        eng.record_verify = True
        for i, p in enumerate(storm_prompts()):
            eng.reset()
            ref = eng.generate(p, GenerationSettings(mode="ar", max_tokens=a.max_tokens)).tokens
            for budget in (int(b) for b in a.budgets.split(",")):
                eng.reset()
                r = eng.generate(
                    p, GenerationSettings(mode="tree", budget=budget, tree_top_k=a.top_k, max_tokens=a.max_tokens)
                )
                part = near_tie.parting(
                    eng,
                    eng.tokenize(p),
                    ref,
                    r.tokens,
                    tolerance=NEAR_TIE_Q8,
                    replay=True,
                    verify_batches=r.verify_batches,
                )
                if part is None:
                    print(f"| {i} | {budget} | (equal) | | | | | |")
                    continue
                g = part.shape_gaps or {}
                linear = [v for k, v in g.items() if k not in ("tree", "run")]
                fmt = lambda x: "" if x is None else f"{x:.4f}"  # noqa: E731
                print(
                    f"| {i} | {budget} | {part.index} | {part.margin:.4f} | {'yes' if part.near_tie else 'NO'} | "
                    f"{fmt(min(linear) if linear else None)} | {fmt(g.get('tree'))} | {fmt(g.get('run'))} |"
                )
    print(f"{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
