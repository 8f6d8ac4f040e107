"""AR and auto alternating per prompt on the default pair (CPU, 2 threads): tok/s and auto's note."""

import statistics
import sys
from engine_bridge.bench.suites import load_suite
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = "resources/models/smollm2/drafter.gguf"
suite, n = sys.argv[1], int(sys.argv[2])
with Engine.load(EngineConfig(target=T, draft=D, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    ps = [p.render(eng.format_chat) for p in load_suite(suite).prompts[:n]]
    res = {"ar": [], "auto": []}
    for i, p in enumerate(ps):
        for mode in ("ar", "auto") if i % 2 == 0 else ("auto", "ar"):
            eng.reset()
            r = eng.generate(p, GenerationSettings(mode=mode, budget=5, max_tokens=128))
            st = [s for s in r.steps if not s.prefill]
            res[mode].append((r.summary.tok_per_s, len(r.tokens) if hasattr(r, "tokens") else 0))
            if mode == "auto":
                print(
                    i,
                    "auto %.1f" % r.summary.tok_per_s,
                    "ar %.1f" % (res["ar"][-1][0] if len(res["ar"]) > len(res["auto"]) - 1 and res["ar"] else 0),
                    r.summary.auto_note[:200],
                    flush=True,
                )
    a = statistics.mean(x[0] for x in res["ar"])
    b = statistics.mean(x[0] for x in res["auto"])
    print(f"{suite}: AR {a:.1f} auto {b:.1f} ratio {b / a:.3f}")
