"""A verify width keeps the graphs of two KV lengths (patch 0019; issue 28).

llama.cpp pads the KV cells a graph attends over to steps of 256 and reuses a graph only at the
length it was built for. A request whose context passed 256 cells left its verify graph at 512, and
the next request, back under 256 after the reset, built it again (on an H200 ~1.2-1.4 ms a time,
docs/benchmarks.md, "One CUDA graph per KV length (patch 0018)"). Patch 0019 gives each row count two
graph slots, so the graph of the last length stays allocated (on an H200 the rebuilt steps went from
2-25 % to 0-3 %: docs/benchmarks.md, "Patch 0019 (two graph slots per row count) on an H200"). An
engine built before it skips these tests (`make engine` rebuilds it).
"""

from __future__ import annotations

import numpy as np
import pytest

from engine_bridge.runtime import engine as engine_mod
from engine_bridge.runtime import llama_ffi
from engine_bridge.runtime.native import Batch
from default_pair import load_default_pair

WAYS_ENV = "DFLASH_ROW_SLOT_WAYS"
LONG, SHORT = 250, 100  # verifies at these positions attend over 512 and 256 cells
ROWS = 8  # a chain-7 verify

pytestmark = pytest.mark.skipif(
    not llama_ffi.has_patch("0019-row-slot-ways.patch"),
    reason="this engine was built without patch 0019: `make engine` rebuilds it with packaging/patches/",
)


def _load(monkeypatch):
    monkeypatch.delenv(engine_mod.ROW_SLOTS_ENV, raising=False)
    return load_default_pair()


def _fill(ctx, b: Batch, start: int, end: int) -> None:
    """Positions start..end-1 decoded as a prompt (one output: not a row slot's batch)."""
    b.clear()
    for p in range(start, end):
        b.add_token(17 + p % 50, p, 0, p == end - 1)
    ctx.process(b)


def _verify(ctx, b: Batch, pos: int) -> np.ndarray:
    b.clear()
    for i in range(ROWS):
        b.add_token(300 + i, pos + i, 0, True)
    ctx.process(b)
    return ctx.logits(ROWS).copy()


def _long_short(eng, ways: str, monkeypatch) -> tuple[list[int], list[np.ndarray]]:
    """Verifies at a long context (512 cells) and a short one (256), three times over, the cache cut
    back in between as a new request's prompt does: the graphs reused at each verify, the logits."""
    monkeypatch.setenv(WAYS_ENV, ways)
    ctx = eng.target_ctx
    assert llama_ffi.set_row_slots(ctx.ptr, 16)  # the ways are read here
    ctx.clear()
    b = Batch(ctx)
    _fill(ctx, b, 0, SHORT)
    reused, logits = [], []
    for _ in range(3):
        for pos in (LONG, SHORT):
            ctx.seq_rm(0, SHORT, -1)  # a new request: the shared prefix stays
            if pos > SHORT:
                _fill(ctx, b, SHORT, pos)
            before = ctx.graph_reuses()
            logits.append(_verify(ctx, b, pos))
            reused.append(ctx.graph_reuses() - before)
    return reused, logits


def test_a_verify_back_at_a_length_it_met_reuses_its_graph_with_the_same_logits(monkeypatch):
    eng = _load(monkeypatch)
    try:
        two, logits_two = _long_short(eng, "2", monkeypatch)
        one, logits_one = _long_short(eng, "1", monkeypatch)
    finally:
        eng.close()
    # two ways: the first long and the first short verify build their graphs, every later one reuses
    assert two == [0, 0, 1, 1, 1, 1], two
    # one way (patch 0017 alone): each change of length builds the graph again
    assert one == [0, 0, 0, 0, 0, 0], one
    for a, b in zip(logits_two, logits_one, strict=True):
        assert np.array_equal(a, b)  # the same graph in another slot: the same numbers
