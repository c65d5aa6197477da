"""Judges calibrated and combined on the human labels (receval.estimators.judge_calibration).

The prediction-powered estimator stays exactly unbiased with several graded judges (every
sample of a tiny task enumerated, as in test_ppi_exact.py); the calibration is monotone in the
direction the labels say, the combination does not follow a useless judge, and the cross-fitted
scores of a labelled fact never use its own label.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from receval.estimators.judge_calibration import (
    calibrate,
    crossfit_judge_scores,
    level_map,
    simplex_weights,
)
from receval.estimators.sample_data import build_sample_data
from receval.task import Task
from tests.estimators.test_ppi_exact import OUTPUTS, TRUTH, exact_expectation, true_precision

#: two graded judges (0–4) on the facts of OUTPUTS; "other" misses x6
GRADES = {
    "umbrela": {"x1": 4, "x2": 1, "x3": 3, "x4": 3, "x5": 0, "x6": 2},
    "other": {"x1": 0, "x2": 4, "x3": 2, "x4": 1, "x5": 3},
}


def graded_task(design: str = "uniform") -> Task:
    from receval.design import sampling_probabilities

    runs = pd.DataFrame(
        [(s, "q1", a) for s, rows in OUTPUTS.items() for a, _ in rows],
        columns=["system", "query_id", "answer"],
    )
    judgments = pd.DataFrame(
        {
            "query_id": "q1",
            "answer": list(TRUTH),
            "label": ["C" if c else "W" for c in TRUTH.values()],
        }
    )
    judge = pd.DataFrame(
        [(name, "q1", a, g) for name, grades in GRADES.items() for a, g in grades.items()],
        columns=["judge", "query_id", "answer", "judge_score"],
    )
    config = {"judge": {"scale": [0, 4]}}
    base = Task.from_frames(runs=runs, judgments=judgments, judge=judge, config=config)
    prob = sampling_probabilities(base.outputs, base.queries, design).to_numpy()
    samples = (
        base.outputs[["system", "query_id", "answer"]]
        .astype(str)
        .assign(sample="all", prob=prob, design=design)
    )
    return Task.from_frames(
        runs=runs, judgments=judgments, samples=samples, judge=judge, config=config
    )


@pytest.mark.parametrize(
    "draws",
    [
        {"A": 2, "B": 1, "C": 1},
        pytest.param({"A": 2, "B": 2, "C": 1}, marks=pytest.mark.slow),
    ],
)
def test_several_graded_judges_keep_ppi_exactly_unbiased(draws):
    task = graded_task()
    expected = exact_expectation(task, draws)
    systems = build_sample_data(task).systems
    np.testing.assert_allclose(expected["precision"], true_precision(systems), atol=1e-12)


def test_level_map_is_monotone_in_the_direction_of_the_labels():
    levels = np.array([0, 0, 1, 1, 2, 2, 3, 3, 3])
    label = np.array([0, 0, 0, 1, 1, 0, 1, 1, 1], float)
    values, direction = level_map(levels, 4, label)
    assert direction == 1 and np.all(np.diff(values[:4]) >= 0)
    values, direction = level_map(3 - levels, 4, label)  # an inverted judge
    assert direction == -1 and np.all(np.diff(values[:4]) <= 0)


def test_combination_ignores_a_useless_judge():
    rng = np.random.default_rng(0)
    F = 400
    y = (rng.random(F) < 0.4).astype(float)
    good = np.clip(np.round(2 * y + rng.normal(0, 0.8, F) + 1), 0, 4)
    useless = rng.integers(0, 5, F).astype(float)
    grades = np.stack([good, useless], axis=1)
    train = np.arange(200)
    fit = calibrate(grades, np.zeros(F, np.int64), train, y[train], ("good", "useless"))
    assert fit.weights[0] > 0.8
    single = calibrate(grades[:, :1], np.zeros(F, np.int64), train, y[train])
    test = np.arange(200, F)
    err = np.mean((fit.combined[test] - y[test]) ** 2)
    assert err <= np.mean((single.combined[test] - y[test]) ** 2) + 0.01


def test_simplex_weights_are_a_convex_combination():
    rng = np.random.default_rng(1)
    P = rng.random((50, 3))
    w = simplex_weights(P, P[:, 1])
    assert np.all(w >= 0) and w.sum() == pytest.approx(1.0)
    assert w.argmax() == 1


def test_crossfit_scores_never_use_the_fact_own_label():
    task = graded_task()
    first = crossfit_judge_scores(task, folds=3)
    labels = task.labels.copy()
    held = int(labels.index[0])
    flipped = labels.copy()
    flipped.loc[held] = 1.0 - flipped.loc[held]

    class Flipped:
        facts, config, judge, merged = task.facts, task.config, task.judge, task.merged
        labels = flipped

    second = crossfit_judge_scores(Flipped(), folds=3)
    assert first.combined[held] == pytest.approx(second.combined[held])
    assert first.per_judge.shape == (len(task.facts), 2)


def test_class_controls_count_every_string_a_system_output():
    from receval.estimators.ppi import judge_totals

    runs = pd.DataFrame(
        {
            "system": ["A", "A", "A", "B"],
            "query_id": ["q1"] * 4,
            "answer": ["Barack Obama", "Obama", "Paris", "Obama"],
        }
    )
    judgments = pd.DataFrame(
        {
            "query_id": ["q1"] * 3,
            "answer": ["Barack Obama", "Obama", "Paris"],
            "label": ["correct", "correct", "wrong"],
            "equivalence_class": ["q1:1", "q1:1", ""],
        }
    )
    samples = pd.DataFrame(
        {
            "sample": "r1",
            "system": ["A", "A", "B"],
            "query_id": "q1",
            "answer": ["Barack Obama", "Paris", "Obama"],
            "prob": [1 / 3, 1 / 3, 1.0],
        }
    )
    judge = pd.DataFrame(
        {
            "query_id": "q1",
            "answer": ["Barack Obama", "Obama", "Paris"],
            "judge_score": [0.9, 0.7, 0.2],
        }
    )
    task = Task.from_frames(runs, judgments=judgments, samples=samples, judge=judge)
    data = build_sample_data(task)
    totals = judge_totals(task, data)
    a, b = data.systems.index("A"), data.systems.index("B")
    obama = int(np.flatnonzero(data.label == 1)[0])
    assert totals.class_sum_drawn[obama, a] == pytest.approx(1.6)  # both of A's spellings
    assert totals.class_count_drawn[obama, a] == 2
    assert totals.class_sum_drawn[obama, b] == pytest.approx(0.7)
    # the precision control's known total is string-level: Σ t_A s over A's three strings
    n = data.sampler_n
    known = (totals.expected_score[:, a] * n).sum()
    assert known == pytest.approx((0.9 + 0.7 + 0.2) / 2)  # t_A = 1/|X_A| = 1/2 classes
    assert (totals.expected_mass[:, a] * n).sum() == pytest.approx(3 / 2)
