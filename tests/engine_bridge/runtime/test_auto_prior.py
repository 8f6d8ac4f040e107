"""The acceptance behind auto's geometric estimates can lean on a prior (auto_mode.PRIOR_STEPS, opt-in
with DFLASH_AUTO_PRIOR_STEPS; off by default since the H100 read it 0.967x on auto, sitting s77).

On the 2-vCPU Xeon's native build a first chain-2 probe whose four drafts were all accepted set the
acceptance to 1.0, so every budget never run read as committing all its drafts: auto ran chain 15,
6.3 AR steps a step there, for four steps, and again when the answer turned to code (a new kind of
text starts from the current one's figures). Tested without an engine, on that machine's costs."""

from __future__ import annotations

import pytest

from engine_bridge.runtime import auto_mode, calibration, text_kind

#: chain step costs in AR steps on the 2-vCPU Xeon (native build), warm-up of 16 tokens
CPU = {1: 1.93, 2: 2.27, 3: 2.59, 4: 3.02, 7: 4.06, 11: 5.51, 15: 6.80}


def _policy(monkeypatch, prior: str) -> auto_mode.AutoPolicy:
    for env in (auto_mode.STAY_ENV, auto_mode.PROBE_ENV, auto_mode.ESTIMATOR_ENV, auto_mode.HOLD_ENV):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv(auto_mode.PRIOR_STEPS_ENV, prior)
    return auto_mode.AutoPolicy(calibration.CostTable(key={}, ar_ms=1.0, chain_ms=dict(CPU)), max_draft=15)


def _lucky_probe(pol: auto_mode.AutoPolicy) -> None:
    """A chain-2 probe whose two steps had both drafts accepted."""
    pol.probe, pol.probe_left = ("chain", 2), 0
    for _ in range(auto_mode.PROBE_STEPS):
        pol.observe("chain", 2, 2, 2, probing=True)


@pytest.mark.parametrize("prior", ["", "0", "4"])
def test_two_lucky_probe_steps_send_auto_to_the_deepest_chain_unless_the_prior_is_on(monkeypatch, prior):
    pol = _policy(monkeypatch, prior)
    _lucky_probe(pol)
    assert pol.alpha == pytest.approx(1.0)  # the measured rate: all accepted
    best = pol.best()
    assert best.mode == "chain"
    if prior in ("", "0"):
        # without the prior: budgets never run read from alpha 1.0, chain 15 commits 16 at 6.8 AR steps
        assert best.budget == 15 and pol.estimates()[("chain", 15)] == pytest.approx(16.0)
    else:
        # (2 * 1.0 + 4 * 0.7) / 6 = 0.8: chain 15 commits ~4.9, chain 2's own measured 3 leads
        assert best.budget == 2
        assert pol.estimates()[("chain", 15)] == pytest.approx(auto_mode.breakeven.geometric_commit(0.8, 15), rel=1e-9)


def test_with_the_prior_a_new_kind_of_text_starts_from_the_prior_acceptance(monkeypatch):
    pol = _policy(monkeypatch, "4")
    _lucky_probe(pol)
    pol.set_kind(text_kind.CODE)  # never seen: the prose figures are its start, its own steps none
    est = pol.estimates()
    a = auto_mode.PROBE_PRIOR_ALPHA
    assert est[("chain", 7)] == pytest.approx(auto_mode.breakeven.geometric_commit(a, 7))
    assert est[("chain", 2)] == pytest.approx(3.0)  # measured (the prose probe's), kept
    assert pol.best().budget == 2
    # with many steps of its own the measured rate takes over
    for _ in range(400):
        pol.observe("chain", 7, 7, 7)
    assert pol.estimates()[("chain", 15)] > 0.95 * 16


def test_the_prior_steps_switch_is_checked(monkeypatch):
    with pytest.raises(ValueError, match=auto_mode.PRIOR_STEPS_ENV):
        _policy(monkeypatch, "many")
