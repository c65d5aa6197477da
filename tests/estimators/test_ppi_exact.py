"""Exact expectations of the prediction-powered estimator (no simulation noise).

On a tiny task every possible sample (each sampler's n_j uniform draws with replacement) is
enumerated with its probability, so E[π̂_i] is computed exactly.  Cross-fitting makes PPI's
precision unbiased for *any* judge: the average over all samples must equal the true
precision to rounding, for a good, an inverted, a useless and a partly missing judge, with an
odd number of draws and a sampler with a single draw.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest

from receval.design import sampling_probabilities
from receval.estimators.base import ScoringContext
from receval.estimators.ppi import judge_totals
from receval.estimators.registry import get_estimator
from receval.estimators.sample_data import build_sample_data
from receval.task import Task

#: system -> (answer, correct) of query q1; A and B share x2, x3
OUTPUTS = {
    "A": [("x1", 1), ("x2", 0), ("x3", 1)],
    "B": [("x2", 0), ("x3", 1), ("x4", 1), ("x5", 0)],
    "C": [("x5", 0), ("x6", 1)],
}
TRUTH = {a: c for rows in OUTPUTS.values() for a, c in rows}
JUDGES = {
    "good": {"x1": 0.9, "x2": 0.2, "x3": 0.7, "x4": 0.8, "x5": 0.1, "x6": 0.6},
    "inverted": {"x1": 0.1, "x2": 0.9, "x3": 0.2, "x4": 0.3, "x5": 0.8, "x6": 0.2},
    "useless": {"x1": 0.5, "x2": 0.9, "x3": 0.1, "x4": 0.5, "x5": 0.9, "x6": 0.1},
    "partial": {"x1": 0.9, "x3": 0.6, "x5": 0.3},
    # favours system A: every fact A output scored 1, the others truthfully
    "biased-for-A": {"x1": 1.0, "x2": 1.0, "x3": 1.0, "x4": 0.9, "x5": 0.1, "x6": 0.8},
}


def tiny_task(judge: dict[str, float], design: str = "uniform", queries: int = 1) -> Task:
    """The task of OUTPUTS; with ``queries=2`` the facts x4, x5, x6 belong to query q2."""

    def query(answer: str) -> str:
        return "q2" if queries == 2 and answer in ("x4", "x5", "x6") else "q1"

    runs = pd.DataFrame(
        [(s, query(a), a) for s, rows in OUTPUTS.items() for a, _ in rows],
        columns=["system", "query_id", "answer"],
    )
    judgments = pd.DataFrame(
        {
            "query_id": [query(a) for a in TRUTH],
            "answer": list(TRUTH),
            "label": ["C" if c else "W" for c in TRUTH.values()],
        }
    )
    scores = pd.DataFrame(
        {
            "query_id": [query(a) for a in judge],
            "answer": list(judge),
            "judge_score": list(judge.values()),
        }
    )
    base = Task.from_frames(runs=runs, judgments=judgments, judge=scores)
    prob = sampling_probabilities(base.outputs, base.queries, design).to_numpy()
    samples = pd.DataFrame(
        {
            "sample": "all",
            "system": base.outputs["system"].astype(str),
            "query_id": base.outputs["query_id"].astype(str),
            "answer": base.outputs["answer"].astype(str),
            "prob": prob,
            "design": design,
        }
    )
    return Task.from_frames(runs=runs, judgments=judgments, samples=samples, judge=scores)


def exact_expectation(
    task: Task, draws: dict[str, int], name: str = "ppi", **options
) -> dict[str, np.ndarray]:
    """E[statistic] over every sample with ``draws[system]`` i.i.d. draws per system from its
    recorded design (each ordered sample weighted by its probability)."""
    full = build_sample_data(task)
    estimator = get_estimator(name)
    per_system = []
    for j, system in enumerate(full.systems):
        facts = full.draw_fact[full.draw_sampler == j]
        per_system.append(list(itertools.product(facts, repeat=draws[system])))
    n = np.array([draws[system] for system in full.systems], float)
    # the controls' expectations depend on the design and n_j only: the same for every sample
    judge = judge_totals(
        task,
        dataclasses.replace(full, sampler_n=n),
        options.get("target", "micro"),
        options.get("weighting", "size"),
        options.get("cluster_queries", False),
    )
    fact_query = np.zeros(full.facts.size, np.int64)
    fact_query[full.draw_fact] = full.draw_query
    total: dict[str, np.ndarray] = {}
    count = 0.0
    draw_prob = full.proposal[np.arange(full.facts.size)]  # (D, J): s_j at every fact
    for combo in itertools.product(*per_system):
        draw_fact = np.concatenate([np.asarray(c, np.int64) for c in combo])
        draw_sampler = np.repeat(np.arange(full.J), [len(c) for c in combo])
        data = dataclasses.replace(
            full,
            draw_fact=draw_fact,
            draw_sampler=draw_sampler,
            draw_row=np.arange(draw_fact.size),
            draw_query=fact_query[draw_fact],
            sampler_n=np.bincount(draw_sampler, minlength=full.J).astype(float),
            census=np.zeros(full.m, bool),
        )
        ctx = ScoringContext.of(data, task=task, estimator=name, **options)
        if name == "ppi":  # the judge totals are the same for every sample: computed once
            estimator.cache.of(ctx)["judge"] = judge
        terms = estimator.terms(ctx)
        point = estimator.statistic(ctx)({k: v.sum(axis=0) for k, v in terms.items()})
        weight = np.prod(draw_prob[draw_fact, draw_sampler])  # P(this ordered sample)
        for key in ("precision", "pooled_recall"):
            total[key] = total.get(key, 0.0) + weight * point[key]
        count += weight
    return {k: v / count for k, v in total.items()}


def true_precision(systems: list[str]) -> np.ndarray:
    return np.array([np.mean([c for _, c in OUTPUTS[s]]) for s in systems])


@pytest.mark.parametrize("judge", sorted(JUDGES))
def test_ppi_precision_is_exactly_unbiased_for_any_judge(judge):
    task = tiny_task(JUDGES[judge])
    expected = exact_expectation(task, {"A": 3, "B": 2, "C": 1})
    systems = build_sample_data(task).systems
    np.testing.assert_allclose(expected["precision"], true_precision(systems), atol=1e-12)


@pytest.mark.parametrize("estimator", ["ppi", "joint"])
def test_unbiased_under_the_judge_uncertainty_design(estimator):
    # receval sample --by-judge: draws favour facts the judge is unsure about; the recorded
    # probabilities keep both estimators unbiased (exact expectation over every sample)
    task = tiny_task(JUDGES["good"], design="judge-uncertainty")
    assert {s.design for s in task.samplers} == {"judge-uncertainty"}
    expected = exact_expectation(task, {"A": 2, "B": 2, "C": 1}, estimator)
    systems = build_sample_data(task).systems
    np.testing.assert_allclose(expected["precision"], true_precision(systems), atol=1e-12)


def test_unbiased_with_overlap_weighting():
    task = tiny_task(JUDGES["inverted"])
    expected = exact_expectation(task, {"A": 2, "B": 2, "C": 2}, weighting="overlap")
    systems = build_sample_data(task).systems
    np.testing.assert_allclose(expected["precision"], true_precision(systems), atol=1e-12)


@pytest.mark.parametrize("judge", ["good", "useless"])
def test_unbiased_with_controls_centred_per_query(judge):
    # --cluster-queries centres the judge's control within every (sampler, query): the
    # conditional expectation given the drawn fact's query keeps the estimator unbiased
    task = tiny_task(JUDGES[judge], queries=2)
    expected = exact_expectation(task, {"A": 2, "B": 2, "C": 2}, cluster_queries=True)
    systems = build_sample_data(task).systems
    np.testing.assert_allclose(expected["precision"], true_precision(systems), atol=1e-12)


def test_unbiased_with_the_logistic_calibration(monkeypatch):
    # the logistic map (used for pooled recall once a fold holds enough correct draws; here for
    # every quantity) is fitted on the other fold, so precision stays exactly unbiased
    import receval.estimators.ppi as ppi

    monkeypatch.setattr(ppi, "CALIBRATE", "logistic")
    task = tiny_task(JUDGES["good"])
    expected = exact_expectation(task, {"A": 2, "B": 2, "C": 1})
    systems = build_sample_data(task).systems
    np.testing.assert_allclose(expected["precision"], true_precision(systems), atol=1e-12)
