"""Tree verification (DDTree): construction, ancestor masks, losslessness, and its statistics."""

from __future__ import annotations

import numpy as np
import pytest

from engine_bridge.runtime.config import EngineConfig, GenerationSettings
from engine_bridge.runtime.engine import Engine
from engine_bridge.models.pair_preflight import PAIR_PREFLIGHT
from engine_bridge.runtime import tree as tree_mod
from engine_bridge.runtime.tree import build_tree, top_candidates

from engine_corpus import LONG_PROMPT, PROMPTS, assert_lossless


def _candidates(n_pos=6, k=3, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n_pos, 50)).astype(np.float32) * 3
    return logits, *top_candidates(logits, k)


def test_top_candidates_are_sorted_log_probs():
    logits, tok, lp = _candidates()
    assert (tok[:, 0] == logits.argmax(axis=1)).all()
    assert (np.diff(lp, axis=1) <= 0).all()
    full = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    assert np.allclose(np.take_along_axis(full, tok, axis=1), lp, atol=1e-5)


@pytest.mark.parametrize("budget", [1, 3, 6, 10, 18])
def test_tree_shape(budget):
    logits, tok, lp = _candidates()
    tree = build_tree(tok, lp, budget, chain_len=(budget + 1) // 2)
    assert len(tree) == budget
    # the greedy chain is inside the tree to the seeded depth
    node = -1
    for d in range(min((budget + 1) // 2, 6)):
        node = tree.children[node][int(tok[d, 0])]
        assert tree.depth[node] == d
    # every node's token is one of its position's candidates; children are distinct tokens
    for i, t in enumerate(tree.tokens):
        assert t in tok[tree.depth[i]]
    sets, root = tree.leaf_sets()
    leaves = tree.leaves()
    assert root == list(range(len(leaves)))
    for i in range(len(tree)):
        below = {s for s, leaf in enumerate(leaves) if _is_ancestor(tree, i, leaf)}
        assert set(sets[i]) == below


def _is_ancestor(tree, a, b):
    while b >= 0:
        if b == a:
            return True
        b = tree.parent[b]
    return False


def test_best_first_prefers_likely_branches():
    # position 0 has two near-equal candidates, later positions are confident
    logp = np.log(np.array([[0.5, 0.49, 0.01], [0.98, 0.01, 0.01], [0.98, 0.01, 0.01]]))
    tok = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    tree = build_tree(tok, logp, 6, chain_len=1)
    # the runner-up at position 0 and its confident continuation beat the unlikely siblings
    assert 2 in tree.children[-1]
    second = tree.children[-1][2]
    assert 4 in tree.children[second]
    assert 3 not in tree.children[-1]


@pytest.mark.parametrize("budget", [4, 8, 16, 32, 64])
def test_tree_is_lossless(tiny_engine, budget):
    eng = tiny_engine
    for p in PROMPTS + [LONG_PROMPT]:
        eng.reset()
        ar = eng.generate(p, GenerationSettings(mode="ar", max_tokens=24))
        eng.reset()
        tr = eng.generate(p, GenerationSettings(mode="tree", budget=budget, max_tokens=24))
        assert_lossless(eng, p, ar.tokens, tr.tokens, f"tree budget {budget}, prompt {p[:30]!r}")
        assert tr.summary.verify_mode == "tree"
        assert tr.steps[0].drafted == 0  # the first token: the prefill's
        for st in tr.steps[1:-1]:
            assert 0 < st.tree_nodes <= budget
            assert st.tree_depth <= min(budget, eng.drafter.max_draft)
            assert st.path_len == st.accepted <= st.tree_depth
            assert st.committed == st.accepted + 1


def test_tree_accepts_more_than_chain_and_grows_with_budget(tiny_engine):
    eng = tiny_engine

    def commit_len(mode, budget):
        gen = tot = 0
        for p in PROMPTS[:6]:
            eng.reset()
            r = eng.generate(p, GenerationSettings(mode=mode, budget=budget, max_tokens=24))
            gen += r.summary.n_generated
            tot += r.summary.n_steps
        return gen / tot

    chain = commit_len("chain", 15)
    tree = [commit_len("tree", b) for b in (2, 8, 32)]
    assert tree[-1] > chain, f"tree {tree} vs chain {chain}"
    assert tree[1] > tree[0], f"tree commit did not rise with the budget: {tree}"
    # this synthetic drafter's trees saturate by budget 8; past that the plateau may move by a
    # step or two of ~80 between backends (on CUDA: 1.85 at 8, 1.78 at 32)
    assert tree[2] >= tree[1] - 0.1, f"tree commit fell with the budget: {tree}"


def test_tree_with_sampling_top_k_one_is_exact(tiny_engine):
    for p in PROMPTS[:4]:
        tiny_engine.reset()
        ar = tiny_engine.generate(p, GenerationSettings(mode="ar", temperature=0.8, top_k=1, max_tokens=20))
        tiny_engine.reset()
        tr = tiny_engine.generate(
            p, GenerationSettings(mode="tree", budget=16, temperature=0.8, top_k=1, max_tokens=20)
        )
        assert_lossless(tiny_engine, p, ar.tokens, tr.tokens, "tree, top-k 1 sampling")


def test_multi_turn_after_tree_steps(tiny_engine):
    eng = tiny_engine
    eng.reset()
    first = eng.generate("Hello world", GenerationSettings(mode="tree", budget=16, max_tokens=16))
    conv = eng.tokenize("Hello world") + first.tokens + eng.tokenize(" next", add_special=False)
    cont = eng.generate(conv, GenerationSettings(mode="tree", budget=16, max_tokens=16))
    assert cont.summary.n_prompt_reused > 0
    eng.reset()
    ref = eng.generate(conv, GenerationSettings(mode="ar", max_tokens=16))
    assert_lossless(eng, conv, ref.tokens, cont.tokens, "tree follow-up turn")


def test_node_budget_clamped_to_context_capacity(tiny_pair):
    target, draft = tiny_pair
    with Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=512, max_tree_nodes=8), preflight=PAIR_PREFLIGHT
    ) as eng:
        assert eng.tree_max_nodes == 8
        r = eng.generate("Hello", GenerationSettings(mode="tree", budget=40, max_tokens=12))
        assert r.summary.budget_effective == 8 and "clamped" in r.summary.budget_note
        assert max(s.tree_nodes for s in r.steps) <= 8


def test_without_sequences_tree_falls_back_to_chain(tiny_pair):
    target, draft = tiny_pair
    with Engine.load(
        EngineConfig(target=target, draft=draft, n_ctx=512, max_tree_nodes=1), preflight=PAIR_PREFLIGHT
    ) as eng:
        assert not eng.tree_capable
        r = eng.generate("Hello", GenerationSettings(mode="tree", budget=8, max_tokens=12))
        assert r.summary.verify_mode == "chain" and "verified as a chain" in r.summary.budget_note
        eng.reset()
        assert r.tokens == eng.generate("Hello", GenerationSettings(mode="ar", max_tokens=12)).tokens


def test_rank_candidates_matches_host_scoring_over_the_same_candidates():
    rng = np.random.default_rng(3)
    logits = (rng.standard_normal((5, 300)) * 4).astype(np.float32)
    # what a backend top-32 sampler returns: the 32 best ids and logits, in no particular order
    ids = np.argpartition(-logits, 32, axis=1)[:, :32]
    ids = rng.permuted(ids, axis=1).astype(np.int32)
    raw = np.take_along_axis(logits, ids, axis=1)
    tok, lp = tree_mod.rank_candidates(ids, raw, 4)
    ref_tok, _ = top_candidates(logits.copy(), 4)
    assert (tok == ref_tok).all()
    sub = raw - np.log(np.exp(raw.astype(np.float64)).sum(axis=1, keepdims=True))
    assert np.allclose(lp, np.sort(sub, axis=1)[:, ::-1][:, :4], atol=1e-5)
    assert (np.diff(lp, axis=1) <= 0).all()


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_leaf_cap_bounds_branches_not_depth(cap):
    _, tok, lp = _candidates(n_pos=6, k=4, seed=1)
    tree = build_tree(tok, lp, 12, chain_len=2, leaf_cap=cap)
    assert tree.n_leaves == len(tree.leaves()) <= cap
    assert len(tree) == 12 or tree.max_depth == 6  # the budget goes into depth instead
    free = build_tree(tok, lp, 12, chain_len=2)
    assert free.n_leaves == len(free.leaves()) > cap


def test_max_leaves_holds_for_seeded_trees():
    for seed in range(5):
        _, tok, lp = _candidates(n_pos=15, k=4, seed=seed)
        for budget in (1, 2, 4, 7, 8, 16, 32, 64):
            tree = build_tree(tok, lp, budget, chain_len=tree_mod.seeded_chain_len(budget))
            assert tree.n_leaves == len(tree.leaves()) <= tree_mod.max_leaves(budget, 15)


def test_a_large_budget_seeds_a_short_chain_and_spends_the_rest_best_first():
    # budgets up to 8 keep half the budget as the chain; larger ones stop at SEEDED_CHAIN_MAX (4),
    # the best of chains of 2-6, 8 and 11 on the validation split at budget 15
    assert [tree_mod.seeded_chain_len(b) for b in (1, 2, 7, 8, 9, 15, 32)] == [1, 1, 4, 4, 4, 4, 4]
    _, tok, lp = _candidates(n_pos=15, k=4, seed=3)
    tree = build_tree(tok, lp, 15, chain_len=tree_mod.seeded_chain_len(15))
    node = -1
    for d in range(4):  # the greedy chain to the seeded depth
        node = tree.children[node][int(tok[d, 0])]
    assert len(tree) == 15
    # with 11 nodes placed best-first, branches may reach the engine's sequence count for the budget
    assert tree.n_leaves <= tree_mod.max_leaves(15, 15) == 12


def test_backend_top_k_draft_equals_host_scoring(tiny_engine):
    """The drafter's top-K from the device (a top-k sampler in the graph) and from host logits."""
    eng = tiny_engine
    eng.reset()
    eng.generate("The history of the", GenerationSettings(mode="chain", budget=4, max_tokens=8))
    d, pos, last = eng.drafter, len(eng.kv), eng.kv[-1]
    assert d.ctx.set_backend_top_k(0) is False
    d.ctx.set_backend_greedy(False)
    host_tok, host_lp = d.draft_candidates(last, pos, 6, 4)  # full logits read on the host
    assert d.ctx.set_backend_top_k(32) and d.ctx.backend_top_k == 32
    dev_tok, dev_lp = d.draft_candidates(last, pos, 6, 4)
    assert not d.ctx.set_backend_top_k(0) and d.ctx.backend_top_k == 0
    assert (dev_tok == host_tok).all()
    # normalised over 32 candidates instead of the vocabulary: each row moves up by the log of the
    # mass outside them (large for this flat synthetic drafter), the same for all its candidates
    shift = dev_lp - host_lp
    assert (shift >= -1e-4).all()
    assert np.allclose(shift, shift[:, :1], atol=1e-4)


def test_every_leaf_sequence_holds_the_prefix_during_a_run_and_only_sequence_0_after(tiny_engine):
    from engine_bridge.runtime.llama_ffi import C

    eng = tiny_engine
    mem = eng.target_ctx.mem
    seen = []

    def check(step):
        n = len(eng.kv)
        seqs = [s for s in range(eng.tree_max_nodes) if C.llama_memory_seq_pos_max(mem, s) >= 0]
        seen.append(len(seqs))
        for s in seqs:  # the committed prefix, no branch left over, in every leaf sequence
            assert C.llama_memory_seq_pos_min(mem, s) == 0
            assert C.llama_memory_seq_pos_max(mem, s) == n - 1, (step.step, s)

    eng.reset()
    r = eng.generate(LONG_PROMPT, GenerationSettings(mode="tree", budget=8, max_tokens=40), on_step=check)
    assert len(r.steps) > 3
    assert seen[0] == tree_mod.max_leaves(8, eng.drafter.max_draft)
    # the last steps have fewer block rows, a shorter seeded chain, room for more branches
    assert seen[0] < max(seen) <= 8
    assert C.llama_memory_seq_pos_max(mem, 0) == len(eng.kv) - 1
    assert all(C.llama_memory_seq_pos_max(mem, s) < 0 for s in range(1, eng.tree_max_nodes))


def test_tree_with_backend_top_k_is_lossless(tiny_engine, monkeypatch):
    from engine_bridge.runtime import drafter as drafter_mod

    monkeypatch.setattr(drafter_mod, "TREE_TOP_K_ON", "backend")
    eng = tiny_engine
    for p in PROMPTS[:5]:
        eng.reset()
        ar = eng.generate(p, GenerationSettings(mode="ar", max_tokens=24))
        eng.reset()
        tr = eng.generate(p, GenerationSettings(mode="tree", budget=8, max_tokens=24))
        assert eng.drafter.ctx.backend_top_k == drafter_mod.BACKEND_TOP_K
        assert_lossless(eng, p, ar.tokens, tr.tokens, f"tree with backend top-k, prompt {p[:30]!r}")
    monkeypatch.setattr(drafter_mod, "TREE_TOP_K_ON", "host")
    eng.reset()
    eng.generate(PROMPTS[0], GenerationSettings(mode="tree", budget=8, max_tokens=4))
    assert eng.drafter.ctx.backend_top_k == 0


def test_tree_verify_argmax_on_the_backend_is_lossless_and_switchable(tiny_engine, monkeypatch):
    # DFLASH_TREE_ARGMAX=backend gives every leaf sequence a greedy sampler (one argmax over all
    # rows since patch 0006) instead of reading the target's logits on the host; same tokens
    from engine_bridge.runtime import generation as gen_mod

    eng = tiny_engine
    monkeypatch.setenv(gen_mod.TREE_ARGMAX_ENV, "backend")
    for p in PROMPTS[:3]:
        eng.reset()
        ar = eng.generate(p, GenerationSettings(mode="ar", max_tokens=24))
        eng.reset()
        tr = eng.generate(p, GenerationSettings(mode="tree", budget=8, max_tokens=24))
        assert eng.target_ctx.backend_greedy
        assert_lossless(eng, p, ar.tokens, tr.tokens, f"tree with backend argmax, prompt {p[:30]!r}")
    monkeypatch.setenv(gen_mod.TREE_ARGMAX_ENV, "host")
    eng.reset()
    eng.generate(PROMPTS[0], GenerationSettings(mode="tree", budget=8, max_tokens=4))
    assert not eng.target_ctx.backend_greedy
    monkeypatch.setenv(gen_mod.TREE_ARGMAX_ENV, "device")
    with pytest.raises(ValueError, match="DFLASH_TREE_ARGMAX"):
        gen_mod.tree_argmax_on()


def test_the_seed_cap_comes_from_the_environment_for_a_b_runs(monkeypatch):
    # DFLASH_TREE_SEED_MAX puts the rule before (half the budget) back in one process, for the GPU's
    # old-against-new comparison; a value that is not a positive integer is refused by name
    monkeypatch.setenv(tree_mod.SEEDED_CHAIN_MAX_ENV, "99")
    assert [tree_mod.seeded_chain_len(b) for b in (7, 15, 32)] == [4, 8, 16]
    monkeypatch.setenv(tree_mod.SEEDED_CHAIN_MAX_ENV, "")
    assert tree_mod.seeded_chain_len(15) == tree_mod.SEEDED_CHAIN_MAX
    for bad in ("0", "-2", "four"):
        monkeypatch.setenv(tree_mod.SEEDED_CHAIN_MAX_ENV, bad)
        with pytest.raises(ValueError, match="DFLASH_TREE_SEED_MAX"):
            tree_mod.seeded_chain_len(15)


def test_candidates_past_the_useful_top_k_never_enter_a_seeded_tree():
    # flat scores, so that deep ranks are as likely as any: the bound must hold for every shape
    for seed in range(6):
        rng = np.random.default_rng(seed)
        for n_pos in (1, 3, 8, 15):
            tok = np.stack([rng.permutation(1000)[:32] for _ in range(n_pos)])
            lp = np.sort(np.log(rng.dirichlet(np.full(32, 0.3 + seed), n_pos)), axis=1)[:, ::-1].copy()
            for budget in range(1, 33):
                chain = tree_mod.seeded_chain_len(budget)
                k = tree_mod.useful_top_k(budget, n_pos, 32)
                full = build_tree(tok, lp, budget, chain_len=chain)
                cut = build_tree(tok[:, :k], lp[:, :k], budget, chain_len=chain)
                assert (cut.tokens, cut.parent) == (full.tokens, full.parent), (seed, n_pos, budget, k)
                if k > 1 and seed == 5 and n_pos == 15:
                    # near-uniform scores, the widest trees: one candidate fewer than the bound changes them
                    short = build_tree(tok[:, : k - 1], lp[:, : k - 1], budget, chain_len=chain)
                    assert (short.tokens, short.parent) != (full.tokens, full.parent), (n_pos, budget, k)
    # the default pair's budgets: 4 candidates cover a tree of 7, 8 are read at 15 (of 12 usable)
    assert [tree_mod.useful_top_k(b, 15, 8) for b in (1, 5, 7, 15, 32)] == [1, 3, 4, 8, 8]
