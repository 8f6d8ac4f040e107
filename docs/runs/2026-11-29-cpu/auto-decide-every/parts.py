"""auto's time per step outside its step functions, by part: the real loop on the first 8 HumanEval
prompts, 96 tokens, the H200 calibration keyed to this engine, each part timed by a wrapper.

    PYTHONPATH=. python docs/runs/2026-11-29-cpu/auto-decide-every/parts.py [ROUNDS]
"""

import json
import sys
import time
from engine_bridge.bench.suites import load_suite
from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import auto_mode, calibration, text_kind
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

TABLE = "docs/runs/2026-11-27-gpu/s26-h200-addnorm-probe/m1/calibration.json"
eng = Engine.load(
    EngineConfig(target=registry_models.cached(), draft=smollm2_drafter(), n_ctx=2048, n_threads=2),
    preflight=PAIR_PREFLIGHT,
)
table = calibration.CostTable.from_json(json.load(open(TABLE)))
table.key = calibration.calibration_key(eng.config)
eng.calibration = table
toks = []
for p in load_suite("humaneval").prompts[:8]:
    msgs = [{"role": r, "content": c} for r, c in p.messages] if p.messages else [{"role": "user", "content": p.text}]
    toks.append(eng.tokenize_chat(msgs))
settings = GenerationSettings(mode="auto", budget=7, max_tokens=96)
for tk in toks[:2]:
    eng.reset()
    eng.generate(tk, settings)
    eng.auto_policy.suspect = ""
acc = {}


def wrap(obj, name, label=None):
    f = getattr(obj, name)
    label = label or name

    def timed(*a, **k):
        t = time.perf_counter()
        r = f(*a, **k)
        acc[label] = acc.get(label, 0.0) + time.perf_counter() - t
        return r

    setattr(obj, name, timed)


pol = eng.auto_policy
for n in ("choose", "observe", "observe_wall"):
    wrap(pol, n)
wrap(text_kind.KindTracker, "feed")
G = auto_mode.AutoGeneration
for n in ("_auto_step", "_chain_step", "_ar_step", "_tree_step", "_measure_switch", "_switch", "_keep_features"):
    wrap(G, n)
steps, outside = 0, 0.0
for _rnd in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1):
    for tk in toks:
        eng.reset()
        r = eng.generate(tk, settings)
        pol.suspect = ""
        steps += len(r.steps)
        outside += r.summary.t_generate - sum(x.wall for x in r.steps)
print(f"steps {steps}, outside the step records {1e6 * outside / steps:.1f} us a step")
inner = sum(acc.get(k, 0.0) for k in ("_chain_step", "_ar_step", "_tree_step"))
print(f"_auto_step less its step function {1e6 * (acc['_auto_step'] - inner) / steps:.1f} us a step")
for k, v in sorted(acc.items(), key=lambda kv: -kv[1]):
    print(f"  {k} {1e6 * v / steps:.1f} us a step")
eng.close()
