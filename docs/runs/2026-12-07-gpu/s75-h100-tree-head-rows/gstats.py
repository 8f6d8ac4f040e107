# Patch 0029 on the GPU: CUDA-graph stats (DFLASH_GRAPH_STATS=1, printed at exit) and the inject's
# time a step on the request path, chain 5 and tree 15, 20 GSM8K prompts, with DFLASH_INJECT_SLOTS as given (one process).
import os
import statistics
import sys

sys.path.insert(0, "/tmp/keep/src")  # the sitting's copy of the engine
from engine_bridge.bench.suites import load_suite
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

T, D, mode, budget = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with Engine.load(EngineConfig(target=T, draft=D), preflight=PAIR_PREFLIGHT) as eng:
    prompts = [p.render(eng.format_chat) for p in load_suite("gsm8k").prompts[:20]]
    inj, stp = [], []
    for rep in range(2):
        for p in prompts:
            eng.reset()
            r = eng.generate(p, GenerationSettings(mode=mode, budget=budget, max_tokens=128))
            if rep:
                st = [s for s in r.steps if not s.prefill]
                inj += [s.t_inject for s in st]
                stp += [s.wall for s in st]
    print(
        f"SLOTS={os.environ.get('DFLASH_INJECT_SLOTS')} {mode} {budget}: inject mean {1e3 * statistics.mean(inj):.3f} ms "
        f"median {1e3 * statistics.median(inj):.3f}, step mean {1e3 * statistics.mean(stp):.3f} ms, "
        f"drafter reuses {eng.drafter.ctx.graph_reuses()}",
        flush=True,
    )
