"""Calibration at the shipped short prompt against a ~250-token prompt, in one process (which build: PYTHONPATH;
TARGET, DRAFT and THREADS from the environment, defaults as this folder's runs used them; the amx-tiles
runs of 2026-11-30 set them)."""

import os

from engine_bridge.runtime.config import EngineConfig
from engine_bridge.runtime.engine import Engine
from engine_bridge.runtime import calibration as cal

T = os.environ.get("TARGET", "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf")
D = os.environ.get("DRAFT", "resources/models/smollm2/drafter.gguf")
eng = Engine.load(EngineConfig(target=T, draft=D, n_threads=int(os.environ.get("THREADS", "2"))), check=False)
long = " ".join(["The history of the city begins with a small settlement on the river, where traders met."] * 14)
for _rep in range(2):
    for name, p in (("short", cal.PROMPT), ("long", long)):
        t = cal.measure(eng, chain_budgets=(1, 3, 7), tree_budgets=(), prompt=p)
        print(
            name,
            len(eng.tokenize(p)),
            "ar_ms %.2f" % t.ar_ms,
            {b: round(v / t.ar_ms, 2) for b, v in t.chain_ms.items()},
            {b: round(v, 1) for b, v in t.chain_ms.items()},
            flush=True,
        )
