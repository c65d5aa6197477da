"""bench/judges.py on the shared TREC RAG 2025 pairs (skipped when ../shared/data is absent):
one campaign fast, a short study slow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import load_bench

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec-rag25-judges"
pytestmark = pytest.mark.skipif(not DATA.exists(), reason="shared RAG 2025 data absent")


def test_one_campaign_with_the_graded_judge_is_narrower_than_joint():
    bench = load_bench("judges")
    world = bench.RagWorld(8, 1)
    grades = world.judges(np.random.default_rng(6))
    configs = {"graded": (world.judge_table(grades, ["umbrela"], False), True)}
    out = bench.campaign(world, np.random.default_rng(3), 30, configs, 3, 100)
    for metric in bench.METRICS:
        joint = out["joint"][metric][2] - out["joint"][metric][1]
        ppi = out["graded"][metric][2] - out["graded"][metric][1]
        assert np.all(np.isfinite(ppi))
        assert np.median(ppi / joint) < 0.95


@pytest.mark.slow
def test_graded_judge_meets_the_targets_on_a_short_study():
    bench = load_bench("judges")
    runs = 12
    world = bench.RagWorld(16, 1)
    grades = world.judges(np.random.default_rng(6))
    configs = {"graded": (world.judge_table(grades, ["umbrela"], False), True)}
    results = [
        bench.campaign(world, np.random.default_rng(1000 + r), 30, configs, 1000 + r, 200)
        for r in range(runs)
    ]
    rows = {(r["config"], r["metric"]): r for r in bench.summarise(world, results, ["graded"])}
    for metric in bench.METRICS:
        row = rows[("graded", metric)]
        # 0.95 − 2 SE with 12 runs of 16 systems counted as 12 independent runs (conservative)
        assert row["coverage"] >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / runs)
        assert row["median_width_ratio"] <= 0.85


def _rag_loop(null: bool, systems: int, seed: int, budget: int):
    from types import SimpleNamespace

    bench = load_bench("until_decided_judge")
    world = load_bench("judges").RagWorld(2, 0)
    world.labelled_of = lambda samples: bench._labels(world, samples)
    bench.rag_systems(world, systems, seed, null)
    judge = world.judge_table({"umbrela": world.grade}, ["umbrela"], False)
    args = SimpleNamespace(top=None if null else 1, batch=20 * systems, budget=budget)
    return world, bench.rag_loop(world, judge, "ppi", args.top, args.batch, args.budget, seed)


def test_the_loop_with_the_judge_decides_no_pair_in_a_rag_null_world():
    """Every system the same precision (RAG 2025 pairs, UMBRELA graded, fixed seed): the loop
    with --estimator ppi decides no pair at any of its looks (a decided pair is an error)."""
    world, out = _rag_loop(True, 4, 3, 240)
    assert world.precision.nunique() == 1
    assert len(out["looks"]) >= 3 and not out["wrong"]


def test_the_floor_study_variance_shares():
    """bench/until_decided_judge.py --floor: an uninformative prediction leaves all of a
    label's variance whatever the design; one that says 0.9 for every correct label and 0.1 for
    every wrong one leaves E[(y − μ)²] / Var(y) = 0.01 / 0.25, and drawing ∝ its (constant) σ̂
    changes nothing."""
    bench = load_bench("until_decided_judge")
    y = np.tile([0.0, 1.0], 50)
    flat = bench.variance_shares(y, np.full(y.size, 0.5))
    assert np.allclose([flat["uniform"], flat["active"]], 1.0)
    sharp = bench.variance_shares(y, np.where(y == 1, 0.9, 0.1))
    assert np.allclose([sharp["uniform"], sharp["active"]], 0.01 / 0.25)


def test_the_rag_loop_records_each_systems_labelled_share_and_the_oracle_calibration():
    """bench/until_decided_judge.py: ``coverage_by_rank`` is each system's labelled share, best
    system first; ``--calibration oracle`` replaces the loop's fitted map by every fact's share
    correct in its (query, grade) while it is in force."""
    bench = load_bench("until_decided_judge")
    world, out = _rag_loop(True, 4, 3, 240)
    share = out["coverage"]
    assert len(share) == 4 and all(0.0 < s < 1.0 for s in share)
    from receval.estimators import judge_stream

    fitted = judge_stream.calibrated_scores
    with bench.calibration(world, "oracle"):
        table = judge_stream.calibrated_scores(None, None, None, None)
    assert judge_stream.calibrated_scores is fitted
    assert table.shape == world.label.shape and ((table >= 0) & (table <= 1)).all()
    # each (query, grade) cell's share over all pairs predicts the labels better than the grade
    assert np.corrcoef(table, world.label)[0, 1] > np.corrcoef(world.grade, world.label)[0, 1]
