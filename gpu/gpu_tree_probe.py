"""Where a tree step's draft phase spends its time on a large vocabulary (diagnostic).

Times, over many drafts at one position: the drafter decode up to its logits (llama.cpp), the
host argmax the drafter does, top_candidates (copy / k argmax passes / exp pass), build_tree; and
the same decode with a backend top-k sampler attached to the drafter (only k candidates and their
logits come back: no full-vocabulary logits on the host), plus numpy calibration on this host.

Usage: python gpu/gpu_tree_probe.py --target T --draft D [--rows 15] [--k 4] [--reps 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime.tree import build_tree, top_candidates  # noqa: E402

now = time.perf_counter


def med(xs):
    return 1e3 * statistics.median(xs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--rows", type=int, default=15)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    res: dict = {}
    with Engine.load(
        EngineConfig(target=a.target, draft=a.draft, n_ctx=4096, flash_attn="on"), preflight=PAIR_PREFLIGHT
    ) as eng:
        eng.generate("The history of the", GenerationSettings(mode="chain", budget=7, max_tokens=32))
        d = eng.drafter
        d.ctx.set_backend_greedy(False)
        pos, last = len(eng.kv), 1000
        n = a.rows
        t = {
            k: []
            for k in (
                "decode+logits",
                "drafter_argmax",
                "copy",
                "argmax_passes",
                "exp_pass",
                "top_candidates",
                "build_tree",
            )
        }
        for _ in range(a.reps):
            t0 = now()
            n_block, first = d._decode_block(last, pos, n)  # the drafter's own noise block
            logits = d.ctx.logits(n_block)[first:]
            t1 = now()
            logits.argmax(axis=1)
            t2 = now()
            work = np.empty_like(logits)
            np.copyto(work, logits)
            t3 = now()
            rows = np.arange(n)
            for _j in range(a.k):
                best = work.argmax(axis=1)
                work[rows, best] = -np.inf
            t4 = now()
            np.subtract(logits, logits[:, :1], out=work)
            np.exp(work, out=work)
            work.sum(axis=1)
            t5 = now()
            cand, logp = top_candidates(logits, a.k)
            t6 = now()
            build_tree(cand, logp, 16, chain_len=8)
            t7 = now()
            d.ctx.seq_rm(0, pos, -1)
            for k, v in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6)):
                t[k].append(v)
        res["host_path_ms"] = {k: med(v) for k, v in t.items()}
        print(
            "host path (median ms):", json.dumps({k: round(v, 3) for k, v in res["host_path_ms"].items()}), flush=True
        )

        # the same decode with a backend top-k sampler: only k candidates + logits per row return
        ok = d.ctx.set_backend_top_k(a.k)
        res["backend_topk_attached"] = ok
        if ok:
            tt, tr = [], []
            for _ in range(a.reps):
                t0 = now()
                n_block, first = d._decode_block(last, pos, n)
                d.ctx.synchronize()
                t1 = now()
                ids, lg = d.ctx.sampled_top_k(first, n)
                got = (ids[0].tolist(), lg[0].tolist())
                t2 = now()
                d.ctx.seq_rm(0, pos, -1)
                tt.append(t1 - t0)
                tr.append(t2 - t1)
            res["backend_topk_ms"] = {"decode+sync": med(tt), "read_candidates": med(tr)}
            res["backend_topk_sample_row"] = got
            print(
                "backend top-k (median ms):",
                json.dumps({k: round(v, 3) for k, v in res["backend_topk_ms"].items()}),
                "row 1:",
                got,
                flush=True,
            )
            d.ctx.set_backend_top_k(0)

    # numpy calibration on this host
    x = np.random.default_rng(0).standard_normal((a.rows, 151936)).astype(np.float32)
    cal = {}
    for name, f in (
        ("argmax", lambda: x.argmax(axis=1)),
        ("exp", lambda: np.exp(x)),
        ("copy", lambda: x.copy()),
        ("top_candidates", lambda: top_candidates(x, a.k)),
    ):
        f()
        ts = []
        for _ in range(20):
            t0 = now()
            f()
            ts.append(now() - t0)
        cal[name] = med(ts)
    res["numpy_ms"] = cal
    print(
        "numpy on this host (median ms, rows x 151936 float32):",
        json.dumps({k: round(v, 3) for k, v in cal.items()}),
        flush=True,
    )
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
