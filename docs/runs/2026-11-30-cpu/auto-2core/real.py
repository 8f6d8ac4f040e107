"""Auto's step walls against the calibration (a cost table from TABLE, this machine's), AR and auto on the
validation split (2026-11-30): python real.py CATEGORY N [TABLE.json], from the checkout root."""

import sys
import json
import time

sys.path.insert(0, ".")
from collections import defaultdict
import statistics as st
from pathlib import Path
from benchmarks import bench_auto_trace as bt
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import calibration
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = "resources/models/smollm2/drafter.gguf"
cat = sys.argv[1]
n = int(sys.argv[2])
with Engine.load(EngineConfig(target=T, draft=D, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    table = calibration.CostTable.from_json(
        json.loads(
            Path(sys.argv[3] if len(sys.argv) > 3 else "docs/runs/2026-11-30-cpu/auto-2core/t2.json").read_text()
        )
    )
    table.key = calibration.calibration_key(eng.config)
    eng.calibration = table
    texts = bt.prompts(eng, cat, n, False)
    for mode in ("ar", "auto"):
        walls = defaultdict(list)
        inj = defaultdict(list)
        tot = 0
        steps_wall = 0
        ntok = 0
        first_spec = []
        for text in texts:
            t0 = time.perf_counter()
            res = eng.generate(text, GenerationSettings(mode=mode, budget=7, max_tokens=128))
            tot += time.perf_counter() - t0
            sw = sum(r.wall for r in res.steps if not r.prefill)
            print(
                mode,
                f"over {(time.perf_counter() - t0 - sw) * 1000:.1f}ms",
                {
                    k: round(getattr(res.summary, k) * 1000, 1)
                    for k in ("t_prefill", "t_first_token")
                    if hasattr(res.summary, k)
                },
                file=sys.stderr,
            )
            prev = None
            for r in res.steps:
                if r.prefill:
                    continue
                k = r.drafted if r.drafted else 0
                walls[k].append(r.wall)
                inj[k].append(r.t_inject)
                if k and prev == 0:
                    first_spec.append((r.wall, r.t_inject))
                prev = k
                steps_wall += r.wall
                ntok += r.committed
        ar = table.ar_ms / 1000
        print(
            mode,
            f"tokens {ntok} total {tot:.2f}s steps {steps_wall:.2f}s",
            {
                k: (len(v), round(st.mean(v) / ar, 2), round(st.median(v) / ar, 2), round(st.mean(inj[k]) * 1000, 2))
                for k, v in sorted(walls.items())
            },
        )
        print(
            "recheck:", getattr(eng.auto_policy, "last_recheck", None), getattr(eng.auto_policy, "recheck_factor", None)
        )
        if first_spec:
            print(
                "  first spec step after AR: n",
                len(first_spec),
                "mean wall/ar",
                round(st.mean(w for w, _ in first_spec) / ar, 2),
                "inject ms",
                round(st.mean(i for _, i in first_spec) * 1000, 2),
            )
