"""TailBand: exact head, uniform tail sample without replacement, exact hypergeometric band."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import load_bench
from scipy import stats

from receval.curves import make_method
from receval.curves.base import Labels
from receval.curves.budget import curve_budget
from receval.curves.paula import Paula
from receval.curves.ranked import ArrayRankedList, LogisticShape, SimulatedRankedList
from receval.curves.stratband import StratBand
from receval.curves.tailband import TailBand, hypergeometric_bounds, log_hypergeometric_tail

BENCH = Path(__file__).resolve().parents[2] / "bench" / "curves_tightness.py"


def _bench():
    return load_bench("curves_tightness")


def _misses(est, ranked) -> int:
    ranks = np.arange(est.exact_prefix + 1, ranked.size + 1)
    truth = ranked.true_precision(ranks)
    _, lower, upper = est.at(ranks)
    return int(np.sum((truth < lower - 1e-12) | (truth > upper + 1e-12)))


def test_plan_never_exceeds_stratbands_labels_and_draws_are_uniform() -> None:
    for size in (3_000, 50_000, 1_234_567):
        method = TailBand(seed=4)
        budget = method.budget(size)
        assert budget["annotations"] <= StratBand().budget(size)["annotations"]
        assert budget["annotations"] <= Paula().budget(size)["annotations"]
        assert (
            curve_budget("tailband", size)["annotations"] == TailBand().budget(size)["annotations"]
        )
        head = method.plan(size, Labels.empty())
        np.testing.assert_array_equal(head, np.arange(1, min(size, method.head(size)) + 1))
        rest = method.plan(size, Labels(head, np.ones(head.size)))
        assert head.size + rest.size == budget["annotations"]
        if rest.size:
            assert np.unique(rest).size == rest.size and rest.min() > head.size
            half = Labels(head, (np.arange(head.size) % 2).astype(float))
            again = method.plan(size, Labels(head, np.ones(head.size)))
            np.testing.assert_array_equal(rest, again)  # tail labels do not steer the plan
            # only the head's precision chooses between strata + uniform and uniform alone
            assert method.plan(size, half).size <= rest.size + head.size
    size = 400_000
    method = TailBand(seed=9)
    design = method.design(size)
    uniform, strata, pool = method.draws(size)
    assert pool.size == 0 and design.strata.size > 10 and design.strata[-1] == size // 10
    assert uniform.size == design.uniform and all(s.size <= design.per_stratum for s in strata)
    position = (uniform - design.head - 0.5) / design.tail
    assert stats.kstest(position, "uniform").pvalue > 1e-3
    plain = TailBand(seed=9, split=0.0).design(size)
    assert plain.strata.size == 0 and plain.uniform == method.tail_labels(size)


def test_low_precision_pools_a_second_uniform_sample_up_to_the_reach() -> None:
    """At a head precision of 0.05 the strata lose; M_r ranks of (h, k*] are drawn among those
    the uniform sample missed, so the pooled draws there form one uniform sample."""
    size = 400_000
    method = TailBand(seed=3)
    d = method.design(size, 0.05)
    assert d.strata.size == 0 and d.pool > 0 and d.reach == size // 10
    assert d.uniform + d.pool == method.tail_labels(size)
    assert d.delta_uniform + d.delta_pool == pytest.approx(method.delta)
    uniform, strata, pool = method.draws(size, 0.05)
    assert not strata and pool.size == d.pool and np.intersect1d(uniform, pool).size == 0
    assert pool.min() > d.head and pool.max() <= d.reach
    pooled = np.concatenate([uniform[uniform <= d.reach], pool])
    position = (pooled - d.head - 0.5) / (d.reach - d.head)
    assert stats.kstest(position, "uniform").pvalue > 1e-3
    budget = method.budget(size)
    assert budget["reach_samples"] == 0  # the plan before any label assumes a head of ½


def test_the_uniform_part_alone_matches_the_baseline_at_n() -> None:
    """The design's rule: z_u²(1 − M_u/T)/M_u ≤ z_0²/M (module docstring)."""
    from scipy.stats import norm

    for size in (100_000, 10**6, 10**8, 2 * 10**9):
        method = TailBand()
        d = method.design(size)
        total = method.tail_labels(size)
        full = grid_points_of(method, size)
        z_u = norm.isf(d.delta_uniform / (2 * d.grid.size))
        z_0 = norm.isf(method.delta / (2 * full))
        assert z_u**2 * (1 - d.uniform / d.tail) / d.uniform <= z_0**2 / total
        assert d.delta_uniform + d.delta_strata == pytest.approx(method.delta)


def grid_points_of(method: TailBand, size: int) -> int:
    from receval.curves.tailband import grid_points

    return grid_points(method.head(size), size, 1 + method.grid).size


def test_log_tail_matches_scipy() -> None:
    rng = np.random.default_rng(3)
    for population, draws in ((60, 25), (5_000, 700), (96_600, 11_392)):
        marked = rng.integers(0, population, 300)
        x = rng.integers(0, draws + 1, 300)
        for lower, ref in (
            (True, stats.hypergeom.cdf(x, population, marked, draws)),
            (False, stats.hypergeom.sf(x - 1, population, marked, draws)),
        ):
            got = np.exp(log_hypergeometric_tail(x, population, marked, draws, lower))
            keep = ref > 1e-250
            np.testing.assert_allclose(got[keep], ref[keep], rtol=1e-8)


def test_bounds_are_the_exact_test_inversion() -> None:
    """L is the smallest and U the largest K the exact test keeps (brute force)."""
    rng = np.random.default_rng(1)
    population, draws, alpha = 400, 90, 1e-3
    marked = rng.integers(0, population, 60)
    hits = rng.hypergeometric(marked, population - marked, draws)
    cap = np.full(hits.shape, population)
    lower, upper = hypergeometric_bounds(hits, hits, population, draws, cap, alpha)
    ks = np.arange(population + 1)
    for x, lo, hi in zip(hits, lower, upper, strict=True):
        keep_up = stats.hypergeom.cdf(x, population, ks, draws) > alpha * (1 - 1e-4)
        keep_lo = stats.hypergeom.sf(x - 1, population, ks, draws) > alpha * (1 - 1e-4)
        assert hi == ks[keep_up].max()
        assert lo == (ks[keep_lo].min() if x > 0 else 0)


LISTS = {
    "falling": lambda n: LogisticShape(0.95, 0.35, n / 3, n / 10),
    "flat": lambda n: LogisticShape(0.5, 0.5, n / 2, n / 4),
    "low": lambda n: LogisticShape(0.06, 0.005, n / 5, n / 10),
}


@pytest.mark.parametrize("shape", sorted(LISTS))
def test_band_contains_p_at_every_rank(shape: str) -> None:
    size = 60_000
    ranked = SimulatedRankedList(size, LISTS[shape](size), seed=5)
    method = TailBand(seed=2)
    est = method.run(size, ranked.labels)
    assert est.kind == "band" and est.annotations <= method.head(size) + method.tail_labels(size)
    assert np.all(est.lower <= est.precision) and np.all(est.precision <= est.upper)
    assert _misses(est, ranked) == 0
    assert "about the labels given" in est.guarantee
    if shape == "low":  # the strata lose at low precision
        assert "more ranks drawn uniformly up to rank" in est.guarantee


@pytest.mark.parametrize("shape", ["flat", "low"])
def test_simultaneous_coverage_frequency(shape: str) -> None:
    """P(any rank missed) ≤ δ: over 60 seeds at δ = 0.3 (so misses happen) within binomial
    (flat: strata + uniform sample; low: pool + uniform sample)."""
    size = 20_000
    ranked = SimulatedRankedList(size, LISTS[shape](size), seed=4)
    failures = sum(
        _misses(
            TailBand(epsilon=0.1, window=20, seed=s, delta=0.3).run(size, ranked.labels), ranked
        )
        > 0
        for s in range(60)
    )
    assert failures <= stats.binom.ppf(1 - 1e-3, 60, 0.3)


def test_merged_ties_and_tiny_lists() -> None:
    labels = np.where(np.arange(20_000) % 7 == 0, 0.5, (np.arange(20_000) % 3 == 0) * 1.0)
    est = TailBand(epsilon=0.1, window=20, seed=1).run(labels.size, lambda r: labels[r - 1])
    ranks = np.arange(1, labels.size + 1)
    truth = np.cumsum(labels) / ranks
    _, lower, upper = est.at(ranks)
    assert np.all((lower <= truth + 1e-12) & (truth <= upper + 1e-12))
    small = ArrayRankedList((np.arange(500) % 3 == 0).astype(float))
    est = make_method("tailband").run(500, small.labels)
    assert est.annotations == 500 and est.kind == "band"
    with pytest.raises(ValueError, match="missing"):
        TailBand().estimate(10_000, Labels.empty())
    for bad in ({"epsilon": 0}, {"delta": 1.0}, {"grid": 0}, {"labels": 0}, {"seed": -1}):
        with pytest.raises(ValueError):
            TailBand(**bad)


def test_planning_two_billion_items_is_fast_and_small() -> None:
    """Both planning stages and the budget at N = 2·10⁹: under 1 s of CPU time (the process's
    own, so a loaded machine does not fail it as wall time did; measured warm, after one plan
    of another size has paid the imports) and under 300 MiB of traced allocations."""
    size = 2_000_000_000
    TailBand().plan(10**6, Labels.empty())  # imports and one-off set-up, not planning
    method = TailBand()
    tracemalloc.start()
    start = time.process_time()
    head = method.plan(size, Labels.empty())
    rest = method.plan(size, Labels(head, np.ones(head.size)))
    budget = method.budget(size)
    cpu = time.process_time() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert head.size + rest.size == budget["annotations"]
    assert cpu < 1.0 and peak < 300 * 2**20


@pytest.mark.parametrize("shape", ["falling", "low"])
def test_no_wider_than_the_baseline_at_equal_labels(shape: str) -> None:
    """Median half-width over 12 seeds at k = 5/10/50/100 % of N: TailBand ≤ H+CP (bench)."""
    bench = _bench()
    size = 30_000
    ranked = SimulatedRankedList(size, LISTS[shape](size), seed=8)
    ks = np.array([size // 20, size // 10, size // 2, size])
    ours, base = [], []
    for seed in range(12):
        method = TailBand(epsilon=0.1, window=20, seed=seed)
        est = method.run(size, ranked.labels)
        _, lo, hi = est.at(ks)
        ours.append(hi - lo)
        band, labels = bench.hcp_band(
            size, ranked.labels, method.head(size), method.tail_labels(size), 0.05, seed
        )
        assert labels <= est.annotations
        lo, hi = band.at(ks)
        base.append(hi - lo)
    assert np.all(np.median(ours, axis=0) <= np.median(base, axis=0))


def test_declared_label_noise_widens_the_band_to_the_true_curve() -> None:
    """10 % flipped labels: the band about the given labels misses the true curve; declared
    η = 0.1 the band holds at every rank (4 seeds, N = 20,000)."""
    size = 20_000
    lst = SimulatedRankedList(size, LogisticShape(0.8, 0.3, size / 3, size / 10), seed=5)
    ranks = np.arange(1, size + 1)
    truth = lst.true_precision(ranks)
    for seed in range(4):
        flips = np.random.default_rng([7, seed]).random(size + 1) < 0.1

        def noisy(r, flips=flips):
            return np.where(flips[r], 1.0 - lst.labels(r), lst.labels(r))

        given = TailBand(epsilon=0.1, window=20, seed=seed).run(size, noisy)
        declared = TailBand(epsilon=0.1, window=20, seed=seed, eta=0.1).run(size, noisy)
        for est, holds in ((given, False), (declared, True)):
            _, lo, hi = est.at(ranks)
            inside = np.all((truth >= lo - 1e-12) & (truth <= hi + 1e-12))
            assert inside == holds
        assert declared.exact_prefix == 0 and "eta = 0.1" in declared.guarantee
    with pytest.raises(ValueError, match="eta"):
        TailBand(eta=0.5)


def test_judge_stratified_band_is_valid_and_narrower_with_a_good_judge() -> None:
    """A judge right on 95 % of the items: the band narrows at 50/100 % of N (and is no wider
    at 10 %) at the same labels; a useless judge (random scores) is left out after the pilot (which costs ≤ 10 %),
    and forced in the band still holds at every rank (6 seeds each, N = 40,000)."""
    from receval.curves.judged import JudgeScores

    size = 40_000
    lst = SimulatedRankedList(size, LogisticShape(0.8, 0.3, size / 3, size / 10), seed=5)
    ranks = np.arange(1, size + 1)
    labels = lst.labels(ranks)
    rng = np.random.default_rng(2)
    good = JudgeScores(np.where(rng.random(size) < 0.05, 1 - labels, labels))
    random = rng.random(size)
    ks = np.array([size // 10, size // 2, size])
    widths, used = {}, {}
    for name, judge in (
        ("none", None),
        ("good", good),
        ("useless", JudgeScores(random)),
        ("forced", JudgeScores(random, always=True)),
    ):
        rows = []
        for seed in range(6):
            est = TailBand(epsilon=0.1, window=20, seed=seed, judge=judge).run(size, lst.labels)
            assert _misses(est, lst) == 0 and est.kind == "band"
            plain = TailBand(epsilon=0.1, window=20)
            assert est.annotations <= plain.head(size) + plain.tail_labels(size)
            _, lo, hi = est.at(ks)
            rows.append(hi - lo)
            used[name] = used.get(name, 0) + ("design weights" in est.guarantee)
            if name == "useless":
                assert "judge's scores were not used" in est.guarantee
        widths[name] = np.median(rows, axis=0)
    assert used["forced"] == 6 and used["good"] >= 4 and used.get("useless", 0) == 0
    assert widths["good"][0] <= widths["none"][0]  # 10 % of N: the strata are strong there
    assert np.all(widths["good"][1:] < 0.85 * widths["none"][1:])
    assert np.all(widths["useless"] <= 1.1 * widths["none"])  # the pilot's labels only
    with pytest.raises(ValueError, match="judge"):
        JudgeScores([0.2, 1.5])
    with pytest.raises(ValueError, match="judge scores for"):
        TailBand(judge=JudgeScores(good.scores[:-1])).run(size, lst.labels)
