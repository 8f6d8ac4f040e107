import sys
from engine_bridge.bench.suites import load_suite
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.runtime import auto_mode

orig = auto_mode.AutoPolicy.choose
log = []


def choose(self):
    r = orig(self)
    b = self._best
    log.append((r, self.probing, self.kind, b and (b.mode, b.budget, round(b.speedup, 2))))
    return r


auto_mode.AutoPolicy.choose = choose
T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = "resources/models/smollm2/drafter.gguf"
with Engine.load(EngineConfig(target=T, draft=D, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    p = load_suite(sys.argv[1]).prompts[int(sys.argv[2])].render(eng.format_chat)
    eng.reset()
    r = eng.generate(p, GenerationSettings(mode="auto", budget=5, max_tokens=128))
    prev = None
    for i, x in enumerate(log):
        if x[:3] != prev:
            print(i, x)
        prev = x[:3]
    print(r.summary.auto_note)
