"""Which budget auto's AR probes run, and what that earns (issue 29).

On an H200 the default pair's chain 7 ran at 1.12-1.2x AR on GSM8K while auto ran at 0.83-0.89x,
probing chain 1 (the cheapest budget) and otherwise decoding AR. A GPU drafter decodes whole blocks,
so a chain-1 step costs nearly a chain-7 step, and it tells only the first position's acceptance.
Now a probe runs the budget auto would run if the drafter were fair (PROBE_PRIOR_ALPHA), and the
running commit weighs a step 0.05. Tested without an engine: a cost table and drawn acceptances
(engine_bridge.runtime.auto_sim)."""

from __future__ import annotations

import pytest

from engine_bridge.runtime import auto_mode, breakeven, calibration
from engine_bridge.runtime.auto_sim import simulate_answers

#: the chain costs in AR steps that auto calibrated on an H200 for the default pair
#: (benchmarks/bench_auto_policy_sim.py)
H200 = {1: 1.74, 2: 1.80, 3: 1.85, 4: 1.89, 7: 2.05, 11: 2.25, 15: 2.39}


def _policy(monkeypatch, rule: str = "") -> auto_mode.AutoPolicy:
    monkeypatch.delenv(auto_mode.STAY_ENV, raising=False)
    monkeypatch.setenv(auto_mode.PROBE_ENV, rule)
    return auto_mode.AutoPolicy(calibration.CostTable(key={}, ar_ms=1.0, chain_ms=dict(H200)), max_draft=15)


def test_the_probe_runs_the_budget_auto_would_run(monkeypatch):
    pol = _policy(monkeypatch)
    # nothing seen: tokens per AR step at 0.7 a position are best at chain 7 (3.14 / 2.05 = 1.53;
    # chain 4 1.47, chain 1 0.98: a chain-1 step could never pay here)
    ratio = {b: breakeven.geometric_commit(auto_mode.PROBE_PRIOR_ALPHA, b) / c for b, c in H200.items()}
    assert max(ratio, key=ratio.get) == 7 and ratio[1] < 1.0
    assert pol.choose() == ("chain", 7) and pol.probing
    # a drafter seen to accept more is probed deeper
    pol = _policy(monkeypatch)
    for _ in range(40):
        pol.observe("chain", 15, 15, 12)
    assert pol.alpha > 0.9 and pol._ar_probe_target() == ("chain", 15)
    # the earlier rule: the cheapest budget that could pay at PROBE_ALPHA
    assert _policy(monkeypatch, "cheapest").choose() == ("chain", 1)
    assert _policy(monkeypatch, "cheapest").ema == auto_mode.EMA_BEFORE and pol.ema == auto_mode.EMA


@pytest.mark.parametrize("seed", [0, 1])
def test_auto_runs_the_chain_that_pays_and_keeps_to_ar_where_none_does(monkeypatch, seed):
    # b = 0.68: chain 7 commits ~2.6 tokens at a cost of 2.05 (1.25x AR alone), as on GSM8K
    chain7 = simulate_answers(_policy(monkeypatch), 0.68, 24, seed, fixed=("chain", 7), switch_cost=2.6)[1]
    share, speed = simulate_answers(_policy(monkeypatch), 0.68, 24, seed, switch_cost=2.6)
    old_share, old_speed = simulate_answers(_policy(monkeypatch, "cheapest"), 0.68, 24, seed, switch_cost=2.6)
    assert chain7 > 1.1
    assert share > 0.5 and speed > 0.9 * chain7, (share, speed, chain7)
    assert old_speed < 1.05 and speed > old_speed + 0.1, (old_share, old_speed, speed)
    # b = 0.3: no budget pays (chain 7 at ~0.69x): auto stays with AR but for its probes
    share, speed = simulate_answers(_policy(monkeypatch), 0.3, 24, seed, switch_cost=2.6)
    assert share < 0.05 and speed > 0.97, (share, speed)


@pytest.mark.parametrize(("env", "fresh", "follow_up"), [("", False, True), ("0", False, False), ("1", True, True)])
def test_which_new_requests_probe_at_once(monkeypatch, env, fresh, follow_up):
    """By default a chat's follow-up probes at its first AR choice and a new conversation waits out
    the interval; DFLASH_AUTO_REQUEST_PROBE=0 never, =1 always."""
    monkeypatch.setenv(auto_mode.REQUEST_PROBE_ENV, env)

    def after_a_failed_probe() -> auto_mode.AutoPolicy:
        pol = _policy(monkeypatch)
        assert pol.choose() == ("chain", 7) and pol.probing  # the first AR choice probes
        for _ in range(auto_mode.PROBE_STEPS):
            pol.observe("chain", 7, 7, 0, probing=True)  # nothing accepted: the probe fails
            if pol.probe_left:
                pol.choose()
        for _ in range(3):
            assert pol.choose() == ("ar", 0) and not pol.probing
        return pol

    for is_follow_up, probes in ((False, fresh), (True, follow_up)):
        pol = after_a_failed_probe()
        every = pol.ar_probe_every
        pol.start_request(is_follow_up)
        assert (pol.choose() == ("chain", 7) and pol.probing) == probes, (env, is_follow_up)
        assert pol.ar_probe_every >= every  # the interval keeps growing as after any probe
    # while speculating, a new request changes nothing
    pol = after_a_failed_probe()
    for _ in range(40):
        pol.observe("chain", 7, 7, 7)
    assert pol.choose()[0] == "chain" and pol.current is not None
    left = pol.since_probe
    pol.start_request(True)
    assert pol.since_probe == left


def test_a_bad_request_probe_setting_is_refused_with_its_name(monkeypatch):
    monkeypatch.setenv(auto_mode.REQUEST_PROBE_ENV, "yes")
    with pytest.raises(ValueError, match=auto_mode.REQUEST_PROBE_ENV):
        _policy(monkeypatch)
