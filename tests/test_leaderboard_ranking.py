"""Tiers and rank confidence sets: family-wise error, never-zero p-values, simultaneous coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from receval.leaderboard import (
    minimum_replicates,
    paired_pvalues,
    rank_confidence_sets,
    replicate_ranks,
    significance_tiers,
    stepdown_comparisons,
)


def _null_world(rng, m, B, rho=0.5):
    """Point estimates and bootstrap replicates of m equally good systems with correlated errors
    (a shared component of weight rho, like systems sharing labels); the replicates mimic the
    estimator's sampling distribution around the point estimate."""
    shared = rng.normal()
    point = math.sqrt(rho) * shared + math.sqrt(1 - rho) * rng.normal(size=m)
    noise = math.sqrt(rho) * rng.normal(size=(B, 1)) + math.sqrt(1 - rho) * rng.normal(size=(B, m))
    return point, point + noise


@pytest.mark.parametrize("m", [10, 30])
def test_stepdown_family_wise_error_in_a_null_world(m):
    # R null worlds: the share of runs with any significant pair estimates the FWER; its Monte
    # Carlo sd is √(0.05·0.95/R) = 0.0154 at R = 200, so FWER ≤ 0.05 fails this check (> 0.05 +
    # 3 sd = 0.096) with probability < 0.2%.  The former Holm-on-percentile procedure gave 0.157.
    rng = np.random.default_rng(11)
    R, B = 200, 400
    errors = 0
    for _ in range(R):
        point, reps = _null_world(rng, m, B)
        comparisons = stepdown_comparisons(point, reps, alpha=0.05)
        errors += bool(comparisons.better.any())
        if not comparisons.better.any():  # no false statement: one tier
            assert (significance_tiers(point, reps, comparisons=comparisons) == 1).all()
    assert errors / R <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / R)


def test_rank_sets_cover_the_true_ranks_simultaneously():
    # five systems with distinct truths 0, 0, 1, 2, 6 (sd 1 per estimate): true ranks by
    # "1 + strictly better" are 4, 4, 3, 2, 1; simultaneous coverage >= 0.95 - 3 sd at R = 200
    rng = np.random.default_rng(5)
    truth = np.array([0.0, 0.0, 1.0, 2.0, 6.0])
    true_rank = replicate_ranks(truth[None, :])[0]
    assert list(true_rank) == [4, 4, 3, 2, 1]
    R, B = 200, 400
    covered = 0
    for _ in range(R):
        point = truth + rng.normal(size=5)
        reps = point + rng.normal(size=(B, 5))
        lo, hi = rank_confidence_sets(stepdown_comparisons(point, reps, alpha=0.05), point)
        covered += bool(((lo <= true_rank) & (true_rank <= hi)).all())
    assert covered / R >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / R)


def test_pvalues_are_never_zero_and_need_a_minimum_B():
    point = np.array([1.0, 0.0])
    reps = point + np.random.default_rng(0).normal(0, 0.01, (99, 2))  # every difference > 0
    assert paired_pvalues(reps)[0, 1] == pytest.approx(2 / 100)
    c = stepdown_comparisons(point, reps, alpha=0.05)
    assert c.pvalues[0, 1] == pytest.approx(1 / 100) and c.better[0, 1]
    assert minimum_replicates(0.05) == 19
    few = stepdown_comparisons(point, reps[:10], alpha=0.05)  # p >= 1/11 > 0.05
    assert not few.better.any()
    lo, hi = rank_confidence_sets(c, point)
    assert list(lo) == [1, 2] and list(hi) == [1, 2]


def test_exact_differences_and_missing_systems():
    # census-like systems: identical replicates; a NaN system takes no part
    point = np.array([0.5, 0.5, 0.4, np.nan])
    reps = np.tile(point, (200, 1))
    c = stepdown_comparisons(point, reps, alpha=0.05)
    assert c.better[0, 2] and c.better[1, 2] and not c.better[0, 1]
    lo, hi = rank_confidence_sets(c, point)
    assert np.allclose(lo[:3], [1, 1, 3]) and np.allclose(hi[:3], [2, 2, 3]) and np.isnan(lo[3])
    assert list(significance_tiers(point, reps, comparisons=c)) == [1, 1, 2, 0]
