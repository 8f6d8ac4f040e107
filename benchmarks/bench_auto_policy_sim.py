"""Auto's policy on a simulated drafter (issue 29): the share of steps it speculates and the tokens
per AR step of time it earns, with and without the opt-in stay band (DFLASH_AUTO_STAY), at several
acceptance rates, on a cost table like an H200's for the default pair (AR step = 1). No engine: it
ranks policies, it does not measure a machine.

    python benchmarks/bench_auto_policy_sim.py [--steps 3000] [--seeds 0,1] [--switch-cost 8]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine_bridge.runtime import auto_mode, breakeven, calibration  # noqa: E402
from engine_bridge.runtime.auto_sim import simulate  # noqa: E402

COSTS = {1: 1.6, 3: 1.9, 7: 2.3, 15: 3.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--alphas", default="0.5,0.55,0.6,0.63,0.66,0.7")
    ap.add_argument(
        "--switch-cost",
        type=float,
        default=0.0,
        help="AR steps per round trip into speculation and back (7-9 on an H200 without patch 0009)",
    )
    args = ap.parse_args()
    seeds = [int(x) for x in args.seeds.split(",")]
    print("| alpha | chain 7 best x AR | stay off: speculating, x AR | stay on: speculating, x AR |")
    print("|---|---|---|---|")
    for alpha in (float(x) for x in args.alphas.split(",")):
        cells = []
        for stay in ("0", "1"):
            os.environ[auto_mode.STAY_ENV] = stay
            runs = [
                simulate(
                    auto_mode.AutoPolicy(calibration.CostTable(key={}, ar_ms=1.0, chain_ms=dict(COSTS)), 15),
                    alpha,
                    args.steps,
                    s,
                    args.switch_cost,
                )
                for s in seeds
            ]
            cells.append(", ".join(f"{sh:.1%} {sp:.3f}" for sh, sp in runs))
        best = breakeven.geometric_commit(alpha, 7) / COSTS[7]
        print(f"| {alpha} | {best:.2f} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
