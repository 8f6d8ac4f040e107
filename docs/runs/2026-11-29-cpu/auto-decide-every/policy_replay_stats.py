"""docs/runs/2026-11-28-cpu/auto-spec-gap/policy_replay.py, also writing each seed's final statistics
(commit lengths, acceptance, failed probes): 12,000 auto policy decisions on a simulated drafter, as
JSON. Run it on two versions of the code (with DFLASH_AUTO_DECIDE_EVERY=1 on the newer, for a decision
at every step as before) and under each switch, then `cmp` the files.

    PYTHONPATH=. python docs/runs/2026-11-29-cpu/auto-decide-every/policy_replay_stats.py OUT.json [--cheap-trees]
"""

import json
import random
import sys

from engine_bridge.runtime import auto_mode, calibration

TABLE = "docs/runs/2026-11-27-gpu/s26-h200-addnorm-probe/m1/calibration.json"
t = calibration.CostTable.from_json(json.load(open(TABLE)))
if "--cheap-trees" in sys.argv:
    t.tree_ms = {k: v * 0.45 for k, v in t.tree_ms.items()}
out = []
for seed, acc in ((0, 0.72), (1, 0.5), (2, 0.3), (3, 0.85)):
    pol = auto_mode.AutoPolicy(t, 15)
    rng = random.Random(seed)
    for i in range(3000):
        if i == 1500:
            pol.set_kind("code")
        if i == 2200:
            pol.set_kind("prose")
        mode, b = pol.choose()
        out.append((mode, b))
        if mode != "ar":
            a = 0
            lim = min(b, 15)
            while a < lim and rng.random() < acc:
                a += 1
            pol.observe(mode, b, lim, a, probing=pol.probing)
    out.append(repr(sorted(pol.commit.items())) + repr(pol._acc) + repr(sorted(pol.fails.items())))
json.dump(out, open(sys.argv[1], "w"))
