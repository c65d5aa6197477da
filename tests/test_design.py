"""Sampling designs: draws follow the declared distribution, probabilities are recorded, rounds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from receval.design import draw_precision_samples, infer_designs, sampling_probabilities
from receval.simulate import SimulationConfig, simulate_task
from receval.task import load_task


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = simulate_task(
        tmp_path_factory.mktemp("design") / "t", SimulationConfig(systems=5, queries=40), seed=8
    )
    return load_task(root)


@pytest.mark.parametrize("distribution", ["uniform", "entity-relation"])
def test_draws_follow_the_distribution_and_record_its_probabilities(task, distribution):
    system = task.systems[0]
    n = 100_000
    drawn = draw_precision_samples(
        task.outputs, task.queries, {system: n}, np.random.default_rng(1), distribution=distribution
    )
    assert (drawn["system"] == system).all() and len(drawn) == n
    out = task.outputs[task.outputs["system"] == system]
    p = sampling_probabilities(task.outputs, task.queries, distribution).loc[out.index].to_numpy()
    assert np.isclose(p.sum(), 1.0)
    key = pd.MultiIndex.from_frame(out[["query_id", "answer_raw"]])
    freq = drawn.groupby(["query_id", "answer"]).size().reindex(key).fillna(0).to_numpy() / n
    z = (freq - p) / np.sqrt(p * (1 - p) / n)
    # Bonferroni over the system's facts: P(max |z| > 5) < facts × 5.7e-7
    assert np.abs(z).max() < 5, np.abs(z).max()
    recorded = drawn.set_index(["query_id", "answer"])["prob"]
    np.testing.assert_allclose(
        recorded.to_numpy(), pd.Series(p, index=key).reindex(recorded.index).to_numpy()
    )


def test_draws_are_a_function_of_the_generator_and_systems_are_independent_of_order(task):
    a = draw_precision_samples(task.outputs, task.queries, 30, np.random.default_rng(5))
    b = draw_precision_samples(task.outputs, task.queries, 30, np.random.default_rng(5))
    pd.testing.assert_frame_equal(a, b)
    assert list(a.groupby("system", sort=False).size().index) == sorted(task.systems)
    assert (a.groupby("system")["draw"].max() == 30).all()


def test_recorded_probabilities_are_recognised_and_a_wrong_one_is_refused(task):
    drawn = draw_precision_samples(
        task.outputs, task.queries, 20, np.random.default_rng(2), distribution="entity-relation"
    )
    from receval.task import with_annotation

    recorded = with_annotation(task, samples=drawn.drop(columns=["design"]))
    samplers = infer_designs(recorded.samples, recorded.outputs, recorded.queries, "samples.tsv")
    assert {s.design for s in samplers} == {"entity-relation"}
    bad = drawn.drop(columns=["design"]).copy()
    first = bad["system"] == bad["system"].iloc[0]
    bad.loc[first, "prob"] = bad.loc[first, "prob"] * 2  # consistent, but no design gives it
    broken = with_annotation(task, samples=bad)
    with pytest.raises(ValueError, match="disagrees with the"):
        infer_designs(broken.samples, broken.outputs, broken.queries, "samples.tsv")
