"""Auto's policy on bench_auto_policy_sim's simulated drafter under a cost table, the entry margin varied
(2026-11-30): python sim.py TABLE.json ANSWERS SEEDS [SWITCH_COST], from the checkout root."""

import sys
import json

sys.path.insert(0, ".")
import numpy as np
from pathlib import Path
from benchmarks import bench_auto_policy_sim as bs
from engine_bridge.runtime import calibration
from engine_bridge.runtime.auto_sim import simulate_answers

tab = sys.argv[1]
answers = int(sys.argv[2])
seeds = range(int(sys.argv[3]))
t = calibration.CostTable.from_json(json.loads(Path(tab).read_text()))
costs = {b: ms / t.ar_ms for b, ms in t.chain_ms.items()}
sw = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
P = {"now": {}}
extra = {
    "m0.1": lambda p: (setattr(p, "margin", 0.1), setattr(p, "_best", None)),
    "m0.15": lambda p: (setattr(p, "margin", 0.15), setattr(p, "_best", None)),
}
print(tab, {b: round(c, 2) for b, c in sorted(costs.items())})
for base in (0.3, 0.45, 0.55, 0.62, 0.68, 0.75, 0.85):
    kw = dict(decay=0.93, switch_cost=sw)
    fixed = np.mean(
        [simulate_answers(bs._policy(costs, {}), base, answers, s, fixed=("chain", 7), **kw)[1] for s in seeds]
    )
    cells = []
    for name, env in list(P.items()) + [(k, None) for k in extra]:
        rs = []
        for s in seeds:
            p = bs._policy(costs, env or {})
            if env is None:
                extra[name](p)
            rs.append(simulate_answers(p, base, answers, s, **kw))
        cells.append(f"{name} {np.mean([r[1] for r in rs]):.3f}")
    print(base, f"c7 {fixed:.3f}", " | ".join(cells), flush=True)
