"""The public Python API, used as a notebook user would (issue 12)."""

from __future__ import annotations

import json
import pydoc
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import receval
from receval.cli import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    return receval.simulate(
        tmp_path_factory.mktemp("api") / "demo", systems=8, queries=40, per_system=40, seed=5
    )


def test_help_lists_the_api():
    text = pydoc.render_doc(receval, renderer=pydoc.plaintext)
    for name in ("load_task", "score", "ScoreResult", "sample", "simulate", "extrapolate",
                 "curve_method", "curve_budget", "BundleError", "RunRecord"):  # fmt: skip
        assert name in text, name
    assert set(receval.__all__) <= set(dir(receval))


def test_import_is_light():
    code = "import sys, receval; print(sorted(m for m in ('pandas','scipy','matplotlib','statsmodels') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_api_and_cli_give_the_same_leaderboard(task_dir, tmp_path):
    result = receval.score(receval.load_task(task_dir), bootstrap=100, seed=4, target_recall=0.1)
    out = tmp_path / "cli"
    args = ["score", str(task_dir), "--out", str(out), "--bootstrap", "100", "--seed", "4",
            "--target-recall", "0.1", "--quiet"]  # fmt: skip
    assert CliRunner().invoke(cli, args).exit_code == 0
    from_cli = pd.read_csv(out / "leaderboard.csv")
    written = result.write(tmp_path / "api")
    from_api = pd.read_csv(written / "leaderboard.csv")
    pd.testing.assert_frame_equal(from_api, from_cli)
    run = json.loads((out / "run.json").read_text())
    assert receval.RunRecord.from_dict(run).to_dict() == run
    assert set(run) >= {"receval_version", "task", "options", "bootstrap", "inputs", "merge"}
    assert result.run.options.bootstrap == 100 and result.per_query is not None


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("bootstrap", 10, "bootstrap=10"),
        ("bootstrap", 200.5, "must be an integer"),
        ("confidence", 1.5, "confidence=1.5"),
        ("rank_by", "F1", "rank_by='F1'"),
        ("tiers", "bonferroni", "tiers='bonferroni'"),
        ("method", "bca", "method='bca'"),
        ("estimator", "magic", "estimator='magic'"),
        ("target_recall", 1.2, "target_recall=1.2"),
    ],
)
def test_invalid_options_fail_before_any_work(option, value, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(".", r"\.")):
        receval.score("/nonexistent/task", **{option: value})


def test_invalid_combinations_are_named():
    with pytest.raises(ValueError, match="needs target_recall"):
        receval.score("/nonexistent", rank_by="precision_at_target")
    with pytest.raises(ValueError, match="BCa needs a jackknife"):
        receval.score("/nonexistent", method="BCa", cluster_queries=True)


def test_sample_draws_without_writing(task_dir):
    before = (task_dir / "samples.tsv").read_bytes()
    drawn = receval.sample(task_dir, 5, seed=9)
    assert len(drawn.samples) == 5 * 8
    assert (task_dir / "samples.tsv").read_bytes() == before
    with pytest.raises(ValueError, match="distribution"):
        receval.sample(task_dir, 5, seed=9, distribution="zipf")


def test_extrapolate_and_curves():
    result = receval.extrapolate(0.6, 0.3, 0.01, 0.5)
    assert 0 < result.precision_at_target < 0.6
    budget = receval.curve_budget("paula", 35_615)
    assert budget["annotations"] == 11_292
    with pytest.raises(ValueError, match="unknown curve method"):
        receval.curve_method("magic")


def test_leaderboard_command_prints_table_and_json(task_dir, tmp_path):
    out = tmp_path / "out"
    receval.score(task_dir, bootstrap=60).write(out, report=False)
    table = CliRunner().invoke(cli, ["leaderboard", str(out)])
    assert table.exit_code == 0 and "system" in table.output.splitlines()[0]
    as_json = CliRunner().invoke(cli, ["leaderboard", str(out), "--json", "--best-per-team"])
    rows = json.loads(as_json.output)
    assert rows and all(r["best_of_team"] for r in rows)
    assert {"precision_lo", "rank_hi", "interval"} <= set(rows[0])


def test_embedded_task_from_frames_scores_like_the_cli(tmp_path):
    """Issue 12 acceptance: the embedded task through the API from DataFrames (no files) gives
    the CLI's leaderboard."""
    from receval.config import load_config

    data = ROOT / "data" / "kbp-sim"
    tables = {
        name: pd.read_csv(data / f"{name}.tsv", sep="\t", dtype=str, keep_default_na=False)
        for name in ("runs", "judgments", "samples", "exhaustive_units", "exhaustive", "queries")
    }
    config = load_config(data / "task.toml", "kbp-sim")
    task = receval.Task.from_frames(**tables, config=config)
    result = receval.score(task, bootstrap=100, seed=3)
    out = tmp_path / "cli"
    args = ["score", str(data), "--out", str(out), "--bootstrap", "100", "--seed", "3", "--quiet"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    from_cli = pd.read_csv(out / "leaderboard.csv")
    result.write(tmp_path / "api", report=False)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "api" / "leaderboard.csv"), from_cli)


def test_simulate_stays_the_function_after_the_module_is_imported():
    import receval.simulation  # a submodule import must not shadow the function

    assert receval.simulate.__module__ == "receval.api"
