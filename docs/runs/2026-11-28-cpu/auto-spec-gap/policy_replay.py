"""12,000 auto policy decisions on a simulated drafter (four acceptance rates, two changes of text
kind), written as JSON: run it on two versions of the code and compare the files (`cmp`) to check
that a change keeps every choice. `--cheap-trees` scales the tree costs by 0.45 so trees are chosen.

    PYTHONPATH=. python docs/runs/2026-11-28-cpu/auto-spec-gap/policy_replay.py OUT.json [--cheap-trees]
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
json.dump(out, open(sys.argv[1], "w"))
print(len(out), "decisions;", sum(1 for m, _ in out if m == "tree"), "tree,", sum(1 for m, _ in out if m == "ar"), "AR")
