"""What a request's first chain-7 steps commit, per public suite (the first N prompts, 24 tokens):
docs/benchmarks.md, "A request's first block was never trained". Ran as
`.venv/bin/python docs/runs/2026-11-29-cpu/first-step/first_step.py 20` (this 2-vCPU machine, 2 threads,
the default pair and the shipped drafter, while a make test ran beside it)."""

import statistics
import sys
import collections
from engine_bridge.bench.suites import load_suite
from engine_bridge.models import registry_models
from engine_bridge.models.demo import smollm2_drafter
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

n = int(sys.argv[1])
cfg = EngineConfig(target=registry_models.cached(), draft=smollm2_drafter(), n_threads=2)
with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
    for suite in ("mt-bench", "gsm8k", "humaneval"):
        texts = [p.render(eng.format_chat) for p in load_suite(suite).prompts[:n]]
        c = collections.defaultdict(list)
        for t in texts:
            eng.reset()
            r = eng.generate(t, GenerationSettings(mode="chain", budget=7, max_tokens=24))
            for i, s in enumerate(r.steps[:4]):
                c[i].append(s.committed)
        print(
            suite,
            n,
            " ".join(
                f"step{i}: {statistics.mean(v):.2f} (1 token: {sum(1 for x in v if x <= 1)})"
                for i, v in sorted(c.items())
            ),
            flush=True,
        )
