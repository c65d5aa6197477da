"""Exact precision functions, the PAULA grid, Definition 5 steps, AdaStrat envelopes."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from receval.curves.precision_function import (
    envelope,
    envelope_lower,
    envelope_upper,
    geometric_grid,
    knot_interval_bounds,
    local_precision,
    precision_at,
    precision_function,
    step_function,
    strong_monotonicity_violations,
    weak_monotonicity_violations,
)
from receval.curves.ranked import (
    ArrayRankedList,
    PiecewiseLinearShape,
    SimulatedRankedList,
)


def naive_p(labels: np.ndarray, r: int) -> float:
    return sum(labels[:r]) / r


def naive_local(labels: np.ndarray, window: int, r: int) -> float:
    if r <= window:
        return sum(labels[:r]) / r
    return sum(labels[r - window : r]) / window


def test_precision_and_local_precision_match_definitions() -> None:
    rng = np.random.default_rng(0)
    labels = (rng.random(300) < 0.6).astype(float)
    ranks = np.array([1, 2, 7, 50, 99, 100, 101, 250, 300])
    expected_p = [naive_p(labels, r) for r in ranks]
    expected_w = [naive_local(labels, 100, r) for r in ranks]
    np.testing.assert_allclose(precision_function(labels, ranks), expected_p, rtol=0, atol=1e-12)
    np.testing.assert_allclose(local_precision(labels, 100, ranks), expected_w, atol=1e-12)
    # p(r) = p_r(r) (PAULA §4.1)
    for r in ranks:
        assert local_precision(labels, int(r), np.array([r]))[0] == pytest.approx(
            naive_p(labels, int(r))
        )


def test_precision_rejects_ranks_outside_list() -> None:
    with pytest.raises(ValueError):
        precision_function(np.ones(5), np.array([6]))
    with pytest.raises(ValueError):
        precision_function(np.ones(5), np.array([0]))


def test_streamed_precision_equals_in_memory() -> None:
    rng = np.random.default_rng(1)
    labels = (rng.random(10_007) < 0.4).astype(float)
    ranked = ArrayRankedList(labels)
    ranks = np.array([10_007, 3, 3, 500, 64, 1, 9_999, 1_000])  # unsorted, repeated
    p, pw = precision_at(ranked, ranks, window=37, chunk_size=64)
    np.testing.assert_allclose(p, precision_function(labels, ranks), atol=1e-12)
    np.testing.assert_allclose(pw, local_precision(labels, 37, ranks), atol=1e-12)
    p_only, none = precision_at(ranked, ranks, chunk_size=1_000_000)
    assert none is None
    np.testing.assert_allclose(p_only, p, atol=1e-12)


def exact_g(epsilon: Fraction, j: int) -> int:
    """⌈(1+ε)^j⌉ in exact rational arithmetic."""
    value = (1 + epsilon) ** j
    return -((-value.numerator) // value.denominator)


def test_grid_reproduces_paula_constants() -> None:
    grid = geometric_grid(35_615, 0.03, 3_400)
    assert (grid.ell, grid.last, grid.m, grid.head, grid.queries) == (276, 354, 103, 3492, 78)
    assert grid.gamma == pytest.approx(1 + 0.03 + 2.03 / 103)
    # Definition 4 in exact arithmetic.
    eps = Fraction(3, 100)
    assert list(grid.points[:4]) == [exact_g(eps, j) for j in range(276, 280)]
    assert grid.points[-1] == exact_g(eps, 354)


@pytest.mark.parametrize(
    ("size", "epsilon", "r_tilde"),
    [(35_615, 0.03, 3_400), (10**7, 0.05, 2_040), (123_457, 0.1, 1_020), (5_000, 0.03, 3_400)],
)
def test_grid_definitions_hold(size: int, epsilon: float, r_tilde: int) -> None:
    grid = geometric_grid(size, epsilon, r_tilde)
    eps = Fraction(epsilon).limit_denominator(1000)
    # ℓ = ⌈log_{1+ε} r̃⌉ and L = ⌊log_{1+ε} N⌋, checked with exact rationals.
    assert (1 + eps) ** (grid.ell - 1) < r_tilde <= (1 + eps) ** grid.ell
    assert (1 + eps) ** grid.last <= size < (1 + eps) ** (grid.last + 1)
    assert grid.m == math.floor(eps * (1 + eps) ** grid.ell - 1)
    # Consecutive points are at least m apart beyond ℓ (PAULA §4.4.2).
    if grid.points.size > 1:
        assert np.diff(grid.points).min() >= grid.m
        assert grid.points[-1] <= size
    assert grid.points[0] >= r_tilde


def test_step_function_follows_definition_5() -> None:
    grid = geometric_grid(20_000, 0.05, 1_000)
    head = np.linspace(1, 0.5, grid.head)
    knots = np.linspace(0.5, 0.2, grid.points.size)
    ranks = np.arange(1, 20_001)
    got = step_function(grid, head, knots, ranks)
    eps = Fraction(1, 20)
    for r in [1, 17, grid.head, grid.head + 1, 5_000, 19_999, 20_000]:
        if r <= grid.head:
            assert got[r - 1] == head[r - 1]
        else:
            j = max(j for j in range(grid.ell, grid.last + 1) if (1 + eps) ** j <= r)
            assert got[r - 1] == knots[j - grid.ell]


def brute_force_weak_violations(labels: np.ndarray, m: int, r_tilde: int) -> set[int]:
    p = precision_function(labels)
    n = labels.size
    return {
        r1
        for r1 in range(r_tilde, n + 1)
        if any(p[r1 - 1] < p[r2 - 1] for r2 in range(r1 + m, n + 1))
    }


def test_weak_monotonicity_check_matches_brute_force() -> None:
    rng = np.random.default_rng(2)
    for trial in range(20):
        labels = (rng.random(120) < np.linspace(0.9, 0.3, 120)).astype(float)
        m, r_tilde = int(rng.integers(1, 30)), int(rng.integers(1, 60))
        got = set(weak_monotonicity_violations(labels, m, r_tilde).tolist())
        assert got == brute_force_weak_violations(labels, m, r_tilde), trial


def test_strong_monotonicity_check_matches_definition() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        labels = (rng.random(400) < np.linspace(0.95, 0.2, 400)).astype(float)
        points = np.array([40, 70, 110, 160, 230, 330])
        bad = set(strong_monotonicity_violations(labels, 20, points).tolist())
        for j in range(points.size - 1):
            a, b = points[j], points[j + 1]
            mean = labels[a:b].mean()
            ok = naive_local(labels, 20, b) <= mean + 1e-12 <= naive_local(labels, 20, a) + 2e-12
            assert (j in bad) == (not ok)


def weak_monotone_list(size: int = 60_000) -> tuple[np.ndarray, int, int]:
    """A balanced list that is (r̃, m)-weakly monotone, verified exactly."""
    shape = PiecewiseLinearShape.log_linear(size, top=1.6, slope=0.12)
    labels = SimulatedRankedList(size, shape, arrangement="balanced").labels(np.arange(1, size + 1))
    m, r_tilde = 150, 2_000
    assert weak_monotonicity_violations(labels, m, r_tilde).size == 0
    return labels, m, r_tilde


def test_envelope_contains_every_weak_monotone_precision_function() -> None:
    """AdaStrat Theorem 2: lb(v; y, p(y)) ≤ p(v) ≤ ub(v; y, p(y)) for v, y > r̃."""
    labels, m, r_tilde = weak_monotone_list()
    p = precision_function(labels)
    v = np.arange(r_tilde + 1, labels.size + 1)
    for y in [r_tilde + 1, 2_345, 10_000, 30_000, labels.size]:
        lb = envelope_lower(v, y, p[y - 1], m)
        ub = envelope_upper(v, y, p[y - 1], m)
        assert np.all(lb <= p[v - 1] + 1e-12)
        assert np.all(p[v - 1] <= ub + 1e-12)
        assert lb[y - r_tilde - 1] == pytest.approx(p[y - 1])
        assert ub[y - r_tilde - 1] == pytest.approx(p[y - 1])
    ys = [3_000, 9_000, 27_000]
    lb, ub = envelope(v, ys, p[np.array(ys) - 1], m)
    assert np.all(lb <= p[v - 1] + 1e-12) and np.all(p[v - 1] <= ub + 1e-12)
    single = [envelope_upper(v, y, p[y - 1], m) for y in ys]
    np.testing.assert_array_equal(ub, np.minimum.reduce(single))


def test_envelope_upper_is_attained() -> None:
    """Tightness (AdaStrat Thm 2): the all-ones-then-density sequence reaches ub."""
    y, m = 1_000, 100
    labels = np.zeros(1_300)
    labels[:500] = 1.0  # p(y) = 0.5
    k = math.floor(m * 0.5)
    labels[y : y + k] = 1.0  # the k positives allowed right after y
    p = precision_function(labels)
    v = np.arange(y + 1, y + k + 1)
    np.testing.assert_allclose(envelope_upper(v, y, 0.5, m), p[v - 1], atol=1e-12)


def test_knot_interval_bounds_contain_weak_monotone_functions() -> None:
    labels, m, r_tilde = weak_monotone_list()
    grid = geometric_grid(labels.size, 0.03, 3 * r_tilde)
    assert grid.m >= m  # the list is (r̃, m)-monotone, hence (3r̃, grid.m)-monotone
    p = precision_function(labels)
    exact = p[grid.points - 1]
    for widen in [0.0, 0.01]:
        lower, upper = knot_interval_bounds(
            grid.points, exact - widen, exact + widen, grid.m, labels.size
        )
        idx = grid.knot_index(np.arange(grid.points[0], labels.size + 1))
        r = np.arange(grid.points[0], labels.size + 1)
        assert np.all(lower[idx] <= p[r - 1] + 1e-12)
        assert np.all(p[r - 1] <= upper[idx] + 1e-12)
    # With exact knots the step bounds are within the (1+ε) factor of PAULA Theorem 1.
    lower, upper = knot_interval_bounds(grid.points, exact, exact, grid.m, labels.size)
    assert np.all(upper <= exact * (1 + 0.03) + 1e-12)
    assert np.all(lower >= exact / (1 + 0.03) - 1e-12)
