"""bench/validity.py end to end on short runs (slow: a few hundred score_task calls)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import load_bench

BENCH = Path(__file__).resolve().parents[1] / "bench" / "validity.py"


def _bench():
    return load_bench("validity")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["null-10", "weighted-units", "multi-document"])
def test_validity_scenarios_pass_on_short_runs(name):
    bench = _bench()
    scenario = next(s for s in bench.SCENARIOS if s.name == name)
    runs = 30
    fig = bench.study(scenario, runs, 200, 7)
    # the bench's own targets, with the Monte Carlo error of 30 runs
    assert fig.checks["rankset"] and fig.checks["range"]
    if fig.fwer is not None:
        assert fig.fwer <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)
    assert fig.bias["theta"] <= fig.zmax
