"""Fast versions of bench/validity.py's checks: fact-level θ̂, pending draws, flags, [0, 1]."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import simulated_world

from receval.errors import BundleError
from receval.estimators.sample_data import build_sample_data
from receval.formats.bundle import write_bundle
from receval.scoring import ScoreOptions, score_task
from receval.simulation import SimulationConfig, simulate_world
from receval.task import load_task, with_annotation


@pytest.fixture(scope="module")
def multi_doc():
    cfg = SimulationConfig(systems=6, queries=40, per_system=40, documents_per_fact=2.5)
    return simulated_world(cfg, 3)


def _theta(task) -> float:
    data = build_sample_data(task)
    return float(
        (data.unit_pooled * data.unit_weight).sum() / (data.unit_found * data.unit_weight).sum()
    )


def test_fact_level_pool_coverage_with_every_document(multi_doc):
    # every document annotated: Σ_u Σ_{x∈u} 1/d(x) counts each fact exactly once, so θ̂ equals the
    # fact-level θ exactly; without the documents column it is the mention-weighted share
    world, base = multi_doc
    assert world.fact_documents[world.candidate_true].mean() > 1.5
    units = pd.DataFrame({"unit": world.documents})
    ex = world.exhaustive_annotation(world.documents)
    task = with_annotation(base, exhaustive_units=units, exhaustive=ex)
    assert _theta(task) == pytest.approx(world.pool_coverage, rel=1e-12)
    mention = with_annotation(base, exhaustive_units=units, exhaustive=ex.drop(columns="documents"))
    assert abs(_theta(mention) - world.pool_coverage) > 0.01


def test_pending_draws_are_refused_unless_allowed(multi_doc):
    world, base = multi_doc
    ann = world.annotate(np.random.default_rng(1), per_system=20, exhaustive_units=20)
    judged = ann.judgments.iloc[5:]  # five drawn facts left unlabelled
    task = with_annotation(
        base,
        samples=ann.samples,
        judgments=judged,
        exhaustive_units=ann.exhaustive_units,
        exhaustive=ann.exhaustive,
    )
    with pytest.raises(BundleError, match=r"have no label yet.*allow_pending=True"):
        score_task(task, ScoreOptions(bootstrap=50))
    result = score_task(task, ScoreOptions(bootstrap=50, allow_pending=True))
    assert any("no label yet" in w for w in result.warnings)


def test_small_samples_are_flagged_and_precision_stays_in_range(multi_doc):
    world, base = multi_doc
    names = sorted(world.systems)
    sizes = {n: (5 if k == 0 else 40) for k, n in enumerate(names)}
    ann = world.annotate(np.random.default_rng(2), per_system=sizes, exhaustive_units=7)
    task = with_annotation(
        base,
        samples=ann.samples,
        judgments=ann.judgments,
        exhaustive_units=ann.exhaustive_units,
        exhaustive=ann.exhaustive,
    )
    result = score_task(task, ScoreOptions(bootstrap=100))
    board = result.leaderboard.set_index("system")
    # 5 own draws are not flagged for their number (the joint estimator adds the others' draws
    # of its facts and the small-sample expansion widens the interval: bench/flags.py measured
    # 5-draw systems covering 0.96 unflagged); the interval is there
    assert "judged draws of this system's sample" not in board.loc[names[0], "note"]
    assert board.loc[names[0], "precision_lo"] < board.loc[names[0], "precision_hi"]
    assert board["note"].str.contains("recall: flagged: pool coverage from").all()
    cols = ["precision", "precision_lo", "precision_hi"]
    assert ((board[cols] >= 0) & (board[cols] <= 1)).all().all()
    assert (board["precision_ess"] > 0).all()
    assert result.record.ranking.procedure == "stepdown"
    assert set(result.record.design.precision_forms.values()) <= {"ratio", "unbiased", "census"}


def test_truth_check_coverage_tolerates_rounding():
    from receval.scoring import covers_truth

    # a census: lower = upper = estimate, which differs from the truth in the last digit
    assert covers_truth(0.3, 0.3, 0.1 + 0.2)
    assert covers_truth(0.2, 0.3, 0.3 + 1e-12)
    assert not covers_truth(0.2, 0.3, 0.3 + 1e-6)
    assert covers_truth(float("nan"), 0.3, 0.3) is None


def test_precision_with_almost_no_wrong_draws_is_flagged():
    """Precision 0.97–1.0 with 30 draws: (nearly) no wrong draw, so the interval's lower end rests
    on a bounded, skewed distribution and is flagged, saying why; 40 draws at precision ≈ 0.5
    have both labels in plenty and are not."""
    cfg = SimulationConfig(systems=5, queries=40, precision_range=(0.97, 1.0))
    world = simulate_world(cfg, np.random.default_rng(8))
    with tempfile.TemporaryDirectory() as tmp:
        base = load_task(write_bundle(Path(tmp) / "w", world.tables(), world.task_config()))
    ann = world.annotate(np.random.default_rng(9), per_system=30, exhaustive_units=40)
    task = with_annotation(base, **ann.tables())
    notes = score_task(task, ScoreOptions(bootstrap=50)).leaderboard["note"]
    # fewer than 3 wrong draws among a system's facts (bench/flags.py: unflagged intervals at
    # precision 0.95-1 then covered 1.0): flagged, saying why; 3 or more: not for this
    flagged = notes.str.contains(r"precision: flagged: [0-2] wrong judged draws among", regex=True)
    assert flagged.any()
    assert notes[flagged].str.contains("near precision 1 the interval may undercover").all()
    assert not notes.str.contains(r"precision: flagged: \d{2,}|[3-9] wrong", regex=True).any()

    world, base = _half_world()
    ann = world.annotate(np.random.default_rng(9), per_system=40, exhaustive_units=40)
    notes = score_task(with_annotation(base, **ann.tables()), ScoreOptions(bootstrap=50))
    assert not notes.leaderboard["note"].str.contains("judged draws among").any()


def _half_world():
    cfg = SimulationConfig(systems=5, queries=40, precision_range=(0.45, 0.55))
    world = simulate_world(cfg, np.random.default_rng(8))
    with tempfile.TemporaryDirectory() as tmp:
        base = load_task(write_bundle(Path(tmp) / "w", world.tables(), world.task_config()))
    return world, base
