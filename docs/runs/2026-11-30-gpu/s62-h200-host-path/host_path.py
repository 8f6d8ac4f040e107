"""Where a drafter block's, an inject's and a verify's wall time goes on the GPU machine, from the host:
the batch fill (Python), the llama_decode call until it returns (llama.cpp's host path: batch split,
graph reuse, input copies, the CUDA graph's launch; the device runs after or while it), the first
result read (the wait for the device), and the rest (reads, seq_rm). The default pair, the shipped
drafter, one process, 200 timed iterations after 20; medians in µs.

    PYTHONPATH=/tmp/lcp_site:/tmp/site:. python3 docs/runs/2026-11-30-gpu/s62-h200-host-path/host_path.py T D
"""

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime.config import EngineConfig  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402

N, WARM = 200, 20


def med(xs):
    return statistics.median(xs) * 1e6


def main(t: str, d: str) -> None:
    with Engine.load(EngineConfig(target=t, draft=d, n_ctx=4096, flash_attn="on"), preflight=PAIR_PREFLIGHT) as eng:
        dr, tc = eng.drafter, eng.target_ctx
        toks = eng.tokenize("The history of the city begins with a small settlement on the river, where")
        eng._prefill(toks[:-1], need_features=True)
        tc.set_backend_greedy(eng.config.backend_sampling, n_seqs=1)
        dr.ctx.set_backend_greedy(eng.config.backend_sampling)
        pos, last = len(toks) - 1, toks[-1]
        print("on GPU:", dr.on_gpu, "full block:", dr.full_block, "out rows:", dr.out_rows)
        res = {}
        # the drafter's whole block, 7 drafts read (Drafter.draft(7) on a GPU)
        b = dr.batch
        parts = {k: [] for k in ("fill", "decode call", "first read (wait)", "reads + seq_rm", "wall")}
        for it in range(WARM + N):
            t0 = time.perf_counter()
            b.clear()
            for i in range(16):
                b.add_token(last if i == 0 else dr.mask_token, pos + i, 0, 1 <= i < 8)
            t1 = time.perf_counter()
            dr.ctx.process(b)
            t2 = time.perf_counter()
            dr.ctx.sampled_token(0)
            t3 = time.perf_counter()
            np.fromiter((dr.ctx.sampled_token(i) for i in range(7)), np.int64, 7)
            dr.ctx.seq_rm(0, pos, -1)
            t4 = time.perf_counter()
            if it >= WARM:
                for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
                    parts[k].append(v)
        res["drafter block (16 rows, 7 read)"] = {k: med(v) for k, v in parts.items()}
        # the target's verify of 8 rows with extraction (a chain-7 verify)
        eng._set_extraction(True)
        tb = eng.target_batch
        parts = {k: [] for k in parts}
        for it in range(WARM + N):
            t0 = time.perf_counter()
            tb.clear()
            for j in range(8):
                tb.add_token(last if j == 0 else (last + j) % 1000 + 10, pos + j, 0, True)
            t1 = time.perf_counter()
            tc.process(tb)
            t2 = time.perf_counter()
            tc.sampled_token(0)
            t3 = time.perf_counter()
            np.fromiter((tc.sampled_token(i) for i in range(8)), np.int64, 8)
            tc.seq_rm(0, pos, -1)
            t4 = time.perf_counter()
            if it >= WARM:
                for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
                    parts[k].append(v)
        res["target verify (8 rows)"] = {k: med(v) for k, v in parts.items()}
        # the inject of 4 rows (features of the last verify), then a sync to see its device time
        tb.clear()
        for j in range(8):
            tb.add_token(last if j == 0 else (last + j) % 1000 + 10, pos + j, 0, True)
        tc.process(tb)
        tc.synchronize()
        parts = {"python + decode call": [], "wait": [], "wall": []}
        for it in range(WARM + N):
            t0 = time.perf_counter()
            dr.inject(tc, 0, 4, pos, sync=False)
            t1 = time.perf_counter()
            dr.ctx.synchronize()
            t2 = time.perf_counter()
            dr.ctx.seq_rm(0, pos, -1)
            if it >= WARM:
                parts["python + decode call"].append(t1 - t0)
                parts["wait"].append(t2 - t1)
                parts["wall"].append(t2 - t0)
        res["inject (4 rows)"] = {k: med(v) for k, v in parts.items()}
        for name, r in res.items():
            print(f"{name}: " + ", ".join(f"{k} {v:.1f}" for k, v in r.items()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
