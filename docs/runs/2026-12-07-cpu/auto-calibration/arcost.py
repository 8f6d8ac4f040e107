"""Plain AR against auto held on AR (its policy always answers AR, drafter fed): the AR steps' overhead."""

import statistics
import sys
from engine_bridge.bench.suites import load_suite
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.runtime import auto_mode

auto_mode.AutoPolicy.choose = lambda self: ("ar", 0)
T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = "resources/models/smollm2/drafter.gguf"
with Engine.load(EngineConfig(target=T, draft=D, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    ps = [p.render(eng.format_chat) for p in load_suite(sys.argv[1]).prompts[: int(sys.argv[2])]]
    res = {"ar": [], "auto": []}
    for rnd in range(2):
        for i, p in enumerate(ps):
            for mode in ("ar", "auto") if (i + rnd) % 2 == 0 else ("auto", "ar"):
                eng.reset()
                r = eng.generate(p, GenerationSettings(mode=mode, budget=5, max_tokens=128))
                st = [s for s in r.steps if not s.prefill]
                res[mode].append((r.summary.tok_per_s, 1e3 * statistics.mean(s.wall for s in st)))
    for m, v in res.items():
        print(
            m, "tok/s %.1f" % statistics.mean(x[0] for x in v), "step wall ms %.3f" % statistics.mean(x[1] for x in v)
        )
    print("auto/ar %.3f" % (statistics.mean(x[0] for x in res["auto"]) / statistics.mean(x[0] for x in res["ar"])))
