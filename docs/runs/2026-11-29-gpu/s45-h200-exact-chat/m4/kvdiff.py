"""Which target KV cells differ after the same chat replayed by AR and by a speculative mode (issue 29).

Both replays commit the same tokens; this compares the K/V bytes llama.cpp holds for every cached
position after each replay (llama_state_seq_get_data) and says where they differ: which positions,
which layers, and which part of the chat wrote them (a prompt's prefill, an answer's steps)."""

import argparse
import struct
import sys

import numpy as np

sys.path.insert(0, ".")
from benchmarks.bench_long_chat import requests  # noqa: E402
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT  # noqa: E402
from engine_bridge.runtime.config import EngineConfig, GenerationSettings  # noqa: E402
from engine_bridge.runtime.engine import Engine  # noqa: E402


def parse(state: bytes, n_layer_hint: int):
    off = 8  # an 8-byte prefix before the cache's own record (n_stream first)
    (n_stream,) = struct.unpack_from("<I", state, off)
    off += 4
    (cells,) = struct.unpack_from("<I", state, off)
    off += 4
    pos = []
    for _ in range(cells):
        p, nsq = struct.unpack_from("<iI", state, off)
        off += 8 + 4 * nsq
        pos.append(p)
    v_trans, n_layer = struct.unpack_from("<II", state, off)
    off += 8
    ks, vs = [], []
    for _ in range(n_layer):
        t, row = struct.unpack_from("<iQ", state, off)
        off += 12
        ks.append(np.frombuffer(state, np.uint8, cells * row, off).reshape(cells, row))
        off += cells * row
    if not v_trans:
        for _ in range(n_layer):
            t, row = struct.unpack_from("<iQ", state, off)
            off += 12
            vs.append(np.frombuffer(state, np.uint8, cells * row, off).reshape(cells, row))
            off += cells * row
    return n_stream, np.array(pos), ks, vs, v_trans


def run(cfg, mode, reqs, tokens):
    eng = Engine.load(cfg, preflight=PAIR_PREFLIGHT)
    msgs, log = [], []
    for t in reqs:
        msgs.append({"role": "user", "content": t})
        toks = eng.tokenize_chat(msgs)
        res = eng.generate(toks, GenerationSettings(mode=mode, budget=7, max_tokens=tokens))
        log.append((len(toks), res.summary.n_prompt_reused, len(res.tokens)))
        msgs.append({"role": "assistant", "content": res.text})
    snap = eng.snapshot_target()
    eng.close()
    return snap, log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--gpu-layers", type=int, default=0)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompts", default="mt-bench")
    ap.add_argument("--mode", default="chain")
    ap.add_argument("--exact", type=int, default=1)
    a = ap.parse_args()
    reqs = requests(a.prompts, a.turns, 1200)
    cfg = EngineConfig(target=a.target, draft=a.draft, n_ctx=8192, n_gpu_layers=a.gpu_layers, exact=bool(a.exact))
    (sa, la), (sb, lb) = run(cfg, "ar", reqs, a.tokens), run(cfg, a.mode, reqs, a.tokens)
    print("turns (prompt, reused, generated) ar:", la)
    print("turns (prompt, reused, generated) " + a.mode + ":", lb)
    print("same tokens:", sa.tokens == sb.tokens, len(sa.tokens), len(sb.tokens))
    na, pa, ka, va, _ = parse(sa.state, 0)
    nb, pb, kb, vb, _ = parse(sb.state, 0)
    print(
        "cells",
        len(pa),
        len(pb),
        "positional (ar, spec):",
        bool((pa == np.arange(len(pa))).all()),
        bool((pb == np.arange(len(pb))).all()),
    )
    n = min(len(pa), len(pb))
    # answer/prompt spans: turn i's prompt prefill covers [reused, prompt-1), its answer [prompt-1, prompt-1+gen-1)
    spans = []
    for i, (p, r, g) in enumerate(la):
        spans.append((r, p - 1, f"t{i + 1} prefill"))
        spans.append((p - 1, p - 1 + g - 1, f"t{i + 1} answer"))

    def where(x):
        return next((f"{name}+{x - lo}" for lo, hi, name in spans if lo <= x < hi), "?")

    ia = np.argsort(pa)[:n]
    ib = np.argsort(pb)[:n]
    any_diff = np.zeros(n, bool)
    for L, (x, y) in enumerate(zip(ka + va, kb + vb)):
        d = (x[ia] != y[ib]).any(axis=1)
        any_diff |= d
        if L in (0, 1, len(ka) - 1, len(ka)) and d.any():
            print(
                f"{'K' if L < len(ka) else 'V'} layer {L % len(ka)}: {int(d.sum())} positions differ, first",
                [(int(q), where(int(q))) for q in np.nonzero(d)[0][:6]],
            )
    print("positions whose K/V differ in some layer:", int(any_diff.sum()), "of", n)
    print("first:", [(int(q), where(int(q))) for q in np.nonzero(any_diff)[0][:12]])


main()
