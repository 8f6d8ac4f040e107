"""Per-step records and run summaries obey their invariants."""

from __future__ import annotations

import pytest

from engine_bridge.runtime.config import GenerationSettings
from engine_bridge.runtime.records import PHASES


@pytest.mark.parametrize("mode,budget", [("chain", 1), ("chain", 6), ("chain", 15), ("ar", 1)])
def test_step_invariants(tiny_engine, mode, budget):
    tiny_engine.reset()
    tokens, steps = [], []
    res = tiny_engine.generate(
        "The quick brown fox",
        GenerationSettings(mode=mode, budget=budget, max_tokens=48),
        on_token=tokens.append,
        on_step=steps.append,
    )
    s = res.summary
    # a last step that picked end-of-generation commits nothing and is no commit step
    assert steps == res.steps and sum(1 for st in steps if st.committed) == s.n_steps > 0
    assert [t.token for t in tokens] == res.tokens
    assert sum(st.committed for st in steps) == s.n_generated == len(res.tokens)
    for i, st in enumerate(steps):
        assert st.step == i
        assert 0 <= st.accepted <= st.drafted
        last = i == len(steps) - 1
        assert st.committed == st.accepted + 1 or (last and st.committed <= st.accepted + 1)
        assert sum(st.phases.values()) <= st.wall * (1 + 1e-9) + 1e-9
        assert all(st.phases[p] >= 0 for p in PHASES)
        assert 0 <= st.t_native <= st.wall + 1e-9
        if mode == "ar":
            assert st.drafted == 0 and st.t_draft == 0 and st.t_inject == 0
        else:
            assert st.drafted <= min(budget, tiny_engine.drafter.max_draft)
    assert s.n_drafted == sum(st.drafted for st in steps)
    assert s.n_accepted == sum(st.accepted for st in steps)
    assert s.mean_commit_len == pytest.approx(s.n_generated / s.n_steps)
    # provenance: a token from the drafter is one the target accepted in that step
    for ev in tokens:
        st = steps[ev.step]
        if ev.source == "draft":
            assert st.accepted > 0
    assert sum(ev.source == "draft" for ev in tokens) == s.n_accepted
    assert s.t_first_token > 0 and s.t_prefill >= 0 and s.tok_per_s > 0


def test_budget_is_clamped_and_reported(tiny_engine):
    tiny_engine.reset()
    res = tiny_engine.generate("Hello", GenerationSettings(mode="chain", budget=40, max_tokens=16))
    bmax = tiny_engine.drafter.block_size - 1
    assert res.summary.budget_requested == 40 and res.summary.budget_effective == bmax
    assert "clamped" in res.summary.budget_note
    assert max(s.drafted for s in res.steps) <= bmax


def test_p_min_cuts_drafts(tiny_engine):
    tiny_engine.reset()
    full = tiny_engine.generate("Hello", GenerationSettings(mode="chain", budget=8, max_tokens=24))
    tiny_engine.reset()
    cut = tiny_engine.generate("Hello", GenerationSettings(mode="chain", budget=8, max_tokens=24, p_min=0.999999))
    assert cut.tokens == full.tokens
    assert cut.summary.n_drafted < full.summary.n_drafted


def test_exact_phases_only_add_a_sync_and_never_change_the_tokens(tiny_engine, monkeypatch):
    # the inject ends at a device sync only when exact phase times are asked for (the profiler's
    # setting) or $DFLASH_SYNC_INJECT says so; the tokens and each step's bookkeeping are the same
    from engine_bridge.runtime import drafter as drafter_mod

    synced: list[bool] = []
    real = drafter_mod.Drafter.inject

    def spy(self, *a, sync=False, **kw):
        synced.append(sync)
        return real(self, *a, sync=sync, **kw)

    monkeypatch.setattr(drafter_mod.Drafter, "inject", spy)
    monkeypatch.delenv(drafter_mod.SYNC_INJECT_ENV, raising=False)
    runs = {}
    for exact in (False, True):
        synced.clear()
        tiny_engine.reset()
        res = tiny_engine.generate(
            "The quick brown fox", GenerationSettings(mode="chain", budget=6, max_tokens=32, exact_phases=exact)
        )
        # (the prefill's inject never syncs: its device time is the prefill's; nor has its first token,
        # step 0, an inject of its own)
        assert synced.count(True) == (sum(1 for st in res.steps[1:] if st.committed) if exact else 0)
        runs[exact] = res
    assert runs[False].tokens == runs[True].tokens
    assert [s.committed for s in runs[False].steps] == [s.committed for s in runs[True].steps]
    # the environment wins over the request, both ways, and a value other than 0 or 1 is refused
    monkeypatch.setenv(drafter_mod.SYNC_INJECT_ENV, "1")
    assert drafter_mod.sync_inject_on(False) is True
    monkeypatch.setenv(drafter_mod.SYNC_INJECT_ENV, "0")
    assert drafter_mod.sync_inject_on(True) is False
    monkeypatch.setenv(drafter_mod.SYNC_INJECT_ENV, "yes")
    with pytest.raises(ValueError, match="DFLASH_SYNC_INJECT"):
        drafter_mod.sync_inject_on()


def test_p_min_on_the_backend_top_k_cuts_where_the_host_would_or_later(tiny_engine, monkeypatch):
    """On a GPU p_min reads the drafter's top-k from the device (Drafter.p_min_top_k_backend): its
    probability is normalised over the k candidates, so it is at least the vocabulary's and a cut
    comes where the host's logits would put it, or later; the drafts before it are the same."""
    import numpy as np

    from engine_bridge.runtime import drafter as drafter_mod

    eng = tiny_engine
    eng.reset()
    res = eng.generate("Hello", GenerationSettings(mode="chain", budget=8, max_tokens=12, stop_at_eog=False))
    d, last, pos = eng.drafter, res.tokens[-1], len(eng.kv)
    n = min(8, d.max_draft)
    d.ctx.set_backend_top_k(0)
    host, logits = d.draft(last, pos, n)
    logits = np.asarray(logits, np.float64)
    p = 1.0 / np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1)
    p_min = float(np.sort(p)[len(p) // 2])  # cuts about half-way on the host
    cut_host, _ = d.draft(last, pos, n, p_min)
    assert len(cut_host) < n  # half the rows lie below the median
    assert d.ctx.set_backend_top_k(drafter_mod.BACKEND_TOP_K)
    full, none = d.draft(last, pos, n)
    cut_dev, _ = d.draft(last, pos, n, p_min)
    assert none is None and list(full) == list(host)  # the top candidate is the argmax
    assert len(cut_dev) >= len(cut_host) and list(cut_dev) == list(host[: len(cut_dev)])
    d.ctx.set_backend_top_k(0)
    # and through a run: the device's top-k where $DFLASH_TREE_TOP_K says backend, the target's tokens
    monkeypatch.setenv(drafter_mod.TREE_TOP_K_ENV, "backend")
    eng.reset()
    ar = eng.generate("Hello", GenerationSettings(mode="ar", max_tokens=24))
    eng.reset()
    cut = eng.generate("Hello", GenerationSettings(mode="chain", budget=8, max_tokens=24, p_min=p_min))
    assert d.ctx.backend_top_k == drafter_mod.BACKEND_TOP_K and cut.tokens == ar.tokens
