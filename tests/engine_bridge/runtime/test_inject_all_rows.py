"""A chain step that injects every verified row into the drafter and then drops the rejected ones
from its cache (generation.INJECT_ALL_ROWS_ENV, opt-in): the inject keeps one shape, so llama.cpp
keeps its graph from step to step; the tokens and both caches stay what they were. On the real
default pair, through llama.cpp."""

from __future__ import annotations

import pytest

from engine_bridge.bench.suites import load_suite
from engine_bridge.runtime import generation
from engine_bridge.runtime.config import GenerationSettings
from decode_count import count_decodes
from default_pair import load_default_pair


@pytest.fixture(scope="module")
def smol():
    eng = load_default_pair()
    yield eng
    eng.close()


def _runs(eng, monkeypatch, side: str, budget: int, max_tokens: int = 48) -> tuple[list[dict], int, int]:
    """Three GSM8K requests: what each left, and the drafter's graph reuses and its decodes."""
    if side:
        monkeypatch.setenv(generation.INJECT_ALL_ROWS_ENV, side)
    else:
        monkeypatch.delenv(generation.INJECT_ALL_ROWS_ENV, raising=False)
    ctx = eng.drafter.ctx
    decodes = count_decodes(monkeypatch, ctx)
    reuses0 = ctx.graph_reuses()
    seen = []
    for p in load_suite("gsm8k").prompts[:3]:
        eng.reset()
        res = eng.generate(
            p.render(eng.format_chat), GenerationSettings(mode="chain", budget=budget, max_tokens=max_tokens)
        )
        seen.append(
            {
                "tokens": list(res.tokens),
                "steps": [(r.drafted, r.accepted, r.committed) for r in res.steps],
                "target_cache": list(eng.kv),
                "drafter_cells": (ctx.seq_pos_min(0), ctx.seq_pos_max(0)),
                "dft_valid": eng.dft_valid,
            }
        )
    monkeypatch.undo()
    return seen, ctx.graph_reuses() - reuses0, decodes[0]


@pytest.mark.parametrize("budget", [5, 7])
def test_the_inject_keeps_its_graph_and_nothing_else_changes(smol, monkeypatch, budget):
    plain, plain_reuses, plain_decodes = _runs(smol, monkeypatch, "", budget)
    every, every_reuses, every_decodes = _runs(smol, monkeypatch, "1", budget)
    assert every == plain
    # the drafter holds what the target holds (the rejected rows left it), as before
    for run in every:
        assert run["drafter_cells"][1] == len(run["target_cache"]) - 1 == run["dft_valid"] - 1
    # the same decodes (a block and an inject a step), and most injects now keep their graph
    assert every_decodes == plain_decodes
    partial = sum(1 for run in plain for d, _, c in run["steps"] if d and c < d + 1)
    assert partial >= 10  # steps whose inject would have changed shape
    assert every_reuses >= plain_reuses + partial // 2


def test_off_by_default(monkeypatch):
    monkeypatch.delenv(generation.INJECT_ALL_ROWS_ENV, raising=False)
    assert not generation.inject_all_rows()
    monkeypatch.setenv(generation.INJECT_ALL_ROWS_ENV, "1")
    assert generation.inject_all_rows()
