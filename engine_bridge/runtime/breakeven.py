"""Does speculation pay? The break-even rule, as pure functions of step costs and commit lengths.

A speculative step (mode m, budget b) takes as long as ``cost(m, b)`` autoregressive steps of the
target alone (engine_bridge.runtime.calibration measures it on this machine) and commits ``commit(m, b)``
tokens on average (the pair's running statistics). Tokens per unit of time relative to AR are
``commit / cost``, so the step is faster than the target alone exactly when ``commit > cost``:
``cost(m, b)`` *is* the break-even commit length. On a 2-core CPU a chain step of budget 7 on
SmolLM2 costs ~6 AR tokens; on an H100 ~2.65 -- the same pair can pay on one and lose on the other.

Nothing here touches the engine: these functions are what the auto mode, the CLI, the bench
report and the status bar share, and what the tests pin down with given numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

AR = ("ar", 0)

#: A choice must beat AR by this fraction before it is taken: calibration has noise, and switching
#: from AR to speculation costs a short catch-up decode that the step cost does not include.
DEFAULT_MARGIN = 0.05


@dataclass(frozen=True)
class Choice:
    mode: str  # ar | chain | tree
    budget: int  # 0 for AR
    cost: float  # step time in AR steps (1.0 for AR) = the break-even commit length
    commit: float  # expected tokens per step (1.0 for AR)

    @property
    def speedup(self) -> float:
        """Expected tokens per second relative to the target alone."""
        return self.commit / self.cost if self.cost > 0 else 0.0

    @property
    def break_even(self) -> float:
        return self.cost

    def pays(self, margin: float = 0.0) -> bool:
        return self.mode != "ar" and self.commit > self.cost * (1.0 + margin)

    @property
    def label(self) -> str:
        if self.mode == "ar":
            return "AR"
        return f"{self.mode} {self.budget}" if self.budget else self.mode  # budget 0: the mode names it all


def candidates(costs: dict[tuple[str, int], float], commits: dict[tuple[str, int], float | None]) -> list[Choice]:
    """Every speculative (mode, budget) with both a cost and a commit estimate, best first.

    Ties in speed-up go to the cheaper step (less work for the same speed)."""
    out = [
        Choice(m, b, float(c), float(k))
        for (m, b), c in costs.items()
        if m != "ar" and c > 0 and (k := commits.get((m, b))) is not None
    ]
    out.sort(key=lambda ch: (-ch.speedup, ch.cost))
    return out


def choose(
    costs: dict[tuple[str, int], float], commits: dict[tuple[str, int], float | None], margin: float = DEFAULT_MARGIN
) -> Choice:
    """The fastest choice: the speculative (mode, budget) with the highest commit / cost among those
    that pay (commit > cost * (1 + margin)), else autoregressive.

    The first of ``candidates`` in one pass, without building and sorting them all: auto asks at
    every speculative step (ties go to the cheaper step, then to the first in ``costs``, as the
    stable sort does)."""
    best: tuple[str, int, float, float] | None = None
    best_s = 0.0
    for (m, b), c in costs.items():
        if m == "ar" or c <= 0:
            continue
        k = commits.get((m, b))
        if k is None:
            continue
        c, k = float(c), float(k)
        s = k / c
        if best is None or s > best_s or (s == best_s and c < best[2]):
            best, best_s = (m, b, c, k), s
    if best is not None:
        ch = Choice(*best)
        if ch.pays(margin):
            return ch
    return Choice("ar", 0, 1.0, 1.0)


def best_candidate(costs, commits) -> Choice | None:
    """The best speculative choice whether it pays or not (what the advice compares with AR)."""
    c = candidates(costs, commits)
    return c[0] if c else None


def advice(costs, commits, margin: float = DEFAULT_MARGIN) -> str:
    """One sentence: whether speculation pays here, at which mode and budget, and by how much."""
    pick = choose(costs, commits, margin)
    if pick.mode != "ar":
        return (
            f"speculation pays: {pick.label} (commit {pick.commit:.2f} > break-even {pick.cost:.2f}, "
            f"~{pick.speedup:.2f}x AR)"
        )
    best = best_candidate(costs, commits)
    if best is None:
        ceiling = perfect_drafter(costs)
        if ceiling is not None and not ceiling.pays(margin):
            return (
                f"speculation cannot pay here: even if every draft were accepted, the best step, "
                f"{ceiling.label}, would commit {ceiling.commit:.0f} tokens in the time of {ceiling.cost:.2f} "
                "AR steps; autoregressive is faster"
            )
        return "no commit-length statistics yet: run the pair (or calibrate with a probe) first"
    return (
        f"speculation does not pay here: the best, {best.label}, needs a commit length of {best.cost:.2f} "
        f"and gets {best.commit:.2f} (~{best.speedup:.2f}x AR); autoregressive is faster"
    )


def perfect_drafter(costs: dict[tuple[str, int], float]) -> Choice | None:
    """The best choice if every draft were accepted (a step of budget b commits at most b + 1 tokens):
    when even this does not pay, no drafter can make speculation pay on this machine."""
    return best_candidate(costs, {k: float(k[1] + 1) for k in costs})


def geometric_commit(alpha: float, budget: int) -> float:
    """Expected commit length of a chain of ``budget`` drafts when each draft is accepted with
    probability ``alpha`` given the previous one was: 1 + a + a^2 + ... + a^budget."""
    alpha = min(max(alpha, 0.0), 1.0)
    if alpha >= 1.0:
        return float(budget + 1)
    return (1.0 - alpha ** (budget + 1)) / (1.0 - alpha)
