"""Equivalence classes counted once by every estimator (TAC's counting; issue 9, item 5)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from estimator_parts import point as estimator_point
from test_exact_expectations import every_output_once

from receval.estimators.classes import canonical_facts, class_view, unresolved_outputs
from receval.estimators.sample_data import build_sample_data
from receval.formats.bundle import write_bundle
from receval.scoring import ScoreOptions, score_task, true_metrics
from receval.simulation import SimulationConfig, simulate_world
from receval.task import Task, load_task, with_annotation

METRICS = ("precision", "pooled_recall", "recall")


def _alias_world(seed: int, systems: int = 8, queries: int = 30):
    config = SimulationConfig(systems=systems, queries=queries, name="classes", alias_rate=0.4)
    return simulate_world(config, np.random.default_rng(seed))


@pytest.fixture(scope="module")
def world_and_base(tmp_path_factory):
    world = _alias_world(5)
    root = write_bundle(tmp_path_factory.mktemp("cls") / "w", world.tables(), world.task_config())
    return world, load_task(root)


def test_world_truth_counts_classes_and_matches_true_metrics(world_and_base):
    world, base = world_and_base
    truth = world.truth_metrics().set_index("system")
    # a redundant alias adds an output row but not an output of the class-level truth
    assert (truth["outputs"] < base.outputs.groupby("system").size().reindex(truth.index)).any()
    scored = true_metrics(base)  # from truth.tsv's equivalence_class column
    for metric in METRICS:
        np.testing.assert_allclose(scored[metric].reindex(truth.index), truth[metric], atol=1e-12)
    assert scored.attrs["pool_coverage"] == pytest.approx(world.pool_coverage, abs=1e-12)


def _census_annotation(world, base):
    """Every output drawn once (uniform), every fact judged with its class, every document
    annotated: each sum over draws equals its expectation, so estimates are exact."""
    samples = every_output_once(base.outputs)
    judgments = world.truth()[["query_id", "answer", "label", "equivalence_class"]]
    units = pd.DataFrame({"unit": world.documents})
    exhaustive = world.exhaustive_annotation(world.documents)
    return with_annotation(
        base, samples=samples, judgments=judgments, exhaustive_units=units, exhaustive=exhaustive
    )


def test_every_estimator_is_exact_at_class_level_on_a_census(world_and_base):
    world, base = world_and_base
    task = _census_annotation(world, base)
    truth = world.truth_metrics().set_index("system")
    for classes in (True, False):
        data = build_sample_data(task, classes=classes)
        for estimator in ("joint", "simple"):
            point = estimator_point(data, estimator)
            # counting aliases as facts over-states precision (and the joint ν̂); the simple
            # recall comes from exhaustive units, which list each class once here
            checked = METRICS if classes else ("precision",)
            for metric in checked:
                got = pd.Series(point[metric], index=data.systems).reindex(truth.index)
                close = np.allclose(got, truth[metric], atol=1e-9)
                assert close == classes, (classes, estimator, metric)
        if classes:
            assert point["pool_coverage"][0] == pytest.approx(world.pool_coverage, abs=1e-9)


def test_aliases_of_a_class_are_one_output_with_summed_probability():
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
            "system": ["A", "A", "A"],
            "query_id": "q1",
            "answer": ["Barack Obama", "Obama", "Paris"],
            "prob": 1 / 3,
        }
    )
    task = Task.from_frames(runs, judgments=judgments, samples=samples)
    canon = canonical_facts(task)
    view = class_view(task, canon)
    assert view.outputs.groupby("system").size().to_dict() == {"A": 2, "B": 1}
    assert unresolved_outputs(task, canon) == 0
    data = build_sample_data(task)
    a = data.systems.index("A")
    obama = int(np.flatnonzero(data.label == 1)[0])
    assert data.proposal[obama, data.sampler_system.tolist().index(a)] == pytest.approx(2 / 3)
    # every output judged: a census; precision 1 class right of 2 outputs, as CS-Score counts
    board = score_task(task, ScoreOptions(bootstrap=50, seed=1)).leaderboard.set_index("system")
    assert board.loc["A", "precision"] == pytest.approx(0.5)
    assert board.loc["B", "precision"] == pytest.approx(1.0)
    assert board.loc["A", "pooled_recall"] == pytest.approx(1.0)


def _campaign(world, base, rng, classes: bool) -> dict[str, np.ndarray]:
    ann = world.annotate(rng, per_system=40, exhaustive_units=60)
    task = with_annotation(base, **ann.tables())
    data = build_sample_data(task, classes=classes)
    ratio = np.ones(data.m, bool) if classes else None  # unresolved aliases: the ratio form
    point = estimator_point(data, "joint", ratio)
    assert classes is False or not data.sizes_known
    return {m: pd.Series(point[m], index=data.systems) for m in METRICS}


def test_class_level_estimates_are_unbiased_in_an_alias_world(world_and_base):
    """20 campaigns; per system and metric z = mean error / (sd/√R).  Without bias, each |z| is
    about a t(19) variable; max over 8 systems × 3 metrics stays below 4 with probability
    ≈ 0.98 (Bonferroni: 24 · P(|t19| > 4) ≈ 0.018).  The ratio estimators carry an O(1/n)
    bias far below one SE at n = 40 draws.  Counting each alias as a fact (classes=False)
    must show the bias the class counting removes."""
    world, base = world_and_base
    truth = world.truth_metrics().set_index("system")
    worst = {}
    for classes in (True, False):
        rng = np.random.default_rng(11)
        runs = [_campaign(world, base, rng, classes) for _ in range(20)]
        z = []
        for metric in METRICS:
            est = np.array([r[metric].reindex(truth.index).to_numpy() for r in runs])
            err = est - truth[metric].to_numpy()
            z.append(np.abs(err.mean(axis=0)) / (err.std(axis=0, ddof=1) / math.sqrt(len(runs))))
        worst[classes] = float(np.max(z))
    assert worst[True] < 4.0
    assert worst[False] > 6.0


def test_mixed_unit_designs_flag_pool_coverage_and_recall(world_and_base):
    """Units with and without prob cannot share one weighted ratio: θ̂ and recall say so."""
    world, base = world_and_base
    ann = world.annotate(np.random.default_rng(3), per_system=20, exhaustive_units=10)
    units = ann.exhaustive_units.assign(prob=[0.01] * 5 + [np.nan] * 5)
    task = with_annotation(base, **{**ann.tables(), "exhaustive_units": units})
    result = score_task(task, ScoreOptions(bootstrap=50, seed=1))
    pool = result.pool.set_index("quantity")
    assert "mixes units without prob" in pool.loc["pool_coverage", "note"]
    assert result.leaderboard["note"].str.contains("recall: flagged: exhaustive_units").all()
    assert any("mixes units" in w for w in result.warnings)
