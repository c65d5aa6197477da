"""Issue 23 (an organiser's first hour), item 12: seeds as numpy takes them, short reprs, one
system's row by name, and CLI errors that name CLI options."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import DEFAULT_FILES, make_bundle

import receval
from receval.cli import cli
from receval.errors import BundleError, OptionError


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return receval.load_task(make_bundle(tmp_path_factory.mktemp("api")))


def test_seed_none_draws_fresh_entropy_and_records_it(task):
    first = receval.score(task, bootstrap=50, seed=None)
    second = receval.score(task, bootstrap=50, seed=None)
    seed = first.run.bootstrap.seed
    assert isinstance(seed, int) and seed != second.run.bootstrap.seed
    assert first.run.options.seed == seed
    again = receval.score(task, bootstrap=50, seed=seed)  # the recorded seed repeats the run
    assert again.leaderboard.equals(first.leaderboard)


def test_seed_may_be_a_generator_as_in_numpy_and_scipy(task):
    one = receval.score(task, bootstrap=50, seed=np.random.default_rng(1))
    two = receval.score(task, bootstrap=50, seed=np.random.default_rng(1))
    assert one.run.bootstrap.seed == two.run.bootstrap.seed
    assert one.leaderboard.equals(two.leaderboard)
    assert receval.score(task, bootstrap=50, seed=np.int64(3)).run.bootstrap.seed == 3
    with pytest.raises(ValueError, match="must be an integer, None"):
        receval.score(task, bootstrap=50, seed="7")


def test_reprs_are_a_few_lines(task):
    text = repr(task)
    assert text.startswith("Task('tiny'") and len(text.splitlines()) == 3 and len(text) < 400
    assert "2 systems (2 teams), 3 queries, 6 outputs" in text
    result = receval.score(task, bootstrap=50, seed=1)
    text = repr(result)
    assert text.startswith("ScoreResult(task 'tiny', estimator 'joint', 2 systems, B=50, seed=1)")
    assert len(text.splitlines()) <= 5 and len(text) < 600


def test_one_system_by_name_leaves_the_leaderboard_a_frame(task):
    result = receval.score(task, bootstrap=50, seed=1)
    row = result.system("B")
    assert (
        row["system"] == "B" and row["f1"] == result.leaderboard.set_index("system").loc["B", "f1"]
    )
    assert list(result.leaderboard.index) == [0, 1]  # the CSV's frame, in rank order
    with pytest.raises(KeyError, match="no system 'Z'"):
        result.system("Z")


def test_option_errors_name_python_keywords_in_the_api_and_flags_in_the_cli(task, tmp_path):
    with pytest.raises(OptionError, match=r"cluster_queries works with method='percentile'"):
        receval.score(task, bootstrap=50, cluster_queries=True, method="BCa")
    root = make_bundle(tmp_path)
    args = ["score", str(root), "--out", str(tmp_path / "o"), "--bootstrap", "50"]
    result = CliRunner().invoke(cli, [*args, "--cluster-queries", "--method", "BCa"])
    assert result.exit_code == 2
    assert "--cluster-queries works with --method percentile or --method basic" in result.output
    assert "cluster_queries" not in result.output
    result = CliRunner().invoke(cli, [*args, "--rank-by", "precision_at_target"])
    assert result.exit_code == 2
    assert "--rank-by precision_at_target needs --target-recall" in result.output


def test_the_pending_draws_error_names_the_option_of_its_caller(tmp_path):
    judgments = DEFAULT_FILES["judgments.tsv"].replace("q2\tMilan\tW\tann1\n", "")
    root = make_bundle(tmp_path, judgments=judgments)  # B's drawn "Milan" has no label
    with pytest.raises(BundleError, match=r"score anyway with allow_pending=True") as err:
        receval.score(root, bootstrap=50)
    assert "--allow-pending" not in str(err.value)
    result = CliRunner().invoke(cli, ["score", str(root), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "score anyway with --allow-pending, which" in result.stderr
    assert "allow_pending" not in result.stderr
