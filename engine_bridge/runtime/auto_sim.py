"""Auto's policy on a simulated drafter: how often it speculates and what that earns, without an
engine (a cost table and drawn acceptances). Used by the policy's tests and by
benchmarks/bench_auto_policy_sim.py; it measures the policy's decisions, not a machine."""

from __future__ import annotations

import numpy as np

from .auto_mode import AutoPolicy


def simulate(pol: AutoPolicy, alpha: float, steps: int, seed: int, switch_cost: float = 0.0) -> tuple[float, float]:
    """Runs ``pol`` for ``steps`` steps on a drafter whose every draft is accepted with probability
    ``alpha`` given the one before was: (share of steps speculating, tokens per AR step of time,
    each step costing its table cost, and each change between AR and speculation half of
    ``switch_cost`` AR steps: graphs built again, as on a GPU without patch 0009)."""
    rng = np.random.default_rng(seed)
    spec = toks = time = 0.0
    was_ar = True
    for _ in range(steps):
        mode, b = pol.choose()
        if (mode == "ar") != was_ar:
            time += switch_cost / 2
            was_ar = mode == "ar"
        if mode == "ar":
            toks, time = toks + 1, time + 1
            continue
        acc = 0
        while acc < b and rng.random() < alpha:
            acc += 1
        pol.observe(mode, b, b, acc, probing=pol.probing)
        spec, toks, time = spec + 1, toks + acc + 1, time + pol.costs[(mode, b)]
    return spec / steps, toks / time
