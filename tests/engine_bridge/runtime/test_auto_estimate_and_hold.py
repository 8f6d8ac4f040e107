"""Auto's chain estimates and its hold between speculative choices (issue 29, 2026-11-28).

A DFlash drafter's acceptance falls along the block: sitting 8's drafter on GSM8K commits 3.08 a
chain-7 step and 3.15 a chain-15 step, where one acceptance rate fitted to chain 7 predicts ~3.3.
Replayed under the H200's costs, auto changed its chain budget 93 times in 12 code answers (chain 7
alone: 12), and every change is a new verify shape (a graph built again on a GPU). The hold keeps the choice being run unless another reads clearly faster (the default); the
estimator "positions" reads every chain budget from per-position rates (opt-in)."""

from __future__ import annotations

import numpy as np
import pytest

from engine_bridge.runtime import auto_mode, breakeven, calibration, text_kind

#: the chain costs auto calibrated on an H200 for the default pair, in AR steps
H200 = {1: 1.74, 2: 1.80, 3: 1.85, 4: 1.89, 7: 2.05, 11: 2.25, 15: 2.39}


def _policy(monkeypatch, estimator: str) -> auto_mode.AutoPolicy:
    monkeypatch.setenv(auto_mode.ESTIMATOR_ENV, estimator)
    return auto_mode.AutoPolicy(calibration.CostTable(key={}, ar_ms=1.0, chain_ms=dict(H200)), max_draft=15)


def test_commits_are_sums_of_survival_products_and_unreached_positions_take_the_deepest_rate():
    pos = np.zeros((15, 2))
    assert auto_mode.position_commits(pos, [1, 7]) is None  # nothing tested yet
    pos[:3] = [[0.7, 1.0], [0.3, 0.5], [0.25, 0.5]]  # rates 0.7, 0.6, 0.5
    got = auto_mode.position_commits(pos, [1, 3, 5, 20])
    assert got[1] == pytest.approx(1.7)
    # positions 2 and 3 lean on the rate before them by POSITION_PRIOR
    w = auto_mode.POSITION_PRIOR
    r2 = (0.3 + w * 0.7) / (0.5 + w)
    r3 = (0.25 + w * r2) / (0.5 + w)
    assert got[3] == pytest.approx(1 + 0.7 + 0.7 * r2 + 0.7 * r2 * r3)
    assert got[5] == pytest.approx(got[3] + 0.7 * r2 * r3 * (r3 + r3 * r3))  # 4-5 untested: position 3's rate
    assert got[20] == pytest.approx(1 + 0.7 + 0.7 * r2 * (1 - r3**19) / (1 - r3))  # past the rows too


def _decaying_steps(pol, budget: int, rates: list[float], n: int) -> None:
    """n chain steps whose accepted counts follow the per-position rates exactly in proportion."""
    survive = np.cumprod(rates[:budget])
    # accepted >= k in a share survive[k-1] of the steps
    counts = [int(round(n * (survive[k - 1] - (survive[k] if k < budget else 0.0)))) for k in range(1, budget + 1)]
    steps = [k for k, c in enumerate(counts, start=1) for _ in range(c)]
    steps += [0] * (n - len(steps))
    for a in np.random.default_rng(0).permutation(steps):
        pol.observe("chain", budget, budget, int(a))


def test_a_drafter_whose_acceptance_falls_along_the_block_keeps_auto_at_chain_7(monkeypatch):
    # 0.8 at the first position, falling 6 % a position: chain 7 commits ~2.9
    rates = [0.8 * 0.94**k for k in range(15)]
    true7 = 1 + float(np.sum(np.cumprod(rates[:7])))
    true11 = 1 + float(np.sum(np.cumprod(rates[:11])))
    geo, pos = _policy(monkeypatch, "geometric"), _policy(monkeypatch, "positions")
    for pol in (geo, pos):
        _decaying_steps(pol, 7, rates, 400)
    g, p = geo.estimates(), pos.estimates()
    # the geometric model reads chain 11 well above the truth; the positions' estimate is near it
    assert g[("chain", 11)] > true11 + 0.15
    assert abs(p[("chain", 7)] - true7) < 0.25  # an EMA of the last ~40 steps
    assert abs(p[("chain", 11)] - true11) < abs(g[("chain", 11)] - true11) - 0.1
    # at the H200's costs chain 7 is the better buy (true commits), and the positions see it
    assert true7 / H200[7] > true11 / H200[11]
    assert (pos.best().mode, pos.best().budget) == ("chain", 7), pos.describe()


def test_the_estimator_is_chosen_by_the_environment_and_a_wrong_name_is_refused(monkeypatch):
    assert _policy(monkeypatch, "geometric").estimator == "geometric"
    monkeypatch.setenv(auto_mode.ESTIMATOR_ENV, "")
    default = auto_mode.AutoPolicy(calibration.CostTable(key={}, ar_ms=1.0, chain_ms=dict(H200)), 15)
    assert default.estimator == auto_mode.ESTIMATOR == "geometric"  # "positions" is opt-in until measured on a GPU
    with pytest.raises(ValueError, match="DFLASH_AUTO_EST"):
        _policy(monkeypatch, "median")


def test_each_kind_of_text_keeps_its_own_positions(monkeypatch):
    pol = _policy(monkeypatch, "positions")
    assert pol.kind == text_kind.PROSE
    _decaying_steps(pol, 7, [0.3] * 15, 200)  # prose: the drafter is poor
    poor = pol.estimates()[("chain", 7)]
    pol.set_kind(text_kind.CODE)  # a kind never seen starts from the current one's statistics...
    assert pol.estimates()[("chain", 7)] == pytest.approx(poor)
    _decaying_steps(pol, 7, [0.9] * 15, 400)  # ...and learns its own: code suits the drafter
    assert pol.estimates()[("chain", 7)] > poor + 2.0
    pol.set_kind(text_kind.PROSE)
    assert pol.estimates()[("chain", 7)] == pytest.approx(poor)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_position_estimate_keeps_a_chain_that_pays(monkeypatch, seed):
    # the stay band's simulation (test_auto_policy_stays.py) with the per-position estimate: chain 7
    # commits 3.15 at alpha 0.7. (Where nothing pays, alpha 0.45, it speculated 15-22 % of its steps
    # in this simulation against the geometric estimate's under 15 %: one reason it is opt-in.)
    from engine_bridge.runtime.auto_sim import simulate

    monkeypatch.setenv(auto_mode.ESTIMATOR_ENV, "positions")
    monkeypatch.delenv(auto_mode.STAY_ENV, raising=False)
    costs = {1: 1.6, 3: 1.9, 7: 2.3, 15: 3.0}
    table = calibration.CostTable(key={}, ar_ms=1.0, chain_ms=costs)
    share, speed = simulate(auto_mode.AutoPolicy(table, max_draft=15), 0.7, 3000, seed)
    assert share >= 0.5 and speed >= 1.2, (share, speed)


def test_a_speculative_choice_is_held_unless_another_reads_clearly_faster(monkeypatch):
    # each change of budget is a new verify shape (a graph built again on a GPU), so auto keeps
    # chain 7 while chain 4 reads within HOLD_MARGIN of it, and moves when it reads clearly faster
    monkeypatch.delenv(auto_mode.HOLD_ENV, raising=False)
    monkeypatch.delenv(auto_mode.PROBE_ENV, raising=False)
    monkeypatch.setenv(auto_mode.DECIDE_ENV, "1")  # each choose() weighs (the rule, step by step)
    pol = _policy(monkeypatch, "geometric")
    assert pol.hold_margin == auto_mode.HOLD_MARGIN > 0
    pol._acc = [0.7, 1.0]
    pol.since_probe = 0
    pol.commit = {("chain", b): breakeven.geometric_commit(0.7, b) for b in H200}
    assert pol.choose() == ("chain", 7)
    # chain 4 now reads 3 % faster than chain 7: held
    pol.commit[("chain", 4)] = pol.commit[("chain", 7)] / H200[7] * H200[4] * 1.03
    pol._best = None
    assert pol.best().budget == 4 and pol.choose() == ("chain", 7)
    # 8 % faster: moved
    pol.commit[("chain", 4)] = pol.commit[("chain", 7)] / H200[7] * H200[4] * 1.08
    pol._best = None
    assert pol.choose() == ("chain", 4)
    # no hold (the rule before): the faster reading wins at once
    monkeypatch.setenv(auto_mode.HOLD_ENV, "0")
    assert _policy(monkeypatch, "geometric").hold_margin == 0.0
    monkeypatch.setenv(auto_mode.HOLD_ENV, "lots")
    with pytest.raises(ValueError, match="DFLASH_AUTO_HOLD"):
        _policy(monkeypatch, "geometric")
