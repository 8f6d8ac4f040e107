"""Patch 0023's calls against the per-entry ones in isolation (no decode between, so no CPU
contention from llama.cpp's threads on this 2-vCPU machine): a 16-row block's fill, and 7 picks
read after one decode. Medians of 2,000 calls, us.

    python docs/runs/2026-11-30-cpu/bulk-batch/pieces.py
"""

import sys
import time
import ctypes
import statistics

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4]))
from pathlib import Path
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import llama_ffi
from engine_bridge.runtime.config import EngineConfig
from engine_bridge.runtime.engine import Engine
from llama_cpp import llama_cpp as C

T = str(Path.home() / ".local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf")
D = str(Path(__file__).resolve().parents[4] / "resources/models/smollm2/drafter.gguf")
with Engine.load(EngineConfig(target=T, draft=D, n_ctx=2048, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    b = eng.drafter.batch
    api = llama_ffi.bulk_batch_api()
    tok = (ctypes.c_int32 * 64)()
    out = (ctypes.c_int8 * 64)()
    tok[:16] = [5] * 16
    out[:16] = [1] * 16

    def tm(f, n=2000):
        xs = []
        for _ in range(n):
            t0 = time.perf_counter()
            f()
            xs.append(time.perf_counter() - t0)
        return statistics.median(xs) * 1e6

    print("clear", tm(lambda: C.llama_batch_ext_clear(b.ptr)))
    print("clear+bulk C call 16", tm(lambda: (C.llama_batch_ext_clear(b.ptr), api[0](b.ptr, 0, tok, 16, 10, out))))
    print("clear+bulk C call 1", tm(lambda: (C.llama_batch_ext_clear(b.ptr), api[0](b.ptr, 0, tok, 1, 10, out))))
    print(
        "py prep",
        tm(
            lambda: (
                tok.__setitem__(slice(0, 16), [int(t) for t in [5] * 16]),
                out.__setitem__(slice(0, 16), [1 if o else 0 for o in [True] * 16]),
            )
        ),
    )
    print("clear+add_tokens", tm(lambda: (b.clear(), b.add_tokens([5] * 16, 10, 0, [True] * 16))))

    def per_entry():
        b.clear()
        for i in range(16):
            b.add_token(5, 10 + i, 0, True)

    print("clear+16 add_token", tm(per_entry))
    ctx = eng.drafter.ctx
    ctx.set_backend_greedy(True)
    b.clear()
    b.add_tokens([5] * 16, 10, 0, [True] * 16)
    ctx.process(b)
    ctx.synchronize()
    import numpy as np

    print("7 sampled_token", tm(lambda: np.fromiter((ctx.sampled_token(i) for i in range(7)), np.int64, 7)))
    print("sampled_tokens(0,7)", tm(lambda: ctx.sampled_tokens(0, 7)))
