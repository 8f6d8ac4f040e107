"""Statistics for bench runs: mean, sample sd, bootstrap intervals, speed-up ratios, delta flags.

Conventions (the reports and the tests rely on them):

* ``sample_sd`` divides by n - 1 (the spread of repeated runs, not of a whole population); it is
  0.0 for fewer than two samples, because one run says nothing about noise.
* Bootstrap intervals are percentile intervals from ``n_boot`` resamples drawn with a fixed
  seed, so the same samples always give the same interval (reports are reproducible and diffable).
* A delta between two configurations is "real" when it exceeds one standard deviation of the
  difference, sqrt(sd_a^2 + sd_b^2): the two means are independent measurements, so their
  noises add in quadrature. Anything smaller is "within noise".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

BOOT_SEED = 20250501
N_BOOT = 2000
LEVEL = 0.95

REAL = "real (> 1 sd)"
NOISE = "within noise"
UNKNOWN = "no noise estimate (< 2 runs)"


def mean(xs: Sequence[float]) -> float:
    if len(xs) == 0:
        raise ValueError("mean of no samples")
    return math.fsum(xs) / len(xs)


def sample_sd(xs: Sequence[float]) -> float:
    n = len(xs)
    if n < 2:
        return 0.0
    m = mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (n - 1))


def _percentiles(stats: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(stats, [tail, 100.0 - tail])
    return float(lo), float(hi)


def bootstrap_ci(
    xs: Sequence[float], *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = BOOT_SEED
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean. One sample gives the degenerate (x, x)."""
    a = np.asarray(xs, dtype=float)
    if a.size == 0:
        raise ValueError("bootstrap of no samples")
    if a.size == 1:
        return float(a[0]), float(a[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(n_boot, a.size))
    return _percentiles(a[idx].mean(axis=1), level)


@dataclass(frozen=True)
class Summary:
    """Mean, sample sd and bootstrap interval of one quantity over repeated runs."""

    n: int
    mean: float
    sd: float
    ci_lo: float
    ci_hi: float
    samples: tuple[float, ...]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["samples"] = list(self.samples)
        return d


def summarize(xs: Sequence[float], *, seed: int = BOOT_SEED) -> Summary | None:
    """None when there is nothing to summarise (a row that failed or was cancelled early)."""
    xs = [float(x) for x in xs]
    if not xs:
        return None
    lo, hi = bootstrap_ci(xs, seed=seed)
    return Summary(len(xs), mean(xs), sample_sd(xs), lo, hi, tuple(xs))


@dataclass(frozen=True)
class Ratio:
    """mean(numerator) / mean(denominator) with a bootstrap interval."""

    ratio: float
    ci_lo: float
    ci_hi: float

    def to_dict(self) -> dict:
        return asdict(self)


def ratio_ci(
    num: Sequence[float], den: Sequence[float], *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = BOOT_SEED
) -> Ratio | None:
    """Speed-up = mean(num) / mean(den); the interval resamples both sides independently.

    Independent resampling is right here: speculative rep r and autoregressive rep r share a
    seed but nothing else, so pairing them would invent a correlation.
    """
    n = np.asarray(num, dtype=float)
    d = np.asarray(den, dtype=float)
    if n.size == 0 or d.size == 0 or d.mean() <= 0:
        return None
    r = float(n.mean() / d.mean())
    if n.size == 1 and d.size == 1:
        return Ratio(r, r, r)
    rng = np.random.default_rng(seed)
    nb = n[rng.integers(0, n.size, size=(n_boot, n.size))].mean(axis=1)
    db = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    lo, hi = _percentiles(nb / db, level)
    return Ratio(r, lo, hi)


def delta_sd(sd_a: float, sd_b: float) -> float:
    """Standard deviation of the difference of two independent means' samples."""
    return math.sqrt(sd_a * sd_a + sd_b * sd_b)


def flag_delta(row: Summary, base: Summary) -> tuple[float, str]:
    """(row mean - baseline mean, flag). Equal to the bar is still noise: "real" needs more.

    With a single run on either side the sd is 0 by convention, which would make every
    difference look real, so such deltas are flagged as having no noise estimate.
    """
    delta = row.mean - base.mean
    if row.n < 2 or base.n < 2:
        return delta, UNKNOWN
    return delta, (REAL if abs(delta) > delta_sd(row.sd, base.sd) else NOISE)
