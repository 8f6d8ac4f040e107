"""Patch 0023's host time, before / after in one process: a drafter block's batch fill and its reads
(Drafter._decode_block's fill, then the 7 picks and the seq_rm of Drafter.draft on a whole block),
and the chain verify's fill of 8 rows and its 8 picks, with the bulk calls (DFLASH_BULK_BATCH=1)
and the per-entry ones (=0), rounds alternating. The real default pair on the CPU engine; the
decodes themselves are timed apart and left out. Medians in us.

    python docs/runs/2026-11-30-cpu/bulk-batch/host_ab.py [TARGET] [--rounds 4] [--iters 200]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime import llama_ffi  # noqa: E402
from engine_bridge.runtime.config import EngineConfig  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402


def side(eng, pos, last, iters):
    d, tc = eng.drafter, eng.target_ctx
    db, tb = d.batch, eng.target_batch
    t = {"block fill": [], "block reads + seq_rm": [], "verify fill": [], "verify picks": []}
    for _ in range(iters):
        t0 = time.perf_counter()
        db.clear()
        db.add_tokens([last] + [d.mask_token] * 15, pos, 0, [1 <= i < 8 for i in range(16)])
        t1 = time.perf_counter()
        d.ctx.process(db)
        d.ctx.sampled_token(0)  # the wait for the decode (CPU: none), left out
        t2 = time.perf_counter()
        d.ctx.sampled_tokens(0, 7)
        d.ctx.seq_rm(0, pos, -1)
        t3 = time.perf_counter()
        tb.clear()
        tb.add_tokens([last] + [100 + j for j in range(7)], pos, 0, [True] * 8)
        t4 = time.perf_counter()
        tc.process(tb)
        tc.sampled_token(0)
        t5 = time.perf_counter()
        tc.sampled_tokens(0, 8)
        t6 = time.perf_counter()
        tc.seq_rm(0, pos, -1)
        for k, v in zip(t, (t1 - t0, t3 - t2, t4 - t3, t6 - t5)):
            t[k].append(v)
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "target",
        nargs="?",
        default=str(Path.home() / ".local/share/dflash-studio/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    )
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--iters", type=int, default=200)
    a = ap.parse_args()
    d = str(ROOT / "resources/models/smollm2/drafter.gguf")
    print("patch 0023 in this build:", llama_ffi.has_patch("0023-bulk-batch-api.patch"))
    with Engine.load(EngineConfig(target=a.target, draft=d, n_ctx=2048, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
        toks = eng.tokenize("The history of the city begins with a small settlement on the river, where")
        eng._prefill(toks[:-1], need_features=True)
        eng.target_ctx.set_backend_greedy(True, n_seqs=1)
        eng.drafter.ctx.set_backend_greedy(True)
        pos, last = len(toks) - 1, toks[-1]
        res = {"1": {}, "0": {}}
        for r in range(a.rounds):
            for s in ("1", "0") if r % 2 == 0 else ("0", "1"):
                os.environ["DFLASH_BULK_BATCH"] = s
                llama_ffi.bulk_batch_api.cache_clear()
                assert (llama_ffi.bulk_batch_api() is not None) == (s == "1")
                t = side(eng, pos, last, a.iters)
                for k, v in t.items():
                    res[s].setdefault(k, []).extend(v[10:])
        print("| host part, us (median) | per-entry calls (0) | one call (1) | saved |")
        print("|---|---|---|---|")
        tot0 = tot1 = 0.0
        for k in res["0"]:
            m0, m1 = statistics.median(res["0"][k]) * 1e6, statistics.median(res["1"][k]) * 1e6
            tot0, tot1 = tot0 + m0, tot1 + m1
            print(f"| {k} | {m0:.1f} | {m1:.1f} | {m0 - m1:.1f} |")
        print(f"| a chain-7 step's four | {tot0:.1f} | {tot1:.1f} | {tot0 - tot1:.1f} |")


if __name__ == "__main__":
    main()
