"""Patch 0015 on the CPU engine: one drafter block read for 7 drafts, every row an output (upstream's
marking) against the drafts only, alternating in one process, 60 calls a side (the first 5 dropped).

    PYTHONPATH=. python docs/runs/2026-11-28-cpu/outrows/draft_ab.py 0   # a budget-sized block (8 rows)
    PYTHONPATH=. python docs/runs/2026-11-28-cpu/outrows/draft_ab.py 1   # a whole block (16 rows)
"""

import statistics
import sys
import time

from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

full = sys.argv[1] == "1"
cfg = EngineConfig(target=registry_models.cached(), draft=smollm2_drafter(), n_ctx=1024, n_threads=2)
eng = Engine.load(cfg, preflight=PAIR_PREFLIGHT)
d = eng.drafter
d.full_block = full
toks = eng.tokenize_chat([{"role": "user", "content": "Write a haiku about rivers and explain it."}])
eng.generate(toks, GenerationSettings(mode="chain", budget=7, max_tokens=8))
pos, last = len(eng.kv), eng.kv[-1]
res: dict[bool, list[float]] = {True: [], False: []}
for it in range(60):
    for on in (True, False) if it % 2 else (False, True):
        d.out_rows = on
        t0 = time.perf_counter()
        d.draft(last, pos, 7)
        res[on].append(time.perf_counter() - t0)
for on in (False, True):
    ms = [1000 * x for x in res[on][5:]]
    print(f"full_block {full} out_rows {on} median ms {statistics.median(ms):.3f} mean {statistics.mean(ms):.3f}")
eng.close()
