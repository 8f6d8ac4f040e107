"""AR decode steps at a 252-token context, for perf: the time spent per function."""

from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
eng = Engine.load(EngineConfig(target=T, n_threads=2), check=False)
long = " ".join(["The history of the city begins with a small settlement on the river, where traders met."] * 14)
toks = eng.tokenize(long)
for _i in range(6):
    eng.reset()
    res = eng.generate(toks, GenerationSettings(mode="ar", max_tokens=200, stop_at_eog=False))
    w = [s.wall for s in res.steps if not s.prefill]
    print("ms/step %.2f" % (1000 * sum(w) / len(w)), flush=True)
