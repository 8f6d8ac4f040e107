"""Host time of a tree-15 step by function (cProfile), default pair, real prompts (sitting s66, issue 28).

Usage: PYTHONPATH=... python3 tree_prof.py T D OUT_PREFIX [MODE BUDGET]
"""

import cProfile
import io
import json
import pstats
import statistics
import sys

sys.path.insert(0, ".")
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402

T, D, OUT = sys.argv[1:4]
MODE = sys.argv[4] if len(sys.argv) > 4 else "tree"
BUDGET = int(sys.argv[5]) if len(sys.argv) > 5 else 15
PROMPTS = [
    "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring.",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "Explain the difference between a process and a thread to a new programmer.",
]
cfg = EngineConfig(target=T, draft=D, n_ctx=4096, flash_attn="on")
with Engine.load(cfg, preflight=PAIR_PREFLIGHT) as eng:
    s = GenerationSettings(mode=MODE, budget=BUDGET, max_tokens=128)
    toks = [eng.tokenize_chat([{"role": "user", "content": p}]) for p in PROMPTS]
    for t in toks:
        eng.generate(t, s)  # warm-up: graphs captured
    recs = []
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(3):
        for t in toks:
            eng.generate(t, s, on_step=recs.append)
    pr.disable()
    buf = io.StringIO()
    st = pstats.Stats(pr, stream=buf)
    st.sort_stats("tottime").print_stats(35)
    st.sort_stats("cumulative").print_stats(35)
    open(OUT + ".txt", "w").write(buf.getvalue())
    steps = [r for r in recs if r.committed > 0 and r.wall > 0]
    ph = {
        k: 1e3 * statistics.fmean(getattr(r, "t_" + k) for r in steps)
        for k in ("draft", "inject", "verify", "accept", "other", "native")
    }
    ph["wall"] = 1e3 * statistics.fmean(r.wall for r in steps)
    ph["steps"] = len(steps)
    ph["commit"] = statistics.fmean(r.committed for r in steps)
    json.dump(ph, open(OUT + ".json", "w"), indent=1)
    print(json.dumps(ph))
