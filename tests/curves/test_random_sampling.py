"""Random-sampling baseline (PAULA §3, eqs. (3)-(5)): budget, plan, (1 − δ) intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from receval.curves.base import Labels
from receval.curves.random_sampling import RandomSampling, random_sampling_total
from receval.curves.ranked import LogisticShape, PiecewiseLinearShape, SimulatedRankedList

PAPER = {35_615: 24_745, 356_150: 84_369, 3_561_500: 284_834, 35_615_000: 954_359}
ALPHA = (1 + 0.03 + 2.03 / 103) * 1.03 - 1  # γ(1+ε) − 1 for ε = 0.03, Δ = 100


@pytest.mark.parametrize(("size", "annotations"), PAPER.items())
def test_budget_reproduces_adastrat_table_2(size: int, annotations: int) -> None:
    budget = RandomSampling().budget(size)
    assert budget["annotations"] == annotations
    assert budget["alpha"] == pytest.approx(ALPHA)


@pytest.mark.parametrize("size", [50_000, 777_777, 2_000_000_000])
@pytest.mark.parametrize(("delta", "pmin"), [(0.05, 0.5), (0.01, 0.3)])
def test_design_follows_eqs_4_and_5(size: int, delta: float, pmin: float) -> None:
    method = RandomSampling(delta=delta, pmin=pmin)
    total = math.sqrt(2 * size / (ALPHA**2 * pmin**2) * math.log(2 * size / delta))
    assert random_sampling_total(size, ALPHA, delta, pmin) == pytest.approx(total)
    n, s = method.design(size)
    s_paper = math.ceil(total / 2)
    # eq. (4): the head reaches n_{α,s} for the chosen s
    n_paper = math.ceil(size / (2 * s_paper * ALPHA**2 * pmin**2) * math.log(2 * size / delta))
    assert n_paper + s_paper in (math.ceil(total), math.ceil(total) + 1)
    if n_paper + s_paper >= size:  # cheaper to label everything
        assert (n, s) == (size, 0)
        assert method.budget(size)["annotations"] == size
    else:
        assert (n, s) == (n_paper, s_paper)
        assert method.budget(size)["annotations"] == math.ceil(total)


def test_given_sample_size_sets_the_head() -> None:
    method = RandomSampling(samples=2_000, alpha=0.2)
    n, s = method.design(217_077)
    assert s == 2_000
    assert n == math.ceil(217_077 / (2 * 2_000 * 0.04 * 0.25) * math.log(2 * 217_077 / 0.05))


def test_plan_is_staged_and_reproducible() -> None:
    size = 100_000
    method = RandomSampling(seed=3)
    n, s = method.design(size)
    head = method.plan(size, Labels.empty())
    np.testing.assert_array_equal(head, np.arange(1, n + 1))
    known = Labels(head, np.zeros(n))
    rest = method.plan(size, known)
    np.testing.assert_array_equal(rest, RandomSampling(seed=3).plan(size, known))
    assert not np.array_equal(rest, RandomSampling(seed=4).plan(size, known))
    assert rest.min() > n and rest.size <= s
    assert method.plan(size, known.merge(rest, np.ones(rest.size))).size == 0
    expected = method.budget(size)["expected_distinct"]
    assert abs(n + rest.size - expected) < 4 * math.sqrt(s)


def noisy_list(size: int, seed: int = 0) -> SimulatedRankedList:
    return SimulatedRankedList(size, LogisticShape(0.95, 0.55, 12_000.0, 4_000.0), seed=seed)


def test_estimate_is_unbiased_and_interval_follows_eq_3() -> None:
    size = 35_615
    ranked = noisy_list(size)
    n, s = RandomSampling().design(size)
    r = np.array([n + 1, 20_000, size])
    p = ranked.true_precision(r)
    seeds = 150
    values = np.array(
        [RandomSampling(seed=k).run(size, ranked.labels).at(r)[0] for k in range(seeds)]
    )
    se = values.std(axis=0, ddof=1) / math.sqrt(seeds)
    assert np.all(np.abs(values.mean(axis=0) - p) <= 4 * se)
    # Half-width at the end of the list: √(ln(2N/δ)/(2c)) with c = s draws.
    est = RandomSampling(seed=0).run(size, ranked.labels)
    q, lower, upper = est.at(np.array([size]))
    half = math.sqrt(math.log(2 * size / 0.05) / (2 * s))
    assert upper[0] - q[0] == pytest.approx(min(half, 1 - q[0]))
    assert q[0] - lower[0] == pytest.approx(min(half, q[0]))


def test_guarantee_holds_in_at_least_one_minus_delta_of_seeds() -> None:
    """No monotonicity is needed: a noisy Bernoulli list with a local rise."""
    size = 35_615
    shape = PiecewiseLinearShape(
        np.array([0.0, 8_000, 15_000, 16_000, 20_000, 35_615]),
        np.array([0.95, 0.7, 0.6, 0.9, 0.6, 0.55]),
    )
    ranked = SimulatedRankedList(size, shape, seed=9)
    ranks = np.arange(1, size + 1)
    p = ranked.true_precision(ranks)
    method0 = RandomSampling()
    n, _ = method0.design(size)
    alpha = method0.alpha_value()
    beyond = (ranks >= n) & (p >= method0.pmin)
    seeds = 100
    outside = too_far = 0
    for seed in range(seeds):
        est = RandomSampling(seed=seed).run(size, ranked.labels)
        q, lower, upper = est.at(ranks)
        outside += not np.all((lower <= p + 1e-12) & (p <= upper + 1e-12))
        too_far += not np.all(np.abs(q[beyond] - p[beyond]) <= alpha * p[beyond])
        np.testing.assert_array_equal(q[:n], p[:n])  # exact head
    bound = stats.binom.ppf(1 - 1e-3, seeds, method0.delta)
    assert outside <= bound and too_far <= bound


def test_low_precision_is_flagged() -> None:
    size = 35_615
    low = SimulatedRankedList(size, PiecewiseLinearShape(np.array([0.0]), np.array([0.3])), seed=1)
    est = RandomSampling().run(size, low.labels)
    assert any("p_min" in flag for flag in est.flags)
    assert RandomSampling().run(size, noisy_list(size).labels).flags == ()


def test_small_lists_are_labelled_completely() -> None:
    size = 2_000
    ranked = noisy_list(size)
    est = RandomSampling().run(size, ranked.labels)
    assert est.annotations == size
    np.testing.assert_allclose(
        est.at(np.arange(1, size + 1))[0], ranked.true_precision(np.arange(1, size + 1))
    )


def test_missing_labels_raise() -> None:
    with pytest.raises(ValueError, match="missing"):
        RandomSampling().estimate(100_000, Labels.empty())
