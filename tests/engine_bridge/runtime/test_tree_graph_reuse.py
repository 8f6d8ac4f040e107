"""A tree verify keeps llama.cpp's compute graph from step to step (issue 28).

llama.cpp rebuilds and re-allocates a context's whole graph when a decode's output count differs
from the previous decode's. A tree step's batch leads with the tokens the last step committed but
did not write (kept nodes off its chain); they used to be no outputs, so the output count changed
with every such step and the target's graph was rebuilt (39 of 95 tree-15 steps of three 96-token runs
on CPU). The engine now marks them as outputs too (their logits are not read): the same tokens
come out, and the graph is kept. ``DFLASH_TREE_FIXED_OUTPUTS=0`` restores the old batch, so each
test can also see the rebuilds it guards against.
"""

from __future__ import annotations

import pytest

from engine_bridge.runtime import generation
from engine_bridge.runtime.config import GenerationSettings
from default_pair import load_default_pair

PROMPT = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?"
)


@pytest.fixture(scope="module")
def smol():
    eng = load_default_pair()
    yield eng
    eng.close()


def _run(eng, monkeypatch, fixed: bool, budget: int):
    monkeypatch.setenv(generation.TREE_FIXED_OUTPUTS_ENV, "1" if fixed else "0")
    toks = eng.tokenize_chat([{"role": "user", "content": PROMPT}])
    res = eng.generate(toks, GenerationSettings(mode="tree", budget=budget, max_tokens=96))
    assert res.summary.verify_mode == "tree"
    return res


@pytest.mark.parametrize("budget", [7, 15])
def test_tree_steps_keep_the_targets_graph(smol, monkeypatch, budget):
    old = _run(smol, monkeypatch, False, budget)
    new = _run(smol, monkeypatch, True, budget)
    assert new.tokens == old.tokens  # the extra output rows change nothing that is read
    steps = len(new.steps)
    # with the old batch, steps that followed a kept off-chain node rebuilt the graph: beyond step 0
    # (the prefill's token, no decode of its own) and the first tree step, at least one more (on
    # this prompt at tree 7 only one since the first token comes from the prefill: the second
    # step's; at tree 15, 6 of its 17 decoding steps)
    assert old.summary.graphs_reused <= steps - 3, (old.summary.graphs_reused, steps)
    # now only the first step after prefill and a shorter last step may rebuild it
    assert new.summary.graphs_reused >= steps - 3, (new.summary.graphs_reused, steps)
    assert new.summary.graphs_reused > old.summary.graphs_reused


def test_the_switch_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv(generation.TREE_FIXED_OUTPUTS_ENV, raising=False)
    assert generation.tree_fixed_outputs() is True
    monkeypatch.setenv(generation.TREE_FIXED_OUTPUTS_ENV, "0")
    assert generation.tree_fixed_outputs() is False
