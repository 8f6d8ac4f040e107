"""A drafter context keeps both of its graphs (patch 0008, issue 28).

Every speculative step decodes two batches in the drafter's context: the target's features into its
KV (no outputs) and the draft block (every row an output). llama.cpp allocates one graph at a time,
so both were rebuilt on the host at every step. With patch 0008 the engine gives the no-output
batches a scheduler of their own (``llama_set_no_output_scheduler``): each graph stays allocated and
is kept while the other runs. These tests run the default pair on the CPU engine with it on and off
(``DFLASH_NO_OUTPUT_SCHED=0``): the same drafts and tokens either way, and the reuse it exists for.
"""

from __future__ import annotations

import pytest

from engine_bridge.runtime import drafter as drafter_mod
from engine_bridge.runtime.config import GenerationSettings
from default_pair import load_default_pair

PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a short docstring."


def _load(monkeypatch, on: bool):
    monkeypatch.setenv(drafter_mod.NO_OUTPUT_SCHED_ENV, "1" if on else "0")
    return load_default_pair()


def _runs(eng):
    toks = eng.tokenize_chat([{"role": "user", "content": PROMPT}])
    out = {}
    for mode, budget in (("chain", 7), ("tree", 15)):
        before = eng.drafter.ctx.graph_reuses()
        res = eng.generate(toks, GenerationSettings(mode=mode, budget=budget, max_tokens=64))
        drafts = [(s.drafted, s.accepted) for s in res.steps]
        out[mode] = (res.tokens, drafts, eng.drafter.ctx.graph_reuses() - before, len(res.steps))
    return out


def test_the_drafter_keeps_both_graphs_and_drafts_the_same(monkeypatch):
    eng = _load(monkeypatch, True)
    try:
        assert eng.drafter.two_schedulers, "this engine build lacks patch 0008"
        on = _runs(eng)
    finally:
        eng.close()
    eng = _load(monkeypatch, False)
    try:
        assert not eng.drafter.two_schedulers
        off = _runs(eng)
    finally:
        eng.close()
    for mode in ("chain", "tree"):
        tokens_on, drafts_on, reused_on, steps = on[mode]
        tokens_off, drafts_off, reused_off, _ = off[mode]
        assert tokens_on == tokens_off and drafts_on == drafts_off, mode
        # off: the inject and the block rebuild each other's graph at every step
        assert reused_off <= 2, (mode, reused_off)
        # on: the block's graph is kept whenever the block has the last block's rows (every chain
        # step after the first; a tree's block shortens after an off-chain commit), the inject's
        # whenever the commit length (its row count) repeats
        assert reused_on >= (steps - 2 if mode == "chain" else steps // 3), (mode, reused_on, steps)


def test_a_whole_block_drafts_more_of_what_the_target_keeps_and_changes_no_token(monkeypatch):
    """DFLASH_DRAFT_FULL_BLOCK=1: the drafter decodes its whole block (its rows attend to each
    other, and it was trained on whole blocks) whatever the budget, and the drafts are read from
    its first rows. The output stays the target's; the drafts may differ."""
    eng = _load(monkeypatch, True)
    try:
        d = eng.drafter
        toks = eng.tokenize_chat([{"role": "user", "content": PROMPT}])
        for full, rows in ((False, 4), (True, d.max_draft + 1)):
            monkeypatch.setattr(d, "full_block", full)
            pos = len(toks) + 1
            # every row an output (upstream's marking): the drafts from row 1 of the block's rows
            assert d._decode_block(toks[-1], pos, 3, every_row=True) == (rows, 1, 1)
            d.ctx.synchronize()
            d.ctx.seq_rm(0, pos, -1)
        runs = {}
        for full in (False, True):
            monkeypatch.setattr(d, "full_block", full)
            runs[full] = eng.generate(toks, GenerationSettings(mode="chain", budget=4, max_tokens=48))
        assert runs[True].tokens == runs[False].tokens
        assert all(s.drafted <= 4 for s in runs[True].steps)
    finally:
        eng.close()


@pytest.mark.parametrize(
    "env, on_gpu, want",
    [
        (None, True, True),
        (None, False, False),
        ("0", True, False),
        ("1", False, True),
        (" 1 ", True, True),
        ("x", False, False),
    ],
)
def test_whole_blocks_are_the_default_where_the_drafter_runs_on_a_gpu(monkeypatch, env, on_gpu, want):
    """A GPU drafter decodes whole blocks (measured on the H200: more committed for ~0.1 ms a step);
    a CPU one decodes only the rows its budget needs; DFLASH_DRAFT_FULL_BLOCK=0/1 decides either way."""
    if env is None:
        monkeypatch.delenv(drafter_mod.FULL_BLOCK_ENV, raising=False)
    else:
        monkeypatch.setenv(drafter_mod.FULL_BLOCK_ENV, env)
    assert drafter_mod.full_block_on(on_gpu) is want
