"""A loop of decodes of ROWS rows (every row an output; a chain-5 verify is 6) on the default target after
a short prompt, 2 threads: ms a decode. Patch 0030 follows $DFLASH_Q4_1_NCOLS (read once per process):
DFLASH_Q4_1_NCOLS=0/1 PYTHONPATH=<engine>:. python docs/runs/2026-12-07-cpu/q4-1-ncols/verify_rows.py ROWS ITERS"""

import sys
import time
from engine_bridge.runtime import native
from engine_bridge.runtime.config import KVTypes

T = "/root/.local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"
model = native.Model(T, n_gpu_layers=0)
ctx = native.Context(model, n_ctx=512, n_batch=64, n_ubatch=64, kv=KVTypes(), n_threads=2)
prompt = model.tokenize("Write a Python function that checks whether a number is prime.")
b = native.Batch(ctx)
b.clear()
b.add_tokens(prompt, 0, 0, [False] * len(prompt))
ctx.process(b)
w = int(sys.argv[1]) if len(sys.argv) > 1 else 6
n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
t0 = time.perf_counter()
for _ in range(n):
    ctx.seq_rm(0, len(prompt), -1)
    b.clear()
    b.add_tokens((prompt * 4)[:w], len(prompt), 0, [True] * w)
    ctx.process(b)
    ctx.logits(w)
print(f"rows {w}: {1e3 * (time.perf_counter() - t0) / n:.3f} ms a decode")
