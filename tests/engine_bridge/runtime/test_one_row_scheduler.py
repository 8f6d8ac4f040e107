"""The target keeps its one-row graph beside its verify graph (patch 0009, issues 28 and 29).

In auto mode the target alternates AR steps (one-row decodes) with speculative verifies and probes
(several rows). llama.cpp keeps one graph per output slot, so each switch rebuilt the target's graph
(and on a GPU captured its CUDA graph again). With patch 0009 the engine gives one-row decodes a
slot and a scheduler of their own (``llama_set_one_row_scheduler``) for a target paired with a
drafter. These tests run the default pair's target on the CPU engine, alternating one-row and
four-row decodes with the slot on and off: the same logits either way, and the reuse it exists for.
"""

from __future__ import annotations

import numpy as np

from engine_bridge.runtime import engine as engine_mod
from engine_bridge.runtime import llama_ffi
from engine_bridge.runtime.config import GenerationSettings
from engine_bridge.runtime.native import Batch
from default_pair import load_default_pair

PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a short docstring."
ROUNDS = 6


def _load(monkeypatch, on: bool):
    monkeypatch.setenv(engine_mod.ONE_ROW_SCHED_ENV, "1" if on else "0")
    return load_default_pair()


def _alternate(eng) -> tuple[int, list[np.ndarray]]:
    """Prefill, then ROUNDS x (a one-row decode, a four-row decode): the graphs kept over the
    alternation and every decode's last-row logits."""
    ctx = eng.target_ctx
    ctx.clear()
    toks = eng.tokenize_chat([{"role": "user", "content": PROMPT}])
    b = Batch(ctx)
    for i, t in enumerate(toks):
        b.add_token(t, i, 0, i == len(toks) - 1)
    ctx.process(b)
    pos, nxt, out = len(toks), 2, []
    before = ctx.graph_reuses()
    for _ in range(ROUNDS):
        for rows in (1, 4):
            b.clear()
            for i in range(rows):
                b.add_token(nxt + i, pos + i, 0, True)
            ctx.process(b)
            out.append(ctx.logits(rows)[-1].copy())
            pos, nxt = pos + rows, nxt + rows
    return ctx.graph_reuses() - before, out


def test_one_row_decodes_and_verifies_keep_both_graphs_with_the_same_logits(monkeypatch):
    eng = _load(monkeypatch, True)
    try:
        assert eng.one_row_graph  # a target paired with a drafter gets the slot
        reused_on, logits_on = _alternate(eng)
        assert llama_ffi.set_one_row_scheduler(eng.target_ctx.ptr, False)
        reused_off, logits_off = _alternate(eng)
    finally:
        eng.close()
    n = 2 * ROUNDS
    # off: each decode has the other's shape, so llama.cpp rebuilds the graph every time
    assert reused_off <= 1, reused_off
    # on: only the first decode of each shape builds its graph
    assert reused_on >= n - 2, (reused_on, n)
    for a, b in zip(logits_on, logits_off, strict=True):
        assert np.array_equal(a, b)  # the same graph on another scheduler: the same numbers


def test_the_switch_is_read_from_the_environment_and_tokens_do_not_change(monkeypatch):
    runs = {}
    for on in (False, True):
        eng = _load(monkeypatch, on)
        try:
            assert eng.one_row_graph is on
            toks = eng.tokenize_chat([{"role": "user", "content": PROMPT}])
            runs[on] = [
                eng.generate(toks, GenerationSettings(mode=m, budget=4, max_tokens=32)).tokens for m in ("ar", "chain")
            ]
        finally:
            eng.close()
    assert runs[True] == runs[False]
