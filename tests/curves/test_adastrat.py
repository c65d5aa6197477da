"""AdaStrat (Sabharwal & Xue 2018): envelope, bisection, QUERY sampling, guarantees, replay.

Statistical tests use fixed seeds; the number of allowed failures is the smallest k with
P(Binomial(runs, δ) > k) < 10⁻³, i.e. derived from the claimed confidence 1 − δ.
"""

from __future__ import annotations

import itertools
import math
import tracemalloc
from decimal import Decimal, getcontext

import numpy as np
import pytest
from scipy import stats

from receval.curves.adastrat import (
    AdaStrat,
    DrawProcess,
    Envelope,
    adastrat_constants,
    geometric_midpoint,
    hoeffding_sample_size,
)
from receval.curves.base import Labels, run_to_completion
from receval.curves.precision_function import envelope as reference_envelope
from receval.curves.precision_function import weak_monotonicity_violations
from receval.curves.ranked import (
    ArrayRankedList,
    BumpShape,
    LogisticShape,
    PowerShape,
    SimulatedRankedList,
)

N_PPDB = 35_615


def allowed_failures(runs: int, delta: float) -> int:
    """Smallest k with P(Binomial(runs, δ) > k) < 1e-3."""
    return int(stats.binom.ppf(1 - 1e-3, runs, delta))


def ppdb_like_labels(seed: int = 2018) -> np.ndarray:
    """A fully labelled PPDB-36K-sized list: decreasing density 0.95 → 0.32, p(N) ≈ 0.52."""
    i = np.arange(1, N_PPDB + 1)
    q = 0.32 + 0.63 * (1 + i / 3000) ** -0.7
    return (np.random.default_rng(seed).random(N_PPDB) < q).astype(np.float64)


def weak_monotone_list(shape: object, size: int = N_PPDB) -> SimulatedRankedList:
    lst = SimulatedRankedList(size, shape, arrangement="balanced")
    c = adastrat_constants(0.03, 100)
    labels = lst.labels(np.arange(1, size + 1))
    # The premise of Theorem 3, checked exactly on the realised labels.
    assert weak_monotonicity_violations(labels, c.m, c.r_tilde).size == 0
    return lst


# ----------------------------------------------------------------------------- constants


def test_constants_match_the_papers_defaults() -> None:
    c = adastrat_constants(0.03, 100)
    # r̃ = ⌈102/0.03⌉, ℓ = ⌈log_1.03 3400⌉ = 276, m = ⌊0.03·1.03^276 − 1⌋, l̃ = max(⌈1.0609m/0.0609⌉, r̃)
    assert (c.r_tilde, c.m, c.l_tilde) == (3400, 103, 3400)
    assert math.ceil(Decimal("1.0609") * 103 / Decimal("0.0609")) == 1795
    big = adastrat_constants(0.5, 100)  # here the first term of l̃ wins
    assert big.l_tilde == max(math.ceil(2.25 * big.m / 1.25), big.r_tilde) > big.r_tilde


def test_sample_size_is_equation_5() -> None:
    for k in (1, 2, 18, 21, 300):
        for beta, pmin, eta in ((1.05, 0.5, 0.0), (1.1, 0.3, 0.02)):
            direct = (1 + eta) ** 2 / (2 * (beta - 1 - eta) ** 2 * pmin**2) * math.log(2 * k / 0.05)
            assert hoeffding_sample_size(k, 0.05, beta, pmin, eta) == math.ceil(direct)
    assert hoeffding_sample_size(18, 0.05, 1.05, 0.5) == 5264
    with pytest.raises(ValueError):
        hoeffding_sample_size(3, 0.05, 1.01, 0.5, eta=0.02)


def test_geometric_midpoint_rounds_sqrt_exactly() -> None:
    getcontext().prec = 60
    rng = np.random.default_rng(1)
    lows = rng.integers(1, 2_000_000_000, 500)
    highs = lows + rng.integers(1, 2_000_000_000, 500)
    for low, high in zip(lows.tolist(), highs.tolist(), strict=True):
        exact = (Decimal(low) * Decimal(high)).sqrt()
        assert geometric_midpoint(low, high) == int(
            (exact + Decimal("0.5")).to_integral_value(rounding="ROUND_FLOOR")
        )


# ----------------------------------------------------------------------------- envelope


@pytest.mark.parametrize("epsilon, r_tilde", [(0.03, None), (0.03, 3000), (0.5, None)])
def test_envelope_is_eqs_3_4_and_height_is_exact(epsilon: float, r_tilde: int | None) -> None:
    c = adastrat_constants(epsilon, 100, r_tilde=r_tilde)
    rng = np.random.default_rng(7)
    for trial in range(6):
        size = int(rng.integers(c.l_tilde + 500, 40 * c.l_tilde))
        prefix = np.cumsum(rng.random(c.l_tilde) < 0.8).astype(np.float64)
        ys = np.unique(np.concatenate([[size], rng.integers(c.l_tilde + 1, size, 8)]))
        if trial % 2:  # points closer than m interact through the middle branches
            ys = np.unique(np.concatenate([ys, ys[:-1] + rng.integers(1, c.m, ys.size - 1)]))
        ps = rng.uniform(0.2, 0.95, ys.size)
        env = Envelope(size, c, prefix, ys, ps)
        v = np.arange(c.l_tilde + 1, size + 1)
        lb, ub = env.bounds(v)
        # Reference: Definition 2 intersected over every exact point y ∈ [r̃, l̃] and the queries.
        yp = np.arange(c.r_tilde, c.l_tilde + 1)
        ref_lb, ref_ub = reference_envelope(v, [*yp, *ys], [*(prefix[yp - 1] / yp), *ps], c.m)
        np.testing.assert_allclose(lb, ref_lb, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ub, ref_ub, rtol=0, atol=1e-12)
        ratio = np.where(lb > 0, ub / np.where(lb > 0, lb, 1), np.inf)
        stops = np.concatenate([[c.l_tilde], ys])
        for i in range(stops.size - 1):
            for j in (i + 1, min(i + 3, stops.size - 1)):
                a, b = int(stops[i]), int(stops[j])
                brute = ratio[max(a - c.l_tilde - 1, 0) : b - c.l_tilde].max()
                if a == c.l_tilde:  # p(l̃) is exact: ub/lb = 1 there
                    brute = max(brute, 1.0)
                assert env.height(a, b) == pytest.approx(brute, rel=1e-12)
        head = np.arange(1, c.l_tilde + 1)
        np.testing.assert_allclose(env.geometric_mean(head), prefix / head)


def test_envelope_through_exact_points_contains_p_theorem_2() -> None:
    lst = weak_monotone_list(PowerShape(high=0.95, low=0.3, scale=2e3, exponent=0.8))
    c = adastrat_constants(0.03, 100)
    ranks = np.arange(1, lst.size + 1)
    p = lst.true_precision(ranks)
    prefix = p[: c.l_tilde] * np.arange(1, c.l_tilde + 1)
    ys = np.array([4_100, 5_000, 5_060, 9_000, 20_000, lst.size])
    env = Envelope(lst.size, c, prefix, ys, p[ys - 1])
    lb, ub = env.bounds(ranks)
    assert np.all(lb <= p + 1e-12) and np.all(p <= ub + 1e-12)


# ----------------------------------------------------------------------------- QUERY draws


def test_draws_are_nested_and_survive_splits() -> None:
    proc = DrawProcess(seed=3, start=3_400, end=1_000_000)
    first = proc.sample(1_000_000, 300)
    proc.split(50_000)
    proc.split(7_000)
    more = proc.sample(1_000_000, 900)
    np.testing.assert_array_equal(more[:300], first)
    low = proc.sample(50_000, 200)
    assert np.all((low > 3_400) & (low <= 50_000))
    # The lowest draws of (l̃, 50000] among the 900 are the first ones of the low sample.
    inside = more[more <= 50_000]
    np.testing.assert_array_equal(low[: inside.size], inside[: min(inside.size, 200)])


def test_draws_are_uniform_on_the_prefix_complement() -> None:
    # Strata generated to different heights (split, then queried at different sizes) must
    # still give i.i.d. uniform draws on (l̃, r]: count those in (l̃, c] over many seeds.
    start, r, c = 3_400, 100_000, 20_000
    n, seeds = 400, 150
    inside = 0
    for seed in range(seeds):
        proc = DrawProcess(seed=seed, start=start, end=r)
        proc.split(c)
        proc.sample(c, 250)  # raises the density of (l̃, c] first
        inside += int(np.sum(proc.sample(r, n) <= c))
    expected = seeds * n * (c - start) / (r - start)
    sd = math.sqrt(seeds * n * (c - start) / (r - start) * (1 - (c - start) / (r - start)))
    assert abs(inside - expected) < 5 * sd


# ----------------------------------------------------------------------------- the algorithm


def test_plan_replays_and_matches_run() -> None:
    lst = SimulatedRankedList(N_PPDB, LogisticShape(0.95, 0.5, 1.2e4, 4e3), seed=4)
    for estimator in ("hoeffding", "clopper-pearson"):
        method = AdaStrat(estimator=estimator, seed=11)
        first = method.plan(lst.size, Labels.empty())
        np.testing.assert_array_equal(first, np.arange(1, 3_401))
        known = Labels(first, lst.labels(first))
        second = method.plan(lst.size, known)
        np.testing.assert_array_equal(second, method.plan(lst.size, known))
        assert np.all((second > 3_400) & (second <= lst.size))
        assert np.all(np.diff(second) > 0)
        if estimator == "hoeffding":  # QUERY(N) at K = 1: ⌈s_1·(N − l̃)/N⌉ draws
            assert second.size <= math.ceil(2952 * (lst.size - 3_400) / lst.size)
        via_plan = run_to_completion(method, lst.size, lst.labels)
        direct, trace = method.run_with_trace(lst.size, lst.labels)
        np.testing.assert_array_equal(via_plan.ranks, direct.ranks)
        np.testing.assert_array_equal(via_plan.precision, direct.precision)
        assert via_plan.annotations == direct.annotations == trace.annotations
        assert via_plan.flags == direct.flags


def test_interim_estimates_are_flagged() -> None:
    method = AdaStrat(seed=1)
    lst = SimulatedRankedList(N_PPDB, LogisticShape(0.95, 0.5, 1.2e4, 4e3), seed=4)
    empty = method.estimate(lst.size, Labels.empty())
    assert empty.flags[0].startswith("incomplete") and np.isnan(empty.precision[0])
    first = method.plan(lst.size, Labels.empty())
    known = Labels(first, lst.labels(first))
    interim = method.estimate(lst.size, known)
    assert interim.flags[0].startswith("incomplete")
    np.testing.assert_allclose(interim.precision[:3_400], lst.true_precision(first))


def test_short_lists_are_labelled_exactly() -> None:
    labels = (np.random.default_rng(0).random(2_000) < 0.7).astype(np.float64)
    lst = ArrayRankedList(labels)
    method = AdaStrat()
    np.testing.assert_array_equal(method.plan(2_000, Labels.empty()), np.arange(1, 2_001))
    curve = run_to_completion(method, 2_000, lst.labels)
    np.testing.assert_allclose(curve.precision, lst.true_precision(np.arange(1, 2_001)))
    assert curve.annotations == 2_000 and curve.queried.size == 0 and curve.flags == ()


def test_stopping_rule_holds_on_every_leaf_and_queries_obey_theorem_4() -> None:
    lst = SimulatedRankedList(356_150, PowerShape(0.95, 0.35, 2e3, 0.7), seed=2)
    method = AdaStrat(seed=5)
    curve, trace = method.run_with_trace(lst.size, lst.labels)
    env = trace.envelope
    tol = (1 + method.epsilon) ** 2
    leaves = sorted(trace.leaves)
    assert leaves[0][0] == 3_400 and leaves[-1][1] == lst.size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(leaves))
    for low, high in leaves:
        assert high <= tol * low or env.height(low, high) <= tol
    bound = math.floor(math.log(lst.size / 3_400) / math.log(1.03)) + 1
    assert trace.queries <= bound
    np.testing.assert_array_equal(curve.queried, np.array(sorted(trace.query_order)))
    # Every queried point is the geometric mid-point of two earlier points (or N).
    seen = {3_400, lst.size}
    for r in trace.query_order[1:]:
        assert any(geometric_midpoint(a, b) == r for a in seen for b in seen if a < b)
        seen.add(r)


@pytest.mark.parametrize("estimator", ["hoeffding", "clopper-pearson"])
def test_guarantee_on_weakly_monotone_lists(estimator: str) -> None:
    shapes = [
        PowerShape(high=0.95, low=0.55, scale=2e3, exponent=0.8),
        LogisticShape(high=0.95, low=0.5, midpoint=8e3, width=3e3),
    ]
    runs, failures = 0, 0
    for shape in shapes:
        lst = weak_monotone_list(shape)
        ranks = np.arange(3_401, lst.size + 1)  # ranks ≤ l̃ are exact (tested elsewhere)
        p = lst.true_precision(ranks)
        for seed in range(10):
            method = AdaStrat(estimator=estimator, seed=seed)
            curve, trace = method.run_with_trace(lst.size, lst.labels)
            exact = np.abs(np.log(trace.envelope.geometric_mean(ranks) / p)).max()
            step = np.abs(np.log(curve.at(ranks)[0] / p)).max()
            ratio = 1 + method.epsilon / 10
            runs += 1
            failures += int(
                exact > math.log(method.factor) or step > math.log(method.factor * ratio)
            )
    assert failures <= allowed_failures(runs, 0.05)


def test_intervals_cover_and_no_false_monotonicity_alarms() -> None:
    lst = weak_monotone_list(LogisticShape(high=0.95, low=0.5, midpoint=8e3, width=3e3))
    runs, missed, alarms = 0, 0, 0
    for estimator in ("hoeffding", "clopper-pearson", "bernstein"):
        for seed in range(8):
            method = AdaStrat(estimator=estimator, seed=100 + seed)
            curve, trace = method.run_with_trace(lst.size, lst.labels)
            p = lst.true_precision(np.array([pt.rank for pt in trace.points]))
            lo = np.array([pt.lower for pt in trace.points])
            hi = np.array([pt.upper for pt in trace.points])
            runs += 1
            missed += int(np.any((p < lo) | (p > hi)))
            alarms += int(any(f.startswith("weak-monotonicity") for f in curve.flags))
            if estimator != "hoeffding":
                for pt in trace.points:
                    if pt.resolved:
                        assert pt.upper <= method.beta**2 * pt.lower * (1 + 1e-12)
                        assert pt.value == pytest.approx(math.sqrt(pt.lower * pt.upper))
    assert missed <= allowed_failures(runs, 0.05)
    assert alarms <= allowed_failures(runs, 0.05)


def test_noisy_labels_keep_the_guarantee() -> None:
    lst = weak_monotone_list(PowerShape(high=0.95, low=0.55, scale=2e3, exponent=0.8))
    ranks = np.arange(1, lst.size + 1)
    p = lst.true_precision(ranks)
    eta = 0.01
    flips = np.random.default_rng(3).random(lst.size) < eta  # one noisy label per rank

    def noisy(r: np.ndarray) -> np.ndarray:
        return np.abs(lst.labels(r) - flips[r - 1])

    runs, failures = 0, 0
    for estimator in ("hoeffding", "clopper-pearson"):
        for seed in range(4):
            method = AdaStrat(eta=eta, beta=1.06, estimator=estimator, seed=seed)
            _, trace = method.run_with_trace(lst.size, noisy)
            # The prefix is read with noise too; the guarantee is for ranks beyond l̃.
            tail = ranks[3_400:]
            runs += 1
            err = np.abs(np.log(trace.envelope.geometric_mean(tail) / p[3_400:])).max()
            failures += int(err > math.log(method.factor))
    assert failures <= allowed_failures(runs, 0.05)


def test_a_detectable_bump_is_flagged() -> None:
    # p falls to ≈0.62 by rank 12,000, then rises to ≈0.76 at 24,000 (a PAULA-Fig.-2 bump).
    shape = BumpShape(LogisticShape(0.95, 0.3, 6_000, 1_000), 12_000, 24_000, 0.6)
    lst = SimulatedRankedList(N_PPDB, shape, seed=1)
    labels = lst.labels(np.arange(1, lst.size + 1))
    assert weak_monotonicity_violations(labels, 103, 3_400).size > 0
    detected = 0
    for seed in range(6):
        curve, trace = AdaStrat(seed=seed).run_with_trace(lst.size, lst.labels)
        flags = [f for f in curve.flags if f.startswith("weak-monotonicity-violated:")]
        proven = any(
            b.rank >= a.rank + 103 and b.lower > a.upper for a in trace.points for b in trace.points
        )
        if proven:  # two queried intervals contradict weak monotonicity: it must say so
            assert flags
        if flags:
            detected += 1
            low, high = (int(x) for x in flags[0].split("near ranks ")[1].split(" ")[0].split(".."))
            assert low < 24_000 and high > 12_000
    assert detected >= 1


def test_pmin_violation_is_flagged_for_hoeffding_only() -> None:
    lst = SimulatedRankedList(N_PPDB, LogisticShape(0.6, 0.2, 8e3, 3e3), seed=3)
    hoeffding = AdaStrat(seed=1).run(lst.size, lst.labels)
    assert any(f.startswith("pmin-violated") for f in hoeffding.flags)
    cp = AdaStrat(seed=1, estimator="clopper-pearson").run(lst.size, lst.labels)
    assert not any(f.startswith("pmin-violated") for f in cp.flags)


def test_ppdb_like_efficiency_against_the_paper() -> None:
    base = ppdb_like_labels()
    paper = {1: 14_612, 10: 24_004}
    for scale, reported in paper.items():
        lst = (
            ArrayRankedList(base)
            if scale == 1
            else SimulatedRankedList.scaled(base, scale=scale, window=100, seed=7)
        )
        hoeffding = AdaStrat(seed=1).run_with_trace(lst.size, lst.labels)[1]
        assert hoeffding.queries <= 21 and hoeffding.annotations <= reported
        cp = AdaStrat(seed=1, estimator="clopper-pearson").run_with_trace(lst.size, lst.labels)[1]
        assert cp.queries <= 21 and cp.annotations < hoeffding.annotations


def test_two_billion_items_in_little_memory() -> None:
    size = 2_000_000_000
    lst = SimulatedRankedList(size, LogisticShape(0.95, 0.55, 1e7, 3e6), seed=3)
    tracemalloc.start()
    curve, trace = AdaStrat(seed=2).run_with_trace(size, lst.labels)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert trace.complete and curve.ranks[-1] == size
    assert peak < 64 * 2**20  # the draws and knots, nothing of length N (which is 16 GB)
    # Realised p streamed up to 10⁶; beyond, E p(r) = D(r)/r, off by a few √(p(1−p)/r)/p at most.
    small = np.array([3_401, 10_000, 100_000, 10**6])
    large = np.unique(np.concatenate([trace.query_order, [10**7, 10**8, size]]))
    large = large[large > 10**6]
    err_small = np.abs(np.log(curve.at(small)[0] / lst.true_precision(small)))
    expected = lst.expected_precision(large)
    slack = 6 * np.sqrt(expected * (1 - expected) / large) / expected
    err_large = np.abs(np.log(curve.at(large)[0] / expected)) - slack
    assert np.all(err_small <= math.log(1.05 * 1.03 * 1.003))
    assert np.all(err_large <= math.log(1.05 * 1.03 * 1.003))


def test_parameters_are_validated() -> None:
    for bad in (
        {"epsilon": 0},
        {"beta": 1.0},
        {"eta": 0.5},
        {"estimator": "wald"},
        {"delta": 1.5},
        {"beta": 1.02, "eta": 0.03},
    ):
        with pytest.raises(ValueError):
            AdaStrat(**bad)
    budget = AdaStrat().budget(35_615_000)
    assert budget["queries"] == math.floor(math.log(35_615_000 / 3_400) / math.log(1.03)) + 1


def test_cli_options_and_settings() -> None:
    method = AdaStrat.from_options(epsilon=None, beta=1.1, estimator="bernstein", seed=4)
    assert method == AdaStrat(beta=1.1, estimator="bernstein", seed=4)
    settings = method.settings()
    assert settings["method"] == "adastrat" and settings["l_tilde"] == 3_400
    assert settings["factor"] == pytest.approx(1.1 * 1.03)
    with pytest.raises(ValueError, match="unknown AdaStrat option"):
        AdaStrat.from_options(windw=100)


@pytest.mark.parametrize(("top", "bottom"), [(0.35, 0.1), (0.5, 0.15)])
@pytest.mark.parametrize("noisy_prefix", [False, True])
def test_noise_corrected_band_holds_with_eta_0_1(top: float, bottom: float, noisy_prefix: bool):
    """The audit's scenarios: η = 0.1, p_min = 0.1, β = 1.25.  The band [lb/β, ub/(2−β)] holds
    at ≥ 95 % of ranks past the prefix (the prefix is assumed noise-free; with a noisy prefix
    the band's slack still absorbs its bias here), and the estimate is within β(1+ε)."""
    size, eta = 100_000, 0.1
    lst = SimulatedRankedList(size, LogisticShape(top, bottom, size / 3, size / 10), seed=5)
    for seed in range(3):
        method = AdaStrat(eta=eta, beta=1.25, pmin=0.1, seed=seed)
        lt = method.constants.l_tilde
        flips = np.random.default_rng([7, seed]).random(size + 1) < eta
        if not noisy_prefix:
            flips[: lt + 1] = False

        def noisy(ranks, flips=flips):
            labels = lst.labels(ranks)
            return np.where(flips[ranks], 1.0 - labels, labels)

        est = method.run(size, noisy)
        # ``band`` only where the default check works at the band's resolution (β = 1.25 makes
        # the band wide); otherwise the guarantee says why not
        assert est.kind == "band" or "cannot confirm" in est.guarantee
        ranks = np.arange(lt + 1, size + 1)
        truth = lst.true_precision(ranks)
        value, lower, upper = est.at(ranks)
        assert np.mean((lower <= truth + 1e-12) & (truth <= upper + 1e-12)) >= 0.95
        if not noisy_prefix:  # the corrected estimate keeps the β(1+ε) promise
            assert np.max(np.maximum(value / truth, truth / value)) <= method.factor
        assert {"envelope_lower", "envelope_upper"} <= set(est.columns)


def test_prefix_weak_monotonicity_check_runs_with_default_constants() -> None:
    """l̃ = r̃ = 3,400 by default; the check covers 1,700..3,297 of the exact prefix."""
    method = AdaStrat()
    c = method.constants
    assert c.l_tilde == c.r_tilde  # the old check (needs l̃ ≥ r̃ + m) could never run
    clean = weak_monotone_list(LogisticShape(0.95, 0.3, 6_000, 1_000))
    flags = method.run(clean.size, clean.labels).flags
    assert not any(f.startswith("weak-monotonicity-violated-in-prefix") for f in flags)
    # a rise inside the prefix (ranks 2,500-3,000) violates weak monotonicity there
    bumped = SimulatedRankedList(
        N_PPDB,
        BumpShape(LogisticShape(0.9, 0.3, 2_000, 500), 2_500, 3_000, 0.6),
        arrangement="balanced",
    )
    labels = bumped.labels(np.arange(1, c.l_tilde + 1))
    assert weak_monotonicity_violations(labels, c.m, c.l_tilde // 2).size > 0
    flags = method.run(bumped.size, bumped.labels).flags
    assert any(f.startswith("weak-monotonicity-violated-in-prefix") for f in flags)


def test_kind_is_band_only_when_the_premise_is_checked_at_the_bands_resolution() -> None:
    """Issue 22: with one to three queries nothing refutes weak monotonicity, so AdaStrat says
    ``approximation`` unless its check labels can see misses of the band's size; a gross
    violation is refuted by the default check; a large check on a monotone list gives ``band``."""
    size = 60_000
    falling = SimulatedRankedList(size, LogisticShape(0.95, 0.35, size / 3, size / 10), seed=2)
    default = AdaStrat(seed=1, estimator="clopper-pearson").run(size, falling.labels)
    assert default.kind == "approximation" and "check labels would match" in default.guarantee
    needed = int(default.guarantee.split("about ")[1].split(" check labels")[0])
    checked = AdaStrat(seed=1, estimator="clopper-pearson", check_labels=needed * 2)
    est = checked.run(size, falling.labels)
    assert est.kind == "band" and "checked at the band's resolution" in est.guarantee
    assert "about the labels given" in est.guarantee
    ranks = np.arange(est.exact_prefix + 1, size + 1)
    _, lower, upper = est.at(ranks)
    truth = falling.true_precision(ranks)
    assert np.all((lower <= truth + 1e-12) & (truth <= upper + 1e-12))
    # a list whose precision dips far below and comes back: the default check refutes the band
    dip = BumpShape(LogisticShape(0.9, 0.85, size / 3, size / 10), 0.1 * size, 0.5 * size, -0.7)
    wave = SimulatedRankedList(size, dip, seed=3)
    refuted = AdaStrat(seed=1, estimator="clopper-pearson").run(size, wave.labels)
    assert refuted.kind == "approximation" and "no coverage claim" in refuted.guarantee
    assert any(
        f.startswith(("premise-refuted", "weak-monotonicity-violated:")) for f in refuted.flags
    )
    none = AdaStrat(seed=1, estimator="clopper-pearson", check_labels=0).run(size, falling.labels)
    assert none.kind == "approximation" and "check_labels = 0" in none.guarantee


def test_a_list_still_rising_at_the_end_of_the_prefix_gets_no_band() -> None:
    """Real third-party list (Chaganty et al.'s MS MARCO answers ranked by word overlap): the
    precision keeps rising past r̃ and AdaStrat's band missed it by ~0.0003 in every seed that
    claimed one.  The exact prefix shows p still rising at its end, so the kind is an
    approximation, with the reason; a monotone list keeps its band (TAC fixtures elsewhere)."""
    from real_lists import msmarco_by_overlap

    found = msmarco_by_overlap()
    if found is None:
        pytest.skip("../shared/data/chaganty-active-eval is absent")
    labels = found[0]
    for seed in range(3):
        est = AdaStrat(seed=seed, epsilon=0.1, window=20).run(
            labels.size, lambda r: labels[np.asarray(r) - 1]
        )
        assert est.kind == "approximation"
        assert "still rising at the end of the prefix" in est.guarantee
        assert any(f.startswith("weak-monotonicity-violated-in-prefix") for f in est.flags)
