"""AR decode speed of a target on HumanEval's first N prompts (chat template), 2 threads; the engine is
whatever PYTHONPATH puts first. Prints decode tok/s (steps after the prompt), mean over prompts and reps."""

import json
import statistics
import sys
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.runtime.chat_template import render_chat

T, N = sys.argv[1], int(sys.argv[2])
eng = Engine.load(EngineConfig(target=T, n_threads=2), check=False)
tmpl = eng.target.chat_template()
rows = [json.loads(line) for line in open("resources/prompts/public/humaneval.jsonl")][:N]
rates = []
for _rep in range(2):
    for r in rows:
        text = render_chat(tmpl, r["messages"]) if "--raw" not in sys.argv else r["messages"][0]["content"]
        eng.reset()
        res = eng.generate(text, GenerationSettings(mode="ar", max_tokens=128))
        w = [s.wall for s in res.steps if not s.prefill]
        if w:
            rates.append(len(w) / sum(w))
print("decode tok/s %.1f (median %.1f, n %d)" % (statistics.mean(rates), statistics.median(rates), len(rates)))
