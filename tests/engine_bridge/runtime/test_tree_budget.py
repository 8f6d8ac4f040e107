"""A bigger tree budget never accepts less on the same context (issue 15).

On the shipped pair's held-out prompts (8 x 128 tokens, greedy, CPU) the mean commit length read
4.43 at budget 32 and 3.84 at 64. The trees are not at fault: at every step the budget-64 tree's
first 32 nodes are the budget-32 tree, and on the same context it accepts at least as much. The
runs commit different texts: the q8_0 target's batched verify rows differ slightly with the batch
size, so at near-ties (top-2 margins 0.02-0.05) the 33-row and 65-row verifies pick different
tokens, and the texts after such a parting are not equally easy to draft (docs/benchmarks.md,
"Why budget 64 committed less than 32"). These tests hold the property that does hold, on the real
engine: containment, and "accepts at least as much" measured against what the verify accepted.
"""

from __future__ import annotations

import json

import pytest

from engine_bridge.models import demo
from engine_bridge.runtime import tree as tree_mod
from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.common.resources import resource

PAIR = demo.shipped_pair()
N_PROMPTS, MAX_TOKENS = 3, 48


@pytest.fixture(scope="module")
def engine():
    from engine_bridge.runtime.engine import Engine
    from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT

    assert PAIR is not None, "the reference pair must ship in resources/models/"
    target, draft = PAIR
    eng = Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=1, max_tree_nodes=64),
        preflight=PAIR_PREFLIGHT,
    )
    yield eng
    eng.close()


def _prompts() -> list[str]:
    lines = resource("models", "prompts.jsonl").read_text().splitlines()
    return [json.loads(x)["prompt"] for x in lines if x.strip()][:N_PROMPTS]


def _step_tree(engine, cand, logp, budget: int) -> tree_mod.DraftTree:
    """The tree a tree step of ``budget`` builds from these candidates (generation._tree_step)."""
    cap = min(engine.tree_max_nodes, tree_mod.max_leaves(budget, cand.shape[0]))
    return tree_mod.build_tree(cand, logp, budget, chain_len=tree_mod.seeded_chain_len(budget), leaf_cap=cap)


def _paths(tree: tree_mod.DraftTree) -> set[tuple[int, ...]]:
    out = set()
    for i in range(len(tree)):
        path, n = [], i
        while n >= 0:
            path.append(tree.tokens[n])
            n = tree.parent[n]
        out.add(tuple(reversed(path)))
    return out


def _accepted(tree: tree_mod.DraftTree, truth: list[int]) -> int:
    """How deep the target's own continuation runs down the tree."""
    node, n = -1, 0
    for tok in truth:
        node = tree.children.get(node, {}).get(int(tok))
        if node is None:
            break
        n += 1
    return n


@pytest.mark.parametrize("budget", [32, 64])
def test_budget_64_tree_contains_the_budget_32_tree_and_accepts_at_least_as_much(engine, monkeypatch, budget):
    recorded = []
    build = tree_mod.build_tree

    def spy(cand, logp, b, chain_len=None, leaf_cap=None):
        tree = build(cand, logp, b, chain_len=chain_len, leaf_cap=leaf_cap)
        recorded.append((cand.copy(), logp.copy(), tree, b))
        return tree

    monkeypatch.setattr(tree_mod, "build_tree", spy)
    small, big = 32, 64  # the budgets; the run verifies one of them
    gained = total_small = total_big = 0
    for prompt in _prompts():
        engine.reset()
        recorded.clear()
        r = engine.generate(prompt, GenerationSettings(mode="tree", budget=budget, max_tokens=MAX_TOKENS))
        steps = [s for s in r.steps if s.tree_nodes]
        assert len(steps) == len(recorded) > 3
        n_prompt = len(engine.tokenize(prompt))
        for st, (cand, logp, used, b_used) in zip(steps, recorded):
            truth = r.tokens[st.pos - (n_prompt - 1) :]  # what the target committed from here
            # walking the target's continuation down the step's tree gives what the verify accepted
            assert _accepted(used, truth) == st.path_len, st
            t_small, t_big = _step_tree(engine, cand, logp, small), _step_tree(engine, cand, logp, big)
            # rebuilt as the step built it: its budget less the rows of the last step's unwritten nodes
            assert budget - 16 < b_used <= budget
            same = _step_tree(engine, cand, logp, b_used)
            assert (same.tokens, same.parent) == (used.tokens, used.parent)
            # best-first: the bigger tree grows the smaller one (same seeded chain: block rows <= 16)
            if min(tree_mod.seeded_chain_len(small), cand.shape[0]) == min(
                tree_mod.seeded_chain_len(big), cand.shape[0]
            ):
                assert t_big.tokens[:small] == t_small.tokens and t_big.parent[:small] == t_small.parent
            assert _paths(t_small) <= _paths(t_big)
            a_small, a_big = _accepted(t_small, truth), _accepted(t_big, truth)
            assert a_big >= a_small, (st.step, a_small, a_big)
            gained += a_big > a_small
            total_small += a_small
            total_big += a_big
    # the property is not vacuous on this pair: the runner-up branches of the bigger tree do hit
    assert gained > 0 and total_big > total_small, (total_small, total_big)
