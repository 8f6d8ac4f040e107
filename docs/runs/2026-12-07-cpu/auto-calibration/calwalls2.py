"""Step walls of calibration-like runs (a reset, the prefill of calibration.PROMPT, then forced steps)
on the default pair, 2 threads, printed step by step: how a run's steps settle after its prefill.
As run 2026-12-07 (before WARM_TOKENS): SEQ="chain4 ar chain1" with 10 steps (40 for AR), and
SEQ="ar ar" with 40: PYTHONPATH=. SEQ=... python docs/runs/2026-12-07-cpu/auto-calibration/calwalls2.py"""

import os

from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import calibration
from engine_bridge.runtime.config import EngineConfig
from engine_bridge.runtime.engine import Engine

T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = "resources/models/smollm2/drafter.gguf"
SEQ = [
    (c.rstrip("0123456789"), int(c.lstrip("archin") or 0)) for c in os.environ.get("SEQ", "chain4 ar chain1").split()
]
with Engine.load(EngineConfig(target=T, draft=D, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    toks = eng.tokenize(calibration.PROMPT)
    for rnd in range(2):
        for mode, b in SEQ:
            w = calibration._step_walls(eng, toks, mode, b, 40 if mode == "ar" else 10, warm=1)
            print(rnd, mode, b, " ".join("%.2f" % (1e3 * x) for x in w))
