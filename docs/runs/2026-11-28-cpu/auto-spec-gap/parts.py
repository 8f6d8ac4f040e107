"""Where auto's time outside its steps goes: benchmarks/bench_auto_spec_gap.py's auto run (first 8
HumanEval prompts, 96 tokens, the H200 table keyed to this engine) with each policy method and the
text-kind tracker timed by a wrapper, in microseconds per step.

    PYTHONPATH=. python docs/runs/2026-11-28-cpu/auto-spec-gap/parts.py
"""

import json
import time

from engine_bridge.bench.suites import load_suite
from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import calibration, text_kind
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
for tk in toks[:2]:  # the policy made and warmed up
    eng.reset()
    eng.generate(tk, settings)
    eng.auto_policy.suspect = ""
acc: dict[str, float] = {}


def wrap(obj, name: str) -> None:
    f = getattr(obj, name)

    def timed(*a, **k):
        t = time.perf_counter()
        r = f(*a, **k)
        acc[name] = acc.get(name, 0.0) + time.perf_counter() - t
        return r

    setattr(obj, name, timed)


pol = eng.auto_policy
for n in ("choose", "observe", "observe_wall"):
    wrap(pol, n)
wrap(text_kind.KindTracker, "feed")
steps, outside = 0, 0.0
for tk in toks:
    eng.reset()
    r = eng.generate(tk, settings)
    pol.suspect = ""
    steps += len(r.steps)
    outside += r.summary.t_generate - sum(x.wall for x in r.steps)
print(f"steps {steps}, outside the steps {1e6 * outside / steps:.1f} us a step")
for k, v in acc.items():
    print(f"{k} {1e6 * v / steps:.1f} us a step")
eng.close()
