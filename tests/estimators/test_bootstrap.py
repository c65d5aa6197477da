"""The shared bootstrap engine: resampling counts, jackknife totals, interval methods."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from receval.estimators.bootstrap import (
    Replicates,
    Stage,
    bca_acceleration,
    confidence_interval,
    draw_replicates,
    jackknife_totals,
    replicate_totals,
    run_bootstrap,
    stratified_counts,
)


def test_stratified_counts_keep_every_stratum_size():
    rng = np.random.default_rng(0)
    strata = np.array([2, 0, 0, 1, 2, 2, 0, 1, 2])
    counts = stratified_counts(strata, 500, rng)
    assert counts.shape == (500, strata.size)
    for s in np.unique(strata):
        assert np.all(counts[:, strata == s].sum(axis=1) == (strata == s).sum())


def test_stratified_counts_are_multinomial_within_stratum():
    # each row of a stratum of size n is drawn Binomial(n, 1/n) times: mean 1, variance 1 - 1/n
    rng = np.random.default_rng(1)
    strata = np.repeat([0, 1], [5, 20])
    counts = stratified_counts(strata, 20_000, rng).astype(float)
    for s, n in ((0, 5), (1, 20)):
        c = counts[:, strata == s]
        var = 1 - 1 / n
        # standard error of a mean of 20,000 draws: sqrt(var / 20000); allow 4 of them
        assert np.all(np.abs(c.mean(axis=0) - 1) < 4 * np.sqrt(var / 20_000))
        # the variance of a sample variance ≈ 2 var² / (B - 1) for near-normal counts; use 5 SE
        assert np.all(np.abs(c.var(axis=0) - var) < 5 * np.sqrt(2 * var**2 / 20_000) + 0.02)


def test_replicate_totals_match_loop_and_keep_nan_columns():
    rng = np.random.default_rng(2)
    terms = rng.normal(size=(30, 4))
    terms[:, 2] = np.nan
    counts = stratified_counts(np.zeros(30, int), 37, rng)
    totals = replicate_totals(counts, terms, chunk=8)
    expected = np.array([[np.sum(c * terms[:, f]) for f in range(4)] for c in counts])
    assert np.allclose(totals[:, [0, 1, 3]], expected[:, [0, 1, 3]])
    assert np.isnan(totals[:, 2]).all()


def test_jackknife_totals_equal_brute_force():
    rng = np.random.default_rng(3)
    strata = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 3])
    terms = rng.normal(size=(strata.size, 3))
    jt = jackknife_totals(terms, strata)
    for k in range(strata.size):
        total = np.zeros(3)
        for s in np.unique(strata):
            rows = np.flatnonzero(strata == s)
            if s == strata[k]:
                rest = rows[rows != k]
                if rest.size:
                    total += terms[rest].sum(axis=0) * rows.size / rest.size
            else:
                total += terms[rows].sum(axis=0)
        assert np.allclose(jt[k], total)


def test_percentile_and_bca_agree_with_scipy_on_a_mean():
    rng = np.random.default_rng(4)
    x = rng.exponential(size=60)
    stage = Stage("rows", np.zeros(x.size, int))
    reps = draw_replicates([stage], 4000, np.random.default_rng(5))
    run = run_bootstrap(
        [stage], {"rows": x[:, None] / x.size}, lambda t: {"mean": t["rows"]}, reps, jackknife=True
    )
    for method, ours in (("percentile", "percentile"), ("BCa", "BCa")):
        ci = confidence_interval(
            run.point["mean"],
            run.replicates["mean"],
            method=ours,
            level=0.9,
            jackknife=run.jackknife["mean"],
            bounds=None,
        )
        ref = stats.bootstrap(
            (x,),
            np.mean,
            n_resamples=4000,
            confidence_level=0.9,
            method=method.lower(),
            rng=np.random.default_rng(6),
        ).confidence_interval
        # two independent sets of 4000 replicates: their quantiles differ by Monte Carlo error only;
        # the 5% quantile of a mean of 60 exponentials has MC sd ≈ 0.004, so 0.03 is > 5 sd.
        assert abs(ci.low[0] - ref.low) < 0.03
        assert abs(ci.high[0] - ref.high) < 0.03


def test_jackknife_acceleration_matches_scipy_definition():
    # for the mean, the jackknife values are (S - x_k)/(n - 1); a = skew / 6 of those deviations
    x = np.array([1.0, 2.0, 2.5, 7.0, 10.0])
    jack = np.array([(x.sum() - v) / (x.size - 1) for v in x])[:, None]
    d = jack.mean() - jack[:, 0]
    expected = np.sum(d**3) / (6 * np.sum(d**2) ** 1.5)
    assert np.isclose(bca_acceleration(jack)[0], expected)


def test_basic_interval_reflects_the_percentiles_and_is_clipped():
    point = np.array([0.5, 0.02])
    reps = np.column_stack([np.linspace(0.4, 0.7, 1001), np.linspace(0.0, 0.2, 1001)])
    ci = confidence_interval(point, reps, method="basic", level=0.9)
    assert np.isclose(ci.low[0], 2 * 0.5 - np.quantile(reps[:, 0], 0.95))
    assert np.isclose(ci.high[0], 2 * 0.5 - np.quantile(reps[:, 0], 0.05))
    assert ci.low[1] == 0.0  # 2·0.02 − 0.19 < 0 is clipped to the parameter's range


def test_too_many_undefined_replicates_give_no_interval():
    reps = np.full((100, 1), 0.5)
    reps[:5] = np.nan
    ci = confidence_interval(np.array([0.5]), reps, level=0.95)
    assert np.isnan(ci.low[0]) and np.isnan(ci.high[0])


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="unknown interval method"):
        confidence_interval(np.zeros(1), np.zeros((10, 1)), method="normal")


def test_replicates_round_trip(tmp_path):
    stages = [Stage("a", np.array([0, 0, 1])), Stage("b", np.zeros(4, int))]
    reps = draw_replicates(stages, 50, np.random.default_rng(7), seed=7)
    reps.save(tmp_path / "r.npz")
    back = Replicates.load(tmp_path / "r.npz", stages)
    assert back.B == 50 and back.seed == 7
    for s in stages:
        assert np.array_equal(back.counts[s.name], reps.counts[s.name])
    with pytest.raises(ValueError, match="shape"):
        Replicates.load(tmp_path / "r.npz", [Stage("a", np.zeros(5, int)), stages[1]])


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda z: b"", "empty: not a replicates file"),
        (lambda z: b"not an npz", "not an .npz archive"),
        (lambda z: {k: v for k, v in z.items() if k != "B"}, "no integer 'B'"),
        (lambda z: {**z, "seed": np.array("x")}, "no integer 'seed'"),
        (lambda z: {**z, "stage_a": -z["stage_a"].astype(int)}, "not whole numbers >= 0"),
        (lambda z: {**z, "stage_a": z["stage_a"] + 0.5}, "not whole numbers >= 0"),
        # stratum 0 holds units 0-1, stratum 1 unit 2: moving a count across them is no resample
        (lambda z: {**z, "stage_a": z["stage_a"][:, ::-1].copy()}, "each stratum to its size"),
    ],
)
def test_a_replicates_file_that_is_not_a_resample_is_refused(tmp_path, edit, words):
    """``score --replicates FILE`` reuses saved counts: a damaged or foreign file is a
    BundleError naming it (was a KeyError / TypeError traceback, an empty file even read as
    Ctrl-C, and negative or fractional counts were used as they were)."""
    import io

    from receval.errors import BundleError

    stages = [Stage("a", np.array([0, 0, 1])), Stage("b", np.zeros(4, int))]
    draw_replicates(stages, 50, np.random.default_rng(7), seed=7).save(tmp_path / "r.npz")
    with np.load(tmp_path / "r.npz") as z:
        saved = {k: z[k] for k in z.files}
    changed = edit(saved)
    if not isinstance(changed, bytes):
        buffer = io.BytesIO()
        np.savez(buffer, **changed)
        changed = buffer.getvalue()
    (tmp_path / "bad.npz").write_bytes(changed)
    with pytest.raises(BundleError, match=words):
        Replicates.load(tmp_path / "bad.npz", stages)
