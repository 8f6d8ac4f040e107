"""Chain 5's host time per step by phase on this CPU: each phase's time from the step records less the
time of the process() calls of its batch (draft, inject, verify), 7 runs of 128 tokens; the verify's
share is not split off (its process time includes the prompt's prefill). Run from the repository root
with PYTHONPATH=. (docs/benchmarks.md, "An AR step's host time on the CPU")."""

import time
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.runtime import native

T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
D = "resources/models/smollm2/drafter.gguf"
cur = {}
real = native.Context.process


def process(ctx, b):
    t = time.perf_counter()
    real(ctx, b)
    dt = time.perf_counter() - t
    cur[id(b)] = cur.get(id(b), 0.0) + dt


native.Context.process = process
S = GenerationSettings(mode="chain", budget=5, max_tokens=128, stop_at_eog=False)
with Engine.load(EngineConfig(target=T, draft=D, n_threads=2), check=False) as eng:
    text = eng.format_chat(
        [{"role": "user", "content": "Write a short story about a lighthouse keeper who finds a message in a bottle."}]
    )
    eng.generate(text, S)
    d = eng.drafter
    names = {id(d.batch): "draft", id(d.inject_batch): "inject", id(eng.target_batch): "verify"}
    tot = {}
    nsteps = 0
    for _ in range(7):
        eng.reset()
        cur.clear()
        r = eng.generate(text, S)
        steps = [s for s in r.steps if not s.prefill]
        nsteps += len(steps)
        for p in ("draft", "inject", "verify", "accept", "other"):
            tot[p] = tot.get(p, 0) + sum(getattr(s, "t_" + p) for s in steps)
        # subtract process time of steps (approx: all process calls after prefill; prefill's are few)
        for k, v in cur.items():
            tot["proc_" + names.get(k, "?")] = tot.get("proc_" + names.get(k, "?"), 0) + v
    for k in sorted(tot):
        print(f"{k:14s} {tot[k] / nsteps * 1e6:8.1f} us/step")
