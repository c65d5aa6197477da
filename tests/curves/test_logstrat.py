"""LogStrat (PAULA paper, Algorithm 1): budget, reproducible stratified plan, (1 − δ) guarantee."""

from __future__ import annotations

import math
import time
import tracemalloc

import numpy as np
import pytest
from scipy import stats

from receval.curves.base import Labels
from receval.curves.logstrat import LogStrat
from receval.curves.paula import Paula
from receval.curves.precision_function import weak_monotonicity_violations
from receval.curves.ranked import BumpShape, PiecewiseLinearShape, SimulatedRankedList

PAPER = {35_615: 18_287, 356_150: 35_631, 3_561_500: 53_937, 35_615_000: 72_867}


@pytest.mark.parametrize(("size", "annotations"), PAPER.items())
def test_budget_matches_adastrat_table_2(size: int, annotations: int) -> None:
    within = LogStrat().budget(size)  # β = 1.05, the stated default
    assert abs(within["annotations"] - annotations) <= 0.02 * annotations
    assert within["queries"] == Paula().budget(size)["queries"]
    exact = LogStrat(beta=None).budget(size)  # β = γ, as the table was computed
    assert exact["annotations"] == annotations


@pytest.mark.parametrize("size", [5_000, 123_456, 10**9])
@pytest.mark.parametrize(("delta", "beta", "pmin"), [(0.05, 1.05, 0.5), (0.1, 1.1, 0.3)])
def test_budget_is_theorem_2_for_any_size(
    size: int, delta: float, beta: float, pmin: float
) -> None:
    method = LogStrat(delta=delta, beta=beta, pmin=pmin)
    grid = method.grid(size)
    k = grid.queries
    expected = grid.head + 0.03 * k / (2 * (beta - 1) ** 2 * 1.03 * pmin**2) * math.log(
        k / (delta / 2)
    )
    assert method.budget(size)["annotations"] == math.ceil(expected)
    s = math.ceil(math.log(k / (delta / 2)) / (2 * (beta - 1) ** 2 * pmin**2))
    assert method.budget(size)["samples_per_point"] == s


def sizes_of_plans(size: int, seeds: range) -> tuple[np.ndarray, np.ndarray]:
    distinct, draws = [], []
    for seed in seeds:
        method = LogStrat(seed=seed)
        grid = method.grid(size)
        fresh = [f for _, f in method._transitions(grid)]
        draws.append(grid.head + sum(f.size for f in fresh))
        head = np.arange(1, grid.head + 1)
        distinct.append(grid.head + method.plan(size, Labels(head, np.ones(head.size))).size)
    return np.array(distinct, float), np.array(draws, float)


def test_expected_counts_match_realised_plans() -> None:
    """``expected_draws`` / ``expected_distinct`` are the means of the realised plan sizes."""
    size, seeds = 35_615, range(40)
    budget = LogStrat().budget(size)
    distinct, draws = sizes_of_plans(size, seeds)
    for values, expected in (
        (distinct, budget["expected_distinct"]),
        (draws, budget["expected_draws"]),
    ):
        se = values.std(ddof=1) / math.sqrt(values.size)
        assert abs(values.mean() - expected) <= 4 * se + 1e-9
    # Draws with replacement repeat items: far fewer distinct labels than the paper counts.
    assert budget["expected_distinct"] < 0.8 * budget["annotations"]


def test_plan_is_staged_and_reproducible() -> None:
    size = 356_150
    method = LogStrat(seed=5)
    head = method.plan(size, Labels.empty())
    np.testing.assert_array_equal(head, np.arange(1, method.grid(size).head + 1))
    known = Labels(head, np.zeros(head.size))
    rest = method.plan(size, known)
    np.testing.assert_array_equal(rest, LogStrat(seed=5).plan(size, known))
    assert not np.array_equal(rest, LogStrat(seed=6).plan(size, known))
    grid = method.grid(size)
    # Every stratum g_k+1..g_{k+1} receives draws; none falls in the head.
    assert rest.min() > grid.head and rest.max() <= grid.points[-1]
    per_stratum = np.bincount(np.searchsorted(grid.points, rest, side="left") - 1)
    assert per_stratum.size == grid.queries and per_stratum.min() > 0
    done = known.merge(rest, np.ones(rest.size))
    assert method.plan(size, done).size == 0


def balanced(size: int, bump: bool = False) -> SimulatedRankedList:
    shape = PiecewiseLinearShape(np.array([0.0, 5_000.0, 40_000.0]), np.array([0.95, 0.75, 0.55]))
    if bump:
        shape = BumpShape(shape, 15_000.0, 25_000.0, 0.4)
    return SimulatedRankedList(size, shape, arrangement="balanced")


def test_estimates_are_unbiased_with_binomial_spread() -> None:
    """Each X_k is s i.i.d. uniform draws on 1..g_k: q(g_k) has mean p(g_k), variance p(1−p)/s."""
    size = 35_615
    ranked = balanced(size)
    method0 = LogStrat()
    grid = method0.grid(size)
    s = method0.sample_size(grid)
    p = ranked.true_precision(grid.points)
    seeds = 80
    q = np.array(
        [LogStrat(seed=seed).run(size, ranked.labels).at(grid.points)[0] for seed in range(seeds)]
    )
    for k in [1, grid.queries // 2, grid.queries]:
        sd = math.sqrt(p[k] * (1 - p[k]) / s)
        assert abs(q[:, k].mean() - p[k]) <= 4 * sd / math.sqrt(seeds)
        # Sample variance of i.i.d. normal-ish values: chi-square bounds at 1e-4.
        lo, hi = stats.chi2.ppf([1e-4, 1 - 1e-4], seeds - 1) / (seeds - 1)
        assert lo * sd**2 <= q[:, k].var(ddof=1) <= hi * sd**2


def test_guarantee_holds_in_at_least_one_minus_delta_of_seeds() -> None:
    size = 35_615
    ranked = balanced(size)
    method0 = LogStrat()
    grid = method0.grid(size)
    ranks = np.arange(1, size + 1)
    labels = ranked.labels(ranks)
    assert weak_monotonicity_violations(labels, grid.m, grid.r_tilde).size == 0  # A.1
    p = ranked.true_precision(ranks)
    beyond = ranks > grid.head  # the head is labelled exhaustively: exact there
    assert p[beyond].min() >= method0.pmin
    seeds = 100
    outside, too_far = 0, 0
    factor = (1 + method0.epsilon) / (2 - method0.beta)  # from |q − p| < (β−1)p and Thm 1
    for seed in range(seeds):
        est = LogStrat(seed=seed).run(size, ranked.labels)
        q, lower, upper = est.at(ranks)
        outside += not np.all((lower <= p + 1e-12) & (p <= upper + 1e-12))
        ratio = np.maximum(q[beyond] / p[beyond], p[beyond] / q[beyond])
        too_far += not np.all(ratio <= factor)
        np.testing.assert_array_equal(q[~beyond], p[~beyond])
        assert est.flags == ()
    bound = stats.binom.ppf(1 - 1e-3, seeds, method0.delta)
    assert outside <= bound and too_far <= bound


def test_bump_and_low_precision_are_flagged() -> None:
    size = 35_615
    est = LogStrat(seed=1).run(size, balanced(size, bump=True).labels)
    assert any("A.1 violated" in flag for flag in est.flags)
    low = SimulatedRankedList(size, PiecewiseLinearShape(np.array([0.0]), np.array([0.3])), seed=2)
    est = LogStrat(seed=1).run(size, low.labels)
    assert any("p_min" in flag for flag in est.flags)


def test_missing_labels_raise() -> None:
    with pytest.raises(ValueError, match="missing"):
        LogStrat().estimate(50_000, Labels.empty())


def test_planning_two_billion_items_is_fast_and_small() -> None:
    method = LogStrat()
    size = 2_000_000_000
    head = np.arange(1, method.grid(size).head + 1)
    known = Labels(head, np.ones(head.size))
    tracemalloc.start()
    start = time.perf_counter()
    rest = method.plan(size, known)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    budget = method.budget(size)
    assert rest.size + head.size <= budget["expected_draws"] * 1.05
    assert elapsed < 1.0 and peak < 200 * 2**20
