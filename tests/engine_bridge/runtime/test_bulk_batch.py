"""A step's token block added, and its backend picks read, in one FFI call each (patch 0023, issue 28);
a tree verify's entries, each in its set of sequences, in one call too (patch 0026).

On the GPU machine's host a 16-row drafter block spent ~75 us filling its batch through per-entry
ctypes calls and ~45 us reading its drafts. Patch 0023 adds ``llama_batch_ext_add_tokens`` and
``llama_get_sampled_tokens``; ``Batch.add_tokens`` and ``Context.sampled_tokens`` use them, and
``DFLASH_BULK_BATCH=0`` keeps the per-entry calls. These tests run the CPU engine on the tiny pair:
the same batch (bit-identical logits), the same picks, the same refusals, the same generations.
Patch 0026 adds ``llama_batch_ext_add_token_sets``, used by ``Batch.add_token_sets`` (the tree step's
verify batch) under the same switch.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine_bridge.common.errors import DecodeError
from engine_bridge.runtime import llama_ffi
from engine_bridge.runtime.config import GenerationSettings

PATCH = "0023-bulk-batch-api.patch"
TREE_PATCH = "0026-tree-batch-api.patch"
PROMPT = "def fibonacci(n):\n    # returns the n-th Fibonacci number"


@pytest.fixture
def bulk(monkeypatch):
    """Sets whether the engine uses the bulk calls (DFLASH_BULK_BATCH, read through a cached lookup)."""

    def use(on: bool) -> None:
        monkeypatch.setenv("DFLASH_BULK_BATCH", "1" if on else "0")
        llama_ffi.bulk_batch_api.cache_clear()
        llama_ffi.token_sets_api.cache_clear()

    yield use
    monkeypatch.delenv("DFLASH_BULK_BATCH", raising=False)
    llama_ffi.bulk_batch_api.cache_clear()
    llama_ffi.token_sets_api.cache_clear()


def _logits_of(eng, fill, n_entries: int, n_out: int) -> np.ndarray:
    """The target's logits of the ``n_out`` output rows of one batch that ``fill(batch)`` fills with
    ``n_entries`` entries, decoded from an empty cache (which is emptied again after)."""
    eng.reset()
    ctx, b = eng.target_ctx, eng.target_batch
    ctx.set_backend_greedy(False)
    b.clear()
    fill(b)
    assert b.n == n_entries
    ctx.process(b)
    ctx.synchronize()
    out = ctx.logits(n_out).copy()
    eng.reset()
    return out


def _decode(eng, tokens, bulk_add: bool) -> np.ndarray:
    """The target's logits of every row of one batch of ``tokens`` at positions 0.., filled either way."""

    def fill(b) -> None:
        if bulk_add:
            assert b.add_tokens(tokens, 0, 0, [True] * len(tokens)) == 0
        else:
            for i, t in enumerate(tokens):
                b.add_token(t, i, 0, True)

    return _logits_of(eng, fill, len(tokens), len(tokens))


def test_the_engine_carries_the_patch_and_binds_it(bulk):
    assert llama_ffi.has_patch(PATCH), "this engine build lacks patch 0023 (make engine)"
    bulk(True)
    assert llama_ffi.bulk_batch_api() is not None
    bulk(False)
    assert llama_ffi.bulk_batch_api() is None


@pytest.mark.parametrize("on", [True, False])
def test_a_block_added_in_one_call_is_the_block_added_entry_by_entry(tiny_engine, bulk, on):
    bulk(on)
    toks = tiny_engine.tokenize(PROMPT)[:12]
    one_call = _decode(tiny_engine, toks, bulk_add=True)
    by_entry = _decode(tiny_engine, toks, bulk_add=False)
    assert one_call.shape == (len(toks), tiny_engine.target_ctx.n_vocab)
    assert np.array_equal(one_call, by_entry)


def test_only_the_rows_marked_are_outputs(tiny_engine, bulk):
    """Outputs where asked, and the positions run on from pos0: the last row's logits after a prefix
    equal the same row decoded as the only output."""
    bulk(True)
    eng = tiny_engine
    toks = eng.tokenize(PROMPT)[:10]
    every = _decode(eng, toks, bulk_add=True)
    eng.reset()
    ctx, b = eng.target_ctx, eng.target_batch
    b.clear()
    b.add_tokens(toks[:6], 0, 0, None)  # no outputs
    ctx.process(b)
    b.clear()
    assert b.add_tokens(toks[6:], 6, 0, [False, False, False, True]) == 0
    ctx.process(b)
    ctx.synchronize()
    last = ctx.logits(1)[0].copy()
    eng.reset()
    assert last.argmax() == every[-1].argmax()
    assert np.abs(last - every[-1]).max() < 1e-3  # another batch split: CPU rounding at most


@pytest.mark.parametrize("on", [True, False])
def test_the_picks_read_in_one_call_are_the_picks_read_one_by_one(tiny_engine, bulk, on):
    bulk(on)
    eng = tiny_engine
    eng.reset()
    ctx, b = eng.target_ctx, eng.target_batch
    assert ctx.set_backend_greedy(True)
    try:
        toks = eng.tokenize(PROMPT)[:8]
        b.clear()
        b.add_tokens(toks, 0, 0, [True] * len(toks))
        ctx.process(b)
        one_by_one = [ctx.sampled_token(i) for i in range(len(toks))]
        assert ctx.sampled_tokens(0, len(toks)).tolist() == one_by_one
        assert ctx.sampled_tokens(3, 4).tolist() == one_by_one[3:7]
        assert ctx.sampled_tokens(0, 8).dtype == np.int64
    finally:
        ctx.set_backend_greedy(False)
        eng.reset()


@pytest.mark.parametrize("on", [True, False])
def test_a_block_larger_than_the_batch_is_refused(tiny_engine, bulk, on):
    bulk(on)
    b = tiny_engine.target_batch
    b.clear()
    with pytest.raises(DecodeError, match="batch is full"):
        b.add_tokens([5] * (tiny_engine.target_ctx.n_batch + 1), 0, 0, None)
    b.clear()


@pytest.mark.parametrize("mode, budget", [("chain", 7), ("tree", 8), ("auto", 7)])
def test_generations_are_the_same_either_way(tiny_engine, bulk, mode, budget):
    toks = tiny_engine.tokenize(PROMPT)
    s = GenerationSettings(mode=mode, budget=budget, max_tokens=40, stop_at_eog=False)
    runs = {}
    for on in (True, False):
        bulk(on)
        tiny_engine.reset()
        res = tiny_engine.generate(toks, s)
        # auto picks each step from the costs it measures as it runs, and the two ways cost the host
        # differently: its steps may differ between the runs (it failed 2 of 8 runs on a 2-core
        # machine when they were compared), its tokens may not
        steps = None if mode == "auto" else [(st.drafted, st.accepted) for st in res.steps]
        runs[on] = (res.tokens, steps)
    assert runs[True] == runs[False]
    assert runs[True][0]


# --- patch 0026: a tree verify's entries in one call ----------------------------------------------
def _tree_batch(eng, tokens, positions, sets, outputs, one_call: bool) -> np.ndarray:
    """The target's logits of the output rows of one tree-shaped batch, filled either way."""

    def fill(b) -> None:
        if one_call:
            assert b.add_token_sets(tokens, positions, sets, outputs) == 0
        else:
            for t, p, q, o in zip(tokens, positions, sets, outputs, strict=True):
                b.add_token_seqs(t, p, q, o)

    return _logits_of(eng, fill, len(tokens), sum(outputs))


def test_the_engine_carries_the_tree_patch_and_binds_it(bulk):
    assert llama_ffi.has_patch(TREE_PATCH), "this engine build lacks patch 0026 (make engine)"
    bulk(True)
    assert llama_ffi.token_sets_api() is not None
    bulk(False)
    assert llama_ffi.token_sets_api() is None


def test_the_tree_patch_has_a_switch_of_its_own(bulk, monkeypatch):
    bulk(True)
    monkeypatch.setenv("DFLASH_TREE_BATCH", "0")
    llama_ffi.token_sets_api.cache_clear()
    assert llama_ffi.token_sets_api() is None and llama_ffi.bulk_batch_api() is not None
    monkeypatch.delenv("DFLASH_TREE_BATCH")
    llama_ffi.token_sets_api.cache_clear()
    assert llama_ffi.token_sets_api() is not None


@pytest.mark.parametrize("on", [True, False])
def test_a_tree_added_in_one_call_is_the_tree_added_entry_by_entry(tiny_engine, bulk, on):
    """A prompt in both sequences, then two branches of two nodes each (one per sequence), outputs on
    the branches only: the same logits bit for bit, whichever way the batch was filled; and the
    branches differ (each attends to its own sequence only)."""
    eng = tiny_engine
    assert eng.tree_max_nodes >= 2
    bulk(on)
    toks = eng.tokenize(PROMPT)[:8]
    n = len(toks)
    tokens = [*toks, 11, 12, 13, 14]
    positions = [*range(n), n, n + 1, n, n + 1]
    sets = [[0, 1]] * n + [[0], [0], [1], [1]]
    outputs = [False] * (n - 1) + [True] * 5
    one_call = _tree_batch(eng, tokens, positions, sets, outputs, one_call=True)
    by_entry = _tree_batch(eng, tokens, positions, sets, outputs, one_call=False)
    assert one_call.shape == (5, eng.target_ctx.n_vocab)
    assert np.array_equal(one_call, by_entry)
    # row 1 (token 11 after the prompt, sequence 0) and row 3 (token 13, sequence 1) differ
    assert not np.array_equal(one_call[1], one_call[3])


@pytest.mark.parametrize("on", [True, False])
def test_a_tree_batch_with_an_empty_set_or_too_many_entries_is_refused(tiny_engine, bulk, on):
    bulk(on)
    b = tiny_engine.target_batch
    b.clear()
    with pytest.raises(DecodeError):
        b.add_token_sets([5, 6], [0, 1], [[0], []], [False, True])
    b.clear()
    n = tiny_engine.target_ctx.n_batch + 1
    with pytest.raises(DecodeError, match="batch is full"):
        b.add_token_sets([5] * n, range(n), [[0]] * n, [False] * n)
    b.clear()


@pytest.mark.parametrize("budget", [4, 15])
def test_tree_generations_are_the_same_either_way(tiny_engine, bulk, budget):
    """Tree steps fill their verify through patch 0026 or entry by entry: the same tokens and steps."""
    toks = tiny_engine.tokenize(PROMPT)
    s = GenerationSettings(mode="tree", budget=budget, max_tokens=32, stop_at_eog=False)
    runs = {}
    for on in (True, False):
        bulk(on)
        tiny_engine.reset()
        res = tiny_engine.generate(toks, s)
        runs[on] = (res.tokens, [(st.drafted, st.accepted, st.committed) for st in res.steps])
    assert runs[True] == runs[False]
    assert any(d > 1 for d, _, _ in runs[True][1])
