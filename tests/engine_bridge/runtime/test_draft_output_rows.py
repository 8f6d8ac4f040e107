"""A drafter block's head only on the drafts read (patch 0015, issue 28).

A GPU drafter decodes its whole block (16 rows) and a chain step of budget 7 reads 7 drafts. The
head is the target's output matrix (for SmolLM2 2.7x the drafter's three layers together), and
upstream's DFlash graph ran it on every row. With patch 0015 the engine marks only the drafts it
reads as outputs and the graph gathers those rows before the final norm and the head. These tests run
the default pair on the CPU engine with the marking on and off (``DFLASH_DRAFT_OUT_ROWS=0``): the same
logits for the rows read, the same drafts and tokens, and fewer rows out of the block.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine_bridge.runtime import drafter as drafter_mod
from engine_bridge.runtime import llama_ffi
from engine_bridge.runtime.config import GenerationSettings
from default_pair import load_default_pair

PROMPT = "Explain in two sentences why the sky is blue, then give one example of Rayleigh scattering."


def _load(monkeypatch, on: bool):
    monkeypatch.setenv(drafter_mod.OUT_ROWS_ENV, "1" if on else "0")
    return load_default_pair()


def test_the_engine_carries_the_patch_and_the_drafter_uses_it(monkeypatch):
    assert llama_ffi.has_patch(drafter_mod.OUT_ROWS_PATCH), "this engine build lacks patch 0015 (make engine)"
    assert not llama_ffi.has_patch("0000-no-such-patch.patch")
    eng = _load(monkeypatch, True)
    try:
        assert eng.drafter.out_rows
    finally:
        eng.close()


def test_the_rows_read_hold_the_same_logits_as_the_whole_block(monkeypatch):
    """A whole block [last, mask x 15] read for n drafts: with the marking, the logits hold exactly
    the n drafts, each the row it holds when every row is an output."""
    eng = _load(monkeypatch, True)
    try:
        d = eng.drafter
        monkeypatch.setattr(d, "full_block", True)
        toks = eng.tokenize_chat([{"role": "user", "content": PROMPT}])
        eng.generate(toks, GenerationSettings(mode="chain", budget=4, max_tokens=8))
        pos, last = len(eng.kv), eng.kv[-1]
        d.ctx.set_backend_greedy(False)
        for n in (3, 7):
            assert d._decode_block(last, pos, n, every_row=True) == (d.max_draft + 1, 1, 1)
            every = d.ctx.logits(d.max_draft + 1)[1 : 1 + n].copy()
            d.ctx.seq_rm(0, pos, -1)
            assert d._decode_block(last, pos, n) == (n, 1, 0)
            read = d.ctx.logits(n).copy()
            d.ctx.seq_rm(0, pos, -1)
            # the head's matmul sees n rows instead of 16: the CPU kernels may round a row
            # differently at another row count, never by more than float noise
            assert np.abs(read - every).max() < 1e-3, n
            assert (read.argmax(axis=1) == every.argmax(axis=1)).all()
    finally:
        eng.close()


def test_a_block_that_would_leave_out_only_its_anchor_marks_every_row(monkeypatch):
    """A budget-sized block (n drafts in n + 1 rows) keeps upstream's marking: leaving the anchor's
    head row out was slower on the CPU (7 rows instead of 8), and the tree's whole block of 15
    drafts has nothing else to leave out."""
    eng = _load(monkeypatch, True)
    try:
        d = eng.drafter
        toks = eng.tokenize_chat([{"role": "user", "content": PROMPT}])
        eng.generate(toks, GenerationSettings(mode="chain", budget=4, max_tokens=8))
        pos, last = len(eng.kv), eng.kv[-1]
        for full, n, want in (
            (False, 7, (8, 1, 1)),
            (True, d.max_draft, (d.max_draft + 1, 1, 1)),
            (True, 13, (13, 1, 0)),
        ):
            monkeypatch.setattr(d, "full_block", full)
            assert d._decode_block(last, pos, n) == want, (full, n)
            d.ctx.synchronize()
            d.ctx.seq_rm(0, pos, -1)
    finally:
        eng.close()


def test_drafts_and_tokens_are_the_same_with_the_head_on_every_row(monkeypatch):
    runs = {}
    for on in (True, False):
        eng = _load(monkeypatch, on)
        try:
            assert eng.drafter.out_rows is on
            # whole blocks, as on a GPU: a chain step reads `budget` of 16 rows (the tree's 15 of 16
            # and budget-sized blocks mark every row whatever the switch)
            monkeypatch.setattr(eng.drafter, "full_block", True)
            toks = eng.tokenize_chat([{"role": "user", "content": PROMPT}])
            for mode, budget in (("chain", 4), ("chain", 7), ("tree", 7)):
                res = eng.generate(toks, GenerationSettings(mode=mode, budget=budget, max_tokens=48))
                runs[on, mode, budget] = (res.tokens, [(s.drafted, s.accepted) for s in res.steps])
        finally:
            eng.close()
    for key in [k[1:] for k in runs if k[0]]:
        assert runs[(True, *key)] == runs[(False, *key)], key
        assert any(a > 0 for _, a in runs[(True, *key)][1]), ("the drafter never had a draft accepted", key)


@pytest.mark.parametrize(
    "env, patched, want", [(None, True, True), ("0", True, False), ("1", False, False), (" 1", True, True)]
)
def test_the_marking_needs_the_patch_and_yields_to_the_switch(monkeypatch, env, patched, want):
    """Without the patch llama.cpp's DFlash graph returns every row whatever is marked, so marking
    fewer would hand the drafts of the wrong rows: the engine then marks every row."""
    if env is None:
        monkeypatch.delenv(drafter_mod.OUT_ROWS_ENV, raising=False)
    else:
        monkeypatch.setenv(drafter_mod.OUT_ROWS_ENV, env)
    monkeypatch.setattr(llama_ffi, "has_patch", lambda name: patched and name == drafter_mod.OUT_ROWS_PATCH)
    assert drafter_mod.out_rows_on() is want
