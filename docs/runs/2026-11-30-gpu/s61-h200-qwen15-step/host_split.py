"""Host (Python) time of one drafter block of the default pair, split from the decode: the 16-row
batch fill, the decode, the 7 sampled-token reads and the seq_rm, as Drafter.draft(7) does them on a
whole block (CPU engine, real SmolLM2 target and the shipped drafter, 50 timed blocks after 10).

    python docs/runs/2026-11-30-gpu/s61-h200-qwen15-step/host_split.py [TARGET]
"""

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine_bridge.runtime.config import EngineConfig  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402

T = (
    sys.argv[1]
    if len(sys.argv) > 1
    else str(Path.home() / ".local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf")
)
D = str(Path(__file__).resolve().parents[4] / "resources/models/smollm2/drafter.gguf")
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402

with Engine.load(EngineConfig(target=T, draft=D, n_ctx=2048, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    d = eng.drafter
    toks = eng.tokenize("The history of the city begins with a small settlement on the river, where")
    eng._prefill(toks[:-1], need_features=True)
    d.ctx.set_backend_greedy(eng.config.backend_sampling)
    pos, last = len(toks) - 1, toks[-1]
    b = d.batch
    fill, sample, rm, proc = [], [], [], []
    for it in range(60):
        t0 = time.perf_counter()
        b.clear()
        for i in range(16):
            b.add_token(last if i == 0 else d.mask_token, pos + i, 0, 1 <= i < 8)
        t1 = time.perf_counter()
        d.ctx.process(b)
        t2 = time.perf_counter()
        d.ctx.sampled_token(1)  # the first read (on a GPU: the sync)
        t3 = time.perf_counter()
        tok = np.fromiter((d.ctx.sampled_token(i) for i in range(1, 8)), np.int64, 7)
        t4 = time.perf_counter()
        d.ctx.seq_rm(0, pos, -1)
        t5 = time.perf_counter()
        if it >= 10:
            fill.append(t1 - t0)
            proc.append(t2 - t1)
            sample.append(t4 - t3)
            rm.append(t5 - t4)
    for n, v in (
        ("batch fill (16 add_token)", fill),
        ("process (llama_decode)", proc),
        ("7 sampled_token reads", sample),
        ("seq_rm", rm),
    ):
        print(f"{n}: median {statistics.median(v) * 1e6:.1f} us")
    print("backend greedy:", d.ctx.backend_greedy, "full block:", d.full_block)
