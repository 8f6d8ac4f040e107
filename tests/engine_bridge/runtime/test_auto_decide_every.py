"""Auto weighs a speculative choice every DECIDE_EVERY steps and learns the steps between in one go
(issue 29: its Python cost 2.9 % of its time on an H200, most of it the policy run from cold caches at
every step). Tested without an engine: a cost table and scripted outcomes."""

from __future__ import annotations

import random

import pytest

from engine_bridge.runtime import auto_mode, breakeven, calibration

COSTS = {1: 1.6, 3: 1.9, 7: 2.3, 15: 3.0}


def _policy(monkeypatch, every: int) -> auto_mode.AutoPolicy:
    monkeypatch.setenv(auto_mode.DECIDE_ENV, str(every))
    for env in (auto_mode.STAY_ENV, auto_mode.HOLD_ENV, auto_mode.PROBE_ENV, auto_mode.ESTIMATOR_ENV):
        monkeypatch.delenv(env, raising=False)
    return auto_mode.AutoPolicy(calibration.CostTable(key={}, ar_ms=1.0, chain_ms=dict(COSTS)), max_draft=15)


def _paying(pol: auto_mode.AutoPolicy) -> None:
    """Chain 7 pays (acceptance 0.7: commit 3.2 at a cost of 2.3), no probe due."""
    pol.commit = {("chain", b): breakeven.geometric_commit(0.7, b) for b in COSTS}
    pol._acc = [0.7, 1.0]
    pol.since_probe = 0
    pol._best = None


def test_the_default_weighs_every_fourth_step_and_the_switch_reads_the_environment(monkeypatch):
    assert auto_mode.DECIDE_EVERY == 4
    monkeypatch.delenv(auto_mode.DECIDE_ENV, raising=False)
    assert auto_mode.AutoPolicy(calibration.CostTable(key={}, ar_ms=1.0, chain_ms=dict(COSTS)), 15).decide_every == 4
    assert _policy(monkeypatch, 1).decide_every == 1
    monkeypatch.setenv(auto_mode.DECIDE_ENV, "often")
    with pytest.raises(ValueError, match=auto_mode.DECIDE_ENV):
        auto_mode.AutoPolicy(calibration.CostTable(key={}, ar_ms=1.0, chain_ms=dict(COSTS)), 15)


@pytest.mark.parametrize("every", [1, 4])
def test_a_held_choice_runs_until_its_next_weighing(monkeypatch, every):
    pol = _policy(monkeypatch, every)
    _paying(pol)
    assert pol.choose() == ("chain", 7)
    # the drafter turns useless: chain 7 no longer pays by far
    pol.commit = {k: 1.0 for k in pol.commit}
    pol._acc = [0.0, 1.0]
    pol._best = None
    got = [pol.choose() for _ in range(every)]
    # the steps in between run what was chosen; the next weighing leaves
    assert got[:-1] == [("chain", 7)] * (every - 1)
    assert got[-1] == ("ar", 0)


def test_outcomes_kept_while_holding_are_learnt_exactly_and_in_order(monkeypatch):
    rng = random.Random(5)
    outcomes = [(7, rng.randint(0, 7)) for _ in range(4 * 25)]
    now, held = _policy(monkeypatch, 1), _policy(monkeypatch, 4)
    for pol in (now, held):
        _paying(pol)
    for i, (drafted, accepted) in enumerate(outcomes):
        if i % 4 == 0:
            held._hold_left = 3  # as choose() leaves it after a weighing
        else:
            held._hold_left -= 1
        now.observe("chain", 7, drafted, accepted)
        held.observe("chain", 7, drafted, accepted)
        if i % 4 != 3:
            assert held._unlearnt  # kept, not learnt, while the choice is held
    assert held.estimates() == now.estimates()  # the same floats: the same updates in the same order
    assert held.alpha == now.alpha and held.commit == now.commit and not held._unlearnt


def test_a_change_of_kind_learns_the_kept_outcomes_into_the_kind_they_came_from(monkeypatch):
    now, held = _policy(monkeypatch, 1), _policy(monkeypatch, 4)
    for pol in (now, held):
        _paying(pol)
        assert pol.choose() == ("chain", 7)
        pol.observe("chain", 7, 7, 0)
        pol.observe("chain", 7, 7, 1)
        pol.set_kind("code")
    assert held._kinds["prose"]["commit"] == now._kinds["prose"]["commit"]
    assert held._kinds["prose"]["_acc"] == now._kinds["prose"]["_acc"]
    assert held.choose() == now.choose()  # the new kind weighs at once (nothing held over)


def test_where_speculation_never_pays_holding_changes_no_choice(monkeypatch):
    # AR steps and probes are never held: with a weak drafter every choice is the same either way
    runs = []
    for every in (1, 4):
        pol, rng, out = _policy(monkeypatch, every), random.Random(3), []
        for _ in range(3000):
            mode, b = pol.choose()
            out.append((mode, b, pol.probing))
            if mode != "ar":
                a = 0
                while a < b and rng.random() < 0.2:
                    a += 1
                pol.observe(mode, b, b, a, probing=pol.probing)
        runs.append(out)
    assert runs[0] == runs[1]
    assert sum(1 for m, _, p in runs[0] if m != "ar" and p) >= 4  # it did probe


def test_holding_keeps_what_auto_gains_where_chain_7_pays(monkeypatch):
    from engine_bridge.runtime.auto_sim import simulate

    # alpha 0.7: chain 7 commits 3.15 at a cost of 2.3 (1.37x AR at best)
    for seed in (0, 1):
        share, speed = simulate(_policy(monkeypatch, 4), 0.7, 3000, seed)
        assert share >= 0.5 and speed >= 1.2, (share, speed)


def test_a_fixed_mode_run_after_a_held_choice_is_learnt_at_once(monkeypatch):
    # a chain run of the user's (observe_run) teaches the policy even while auto held a choice
    from types import SimpleNamespace

    pol = _policy(monkeypatch, 4)
    _paying(pol)
    assert pol.choose() == ("chain", 7) and pol._hold_left == 3
    before = pol.commit[("chain", 7)]
    steps = [SimpleNamespace(tree_nodes=0, drafted=7, accepted=0) for _ in range(20)]
    pol.observe_run(SimpleNamespace(summary=SimpleNamespace(verify_mode="chain", budget_effective=7), steps=steps))
    assert not pol._unlearnt and pol._hold_left == 0
    assert pol.commit[("chain", 7)] < before  # learnt now, not at some later read
