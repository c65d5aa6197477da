"""Small-sample expansion of bootstrap intervals (Hesterberg 2015, expanded percentile)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from receval.estimators.bootstrap import confidence_interval
from receval.estimators.small_sample import expanded_alpha


def test_expanded_level_reproduces_the_t_quantile():
    # Φ⁻¹(1 − α'/2) = √(n/(n − 1)) t_{n−1, 0.975}: for n = 10, 2.384 (α' ≈ 0.0171)
    alpha = expanded_alpha(0.05, np.array([10.0, 30.0, 1e6]), 3)
    z = stats.norm.ppf(1 - alpha / 2)
    expected = np.sqrt([10 / 9, 30 / 29, 1e6 / (1e6 - 1)]) * stats.t.ppf(0.975, [9, 29, 1e6 - 1])
    np.testing.assert_allclose(z, expected, rtol=1e-10)
    assert alpha[0] < alpha[1] < alpha[2] < 0.05 + 1e-9
    np.testing.assert_allclose(alpha[2], 0.05, atol=1e-5)


def test_columns_without_a_count_keep_the_level():
    alpha = expanded_alpha(0.05, np.array([np.nan, 0.0, np.inf, 1.0]), 4)
    np.testing.assert_allclose(alpha[:3], 0.05)
    # one draw counts as two: t_1, the widest expansion
    assert alpha[3] < 1e-3
    np.testing.assert_allclose(expanded_alpha(0.05, None, 2), 0.05)


def test_expanded_percentile_covers_a_small_sample_mean():
    # the mean of n = 10 normal draws: the plain percentile interval covers about
    # P(|T_9| ≤ 1.96 √(9/10)) ≈ 0.905, the expanded one ≈ 0.95 (Hesterberg 2015, §5.2).
    # 600 independent samples: Monte Carlo SE of a coverage near 0.95 is 0.009; 3 SE tolerance.
    rng = np.random.default_rng(4)
    n, trials, B = 10, 600, 1000
    samples = rng.normal(size=(trials, n))
    picks = rng.integers(0, n, size=(B, trials, n))
    reps = np.take_along_axis(samples[None, :, :].repeat(B, 0), picks, axis=2).mean(axis=2)
    point = samples.mean(axis=1)
    plain = confidence_interval(point, reps, bounds=None)
    wide = confidence_interval(point, reps, bounds=None, draws=np.full(trials, float(n)))
    plain_cov = np.mean((plain.low <= 0) & (0 <= plain.high))
    wide_cov = np.mean((wide.low <= 0) & (0 <= wide.high))
    assert abs(plain_cov - 0.905) < 3 * np.sqrt(0.905 * 0.095 / trials)
    assert abs(wide_cov - 0.95) < 3 * np.sqrt(0.95 * 0.05 / trials)
    assert np.all(wide.high - wide.low >= plain.high - plain.low)
