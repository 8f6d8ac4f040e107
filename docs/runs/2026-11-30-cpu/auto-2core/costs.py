"""Median step walls of AR and fixed chain budgets on validation prompts, in AR steps, two rounds in one
process (2026-11-30): python docs/runs/2026-11-30-cpu/auto-2core/costs.py, from the checkout root."""

import sys
import statistics as st

sys.path.insert(0, ".")
from benchmarks import bench_auto_trace as bt
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = "resources/models/smollm2/drafter.gguf"
with Engine.load(EngineConfig(target=T, draft=D, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    texts = bt.prompts(eng, "math", 4, False) + bt.prompts(eng, "chat", 4, False)
    med = {}
    for _rnd in range(2):
        for mode, b in [("ar", 0), ("chain", 1), ("chain", 2), ("chain", 3), ("chain", 4), ("chain", 7)]:
            w = []
            for t in texts:
                res = eng.generate(t, GenerationSettings(mode=mode, budget=max(b, 1), max_tokens=128))
                w += [r.wall for r in res.steps[1:-1] if not r.prefill]
            med[b] = st.median(w)
        print({b: round(m / med[0], 2) for b, m in med.items()}, "ar ms", round(med[0] * 1000, 2), flush=True)
