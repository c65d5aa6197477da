"""PAULA (Sabharwal & Sedghi 2017, Algorithm 2): budget, plan, bounds, assumption flags."""

from __future__ import annotations

import math
import time
import tracemalloc
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from receval.curves.base import Labels
from receval.curves.paula import Paula, paula_yields
from receval.curves.precision_function import (
    local_precision,
    precision_function,
    strong_monotonicity_violations,
    weak_monotonicity_violations,
)
from receval.curves.ranked import (
    ArrayRankedList,
    BumpShape,
    PiecewiseLinearShape,
    SimulatedRankedList,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

PAPER_N = [35_615, 356_150, 3_561_500, 35_615_000]


@pytest.mark.parametrize(
    ("size", "queries", "annotations"),
    list(zip(PAPER_N, [78, 156, 234, 312], [11_292, 19_092, 26_892, 34_692], strict=True)),
)
def test_budget_reproduces_paper(size: int, queries: int, annotations: int) -> None:
    budget = Paula().budget(size)
    assert (budget["queries"], budget["annotations"]) == (queries, annotations)


def exact_budget(size: int, epsilon: Fraction, window: int) -> tuple[int, int]:
    """(L − ℓ, min(g_ℓ, N) + Δ(L − ℓ)) from the definitions, in exact arithmetic."""
    r_tilde = math.ceil((window + 2) / epsilon)
    power, j = Fraction(1), 0
    while power < r_tilde:
        power, j = power * (1 + epsilon), j + 1
    ell, g_ell = j, math.ceil(power)
    while power * (1 + epsilon) <= size:
        power, j = power * (1 + epsilon), j + 1
    queries = max(j - ell, 0) if power <= size else 0
    return queries, min(g_ell, size) + window * queries


@pytest.mark.parametrize("size", [1, 3_000, 3_492, 3_600, 77_777, 1_234_567, 2_000_000_000])
@pytest.mark.parametrize(("epsilon", "window"), [(Fraction(3, 100), 100), (Fraction(1, 20), 50)])
def test_budget_formula_holds_for_any_size(size: int, epsilon: Fraction, window: int) -> None:
    budget = Paula(epsilon=float(epsilon), window=window).budget(size)
    assert (budget["queries"], budget["annotations"]) == exact_budget(size, epsilon, window)


def test_plan_is_staged_deterministic_and_matches_budget() -> None:
    method = Paula()
    size = 356_150
    first = method.plan(size, Labels.empty())
    np.testing.assert_array_equal(first, np.arange(1, 3_493))
    known = Labels(first, np.ones(first.size))
    second = method.plan(size, known)
    np.testing.assert_array_equal(second, Paula().plan(size, known))  # a fresh object agrees
    assert first.size + second.size == method.budget(size)["annotations"]
    grid = method.grid(size)
    # Windows are the Δ ranks ending at each knot g_{ℓ+1}..g_L, disjoint from the head.
    np.testing.assert_array_equal(second.reshape(-1, 100)[:, -1], grid.knots)
    assert second.min() > grid.head
    done = known.merge(second, np.zeros(second.size))
    assert method.plan(size, done).size == 0


def test_yields_follow_definition_6() -> None:
    rng = np.random.default_rng(0)
    labels = (rng.random(40_000) < np.linspace(0.9, 0.5, 40_000)).astype(float)
    grid = Paula().grid(labels.size)
    g = grid.points
    local = local_precision(labels, 100, g)
    y_minus, y_plus = paula_yields(labels[: g[0]].sum(), g, local)
    for k in range(g.size):
        lower = labels[: g[0]].sum() + sum((g[j + 1] - g[j]) * local[j + 1] for j in range(k))
        upper = labels[: g[0]].sum() + sum((g[j + 1] - g[j]) * local[j] for j in range(k))
        assert y_minus[k] == pytest.approx(lower) and y_plus[k] == pytest.approx(upper)


# Lists that satisfy A.1 and A.2 exactly (balanced arrangement, steep log-linear density),
# checked below with the exact assumption checkers before the theorem is tested.
MONOTONE_CASES = [
    # (epsilon, window, r_tilde, size, top, slope)
    (0.03, 1_000, 100_000, 3_000_000, 2.6, 0.15),
    (0.03, 500, 50_000, 1_000_000, 2.5, 0.15),
    (0.05, 500, 30_000, 1_000_000, 2.5, 0.15),
]


def monotone_list(size: int, top: float, slope: float, bump: bool = False) -> SimulatedRankedList:
    shape = PiecewiseLinearShape.log_linear(size, top=top, slope=slope)
    if bump:
        shape = BumpShape(shape, 0.40 * size, 0.45 * size, 0.3)
    return SimulatedRankedList(size, shape, arrangement="balanced")


@pytest.mark.parametrize(("epsilon", "window", "r_tilde", "size", "top", "slope"), MONOTONE_CASES)
def test_bounds_contain_p_at_every_rank_under_assumptions(
    epsilon: float, window: int, r_tilde: int, size: int, top: float, slope: float
) -> None:
    ranked = monotone_list(size, top, slope)
    labels = ranked.labels(np.arange(1, size + 1))
    method = Paula(epsilon=epsilon, window=window, r_tilde=r_tilde)
    grid = method.grid(size)
    assert weak_monotonicity_violations(labels, grid.m, grid.r_tilde).size == 0  # A.1
    assert strong_monotonicity_violations(labels, window, grid.points).size == 0  # A.2
    p = precision_function(labels)
    assert p[grid.head - 1] >= local_precision(labels, window, np.array([grid.head]))[0]

    est = method.run(size, ranked.labels)
    assert est.annotations == method.budget(size)["annotations"]
    assert est.flags == ()
    ranks = np.arange(1, size + 1)
    centre, lower, upper = est.at(ranks)
    assert np.all(lower <= p + 1e-12) and np.all(p <= upper + 1e-12)
    np.testing.assert_array_equal(centre[: grid.head], p[: grid.head])  # exact head
    # Width: upper/lower ≤ γ(1+ε)² (Lemma 4 times the (1+ε) of each step bound).
    beyond = ranks > grid.head
    assert np.max(upper[beyond] / lower[beyond]) <= grid.gamma * (1 + epsilon) ** 2 + 1e-12

    # Algorithm 2's own output: bounds at the knots (Lemma 3) and γ(1+ε)-approximations of p
    # at every rank (Theorem 3).
    paper = Paula(epsilon=epsilon, window=window, r_tilde=r_tilde, bounds="paper")
    est2 = paper.run(size, ranked.labels)
    _, q_minus, q_plus = est2.at(ranks)
    at_knots = grid.knots - 1
    assert np.all(q_minus[at_knots] <= p[at_knots] + 1e-12)
    assert np.all(p[at_knots] <= q_plus[at_knots] + 1e-12)
    factor = grid.gamma * (1 + epsilon)
    for q in (q_minus, q_plus):
        assert np.all(q <= factor * p + 1e-12) and np.all(p <= factor * q + 1e-12)


def test_bump_is_flagged() -> None:
    epsilon, window, r_tilde, size, top, slope = MONOTONE_CASES[1]
    method = Paula(epsilon=epsilon, window=window, r_tilde=r_tilde)
    est = method.run(size, monotone_list(size, top, slope, bump=True).labels)
    assert any("A.2 violated" in flag for flag in est.flags)
    assert any("precision rises" in flag for flag in est.flags)
    clean = method.run(size, monotone_list(size, top, slope).labels)
    assert clean.flags == ()


def _significant_rises(local: np.ndarray, window: int) -> int:
    """Rises of p_Δ beyond a Bonferroni two-sample z-test at 0.05 (what PAULA flags)."""
    from statistics import NormalDist

    rise = np.diff(local)
    pooled = np.clip((local[1:] + local[:-1]) / 2, 1e-3, 1 - 1e-3)
    z = NormalDist().inv_cdf(1 - 0.05 / rise.size)
    return int(np.sum(rise > z * np.sqrt(2 * pooled * (1 - pooled) / window)))


def test_noisy_lists_are_approximations_with_truthful_flags() -> None:
    """Bernoulli lists: kind is approximation (A.2 fails), lower <= upper, A.2 flagged only
    for rises beyond window noise (the flag counts them exactly)."""
    shape = PiecewiseLinearShape.log_linear(60_000, top=1.1, slope=0.05)
    method = Paula()
    grid = method.grid(60_000)
    for seed in range(5):
        ranked = SimulatedRankedList(60_000, shape, seed=seed)
        est = method.run(ranked.size, ranked.labels)
        assert est.kind == "approximation"
        assert np.all(est.lower <= est.upper)
        assert np.all((est.lower <= est.precision) & (est.precision <= est.upper))
        kinds = est.row_kinds()
        assert set(kinds[est.ranks <= grid.head]) == {"exact"}
        local = ranked.true_local_precision(grid.points, 100)
        rises = _significant_rises(local, 100)
        flagged = [f for f in est.flags if "A.2 violated beyond" in f]
        assert bool(flagged) == (rises > 0)
        if rises:
            assert f"rises at {rises} of {grid.queries}" in flagged[0]


def test_missing_labels_and_tiny_lists() -> None:
    method = Paula()
    with pytest.raises(ValueError, match="missing"):
        method.estimate(10_000, Labels.empty())
    labels = (np.arange(500) % 3 == 0).astype(float)
    est = method.run(500, ArrayRankedList(labels).labels)  # N < g_ℓ: everything labelled
    assert est.annotations == 500
    np.testing.assert_allclose(est.at(np.arange(1, 501))[0], precision_function(labels))


def test_planning_two_billion_items_is_fast_and_small() -> None:
    method = Paula()
    size = 2_000_000_000
    head = np.arange(1, method.grid(size).head + 1)
    known = Labels(head, np.ones(head.size))
    tracemalloc.start()
    start = time.perf_counter()
    rest = method.plan(size, known)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert head.size + rest.size == method.budget(size)["annotations"]
    assert elapsed < 1.0 and peak < 200 * 2**20


def ppdb_proxy_ranking() -> np.ndarray:
    path = DATA / "ppdb2-human" / "ppdb-sample.tsv"
    if not path.exists():
        pytest.skip("shared PPDB data not available")
    frame = pd.read_csv(path, sep="\t", header=None, quoting=3)
    ratings = frame[4].str.split(",", expand=True).astype(float)
    score = ratings[0] + ratings[1]  # a noisy proxy score: two of the five ratings
    order = np.argsort(-score.to_numpy(), kind="stable")
    return (frame[0] >= 3).to_numpy(np.float64)[order]


def test_ppdb_proxy_flags_match_exact_checks() -> None:
    """Real labels (PPDB 2.0 human ratings, ranked by a proxy score): flags are truthful."""
    labels = ppdb_proxy_ranking()
    method = Paula()
    est = method.run(labels.size, ArrayRankedList(labels).labels)
    grid = method.grid(labels.size)
    assert est.annotations == method.budget(labels.size)["annotations"]
    local = local_precision(labels, 100, grid.points)
    assert any("A.2 violated beyond" in f for f in est.flags) == bool(
        _significant_rises(local, 100)
    )
    assert est.kind == "approximation" and np.all(est.lower <= est.upper)
