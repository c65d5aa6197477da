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
