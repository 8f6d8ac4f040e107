"""Greedy requests in a loop for a host profiler (run70.sh's `prof` part): the default pair, the first
10 prompts of each public suite, 128 tokens, one mode. Prints READY once warm, so that a profiler
attaches to a process that only generates; runs until killed or SECONDS have passed.

Usage: python3 prof_loop.py TARGET DRAFT MODE BUDGET SECONDS
"""

import sys
import time

from engine_bridge.bench.suites import load_suite
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

target, draft, mode, budget, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
with Engine.load(EngineConfig(target=target, draft=draft), preflight=PAIR_PREFLIGHT) as eng:
    texts = [p.render(eng.format_chat) for s in ("mt-bench", "gsm8k", "humaneval") for p in load_suite(s).prompts[:10]]
    settings = GenerationSettings(mode=mode, budget=budget, max_tokens=128)
    for t in texts[:3]:
        eng.reset()
        eng.generate(t, settings)
    print("READY", flush=True)
    end = time.time() + seconds
    n = toks = steps = 0
    gen = 0.0
    while time.time() < end:
        for t in texts:
            eng.reset()
            r = eng.generate(t, settings)
            n, toks, steps, gen = (
                n + 1,
                toks + r.summary.n_generated,
                steps + r.summary.n_steps,
                gen + r.summary.t_generate,
            )
    print(
        f"{mode} {budget}: {n} requests, {toks} tokens, {toks / gen:.1f} tok/s, {1e3 * gen / steps:.3f} ms a step",
        flush=True,
    )
