"""AR, chain 5, chain 2 and auto on the real default pair, 2 threads: tok/s and each phase's ms a step
(the first 4 GSM8K test prompts, 64 tokens, greedy). Run from a checkout with the engine on PYTHONPATH:
PYTHONPATH=<engine>:. python docs/runs/2026-12-07-cpu/amd-epyc/modes.py"""

import statistics

from engine_bridge.bench.suites import load_suite
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = "resources/models/smollm2/drafter.gguf"
with Engine.load(EngineConfig(target=T, draft=D, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    ps = [p.render(eng.format_chat) for p in load_suite("gsm8k").prompts[:4]]
    for mode, b in (("ar", 0), ("chain", 5), ("chain", 2), ("auto", 0)):
        tps, ph = [], {}
        for p in ps:
            eng.reset()
            r = eng.generate(p, GenerationSettings(mode=mode, budget=b or 5, max_tokens=64))
            tps.append(r.summary.tok_per_s)
            st = [s for s in r.steps if not s.prefill]
            for k in ("draft", "inject", "verify"):
                ph.setdefault(k, []).append(1e3 * sum(getattr(s, "t_" + k) for s in st) / max(1, len(st)))
            ph.setdefault("commit", []).append(sum(s.committed for s in st) / max(1, len(st)))
        note = r.summary.auto_note[:150] if mode == "auto" else ""
        print(
            mode, b, "tok/s %.1f" % statistics.mean(tps), {k: round(statistics.mean(v), 3) for k, v in ph.items()}, note
        )
