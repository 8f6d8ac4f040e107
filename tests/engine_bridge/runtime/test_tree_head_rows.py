"""A tree step's whole drafter block keeps one graph (issue 28).

A tree step reads as many drafts as its depth, ``budget - unwritten``, so the count follows the last
step's commit. Where the drafter decodes whole blocks (a GPU) and runs its head on the drafts read
(patch 0015), the block's graph changed shape from step to step; on the H100 (sitting s74) the CUDA
graph cache, keyed by a graph's first and last nodes, did not see the change, and one block in ten
re-captured its graph or ran without one. The engine now runs the head on the budget's drafts
every step (``drafter.tree_head_rows``) and reads the first ``depth``. These tests force whole
blocks on the CPU engine (llama.cpp reuses a graph there only when its outputs match, so the count
of reuses shows the one shape) and compare with the old rule (``DFLASH_TREE_HEAD_ROWS=depth``).
"""

from __future__ import annotations

import pytest

from engine_bridge.runtime import drafter as drafter_mod
from engine_bridge.runtime.config import GenerationSettings
from default_pair import CODE_AND_MATH_PROMPTS, load_default_pair

PROMPTS = CODE_AND_MATH_PROMPTS


@pytest.fixture(scope="module")
def engine():
    eng = load_default_pair()
    yield eng
    eng.close()


def _run(eng, monkeypatch, rule: str, prompt: str, budget: int = 15):
    monkeypatch.setattr(eng.drafter, "full_block", True)  # a GPU drafter's whole blocks
    monkeypatch.setenv(drafter_mod.TREE_HEAD_ROWS_ENV, rule)
    toks = eng.tokenize_chat([{"role": "user", "content": prompt}])
    before = eng.drafter.ctx.graph_reuses()
    res = eng.generate(toks, GenerationSettings(mode="tree", budget=budget, max_tokens=64))
    blocks = sum(1 for s in res.steps if s.drafted)
    return res, blocks, eng.drafter.ctx.graph_reuses() - before


def test_the_budgets_head_rows_keep_the_blocks_graph_and_the_targets_tokens(engine, monkeypatch):
    for prompt in PROMPTS:
        old, blocks_old, reused_old = _run(engine, monkeypatch, "depth", prompt)
        new, blocks_new, reused_new = _run(engine, monkeypatch, "budget", prompt)
        assert new.tokens == old.tokens, prompt  # the target decides every token either way
        depths = {s.tree_depth for s in old.steps if s.drafted}
        assert len(depths) > 1, "every tree step had one depth: nothing to measure"
        # a block and an inject a step, with a scheduler each (patch 0008): with one head shape the
        # block's graph is reused at every step but the first and those crossing a KV-size step
        # (llama.cpp pads the cells a graph attends over to 256); the depth rule rebuilt it whenever
        # the depth changed
        assert reused_new - reused_old >= len(depths) - 1, (prompt, depths, reused_old, reused_new)
        assert reused_new >= blocks_new - 4, (prompt, blocks_new, reused_new)


def test_the_head_rows_follow_the_budget_and_the_switch():
    assert drafter_mod.tree_head_rows(15, 15) == 15
    assert drafter_mod.tree_head_rows(31, 15) == 15  # at most a block's drafts
    assert drafter_mod.tree_head_rows(5, 15) == 5


def test_depth_restores_the_old_rule(monkeypatch):
    monkeypatch.setenv(drafter_mod.TREE_HEAD_ROWS_ENV, "depth")
    assert drafter_mod.tree_head_rows(15, 15) == 0
