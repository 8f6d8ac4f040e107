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


def _accepted(rng, budget: int, base: float, decay: float) -> int:
    """Drafts accepted in one chain step of a drafter that accepts position k (given k - 1) with
    probability base * decay ** (k - 1): DFlash drafters lose acceptance along the block."""
    acc = 0
    while acc < budget and rng.random() < base * decay**acc:
        acc += 1
    return acc


def simulate_answers(
    pol: AutoPolicy,
    base: float,
    answers: int,
    seed: int,
    *,
    decay: float = 0.93,
    spread: float = 0.06,
    tokens: int = 128,
    switch_cost: float = 0.0,
    fixed: tuple[str, int] | None = None,
) -> tuple[float, float]:
    """Runs ``pol`` (or the ``fixed`` chain configuration) over ``answers`` answers of ``tokens``
    tokens, one policy throughout as in one engine, each answer's drafter accepting position k with
    probability b * decay ** (k - 1), b drawn per answer around ``base`` (sd ``spread``: some
    prompts suit the drafter better). Returns (share of steps speculating, tokens per AR step of
    time); each step costs its table cost, each change between AR and speculation half of
    ``switch_cost`` AR steps. The policy's table must hold chain costs only (a tree step's outcome
    is not modelled)."""
    rng = np.random.default_rng(seed)
    spec = steps = 0
    toks = time = 0.0
    for _ in range(answers):
        b_answer = float(np.clip(base + rng.normal(0.0, spread), 0.0, 0.99))
        done, was_ar = 0, True
        while done < tokens:
            mode, b = fixed if fixed is not None else pol.choose()
            steps += 1
            if (mode == "ar") != was_ar:
                time += switch_cost / 2
                was_ar = mode == "ar"
            if mode == "ar":
                done, toks, time = done + 1, toks + 1, time + 1
                continue
            acc = _accepted(rng, b, b_answer, decay)
            if fixed is None:
                pol.observe(mode, b, b, acc, probing=pol.probing)
            spec += 1
            done, toks, time = done + acc + 1, toks + acc + 1, time + pol.costs[(mode, b)]
    return spec / max(steps, 1), toks / time
