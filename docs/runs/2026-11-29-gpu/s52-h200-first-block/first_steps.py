"""What a request's first chain-7 steps commit, per public suite (the first N prompts, 24 tokens),
one drafter: python first_steps.py TARGET DRAFT N NGL."""

import collections
import statistics
import sys

from engine_bridge.bench.suites import load_suite
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine

target, draft, n, ngl = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cfg = EngineConfig(target=target, draft=draft, n_gpu_layers=ngl)
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
            len(texts),
            " ".join(
                f"step{i}: {statistics.mean(v):.2f} (1 token: {sum(1 for x in v if x <= 1)})"
                for i, v in sorted(c.items())
            ),
            flush=True,
        )
