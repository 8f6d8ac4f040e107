"""Auto's policy on a simulated drafter (issue 29): tokens per AR step of time over many 128-token
answers, for the probe rule and commit weight now (the budget auto would run, EMA 0.05), the earlier
ones (DFLASH_AUTO_PROBE=cheapest: the cheapest budget, EMA 0.1), the opt-in stay band
(DFLASH_AUTO_STAY) and chain 7 alone, at several acceptance levels. The drafter accepts position k
with probability b * 0.93 ** (k - 1), b drawn per answer around the level (DFlash drafters lose
acceptance along the block). Chain costs: a calibration file (--table, the JSON that auto caches in
the data folder's calibration/), else the one auto measured on an H200 for the default pair
(docs/benchmarks.md, "Auto probes the budget it would run"). No engine: it ranks policies, it does
not measure a machine.

    python benchmarks/bench_auto_policy_sim.py [--table CAL.json] [--answers 24] [--seeds 0,1,2,3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine_bridge.runtime import auto_mode, calibration  # noqa: E402
from engine_bridge.runtime.auto_sim import simulate_answers  # noqa: E402

#: chain step costs in AR steps that auto calibrated on an H200 with patch 0011 (AR 1.025 ms; the
#: default pair; docs/runs/2026-11-27-gpu/s26-h200-addnorm-probe/m1/calibration.json)
H200_MEASURED = {1: 1.74, 2: 1.80, 3: 1.85, 4: 1.89, 7: 2.05, 11: 2.25, 15: 2.39}

POLICIES = {
    "now": {},
    "now + per-position estimate": {auto_mode.ESTIMATOR_ENV: "positions"},
    "earlier": {auto_mode.PROBE_ENV: "cheapest"},
    "now + stay": {auto_mode.STAY_ENV: "1"},
}


def _policy(chain_costs: dict[int, float], env: dict[str, str]) -> auto_mode.AutoPolicy:
    for k in (auto_mode.PROBE_ENV, auto_mode.STAY_ENV, auto_mode.ESTIMATOR_ENV):
        os.environ.pop(k, None)
    os.environ.update(env)
    try:
        table = calibration.CostTable(key={}, ar_ms=1.0, chain_ms=dict(chain_costs))
        return auto_mode.AutoPolicy(table, max_draft=15)
    finally:
        for k in env:
            os.environ.pop(k, None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", help="a calibration JSON (its chain costs are used)")
    ap.add_argument("--answers", type=int, default=24)
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--bases", default="0.3,0.45,0.55,0.62,0.68,0.75")
    ap.add_argument("--switch-cost", type=float, default=2.6, help="AR steps per round trip (H200: ~2.6)")
    args = ap.parse_args()
    if args.table:
        t = calibration.CostTable.from_json(json.loads(Path(args.table).read_text()))
        costs = {b: ms / t.ar_ms for b, ms in t.chain_ms.items()}
    else:
        costs = dict(H200_MEASURED)
    seeds = [int(x) for x in args.seeds.split(",")]
    print("chain costs (AR steps): " + ", ".join(f"{b}: {c:.2f}" for b, c in sorted(costs.items())))
    print("| b (position 1) | chain 7 commit | chain 7 alone | " + " | ".join(POLICIES) + " |")
    print("|---" * (3 + len(POLICIES)) + "|")
    for base in (float(x) for x in args.bases.split(",")):
        commit7 = 1.0 + sum(np.prod([base * 0.93**j for j in range(k)]) for k in range(1, 8))
        kw = dict(decay=0.93, switch_cost=args.switch_cost)
        fixed = np.mean(
            [simulate_answers(_policy(costs, {}), base, args.answers, s, fixed=("chain", 7), **kw)[1] for s in seeds]
        )
        cells = []
        for env in POLICIES.values():
            runs = [simulate_answers(_policy(costs, env), base, args.answers, s, **kw) for s in seeds]
            cells.append(f"{np.mean([r[1] for r in runs]):.3f} ({np.mean([r[0] for r in runs]):.0%} spec)")
        print(f"| {base} | {commit7:.2f} | {fixed:.3f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
