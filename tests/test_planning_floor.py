"""The adaptive planner says when a recall target cannot be met by any sample size."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from receval.formats.bundle import write_bundle
from receval.planning import adaptive_sample_sizes
from receval.simulation import SimulationConfig, simulate_world
from receval.task import load_task, with_annotation


def test_a_recall_target_below_the_units_floor_is_unreachable_and_draws_nothing():
    world = simulate_world(SimulationConfig(systems=5, queries=40), np.random.default_rng(2))
    with tempfile.TemporaryDirectory() as tmp:
        base = load_task(write_bundle(Path(tmp) / "w", world.tables(), world.task_config()))
    ann = world.annotate(np.random.default_rng(3), per_system=40, exhaustive_units=8)
    late = sorted(world.systems)[-1]
    task = with_annotation(
        base,
        samples=ann.samples[ann.samples["system"] != late],
        judgments=ann.judgments,
        exhaustive_units=ann.exhaustive_units,
        exhaustive=ann.exhaustive,
    )
    # 8 units: θ̂'s standard error alone is several points, so ±0.005 recall is out of reach
    plan = adaptive_sample_sizes(task, 0.005, metrics=("recall",), max_n=300).set_index("system")
    assert plan.loc[late, "n"] == 0 and not plan.loc[late, "reached"]
    assert "unreachable" in plan.loc[late, "note"] and "exhaustive units" in plan.loc[late, "note"]
    # a precision target is met by drawing, as before
    plan = adaptive_sample_sizes(task, 0.2, metrics=("precision",), max_n=300).set_index("system")
    assert 0 < plan.loc[late, "n"] < 300 and plan.loc[late, "reached"]
    assert plan.loc[late, "note"] == ""
