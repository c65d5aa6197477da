"""Statistical properties of the joint estimators on simulated tasks with known truth.

One simulated world (fixed seed); the annotation campaign (per-system samples, exhaustive units)
is redrawn R times.  Tolerances come from the math:

* unbiasedness: the mean error over R repetitions has standard error sd/√R; an unbiased
  estimator's mean error lies within 3 SE of 0 (the issue's criterion).  Ratio estimators
  (pool coverage, pooled and true recall) are only consistent, with bias O(1/n); at these sample
  sizes that bias is far below 3 SE, so they are held to the same criterion.
* coverage: over R × m intervals, the share that covers the truth must be within ±4 points of the
  nominal level (the issue's criterion).  Intervals of one repetition share replicates, so they
  are correlated; ±4 points is still > 4 binomial standard errors of an R·m-interval share
  (√(.05·.95/(R·m)) < 0.004 for R·m = 3000).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from estimator_parts import terms_and_statistic

from receval.estimators.bootstrap import confidence_interval, draw_replicates, run_bootstrap
from receval.estimators.recall import naive_pooled_recall
from receval.estimators.sample_data import build_sample_data
from receval.formats.bundle import write_bundle
from receval.scoring import bootstrap_stages
from receval.simulation import SimulationConfig, simulate_world
from receval.task import load_task, with_annotation

pytestmark = pytest.mark.slow

REPETITIONS = 200
B = 400
METRICS = ("precision", "pooled_recall", "recall")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    config = SimulationConfig(
        systems=15, queries=60, per_system=80, exhaustive_facts=80, name="props"
    )
    world = simulate_world(config, np.random.default_rng(20260101))
    root = write_bundle(
        tmp_path_factory.mktemp("props") / "world", world.tables(), world.task_config()
    )
    base = load_task(root)
    truth = world.truth_metrics().set_index("system")
    rng = np.random.default_rng(7)
    errors = {k: [] for k in (*METRICS, "pool_coverage", "naive_pooled_recall")}
    covered = {
        (k, level): [] for k in ("precision", "recall", "pooled_recall") for level in (0.9, 0.95)
    }
    for _ in range(REPETITIONS):
        annotation = world.annotate(rng)
        task = with_annotation(base, **annotation.tables())
        data = build_sample_data(task)
        stages = bootstrap_stages(data)
        terms, statistic = terms_and_statistic(data)
        run = run_bootstrap(stages, terms, statistic, draw_replicates(stages, B, rng))
        systems = data.systems
        for k in METRICS:
            errors[k].append(run.point[k] - truth.loc[systems, k].to_numpy())
        errors["pool_coverage"].append(run.point["pool_coverage"] - world.pool_coverage)
        drawn = np.bincount(data.draw_fact, minlength=data.facts.size)
        errors["naive_pooled_recall"].append(
            naive_pooled_recall(data, drawn) - truth.loc[systems, "pooled_recall"].to_numpy()
        )
        for k in ("precision", "recall", "pooled_recall"):
            for level in (0.9, 0.95):
                ci = confidence_interval(run.point[k], run.replicates[k], level=level)
                true = truth.loc[systems, k].to_numpy()
                covered[(k, level)].append((ci.low <= true) & (true <= ci.high))
    return (
        {k: np.array(v) for k, v in errors.items()},
        {k: np.array(v) for k, v in covered.items()},
        truth,
    )


def _z(errors: np.ndarray) -> np.ndarray:
    return errors.mean(axis=0) / (errors.std(axis=0, ddof=1) / np.sqrt(errors.shape[0]))


@pytest.mark.parametrize("metric", ["precision", "pool_coverage", "recall", "pooled_recall"])
def test_joint_estimators_are_unbiased(study, metric):
    errors, _, _ = study
    z = _z(errors[metric])
    assert np.all(np.abs(z) < 3), f"{metric}: mean error / SE per system = {np.round(z, 2)}"


def test_naive_closed_world_pooled_recall_is_visibly_biased(study):
    errors, _, _ = study
    z_naive = _z(errors["naive_pooled_recall"])
    z_joint = _z(errors["pooled_recall"])
    # "visibly": most systems' naive mean error is more than 5 standard errors from 0, and the
    # average absolute bias is several times the joint estimator's.
    assert np.mean(np.abs(z_naive) > 5) > 0.5, np.round(z_naive, 1)
    bias_naive = np.abs(errors["naive_pooled_recall"].mean(axis=0)).mean()
    bias_joint = np.abs(errors["pooled_recall"].mean(axis=0)).mean()
    assert bias_naive > 4 * bias_joint, (bias_naive, bias_joint)
    assert np.all(np.abs(z_joint) < 3)


@pytest.mark.parametrize("metric", ["precision", "recall", "pooled_recall"])
@pytest.mark.parametrize("level", [0.9, 0.95])
def test_bootstrap_interval_coverage_is_nominal(study, metric, level):
    _, covered, _ = study
    share = covered[(metric, level)].mean()
    assert abs(share - level) <= 0.04, f"{metric} {level:.0%} intervals cover {share:.3f}"


def test_the_world_is_realistic_enough_for_the_study(study):
    _, _, truth = study
    # pool coverage well below 1 and systems of different quality, else the test says little
    assert truth["pool_coverage"].iloc[0] < 0.9
    assert truth["precision"].max() - truth["precision"].min() > 0.2
    assert pd.Series(truth["team"]).nunique() < len(truth)
