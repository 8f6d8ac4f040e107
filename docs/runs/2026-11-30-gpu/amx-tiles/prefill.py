import statistics as st
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

T = __import__("os").environ.get("TARGET", "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf")
eng = Engine.load(EngineConfig(target=T, n_threads=int(__import__("os").environ.get("THREADS", "2"))), check=False)
for n in (14, 40):
    p = " ".join(["The history of the city begins with a small settlement on the river, where traders met."] * n)
    ts = []
    for _ in range(5):
        r = eng.generate(p, GenerationSettings(mode="ar", max_tokens=1))
        ts.append(r.summary.t_prefill)
    print(len(eng.tokenize(p)), "tokens, prefill ms median", round(st.median(ts) * 1000, 1), flush=True)
