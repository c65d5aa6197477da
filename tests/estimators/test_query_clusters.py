"""Resampling queries as clusters: same point estimates, replicates as the definition says."""

from __future__ import annotations

import numpy as np
import pytest
from estimator_parts import terms_and_statistic

from receval.estimators.bootstrap import QUERY_STAGE, draw_replicates, run_bootstrap
from receval.estimators.sample_data import build_sample_data
from receval.scoring import ScoreOptions, bootstrap_stages, score_task
from receval.simulation import SimulationConfig, simulate_task
from receval.task import load_task


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = simulate_task(
        tmp_path_factory.mktemp("qc") / "t",
        SimulationConfig(systems=6, queries=30, per_system=40),
        seed=4,
    )
    return load_task(root)


def test_point_estimates_do_not_depend_on_the_resampling_plan(task):
    plain = score_task(task, ScoreOptions(bootstrap=100)).leaderboard.set_index("system")
    clustered = score_task(
        task, ScoreOptions(bootstrap=100, cluster_queries=True)
    ).leaderboard.set_index("system")
    for metric in ("precision", "pooled_recall", "recall", "f1"):
        np.testing.assert_allclose(
            clustered[metric], plain.loc[clustered.index, metric], rtol=1e-12
        )
    assert clustered["interval"].str.contains("queries resampled as clusters").all()


def test_a_replicate_is_the_estimator_on_the_reweighted_queries(task):
    """Replicate b = the joint estimator with draw k weighted by c_bk · v_b,q(k) and |X_i| by Σ_q v_q |X_iq|."""
    data = build_sample_data(task)
    stages = bootstrap_stages(data, cluster_queries=True)
    terms, statistic = terms_and_statistic(data, cluster_queries=True)
    reps = draw_replicates(stages, 5, np.random.default_rng(3))
    run = run_bootstrap(stages, terms, statistic, reps)
    m = data.m
    q = task.facts["query_id"].to_numpy()[data.facts[data.draw_fact]]
    index = {name: k for k, name in enumerate(data.queries)}
    qk = np.array([index[x] for x in q])
    census = data.census
    for b in range(5):
        v = reps.counts[QUERY_STAGE][b].astype(float)
        w = reps.counts["draws"][b] * v[qk]
        # joint precision with the resampled target distribution t_i^b(x) = v_q(x) / Σ_q v_q |X_iq|
        numerator = (w[:, None] * terms["draws"][:, :m]).sum(axis=0) * data.sizes
        expected = numerator / (v @ data.query_sizes)
        expected = np.where(census, (v @ data.query_correct) / (v @ data.query_sizes), expected)
        np.testing.assert_allclose(run.replicates["precision"][b], expected, rtol=1e-10)
        # pool coverage: each unit's facts weighted by the unit's count and their query's count
        u = reps.counts["units"][b][data.pair_unit] * v[data.pair_query]
        theta = (u * data.pair_pooled).sum() / (u * data.pair_found).sum()
        np.testing.assert_allclose(run.replicates["pool_coverage"][b, 0], theta, rtol=1e-12)


def test_bca_and_macro_are_refused_with_clusters(task):
    with pytest.raises(ValueError, match="BCa"):
        score_task(task, ScoreOptions(bootstrap=50, cluster_queries=True, method="BCa"))
    with pytest.raises(ValueError, match="micro"):
        score_task(task, ScoreOptions(bootstrap=50, cluster_queries=True, target="macro"))


def test_query_cells_counted_in_chunks_equal_one_pass():
    """The per-(query, system) output counts and label sums of build_sample_data, counted a few
    rows at a time, equal np.add.at over every row at once (NaN labels left out)."""
    from receval.design import chunked_bincount
    from receval.estimators.sample_data import query_cells

    rng = np.random.default_rng(11)
    n, q, m, f = 1000, 7, 4, 50
    out_q = rng.integers(0, q, n).astype(np.int16)
    sys_codes = rng.integers(0, m, n).astype(np.int32)
    fact = rng.integers(0, f, n)
    label = np.where(rng.random(f) < 0.4, np.nan, rng.random(f))
    sizes, correct, known = query_cells(out_q, sys_codes, fact, label, q, m, chunk=37)
    want_sizes, want_correct, want_known = np.zeros((q, m)), np.zeros((q, m)), np.zeros((q, m))
    np.add.at(want_sizes, (out_q, sys_codes), 1.0)
    ok = ~np.isnan(label[fact])
    np.add.at(want_correct, (out_q[ok], sys_codes[ok]), label[fact][ok])
    np.add.at(want_known, (out_q[ok], sys_codes[ok]), 1.0)
    assert np.array_equal(sizes, want_sizes) and np.array_equal(known, want_known)
    assert np.allclose(correct, want_correct, rtol=1e-12, atol=0)
    assert np.array_equal(
        chunked_bincount(sys_codes, minlength=6, chunk=13), np.bincount(sys_codes, minlength=6)
    )
