"""bench.stats against values worked out by hand (or by exact enumeration) on fixed inputs."""

from __future__ import annotations

import itertools
import math

import pytest

from engine_bridge.bench import stats as st


def test_mean_and_sample_sd_match_hand_values():
    xs = [2, 4, 4, 4, 5, 5, 7, 9]
    assert st.mean(xs) == 5.0
    # squared deviations 9+1+1+1+0+0+4+16 = 32, divided by n - 1 = 7
    assert st.sample_sd(xs) == pytest.approx(math.sqrt(32 / 7), rel=1e-12)
    assert st.sample_sd([10.0, 12.0]) == pytest.approx(math.sqrt(2.0), rel=1e-12)


def test_sd_of_one_run_is_zero_and_mean_of_none_fails():
    assert st.sample_sd([3.5]) == 0.0
    with pytest.raises(ValueError):
        st.mean([])
    assert st.summarize([]) is None


def test_bootstrap_of_two_samples_spans_them():
    # Resampled means of (a, b) are a, (a+b)/2, b with probabilities 1/4, 1/2, 1/4, so the 2.5th
    # and 97.5th percentiles are exactly a and b.
    assert st.bootstrap_ci([10.0, 20.0]) == (10.0, 20.0)


def test_bootstrap_degenerate_cases():
    assert st.bootstrap_ci([7.0, 7.0, 7.0]) == (7.0, 7.0)
    assert st.bootstrap_ci([4.2]) == (4.2, 4.2)


def test_bootstrap_matches_the_exact_bootstrap_distribution():
    xs = [1.0, 2.0, 6.0, 11.0]
    # all 4^4 equally likely resamples, enumerated; quantiles by the inverse CDF
    exact = sorted(sum(c) / 4 for c in itertools.product(xs, repeat=4))
    quantile = lambda p: exact[math.ceil(p * len(exact)) - 1]
    assert (quantile(0.025), quantile(0.975)) == (1.5, 8.75)
    # neighbouring attainable means are 0.25 apart: the sampled interval must land on these
    lo, hi = st.bootstrap_ci(xs, n_boot=20000)
    assert lo == pytest.approx(1.5, abs=0.25)
    assert hi == pytest.approx(8.75, abs=0.25)
    assert min(xs) < lo < st.mean(xs) < hi < max(xs)


def test_bootstrap_is_reproducible_with_its_fixed_seed():
    xs = [101.2, 98.7, 103.9, 99.1, 100.4]
    assert st.bootstrap_ci(xs) == st.bootstrap_ci(xs)
    assert st.bootstrap_ci(xs, seed=1) != st.bootstrap_ci(xs, seed=2)


def test_summarize_carries_everything():
    s = st.summarize([10, 12, 14])
    assert (s.n, s.mean, s.sd, s.samples) == (3, 12.0, 2.0, (10.0, 12.0, 14.0))
    assert 10.0 <= s.ci_lo <= 12.0 <= s.ci_hi <= 14.0
    assert s.to_dict()["samples"] == [10.0, 12.0, 14.0]


def test_speedup_ratio_and_interval():
    r = st.ratio_ci([10.0, 12.0], [5.0, 5.0])
    assert r.ratio == pytest.approx(2.2)
    # the denominator never varies, so the interval is the numerator's (10, 12) over 5
    assert (r.ci_lo, r.ci_hi) == pytest.approx((2.0, 2.4))
    one = st.ratio_ci([9.0], [3.0])
    assert (one.ratio, one.ci_lo, one.ci_hi) == (3.0, 3.0, 3.0)
    assert st.ratio_ci([], [1.0]) is None
    assert st.ratio_ci([1.0], [0.0]) is None


def test_delta_flags_use_one_sd_of_the_difference():
    base = st.Summary(3, 100.0, 3.0, 97.0, 103.0, (97.0, 100.0, 103.0))
    row = lambda m, sd=3.0: st.Summary(3, m, sd, m - 1, m + 1, (m - sd, m, m + sd))
    # sd of the difference: sqrt(3^2 + 3^2) = 4.2426...
    assert st.flag_delta(row(104.5), base) == (pytest.approx(4.5), st.REAL)
    assert st.flag_delta(row(104.0), base) == (pytest.approx(4.0), st.NOISE)
    assert st.flag_delta(row(95.0), base) == (pytest.approx(-5.0), st.REAL)
    # exactly on the bar is still noise
    assert st.flag_delta(row(103.0, sd=4.0), st.Summary(3, 100.0, 0.0, 100, 100, (100.0,) * 3))[1] == st.NOISE
    single = st.Summary(1, 150.0, 0.0, 150.0, 150.0, (150.0,))
    assert st.flag_delta(single, base)[1] == st.UNKNOWN
