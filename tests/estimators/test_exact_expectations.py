"""Exact checks of the estimators' expectations (no simulation noise).

For a uniform design, a "sample" that draws every fact of every system exactly once makes each
sum over draws equal to its expectation: Σ_{x ∈ X_j} (1/|X_j|) h(x) = E_{s_j}[h].  So on such a
sample the joint precision estimator must equal the true precision exactly (it is unbiased), for
either mixture weighting, and the self-normalised pooled recall must equal the true pooled
recall (its numerator and denominator are both exact).  The same holds for pool coverage when
every document is annotated.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from estimator_parts import terms_and_statistic

from receval.estimators.registry import get_estimator
from receval.estimators.sample_data import build_sample_data
from receval.formats.bundle import write_bundle
from receval.scoring import true_metrics
from receval.simulation import SimulationConfig, simulate_world
from receval.task import load_task, with_annotation


def every_output_once(out: pd.DataFrame) -> pd.DataFrame:
    """A uniform "sample" of every system that draws each of its outputs exactly once."""
    size = out.groupby("system")["fact"].transform("size")
    return pd.DataFrame(
        {
            "sample": "all",
            "system": out["system"],
            "query_id": out["query_id"],
            "answer": out["answer_raw"],
            "prob": 1.0 / size,
        }
    )


@pytest.fixture(scope="module")
def census_task(tmp_path_factory):
    config = SimulationConfig(systems=8, queries=25, name="exact")
    world = simulate_world(config, np.random.default_rng(99))
    root = write_bundle(tmp_path_factory.mktemp("exact") / "w", world.tables(), world.task_config())
    base = load_task(root)
    samples = every_output_once(base.outputs)
    truth = base.truth
    judgments = pd.DataFrame(
        {
            "query_id": truth["query_id"],
            "answer": truth["answer"],
            "label": np.where(truth["value"] == 1, "C", "W"),
        }
    )
    units = pd.DataFrame({"unit": world.documents})
    true_ids = np.flatnonzero(world.candidate_true)
    exhaustive = pd.DataFrame(
        {
            "unit": world.documents[world.candidate_doc[true_ids]],
            "query_id": world.queries["query_id"].to_numpy()[world.candidate_query[true_ids]],
            "answer": world.candidate_answer[true_ids],
        }
    )
    task = with_annotation(
        base, samples=samples, judgments=judgments, exhaustive_units=units, exhaustive=exhaustive
    )
    return task, world


@pytest.mark.parametrize("weighting", ["size", "overlap"])
def test_joint_precision_equals_truth_on_the_full_support(census_task, weighting):
    task, _ = census_task
    data = build_sample_data(task)
    assert data.census.all()  # every output judged: the census override must not hide the estimator
    terms, _ = terms_and_statistic(data, weighting=weighting)
    layout = get_estimator("joint").draw_layout(data.m)
    joint = terms["draws"][:, layout["joint"]].sum(axis=0)
    truth = true_metrics(task).loc[data.systems]
    np.testing.assert_allclose(joint, truth["precision"].to_numpy(), rtol=1e-10)


def test_pooled_recall_and_pool_coverage_equal_truth_on_the_full_support(census_task):
    task, world = census_task
    data = build_sample_data(task)
    terms, statistic = terms_and_statistic(data)
    totals = {k: v.sum(axis=0) for k, v in terms.items()}
    point = statistic(totals)
    truth = world.truth_metrics().set_index("system").loc[data.systems]
    np.testing.assert_allclose(
        point["pooled_recall"], truth["pooled_recall"].to_numpy(), rtol=1e-10
    )
    np.testing.assert_allclose(point["pool_coverage"], world.pool_coverage, rtol=1e-12)
    np.testing.assert_allclose(point["recall"], truth["recall"].to_numpy(), rtol=1e-10)
    # the Horvitz-Thompson total of correct pool facts is exact too
    assert np.isclose(point["pool_correct"][0], world.candidate_true[world.pool].sum())


def test_simple_estimators_equal_truth_on_the_full_support(census_task):
    task, world = census_task
    data = build_sample_data(task)
    terms, statistic = terms_and_statistic(data, "simple")
    totals = {k: v.sum(axis=0) for k, v in terms.items()}
    point = statistic(totals)
    truth = world.truth_metrics().set_index("system").loc[data.systems]
    layout = get_estimator("simple").draw_layout(data.m)
    simple = totals["draws"][layout["simple"]]  # raw terms: the census override is not involved
    np.testing.assert_allclose(simple, truth["precision"].to_numpy(), rtol=1e-10)
    np.testing.assert_allclose(point["recall"], truth["recall"].to_numpy(), rtol=1e-10)
