"""bench/loop_judge.py on the shared TREC RAG 2025 pairs (skipped when ../shared/data is absent):
one world, two equal rounds, the diagnostic's identities."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
from conftest import load_bench

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec-rag25-judges"
pytestmark = pytest.mark.skipif(not DATA.exists(), reason="shared RAG 2025 data absent")


def test_diagnostic_compares_the_judged_tests_with_joint_at_equal_labels():
    bench = load_bench("loop_judge")
    judges = load_bench("judges")
    world = judges.RagWorld(2, 0)
    args = argparse.Namespace(systems=6, seed=0, fixed=2, batch=150)
    task = [task for _, task in bench.world_tasks(world, 0, args)][-1]
    figures = bench.compare(world, task)
    # joint's own variants bet differently on the same terms: the same variance and information
    for name in ("var", "z2", "best_const", "kurtosis"):
        assert figures[f"joint_cap0.7_{name}"] == pytest.approx(1.0)
    # the judge lowers the variance of the paired terms; the oracle calibration lowers it more
    assert figures["ppi_var"] < 0.95
    assert figures["oracle_var"] < figures["ppi_var"]
    assert all(np.isfinite(v) for k, v in figures.items() if k.endswith(("_var", "_logcap")))
    assert figures["open_ppi"] <= figures["open_joint"]


def test_bet_variants_and_the_segment_errors():
    """``bet:agrapa@0.5`` is the bets in use (the same capitals); the segment study gives a
    finite error ratio per system and segment, and the judge lowers the middle ranks' error."""
    from unittest import mock

    from receval.estimators.anytime import pairs

    bench = load_bench("loop_judge")
    judges = load_bench("judges")
    world = judges.RagWorld(2, 0)
    args = argparse.Namespace(systems=6, seed=0, fixed=2, batch=150)
    task = [task for _, task in bench.world_tasks(world, 0, args)][-1]
    rng = np.random.default_rng(0)
    d = rng.normal(0.05, 1.0, (3, 200))
    lo, hi = np.full(d.shape, -4.0), np.full(d.shape, 4.0)
    act = rng.random(d.shape) < 0.8
    same = bench.mixed_bets("agrapa@0.5")(d, lo, hi, act)
    for x, y in zip(same, pairs.log_capitals(d, lo, hi, act), strict=True):
        np.testing.assert_allclose(x, y)
    with mock.patch.object(pairs, "log_capitals", bench.mixed_bets("agrapa@0.5|sq@0.7")):
        mixed = pairs.log_capitals(d, lo, hi, act)
    assert np.all(mixed[0] >= 0) and np.all(np.isfinite(mixed[0]))
    errors = bench.segment_errors(world, task, ("ppi",))
    assert all(np.isfinite(v) and v > 0 for v in errors.values())
    middle = [v for (_, r, c), v in errors.items() if c < 0 and isinstance(r, int) and 1 < r < 5]
    assert np.median(middle) < 1.0
    assert {r for (_, r, _) in errors if isinstance(r, str)} == {
        "pair 0-2",
        "pair 0-3",
        "pair 1-2",
        "pair 1-3",
    }
