"""Where auto's modelled loss goes under a cost table (probe steps against the runs after them), on the
training sources' validation split (2026-11-30): python split.py TABLE.json VARIANTS N, from the checkout root."""

import sys
import json
from collections import Counter

sys.path.insert(0, ".")
sys.argv = ["x"] + sys.argv[1:]
from benchmarks import bench_auto_trace as bt  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import calibration  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402
from pathlib import Path  # noqa: E402

table_path, variants, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = "resources/models/smollm2/drafter.gguf"
saved = json.loads(Path(table_path).read_text())
with Engine.load(EngineConfig(target=T, draft=D, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    table = calibration.CostTable.from_json(saved)
    table.key = calibration.calibration_key(eng.config)
    eng.calibration = table
    costs = table.costs()
    for v in variants.split(","):
        for cat in ("code", "math", "chat"):
            pol = bt.policy(table, eng.drafter.max_draft, v, 0.0)
            log = []
            orig = pol.observe

            def obs(mode, budget, drafted, accepted, probing=False, _o=orig, _l=log):
                _l.append((budget, drafted, accepted, probing))
                return _o(mode, budget, drafted, accepted, probing)

            pol.observe = obs
            eng.auto_policy = pol
            tot = Counter()
            for text in bt.prompts(eng, cat, n, False):
                res = eng.generate(text, GenerationSettings(mode="auto", budget=7, max_tokens=128))
                for r in res.steps:
                    tot["steps"] += 1
                    tot["tokens"] += (r.accepted + 1) if r.drafted else 1
                    tot["time"] += costs.get(("chain", r.drafted), 1.0) if r.drafted else 1.0
            c = Counter()
            for _b, d, a, p in log:
                k = "probe" if p else "run"
                c[k + "_n"] += 1
                c[k + "_loss"] += costs[("chain", d)] - (a + 1)
                c[k + "_b" + str(d)] += 1
            print(
                v,
                cat,
                f"xAR {tot['tokens'] / tot['time']:.3f} steps {tot['steps']}",
                "probe",
                c["probe_n"],
                f"{c['probe_loss']:.1f}",
                "run",
                c["run_n"],
                f"{c['run_loss']:.1f}",
                {k: x for k, x in c.items() if "_b" in k},
                flush=True,
            )
