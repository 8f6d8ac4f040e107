"""KV position ranges that visit only the used cells (patch 0027, issue 28).

llama.cpp's seq_rm / seq_cp looped over every cell of the context (8,192 for SmolLM2) for each call,
and a tree step keeps its winning branch with ~15 such calls. With 0027 they loop from the first used
cell to the last; empty cells hold position -1, outside every range, so the same cells change.
``DFLASH_KV_USED_RANGE=0`` visits every cell (upstream); the switch is read once per process, so the
comparison runs in two child processes. These tests run the CPU engine on the tiny pair.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine_bridge.runtime import llama_ffi

ROOT = Path(__file__).resolve().parents[3]
PATCH = "0027-kv-used-range.patch"


def test_the_engine_carries_the_patch():
    names = [p["name"] for p in llama_ffi.build_info().get("patches", [])]
    assert PATCH in names


def _fill(eng, tokens: list[int], pos0: int, seq: int = 0) -> None:
    b = eng.target_batch
    b.clear()
    b.add_tokens(tokens, pos0, seq=seq, outputs=[False] * (len(tokens) - 1) + [True])
    eng.target_ctx.process(b)
    eng.target_ctx.synchronize()


def test_ranges_reach_the_first_and_the_last_used_cell(tiny_engine):
    eng = tiny_engine
    eng.reset()
    ctx = eng.target_ctx
    try:
        toks = eng.tokenize("The history of the city begins with a small settlement on the river.") * 4
        _fill(eng, toks, 0)
        n = len(toks)
        assert (ctx.seq_pos_min(0), ctx.seq_pos_max(0)) == (0, n - 1)
        # the last used cell: a range that ends the sequence must take it
        assert ctx.seq_rm(0, n - 3, -1)
        assert ctx.seq_pos_max(0) == n - 4
        # the first used cell
        assert ctx.seq_rm(0, 0, 2)
        assert ctx.seq_pos_min(0) == 2
        # a hole in the middle, refilled at new positions: its cells now sit before older ones
        assert ctx.seq_rm(0, 10, 20)
        _fill(eng, toks[:10], n - 3)
        assert ctx.seq_pos_max(0) == n + 6
        # a copy to another sequence over the whole range, then a removal of its tail
        ctx.seq_cp(0, 1, -1, -1)
        assert (ctx.seq_pos_min(1), ctx.seq_pos_max(1)) == (2, n + 6)
        assert ctx.seq_rm(1, n, -1)
        assert (ctx.seq_pos_max(1), ctx.seq_pos_max(0)) == (n - 1, n + 6)
        # every sequence (-1) from a position on
        assert ctx.seq_rm(-1, 5, -1)
        assert ctx.seq_pos_max(0) == ctx.seq_pos_max(1) == 4
    finally:
        ctx.seq_rm(-1, -1, -1)
        eng.reset()


CHILD = """
import json, sys
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
target, draft = sys.argv[1], sys.argv[2]
out = {}
with Engine.load(EngineConfig(target=target, draft=draft, n_ctx=512, n_threads=2), preflight=PAIR_PREFLIGHT) as eng:
    prompt = "def fibonacci(n):\\n    # returns the n-th Fibonacci number"
    for mode, budget in (("tree", 15), ("tree", 6), ("chain", 7), ("auto", 7)):
        r = eng.generate(prompt, GenerationSettings(mode=mode, budget=budget, max_tokens=40))
        ctx = eng.target_ctx
        out[f"{mode}{budget}"] = {"tokens": [int(t) for t in r.tokens]}
        if mode != "auto":  # (auto picks its steps from the costs it measures: they differ run to run)
            out[f"{mode}{budget}"].update(
                steps=r.summary.n_steps, kv=[(ctx.seq_pos_min(s), ctx.seq_pos_max(s)) for s in range(4)]
            )
print("RESULT " + json.dumps(out))
"""


def _child(pair, switch: str | None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("DFLASH_KV_USED_RANGE", None)
    if switch is not None:
        env["DFLASH_KV_USED_RANGE"] = switch
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(pair[0]), str(pair[1])],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def test_generations_and_the_cache_are_the_same_with_every_cell_visited(tiny_pair):
    used_range, every_cell = _child(tiny_pair, None), _child(tiny_pair, "0")
    assert used_range == every_cell
    assert all(len(v["tokens"]) == 40 for v in used_range.values())
