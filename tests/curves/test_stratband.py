"""StratBand: a band on precision@k valid at every rank at once, at PAULA's label count."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from scipy import stats

from receval.curves.base import Labels
from receval.curves.budget import curve_budget
from receval.curves.paula import Paula
from receval.curves.ranked import (
    ArrayRankedList,
    BumpShape,
    LogisticShape,
    SimulatedRankedList,
)
from receval.curves.stratband import StratBand, stratum_bounds

PAPER_N = [35_615, 356_150, 3_561_500, 35_615_000]
PAULA_LABELS = [11_292, 19_092, 26_892, 34_692]


def _misses(est, ranked) -> int:
    """Ranks past the exact prefix where the truth lies outside [lower, upper] (every rank)."""
    ranks = np.arange(est.exact_prefix + 1, ranked.size + 1)
    truth = ranked.true_precision(ranks)
    _, lower, upper = est.at(ranks)
    return int(np.sum((truth < lower - 1e-12) | (truth > upper + 1e-12)))


@pytest.mark.parametrize(("size", "paula"), list(zip(PAPER_N, PAULA_LABELS, strict=True)))
def test_label_count_never_exceeds_paula(size: int, paula: int) -> None:
    got = StratBand().budget(size)
    assert got["annotations"] <= paula == Paula().budget(size)["annotations"]
    assert got["strata"] == Paula().budget(size)["queries"]


def test_strata_cover_the_list_and_the_plan_matches_the_budget() -> None:
    for size in [3_000, 3_600, 50_000, 1_234_567]:
        head, bounds = stratum_bounds(size, 0.03, 3_400)
        if size <= head:
            assert bounds.size == 0
            continue
        assert bounds[-1] == size and np.all(np.diff(np.concatenate([[head], bounds])) > 0)
        method = StratBand(seed=3)
        first = method.plan(size, Labels.empty())
        np.testing.assert_array_equal(first, np.arange(1, head + 1))
        rest = method.plan(size, Labels(first, np.ones(first.size)))
        assert first.size + rest.size == method.budget(size)["annotations"]
        assert np.unique(rest).size == rest.size and rest.min() > head  # distinct draws
        # every stratum gets min(n, size) draws inside it
        lows = np.concatenate([[head], bounds[:-1]])
        counts = np.histogram(rest, bins=np.concatenate([lows + 0.5, [bounds[-1] + 0.5]]))[0]
        np.testing.assert_array_equal(counts, np.minimum(bounds - lows, 100))
        again = method.plan(size, Labels(first, np.zeros(first.size)))
        np.testing.assert_array_equal(rest, again)  # the plan does not depend on label values


def test_draws_are_uniform_within_a_stratum() -> None:
    """Position of the draws inside their stratum: uniform (KS test at level 1e-3)."""
    size = 400_000
    head, bounds = stratum_bounds(size, 0.03, 3_400)
    lows = np.concatenate([[head], bounds[:-1]])
    method = StratBand(seed=9)
    rest = method.plan(size, Labels(np.arange(1, head + 1), np.ones(head)))
    j = np.searchsorted(bounds, rest, side="left")
    position = (rest - lows[j] - 0.5) / (bounds[j] - lows[j])
    assert stats.kstest(position, "uniform").pvalue > 1e-3


LISTS = {
    "smooth": lambda n: LogisticShape(0.95, 0.35, n / 3, n / 10),
    "bumpy": lambda n: BumpShape(LogisticShape(0.9, 0.3, n / 4, n / 12), 0.4 * n, 0.5 * n, 0.3),
    "noisy-flat": lambda n: LogisticShape(0.6, 0.55, n / 2, n / 4),
    "low": lambda n: LogisticShape(0.2, 0.03, n / 3, n / 10),
}


@pytest.mark.parametrize("shape", sorted(LISTS))
@pytest.mark.parametrize("size", [10_000, 100_000, 1_000_000])
def test_band_contains_p_at_every_rank(shape: str, size: int) -> None:
    params = {"epsilon": 0.1, "window": 20} if size == 10_000 else {}
    ranked = SimulatedRankedList(size, LISTS[shape](size), seed=size % 97)
    method = StratBand(seed=1, **params)
    est = method.run(size, ranked.labels)
    assert est.kind == "band" and est.annotations == method.budget(size)["annotations"]
    assert np.all(est.lower <= est.precision) and np.all(est.precision <= est.upper)
    # The guarantee is all ranks with probability ≥ 0.95; the acceptance asks ≥ 95 % of ranks.
    ranks = size - est.exact_prefix
    assert _misses(est, ranked) <= 0.05 * ranks
    head = np.arange(1, est.exact_prefix + 1)
    np.testing.assert_allclose(est.at(head)[0], ranked.true_precision(head))


def test_simultaneous_coverage_frequency() -> None:
    """P(any rank missed) ≤ δ: over 60 seeds the failures stay within a binomial(60, δ) bound."""
    size = 30_000
    ranked = SimulatedRankedList(size, LISTS["bumpy"](size), seed=4)
    failures = 0
    for seed in range(60):
        est = StratBand(epsilon=0.1, window=20, seed=seed, delta=0.1).run(size, ranked.labels)
        failures += _misses(est, ranked) > 0
    assert failures <= stats.binom.ppf(1 - 1e-3, 60, 0.1)


def test_width_is_as_designed() -> None:
    """Knot half-width ≈ √(ε ln(2J/δ)/(4n)) (module docstring): ≤ 0.03 at the defaults."""
    budget = curve_budget("stratband", 356_150)
    assert budget["knot_halfwidth"] < 0.03 < budget["halfwidth"] < 0.04
    size = 100_000
    ranked = SimulatedRankedList(size, LISTS["smooth"](size), seed=2)
    method = StratBand()
    est = method.run(size, ranked.labels)
    beyond = est.ranks > est.exact_prefix
    # between knots the yield interpolation adds at most a factor 1+ε on each side
    assert np.median((est.upper - est.lower)[beyond]) < 2 * budget["knot_halfwidth"] + 0.03
    # the designed half-width holds at every rank, whatever the labels
    assert np.max(est.upper - est.lower) / 2 <= method.designed_halfwidth(size) + 1e-12


def test_missing_labels_and_tiny_lists() -> None:
    method = StratBand()
    with pytest.raises(ValueError, match="missing"):
        method.estimate(10_000, Labels.empty())
    labels = (np.arange(500) % 3 == 0).astype(float)
    est = method.run(500, ArrayRankedList(labels).labels)
    assert est.annotations == 500 and est.kind == "band"
    np.testing.assert_allclose(est.at(np.arange(1, 501))[0], np.cumsum(labels) / np.arange(1, 501))


def test_parameters_are_validated() -> None:
    for bad in ({"epsilon": 0}, {"delta": 1.0}, {"labels_per_stratum": 1}, {"window": 0}):
        with pytest.raises(ValueError):
            StratBand(**bad)


def test_planning_two_billion_items_is_fast_and_small() -> None:
    method = StratBand()
    size = 2_000_000_000
    tracemalloc.start()
    start = time.perf_counter()
    head = method.plan(size, Labels.empty())
    known = Labels(head, np.ones(head.size))
    rest = method.plan(size, known)
    budget = method.budget(size)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert head.size + rest.size == budget["annotations"] <= Paula().budget(size)["annotations"]
    assert elapsed < 2.0 and peak < 300 * 2**20


def test_bernstein_variant_is_valid_and_narrower_at_high_precision() -> None:
    size = 200_000
    for shape, narrower in (
        (LogisticShape(0.99, 0.9, size / 3, size / 10), True),
        (LISTS["low"](size), None),
    ):
        ranked = SimulatedRankedList(size, shape, seed=3)
        hoeffding = StratBand(seed=1).run(size, ranked.labels)
        bernstein = StratBand(seed=1, estimator="bernstein").run(size, ranked.labels)
        assert bernstein.annotations == hoeffding.annotations  # same plan
        assert _misses(bernstein, ranked) <= 0.05 * (size - bernstein.exact_prefix)
        if narrower:
            width = lambda est: np.median((est.upper - est.lower)[est.ranks > est.exact_prefix])  # noqa: E731
            assert width(bernstein) < width(hoeffding)
    with pytest.raises(ValueError, match="estimator"):
        StratBand(estimator="clopper-pearson")


def test_simultaneous_halfwidths_hold_for_the_worst_case_strata() -> None:
    """Monte Carlo of the maximal inequality itself: strata half positive (the variance the
    Hoeffding-Serfling proxy allows), draws without replacement (hypergeometric), the design of
    N = 356,150.  P(some knot missed) must stay ≤ δ; tolerance 3 binomial standard deviations
    of the estimated frequency over R runs."""
    from receval.curves.stratband import hoeffding_halfwidths, serfling_proxy

    delta, runs = 0.3, 4_000
    head, bounds = stratum_bounds(356_150, 0.03, 3_400)
    widths = np.diff(np.concatenate([[head], bounds]))
    drawn = np.minimum(widths, 100)
    half = hoeffding_halfwidths(np.cumsum(serfling_proxy(widths, drawn)), bounds, delta)
    rng = np.random.default_rng(2024)
    good = widths // 2
    hits = rng.hypergeometric(good, widths - good, drawn, size=(runs, widths.size))
    error = np.cumsum(widths / drawn * (hits - drawn * good / widths), axis=1)
    missed = np.mean(np.any(np.abs(error) >= half, axis=1))
    assert missed <= delta + 3 * np.sqrt(delta * (1 - delta) / runs)


def test_halfwidth_sizes_the_strata_samples() -> None:
    size = 356_150
    sized = StratBand(halfwidth=0.025)
    n = sized.per_stratum(size)
    budget = sized.budget(size)
    assert (
        budget["halfwidth"] <= 0.025 < StratBand(labels_per_stratum=n - 1).budget(size)["halfwidth"]
    )
    # at every rank, not only at the knots (issue 22: the last stratum was twice as wide)
    for shape in ("noisy-flat", "low"):
        ranked = SimulatedRankedList(size, LISTS[shape](size), seed=6)
        est = sized.run(size, ranked.labels)
        assert np.max(est.upper - est.lower) / 2 <= budget["halfwidth"]
    head = sized.plan(size, Labels.empty())
    rest = sized.plan(size, Labels(head, np.ones(head.size)))
    assert head.size + rest.size == budget["annotations"]
    with pytest.raises(ValueError, match="not both"):
        StratBand(halfwidth=0.02, labels_per_stratum=50)


def test_declared_label_noise_covers_the_true_curve() -> None:
    """10 % of the labels flipped: the band about the labels given misses the true curve on
    every seed; with η = 0.1 declared it holds at every rank (6 seeds, N = 20,000), and its
    guarantee says what it covers."""
    size = 20_000
    lst = SimulatedRankedList(size, LogisticShape(0.8, 0.3, size / 3, size / 10), seed=5)
    ranks = np.arange(1, size + 1)
    truth = lst.true_precision(ranks)
    for seed in range(6):
        flips = np.random.default_rng([11, seed]).random(size + 1) < 0.1

        def noisy(r, flips=flips):
            return np.where(flips[r], 1.0 - lst.labels(r), lst.labels(r))

        given = StratBand(epsilon=0.1, window=20, seed=seed).run(size, noisy)
        declared = StratBand(epsilon=0.1, window=20, seed=seed, eta=0.1).run(size, noisy)
        for est, holds in ((given, False), (declared, True)):
            _, lo, hi = est.at(ranks)
            assert np.all((truth >= lo - 1e-12) & (truth <= hi + 1e-12)) == holds
        assert declared.exact_prefix == 0 and declared.kind == "band"
        assert "TRUE labels" in declared.guarantee and "eta = 0.1" in declared.guarantee
        assert declared.annotations == given.annotations  # the same plan
    budget = StratBand(eta=0.1).budget(size)
    assert budget["halfwidth"] is None and "flipped" in budget["guarantee"]
    assert curve_budget("stratband", size, eta=0.1)["eta"] == 0.1
    for bad in (
        {"eta": 0.5},
        {"eta": 0.1, "halfwidth": 0.05},
        {"eta": 0.1, "estimator": "bernstein"},
    ):
        with pytest.raises(ValueError, match="eta"):
            StratBand(**bad)
