"""The judge calibrated as the anytime stream goes (receval.estimators.judge_stream): segments at
clean cuts on a doubling schedule, every segment's map fitted on earlier rows only (predictable,
the same at every later look), and the paired ranges hold every term."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from receval.estimators.judge_stream import (
    FIRST_REFIT,
    judged_terms,
    pair_range,
    segment_starts,
    stream_judge,
)


def test_segments_start_at_clean_cuts_on_a_doubling_schedule():
    # rows 0-9 one step each (a shuffled round), 10-39 a legacy round (steps 10-19, twice),
    # then one step per row again
    steps = np.r_[np.arange(10), np.tile(np.arange(10, 20), 3), np.arange(20, 200)]
    starts = segment_starts(steps)
    assert starts[0] == 0
    K = steps.size
    for s in starts[1:]:  # every earlier row has a smaller step than every later one
        assert steps[:s].max() < steps[s:].min()
    assert starts[1] >= FIRST_REFIT and np.all(starts[2:] >= 2 * starts[1:-1])
    assert not ((starts > 10) & (starts < 40)).any()  # never inside the legacy round
    assert segment_starts(steps[:1]).tolist() == [0] and starts[-1] < K


@pytest.fixture(scope="module")
def judged_task(tmp_path_factory):
    from receval.simulation import SimulationConfig, simulate_task
    from receval.task import load_task

    config = SimulationConfig(systems=5, teams=5, queries=30, per_system=60,
                              precision_range=(0.2, 0.8), uppercase_teams=0.0)  # fmt: skip
    root = simulate_task(tmp_path_factory.mktemp("judged") / "task", config, seed=5)
    truth = pd.read_csv(root / "truth.tsv", sep="\t", dtype=str)
    correct = truth["label"].str.lower().isin(["c", "correct", "1", "true", "yes"]).to_numpy()
    rng = np.random.default_rng(2)
    grade = np.clip(np.round(2 * correct + rng.normal(0.5, 1.0, correct.size)), 0, 4)
    truth[["query_id", "answer"]].assign(judge_score=grade).to_csv(
        root / "judge.tsv", sep="\t", index=False
    )
    (root / "task.toml").write_text(
        (root / "task.toml").read_text() + "\n[judge]\nscale = [0, 4]\n", encoding="utf-8"
    )
    return load_task(root)


def _stream(task):
    from receval.estimators.anytime.stream import build_stream
    from receval.estimators.sample_data import build_sample_data

    data = build_sample_data(task)
    return data, build_stream(task, data)


def test_each_segment_is_fitted_on_earlier_rows_only(judged_task):
    """Changing the labels of every row from segment c on leaves the maps of segments ≤ c and
    so the judged terms of every step before segment c + 1 unchanged (predictable)."""
    from receval.estimators.anytime.stream import output_arrays

    data, st = _stream(judged_task)
    sj = stream_judge(judged_task, data, st)
    assert sj.tables.shape[0] >= 3
    c = 2
    cut = sj.starts[c]
    flipped = st.label.copy()
    flipped[cut:] = 1.0 - np.nan_to_num(flipped[cut:])
    other = dataclasses.replace(st, label=flipped)
    sj2 = stream_judge(judged_task, data, other)
    np.testing.assert_array_equal(sj.tables[: c + 1], sj2.tables[: c + 1])
    assert not np.allclose(sj.tables[c + 1 :], sj2.tables[c + 1 :])
    terms, _ = judged_terms(judged_task, data, st, output_arrays)
    terms2, _ = judged_terms(judged_task, data, other, output_arrays)
    first = st.pool_step[cut]  # the first step whose term may see a flipped label
    np.testing.assert_allclose(terms.y[:, :first], terms2.y[:, :first])
    # the calibrated map predicts the labels better than the raw grade / 4
    f = np.nan_to_num(st.label)
    raw = np.mean((sj.tables[0][data.facts[st.fact]] - f) ** 2)
    late = np.mean((sj.tables[-1][data.facts[st.fact]] - f) ** 2)
    assert late < raw


def test_every_term_and_pair_difference_lies_in_its_predictable_range(judged_task):
    from receval.estimators.anytime.stream import output_arrays

    data, st = _stream(judged_task)
    terms, reach = judged_terms(judged_task, data, st, output_arrays)
    eps = 1e-9
    assert np.all(terms.lo <= terms.y + eps) and np.all(terms.y <= terms.hi + eps)
    m = data.m
    a, b = np.triu_indices(m, 1)
    lo, hi = pair_range(terms, reach, a, b)
    d = terms.y[a] - terms.y[b]
    both = terms.active[a] & terms.active[b]
    assert np.all(~both | ((lo <= d + eps) & (d <= hi + eps)))
    # the joint range of one draw is never wider than the sum of the two ranges
    plain = (terms.hi[a] - terms.lo[b]) - (terms.lo[a] - terms.hi[b])
    assert np.all(hi - lo <= plain + eps)
    assert np.median((hi - lo)[both] / plain[both]) < 0.8


def test_anytime_intervals_with_the_calibrated_judge_score(judged_task):
    """score --estimator ppi --intervals anytime runs on the calibrated controls and its
    intervals hold the points."""
    import receval

    board = receval.score(
        judged_task, estimator="ppi", intervals="anytime", rank_by="precision"
    ).leaderboard
    assert ((board["precision_lo"] <= board["precision"] + 1e-9)
            & (board["precision"] <= board["precision_hi"] + 1e-9)).all()  # fmt: skip
