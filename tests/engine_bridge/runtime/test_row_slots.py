"""Every verify width keeps its graph (patch 0017, issues 28 and 29).

llama.cpp reuses a graph only for the shape it last ran in a slot. A target that alternates widths
(auto's probes of other budgets, the first verify after a prompt, a chain cut short) built and
allocated its graph again at every change: on an H200 a step whose budget changed took 4.5 ms where
one that reused its graph took 2.4 (docs/benchmarks.md, "Where auto's time goes, step by step").
With patch 0017 the engine gives each row count up to 16, for batches whose rows are all outputs, a
slot and a scheduler of its own (``llama_set_row_slots``). These tests run the default pair's target
on the CPU engine with the slots on and off: the same logits and tokens either way, and the reuse.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine_bridge.runtime import engine as engine_mod
from engine_bridge.runtime import llama_ffi
from engine_bridge.runtime.config import GenerationSettings
from engine_bridge.runtime.native import Batch
from default_pair import load_default_pair

PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a short docstring."
WIDTHS = (1, 8, 3, 8, 16, 1, 3, 16, 8, 3)  # AR steps, verifies of chain 7, 2 and 15, and a chain cut short


def _load(monkeypatch, slots: str | None = None):
    monkeypatch.setenv(engine_mod.ONE_ROW_SCHED_ENV, "1")
    if slots is None:
        monkeypatch.delenv(engine_mod.ROW_SLOTS_ENV, raising=False)
    else:
        monkeypatch.setenv(engine_mod.ROW_SLOTS_ENV, slots)
    return load_default_pair()


def _alternate(eng) -> tuple[int, list[np.ndarray]]:
    """A prompt, then decodes of WIDTHS rows each (every row an output, as a verify): the graphs
    reused over them, and every row's logits."""
    ctx = eng.target_ctx
    ctx.clear()
    toks = eng.tokenize_chat([{"role": "user", "content": PROMPT}])
    b = Batch(ctx)
    for i, t in enumerate(toks):
        b.add_token(t, i, 0, i == len(toks) - 1)
    ctx.process(b)
    pos, nxt, out = len(toks), 2, []
    before = ctx.graph_reuses()
    for rows in WIDTHS:
        b.clear()
        for i in range(rows):
            b.add_token(nxt + i, pos + i, 0, True)
        ctx.process(b)
        out.append(ctx.logits(rows).copy())
        pos, nxt = pos + rows, nxt + rows
    return ctx.graph_reuses() - before, out


def test_each_width_keeps_its_graph_with_the_same_logits(monkeypatch):
    assert llama_ffi.has_patch("0017-row-slots.patch"), "the engine was built without patch 0017"
    eng = _load(monkeypatch)
    try:
        assert eng.row_slots == engine_mod.ROW_SLOTS == 16  # a target paired with a drafter gets them
        reused_on, logits_on = _alternate(eng)
        assert llama_ffi.set_row_slots(eng.target_ctx.ptr, 1)  # patch 0009's one-row slot only
        reused_one, logits_one = _alternate(eng)
    finally:
        eng.close()
    widths = set(WIDTHS)
    # on: only the first decode of each width builds its graph
    assert reused_on == len(WIDTHS) - len(widths), reused_on
    # one-row slot only: the one-row decodes keep theirs (the second one reuses), every other width
    # change builds its graph again (no two decodes of the same width follow each other here)
    assert reused_one == WIDTHS.count(1) - 1, reused_one
    for a, b in zip(logits_on, logits_one, strict=True):
        assert np.array_equal(a, b)  # the same graph on another scheduler: the same numbers


def test_the_row_count_comes_from_the_environment_and_tokens_do_not_change(monkeypatch):
    runs = {}
    for slots in ("0", "16"):
        eng = _load(monkeypatch, slots)
        try:
            assert eng.row_slots == int(slots)
            assert eng.one_row_graph  # 0 leaves patch 0009's one-row slot as it was
            toks = eng.tokenize_chat([{"role": "user", "content": PROMPT}])
            runs[slots] = [
                eng.generate(toks, GenerationSettings(mode=m, budget=b, max_tokens=32)).tokens
                for m, b in (("ar", 1), ("chain", 4), ("chain", 7), ("tree", 8))
            ]
        finally:
            eng.close()
    assert runs["0"] == runs["16"]


def test_a_bad_row_count_is_refused_with_its_name(monkeypatch):
    monkeypatch.setenv(engine_mod.ROW_SLOTS_ENV, "many")
    with pytest.raises(ValueError, match="DFLASH_ROW_SLOTS"):
        engine_mod.row_slots_wanted()
    monkeypatch.setenv(engine_mod.ROW_SLOTS_ENV, "99")
    assert engine_mod.row_slots_wanted() == 16  # clamped to the widest verify
