"""Files receval writes load back; scoring edge cases that used to leak warnings or fail.

* uniform exhaustive units (an empty ``prob`` column, as ``sample --units-from`` writes it) load;
* a joint score without exhaustive units prints no ``RuntimeWarning``;
* an empty submission (a header-only ``runs/<system>.tsv``) is scored: precision undefined,
  recall 0, and a note says why.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import make_bundle

from receval.cli import cli
from receval.scoring import ScoreOptions, score_task
from receval.task import load_task

RUNS_A = "query_id\tanswer\tscore\nq1\tParis\t0.9\nq2\tRome\t0.8\nq3\tBarcelona\t0.3\n"
RUNS_B = "query_id\tanswer\tscore\nq1\t Paris \t0.7\nq2\tMilan\t0.6\nq3\tMadrid\t0.5\n"


def test_uniform_exhaustive_units_with_an_empty_prob_column_load(tmp_path):
    root = make_bundle(tmp_path, exhaustive_units="unit\tprob\nd1\t\nd2\t\n")
    task = load_task(root)
    assert task.exhaustive_units["prob"].isna().all()
    # a partly filled prob column is still an error
    bad = make_bundle(tmp_path / "bad", exhaustive_units="unit\tprob\nd1\t0.5\nd2\t\n")
    result = CliRunner().invoke(cli, ["validate", str(bad)])
    assert result.exit_code == 2 and "exhaustive_units.tsv:3" in result.output


def test_sample_units_from_round_trips(tmp_path):
    root = make_bundle(tmp_path, exhaustive_units=None, exhaustive=None)
    units = tmp_path / "candidates.tsv"
    units.write_text("unit\nd1\nd2\nd3\n")
    result = CliRunner().invoke(
        cli,
        ["sample", str(root), "--exhaustive-units", "2", "--units-from", str(units), "--seed", "1"],
    )
    assert result.exit_code == 0, result.output
    todo = pd.read_csv(root / "to_annotate.tsv", sep="\t", dtype=str, keep_default_na=False)
    drawn = todo[todo["kind"] == "unit"][["unit", "prob"]]
    assert (drawn["prob"] == "").all()
    drawn.to_csv(root / "exhaustive_units.tsv", sep="\t", index=False)
    assert len(load_task(root).exhaustive_units) == 2


@pytest.mark.parametrize(
    ("table", "words"),
    [
        (
            "unit\tprob\nd1\t0.5\nd2\tabc\n",
            "candidates.tsv:3: column 'prob': 'abc' is not a finite",
        ),
        ("unit\tprob\nd1\t0.5\nd2\t\n", "candidates.tsv:3: no prob here but on other lines"),
        ("unit\tprob\nd1\t-1\nd2\t1\n", "candidates.tsv:2: prob must be >= 0"),
        ("unit\tprob\nd1\t0\nd2\t0\n", "candidates.tsv: every prob is 0"),
        ("unit\nd1\nd2\nd1\n", "candidates.tsv:4: unit 'd1' is listed twice"),
        ("unit\tprob\nd1\t1\n \t1\n", "candidates.tsv:3: empty value in required column 'unit'"),
    ],
)
def test_a_candidate_unit_table_with_a_bad_row_is_refused(tmp_path, table, words):
    """One unreadable weight used to turn the whole table uniform, silently (the organiser's
    design ignored); a repeated or blank unit was drawn as it was."""
    root = make_bundle(tmp_path, exhaustive_units=None, exhaustive=None)
    units = tmp_path / "candidates.tsv"
    units.write_text(table)
    args = ["sample", str(root), "--exhaustive-units", "1", "--units-from", str(units)]
    result = CliRunner().invoke(cli, [*args, "--seed", "1"])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and words in result.output, result.output
    assert not (root / "to_annotate.tsv").exists()


def test_joint_score_without_exhaustive_units_is_quiet(tmp_path):
    task = load_task(make_bundle(tmp_path, exhaustive_units=None, exhaustive=None))
    for method in ("percentile", "BCa"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            result = score_task(task, ScoreOptions(bootstrap=50, method=method))
        assert result.leaderboard["recall"].isna().all()


@pytest.mark.parametrize("estimator", ["joint", "official"])
def test_empty_submission_is_scored_and_noted(tmp_path, estimator):
    root = make_bundle(
        tmp_path,
        runs=None,
        files={"runs/A.tsv": RUNS_A, "runs/B.tsv": RUNS_B, "runs/C.tsv": "query_id\tanswer\n"},
    )
    task = load_task(root)
    assert task.systems == ["A", "B", "C"] and task.summary()["empty submissions"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        board = score_task(task, ScoreOptions(estimator=estimator, bootstrap=50)).leaderboard
    c = board.set_index("system").loc["C"]
    assert c["outputs"] == 0 and c["pooled_recall"] == 0.0
    if estimator == "joint":
        assert np.isnan(c["precision"])
        assert "empty submission" in c["note"]
    else:  # CS-Score prints 0/0 as 0.0000
        assert c["precision"] == 0.0 and "0/0" in c["note"]
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["score", str(root), "--out", str(out), "--estimator", estimator, "--bootstrap", "50"]
    )
    assert result.exit_code == 0, result.output
