import sys
from engine_bridge.bench.suites import load_suite
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = "resources/models/smollm2/drafter.gguf"
with Engine.load(EngineConfig(target=T, draft=D, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    ps = [p.render(eng.format_chat) for p in load_suite(sys.argv[1]).prompts[: int(sys.argv[2])]]
    for i, p in enumerate(ps):
        eng.reset()
        r = eng.generate(p, GenerationSettings(mode="auto", budget=5, max_tokens=128))
        pol = eng.auto_policy
        if i == 0:
            print("table key", pol.table.key, "ar_ms %.2f" % pol.table.ar_ms)
            print({f"{m}{b}": round(c, 2) for (m, b), c in sorted(pol.costs.items())})
        est = pol.estimates()
        print(i, "%.1f tok/s" % r.summary.tok_per_s, r.summary.auto_note[:120])
        print(
            "   kind",
            pol.kind,
            "alpha",
            pol.alpha and round(pol.alpha, 3),
            {f"{m}{b}": round(v, 2) for (m, b), v in sorted(est.items()) if v is not None},
        )
        print(
            "   speedups",
            {f"{m}{b}": round(v / pol.costs[(m, b)], 2) for (m, b), v in sorted(est.items()) if v is not None},
        )
