"""Monte Carlo validity of --estimator ppi in worlds built to break it (bench/ppi.py's study).

Per judge: the human sample is redrawn R times; joint and ppi are fitted on the same bootstrap
replicates.  Targets, with the Monte Carlo error of R runs allowed for:

* coverage of the 95% intervals ≥ min(0.93, joint's) − 3·√(0.05·0.95/R) (a run's systems are
  correlated, so R, not R·m, is the effective count);
* no system's bias beyond 4 Monte Carlo SE (|mean error| / (sd/√R));
* never wider than the human-only joint estimator beyond Monte Carlo error: median width ratio
  over systems ≤ 1.03 for a useless/inverted judge; < 1 for a strong one.

The exact unbiasedness for any judge is checked without noise in test_ppi_exact.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import load_bench

BENCH = Path(__file__).resolve().parents[2] / "bench" / "ppi.py"


@pytest.fixture(scope="module")
def bench():
    return load_bench("ppi")


@pytest.fixture(scope="module")
def small_world(bench):
    return bench.simulated_world(seed=5, systems=8, queries=30)


def _check(rows, runs: int, max_median_ratio: float) -> None:
    se = math.sqrt(0.05 * 0.95 / runs)
    for row in rows:
        floor = min(0.93, row["joint_coverage"]) - 3 * se
        assert row["coverage"] >= floor, row
        assert row["max_bias_z"] <= 4.0, row
        assert row["median_ratio"] <= max_median_ratio, row


def test_useless_judge_stays_valid_and_no_wider_fast(bench, small_world):
    runs = 15
    _check(bench.study(small_world, "useless", 15, runs, 100, seed=3), runs, 1.03)


def test_strong_judge_narrows_precision_fast(bench, small_world):
    rows = bench.study(small_world, "strong", 20, 10, 100, seed=4)
    precision = next(r for r in rows if r["metric"] == "precision")
    assert precision["median_ratio"] < 0.9, precision


@pytest.mark.slow
@pytest.mark.parametrize(
    ("judge", "n"),
    [
        ("useless", 10),
        ("inverted", 30),
        ("weak", 10),
        ("team-biased", 30),
        ("missing-30", 10),
        ("strong", 30),
    ],
)
def test_ppi_validity_in_hostile_worlds(bench, small_world, judge, n):
    runs = 80
    rows = bench.study(small_world, judge, n, runs, 200, seed=11)
    _check(rows, runs, 1.03 if judge in ("useless", "inverted", "weak") else 1.0)
    if judge == "strong":
        precision = next(r for r in rows if r["metric"] == "precision")
        assert precision["median_ratio"] <= 0.75, precision
    assert np.isfinite([r["coverage"] for r in rows]).all()


@pytest.fixture(scope="module")
def trec_small(bench):
    return bench.trec_world(seed=2, queries=12, docs=1500, systems=8, teams=4, units=5)


def test_trec_like_world_is_low_prevalence_with_a_weak_consensus_judge(bench, trec_small):
    facts = trec_small.task.facts
    pool = facts["in_pool"].to_numpy(bool)
    assert 0.01 < trec_small.label[pool].mean() < 0.12  # few relevant among the pooled
    assert trec_small.label[~pool].sum() > 0  # relevant documents no run retrieved
    judge = bench.judge_scores(trec_small, "consensus", np.random.default_rng(0))
    rho = np.corrcoef(judge["judge_score"], trec_small.label[pool])[0, 1]
    assert 0.1 < rho < 0.5, rho


def test_trec_like_consensus_judge_valid_and_no_wider_fast(bench, trec_small):
    runs = 12
    _check(bench.study(trec_small, "consensus", 10, runs, 100, seed=3), runs, 1.03)


@pytest.mark.slow
def test_trec_like_strong_judge_valid_and_narrower(bench, trec_small):
    runs = 30
    rows = bench.study(trec_small, "strong", 30, runs, 150, seed=7)
    _check(rows, runs, math.inf)
    for row in rows:  # never wider beyond Monte Carlo error: at prevalence ≈ 0.04 pooled recall
        # rests on a handful of correct draws per run, so its median ratio's SE is ≈ 0.07
        assert row["median_ratio"] <= 1.0 + 3 * row["ratio_se"], row
    precision = next(r for r in rows if r["metric"] == "precision")
    assert precision["median_ratio"] <= 0.8, precision


@pytest.mark.slow
def test_parabank_model_score_judge_is_valid(bench):
    module = bench
    world = module.parabank_world()
    if world is None:
        pytest.skip("../shared/data/parabank-eval not present")
    runs = 20
    rows = module.study(world, "nll", 30, runs, 150, seed=5)
    _check(rows, runs, 1.0)
