"""A new estimator reaches parity with the registered ones through the registry alone
(issue 36 item 1): registered at run time, it is a CLI choice with its summary in `score
--help`, scores (leaderboard, run card), drives `sample --until-decided` and `budget`, with no
other file touched; its components are fresh per run."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest
from click.testing import CliRunner

from receval.cli import cli
from receval.estimators import registry
from receval.estimators.joint import JointEstimator
from receval.simulation import SimulationConfig, simulate_task


class DemoEstimator(JointEstimator):
    """A throwaway estimator: the joint estimator under another name and summary."""

    name: ClassVar[str] = "demo-joint"
    summary: ClassVar[str] = "a demonstration estimator registered at run time"


@pytest.fixture
def demo():
    registry.register(DemoEstimator)
    yield DemoEstimator
    registry.ESTIMATORS.pop(DemoEstimator.name, None)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": "100"})


def test_a_runtime_registered_estimator_is_everywhere(demo, tmp_path):
    help_text = invoke("score", "--help").output.replace("\n", " ")
    assert "demo-joint" in help_text and "a demonstration estimator" in " ".join(help_text.split())
    config = SimulationConfig(systems=4, teams=4, queries=20, per_system=30)
    root = simulate_task(tmp_path / "task", config, seed=2)
    out = tmp_path / "out"
    result = invoke("score", root, "--out", out, "--estimator", "demo-joint", "--bootstrap", 50)
    assert result.exit_code == 0, result.output
    board = (out / "leaderboard.csv").read_text(encoding="utf-8")
    assert "demo-joint" in board
    assert json.loads((out / "run.json").read_text())["options"]["estimator"] == "demo-joint"
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "a demonstration estimator registered at run time" in page
    drawn = invoke("sample", root, "--until-decided", "--batch", 10, "--seed", 1,
                   "--estimator", "demo-joint")  # fmt: skip
    assert drawn.exit_code == 0, drawn.output
    planned = invoke("budget", root, "--total", 200, "--estimator", "demo-joint")
    assert planned.exit_code == 0, planned.output
    assert "demo-joint" in invoke("budget", "--help").output


def test_the_registry_hands_out_fresh_components():
    assert registry.get_estimator("joint") is not registry.get_estimator("joint")
    assert registry.get_interval_method("anytime") is not registry.get_interval_method("anytime")
    assert registry.estimator_class("ppi").uses_judge
    assert not registry.estimator_class("official").sample_based
