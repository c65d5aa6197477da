"""Precision at target recall needs a confidence ranking; Dimm extrapolations that fail their
back-test are flagged (issue 14, items 3 and 4)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from receval.cli import cli
from receval.estimators.target import BACKTEST_LIMIT, POOR_FIT_NOTE, score_ranking_problem
from receval.scoring import ScoreOptions, score_task
from receval.task import load_task

TARGET = 0.1


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ranking") / "task"
    args = ["simulate", str(root), "--systems", "8", "--queries", "60", "--seed", "3"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root


def _score(root: Path):
    options = ScoreOptions(bootstrap=100, seed=2, target_recall=TARGET)
    return score_task(load_task(root), options)


@pytest.fixture(scope="module")
def scored(bundle, tmp_path_factory):
    """The task as simulated, and a copy in which one system lost its scores and another has one
    score for every output."""
    base = _score(bundle)
    runs = pd.read_csv(bundle / "runs.tsv", sep="\t", dtype=str, keep_default_na=False)
    systems = sorted(runs["system"].unique())
    unscored, constant = systems[0], systems[1]
    edited = tmp_path_factory.mktemp("edited") / "task"
    edited.mkdir()
    for path in bundle.iterdir():
        if path.is_file():
            (edited / path.name).write_bytes(path.read_bytes())
    runs.loc[runs["system"] == unscored, "score"] = ""
    runs.loc[runs["system"] == constant, "score"] = "0.5"
    runs.to_csv(edited / "runs.tsv", sep="\t", index=False)
    return base, _score(edited), unscored, constant


def test_refuses_precision_at_target_without_a_ranking(scored):
    base, result, unscored, constant = scored
    board = result.leaderboard.set_index("system")
    for system, why in ((unscored, "its outputs have no score"), (constant, "same score")):
        row = board.loc[system]
        assert math.isnan(row["precision_at_target"])
        assert math.isnan(row["precision_at_target_lo"]) and math.isnan(
            row["precision_at_target_hi"]
        )
        assert row["precision_at_target_method"] in ("", None) or pd.isna(
            row["precision_at_target_method"]
        )
        assert "precision_at_target: refused" in row["note"] and why in row["note"]
        assert system not in result.curves  # no curve over an arbitrary order is written
        details = result.record.target.systems[system]
        assert details.method is None and "no confidence ranking" in details.refused
    # the base run (with scores) had a number for both: the refusal is about the ranking only
    before = base.leaderboard.set_index("system")
    assert np.isfinite(before.loc[[unscored, constant], "precision_at_target"]).all()


def test_other_systems_are_unaffected(scored):
    base, result, unscored, constant = scored
    before = base.leaderboard.set_index("system")
    after = result.leaderboard.set_index("system")
    others = [s for s in before.index if s not in (unscored, constant)]
    # precision, recall and the universe estimate do not depend on any system's scores, and
    # each system's curve only on its own: the other systems' numbers are the same
    for column in ("precision", "recall", "precision_at_target", "precision_at_target_lo"):
        np.testing.assert_allclose(
            after.loc[others, column].to_numpy(float), before.loc[others, column].to_numpy(float)
        )


def test_score_ranking_problem():
    outputs = pd.DataFrame(
        {
            "system": ["a", "a", "b", "b", "c", "c", "d"],
            "score": [0.1, 0.9, np.nan, np.nan, 0.3, 0.3, 0.2],
        }
    )
    assert score_ranking_problem(outputs, "a") is None
    assert score_ranking_problem(outputs, "b") == "its outputs have no score"
    assert score_ranking_problem(outputs, "c") == "every output has the same score"
    assert score_ranking_problem(outputs, "d") is None  # one output: its order is not arbitrary
    assert score_ranking_problem(outputs.drop(columns="score"), "a") == "its outputs have no score"


def test_dimm_extrapolations_failing_the_backtest_are_flagged(scored):
    base, _, _, _ = scored
    board = base.leaderboard
    dimm = board[board["precision_at_target_method"] == "dimm"]
    # the world is built so that some systems stop short of the target: the test must test
    assert len(dimm) >= 1, "no Dimm extrapolation at this target: the test world changed"
    for _, row in dimm.iterrows():
        backtest = row["precision_at_target_backtest"]
        flagged = POOR_FIT_NOTE in str(row["note"])
        assert flagged == (not pd.isna(backtest) and backtest > BACKTEST_LIMIT), row["system"]
        flags = base.record.target.systems[row["system"]].flags
        assert any("does not fit" in f for f in flags) == flagged
        if flagged:
            assert f"{backtest:.2f} > {BACKTEST_LIMIT:.2f}" in " ".join(flags)
    print(
        f"\n{len(dimm)} Dimm extrapolations, back-tests {sorted(dimm['precision_at_target_backtest'].round(2))}"
    )
