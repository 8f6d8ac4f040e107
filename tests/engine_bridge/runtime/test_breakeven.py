"""The break-even rule and the auto policy, with given costs and commit lengths (no engine, no timing)."""

from __future__ import annotations

import pytest

from engine_bridge.runtime import auto_mode, breakeven
from engine_bridge.bench.report import advice_lines
from engine_bridge.runtime.calibration import CostTable


def test_a_step_pays_exactly_when_its_commit_length_exceeds_its_cost():
    costs = {("chain", 4): 3.0}
    assert breakeven.choose(costs, {("chain", 4): 3.01}, margin=0.0).mode == "chain"
    assert breakeven.choose(costs, {("chain", 4): 3.0}, margin=0.0).mode == "ar"
    assert breakeven.choose(costs, {("chain", 4): 2.99}, margin=0.0).mode == "ar"
    # the margin raises the bar by its fraction
    assert breakeven.choose(costs, {("chain", 4): 3.1}, margin=0.05).mode == "ar"
    assert breakeven.choose(costs, {("chain", 4): 3.2}, margin=0.05).mode == "chain"
    # unknown commit length: not a candidate
    assert breakeven.choose(costs, {("chain", 4): None}).mode == "ar"


def test_the_best_budget_is_the_highest_commit_per_cost():
    costs = {("chain", 1): 1.5, ("chain", 4): 2.5, ("chain", 7): 4.0, ("tree", 8): 3.0}
    commits = {("chain", 1): 1.9, ("chain", 4): 4.0, ("chain", 7): 5.5, ("tree", 8): 4.2}
    pick = breakeven.choose(costs, commits, margin=0.0)
    # speed-ups: chain1 1.27, chain4 1.6, chain7 1.375, tree8 1.4
    assert (pick.mode, pick.budget) == ("chain", 4)
    assert pick.speedup == pytest.approx(1.6) and pick.break_even == 2.5
    # equal speed-ups: the cheaper step wins
    tie = breakeven.choose({("chain", 2): 2.0, ("chain", 4): 4.0}, {("chain", 2): 3.0, ("chain", 4): 6.0}, 0.0)
    assert tie.budget == 2
    assert "chain 4" in breakeven.advice(costs, commits, 0.0)


def test_advice_says_when_nothing_pays_and_what_it_would_need():
    costs = {("chain", 7): 6.0, ("chain", 2): 2.4}
    commits = {("chain", 7): 1.3, ("chain", 2): 1.2}
    assert breakeven.choose(costs, commits).mode == "ar"
    text = breakeven.advice(costs, commits)
    assert "does not pay" in text and "chain 2" in text and "2.40" in text and "1.20" in text
    # nothing measured: whether a perfect drafter could pay decides what is said
    assert "no commit-length statistics" in breakeven.advice(costs, {})
    hopeless = {("chain", 1): 2.6, ("chain", 2): 4.0, ("tree", 4): 5.05}
    text = breakeven.advice(hopeless, {})
    assert "cannot pay here" in text and "tree 4" in text and "5.05" in text  # 5 / 5.05 beats 2 / 2.6


def test_geometric_commit_length():
    assert breakeven.geometric_commit(0.0, 7) == 1.0
    assert breakeven.geometric_commit(1.0, 7) == 8.0
    assert breakeven.geometric_commit(0.5, 2) == pytest.approx(1.75)


def _table(chain: dict, tree: dict | None = None) -> CostTable:
    return CostTable(
        key={"test": 1},
        ar_ms=10.0,
        chain_ms={b: 10.0 * c for b, c in chain.items()},
        tree_ms={b: 10.0 * c for b, c in (tree or {}).items()},
    )


def test_cost_table_interpolates_between_calibrated_budgets():
    t = _table({1: 2.0, 3: 3.0, 7: 5.0})
    assert t.cost("ar", 0) == 1.0
    assert t.cost("chain", 3) == pytest.approx(3.0)
    assert t.cost("chain", 5) == pytest.approx(4.0)
    assert t.cost("chain", 11) == pytest.approx(7.0)  # extrapolated from 3 and 7
    assert t.cost("tree", 8) is None
    assert CostTable.from_json(t.to_json()).costs() == t.costs()


def _steps(pol, n, drafted, accepted, mode="chain"):
    """Runs the policy for n steps, feeding every speculative step the given outcome."""
    chosen = []
    for _ in range(n):
        m, b = pol.choose()
        chosen.append((m, b))
        if m != "ar":
            pol.observe(m, b, min(drafted, b) if m == "chain" else b, min(accepted, b), probing=pol.probing)
    return chosen


def test_policy_probes_first_then_settles_on_ar_when_nothing_is_accepted():
    pol = auto_mode.AutoPolicy(_table({1: 1.6, 2: 1.8, 4: 2.5, 7: 4.5}), max_draft=15)
    first = pol.choose()
    assert first[0] == "chain" and pol.probing  # nothing known: a probe
    # the probe's budget: among those that could pay at PROBE_ALPHA acceptance per position, the best
    # geometric commit / cost at a fair drafter's acceptance (PROBE_PRIOR_ALPHA 0.7, nothing seen
    # yet): chain 1 1.70 / 1.6 = 1.06, chain 2 2.19 / 1.8 = 1.22, chain 4 2.77 / 2.5 = 1.11, chain 7
    # 3.14 / 4.5 = 0.70: chain 2, the budget auto would run if the drafter were that good
    assert first == ("chain", 2)
    pol.observe(*first, drafted=1, accepted=0, probing=True)
    chosen = _steps(pol, 400, drafted=15, accepted=0)
    assert pol.best().mode == "ar"
    share_ar = sum(m == "ar" for m, _ in chosen) / len(chosen)
    assert share_ar > 0.95
    # probes back off: their intervals double
    probe_at = [i for i, (m, _) in enumerate(chosen) if m != "ar"]
    starts = [i for i in probe_at if i - 1 not in probe_at]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert len(gaps) >= 2 and all(g2 > g1 for g1, g2 in zip(gaps, gaps[1:]))


def test_no_probe_of_a_budget_that_pays_only_if_every_draft_is_accepted():
    """The default pair on the 2-vCPU machine (its calibration, AR steps): chain 1 costs 2.92, chain 3
    3.79, chain 7 4.92. Chain 3 would pay only at a commit of 3.98 of at most 4 (every draft
    accepted), more than any drafter's acceptance gives (PROBE_ALPHA): auto never probes there, so it
    neither feeds the drafter nor leaves AR, where before it probed chain 3 and lost ~8 AR steps a
    probe. Where cheaper steps could pay (a table with chain 1 at 1.13), it still probes."""
    cpu = auto_mode.AutoPolicy(_table({1: 2.92, 2: 4.02, 3: 3.79, 4: 5.01, 7: 4.92}), max_draft=15)
    assert cpu._ar_probe_target() is None and not cpu.can_probe and not cpu.needs_drafter()
    assert {m for m, _ in _steps(cpu, 300, drafted=15, accepted=15)} == {"ar"}
    # (3 + 1) / 3.79 = 1.055 clears the margin: the every-draft-accepted rule would have probed it
    assert 4 / 3.79 > 1.0 + cpu.margin and breakeven.geometric_commit(auto_mode.PROBE_ALPHA, 3) / 3.79 < 1.05
    gpu = auto_mode.AutoPolicy(_table({1: 1.13, 2: 1.25, 3: 1.4, 7: 2.1}), max_draft=15)
    # (at 0.7 a position: chain 1 1.50, chain 2 1.75, chain 3 1.81, chain 7 1.50 tokens per AR step)
    assert gpu._ar_probe_target() == ("chain", 3) and gpu.needs_drafter()
    assert gpu.choose() == ("chain", 3) and gpu.probing


def test_policy_moves_to_speculation_when_the_drafter_starts_paying():
    pol = auto_mode.AutoPolicy(_table({1: 1.6, 2: 1.8, 4: 2.5, 7: 4.5, 15: 9.0}), max_draft=15)
    _steps(pol, 200, drafted=15, accepted=0)
    assert pol.best().mode == "ar"
    chosen = _steps(pol, 600, drafted=15, accepted=15)  # the prompt changed: all accepted
    assert pol.best().mode == "chain"
    # accepting everything, commit b + 1 over cost: chain 4 gives 2.0, chain 7 1.78, chain 15 1.78,
    # chain 2 1.67, chain 1 1.25
    assert pol.best().budget == 4
    assert chosen[-1][0] == "chain"


def test_policy_learns_smaller_budgets_from_larger_chain_steps():
    pol = auto_mode.AutoPolicy(_table({1: 1.2, 2: 1.5, 4: 2.0, 7: 3.0}), max_draft=15)
    for _ in range(30):
        pol.observe("chain", 7, drafted=7, accepted=2)
    est = pol.estimates()
    assert est[("chain", 1)] == pytest.approx(2.0, abs=0.01)  # min(2, 1) + 1
    assert est[("chain", 2)] == pytest.approx(3.0, abs=0.01)
    assert est[("chain", 4)] == pytest.approx(3.0, abs=0.01)
    # chain 2: 3/1.5 = 2.0 is the best
    assert (pol.best().mode, pol.best().budget) == ("chain", 2)


def test_bench_report_advice_line_uses_the_rows_own_speeds():
    report = {
        "rows": [
            {
                "id": "ar",
                "kind": "ar",
                "ar_row": "ar",
                "avg_ts": 100.0,
                "mean_commit_len": 1.0,
                "label": "autoregressive",
                "verify_mode": "ar",
                "budget": 0,
            },
            {
                "id": "c0",
                "kind": "spec",
                "ar_row": "ar",
                "avg_ts": 50.0,
                "mean_commit_len": 2.0,
                "label": "budget=4",
                "verify_mode": "chain",
                "budget": 4,
            },
            {
                "id": "c1",
                "kind": "spec",
                "ar_row": "ar",
                "avg_ts": 150.0,
                "mean_commit_len": 4.5,
                "label": "budget=7",
                "verify_mode": "chain",
                "budget": 7,
            },
        ]
    }
    lines = advice_lines(report)
    # c0: step = 2/50 s vs 1/100 s per AR step -> break-even 4.0; c1: 4.5/150 vs 1/100 -> 3.0
    assert lines[0].startswith("c0") and "break-even commit 4.00" in lines[0] and "does not pay" in lines[0]
    assert lines[1].startswith("c1") and "break-even commit 3.00" in lines[1] and lines[1].endswith("pays")
    assert lines[-1].startswith("advice: speculation pays: c1 budget=7")
    report["rows"][2]["avg_ts"] = 90.0
    assert "does not pay" in advice_lines(report)[-1]


def test_the_one_pass_choice_is_the_first_paying_candidate_of_the_sorted_list():
    """breakeven.choose finds the best in one pass (auto asks at every speculative step); it must
    pick what sorting every candidate picked: the highest commit / cost, ties to the cheaper step,
    then to the first in the table, and AR when that one does not pay."""
    import random

    def by_sorting(costs, commits, margin):
        for ch in breakeven.candidates(costs, commits):
            return ch if ch.pays(margin) else breakeven.Choice("ar", 0, 1.0, 1.0)
        return breakeven.Choice("ar", 0, 1.0, 1.0)

    rng = random.Random(7)
    for _ in range(3000):
        keys = [("chain", b) for b in rng.sample(range(1, 16), rng.randint(1, 8))]
        keys += [("tree", b) for b in rng.sample((4, 8, 12, 16, 32), rng.randint(0, 3))]
        costs = {("ar", 0): 1.0} | {k: rng.choice((1.5, 2.0, 2.5, 3.0, 0.0, -1.0)) for k in keys}
        # commit lengths on a coarse grid, so that equal speed-ups (ties) are frequent
        commits = {k: rng.choice((None, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0)) for k in keys}
        margin = rng.choice((0.0, 0.05, 0.2))
        assert breakeven.choose(costs, commits, margin) == by_sorting(costs, commits, margin), (costs, commits, margin)
