"""Judges as they come: several judges per fact and graded scales (judge.tsv, task.toml [judge],
``import ... --judge FILE --judge FILE --judge-scale LO,HI``); bad grades name file and line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import make_bundle

from receval.cli import cli
from receval.errors import BundleError
from receval.judge import fact_scores, judge_grades
from receval.task import load_task

GRADED = (
    "query_id\tanswer\tjudge_score\tjudge\n"
    "q1\tParis\t3\tumbrela\n"
    "q2\tRome\t2\tumbrela\n"
    "q2\tMilan\t0\tumbrela\n"
    "q1\tParis\t0.9\tllm\n"
    "q2\tRome\t0.7\tllm\n"
    "q1\t paris \t3\tumbrela\n"  # the same judge and fact again with the same grade: collapsed
)
SCALES = "[judge]\nscale = [0, 3]\n\n[judge.scales]\nllm = [0, 1]\n"


def graded_bundle(tmp_path, judge=GRADED, toml=SCALES, name="bundle"):
    return make_bundle(tmp_path, name, files={"judge.tsv": judge, "task.toml": toml})


def test_several_judges_and_declared_scales_load(tmp_path):
    task = load_task(graded_bundle(tmp_path))
    grades = judge_grades(task)
    assert grades.names == ("llm", "umbrela")
    assert grades.scales.tolist() == [[0.0, 1.0], [0.0, 3.0]]
    assert len(task.judge) == 5  # one row per (judge, fact)
    facts = task.facts.reset_index()
    paris = facts.index[(facts["query_id"] == "q1") & (facts["answer"] == "paris")][0]
    # the uncalibrated summary: the judges' mean grade on [0, 1]
    assert fact_scores(task)[0][paris] == pytest.approx((0.9 + 1.0) / 2)
    milan = facts.index[facts["answer"] == "milan"][0]
    assert fact_scores(task)[0][milan] == 0.0  # llm did not grade it: umbrela alone
    assert grades.missing()["llm"] > grades.missing()["umbrela"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("q1\tRome\t4\tumbrela", "judge_score 4.0 of judge 'umbrela' is outside [0, 3]"),
        ("q1\tRome\t1.5\tllm", "judge_score 1.5 of judge 'llm' is outside [0, 1]"),
        ("q2\trome\t1\tumbrela", "already has judge_score 2.0 from judge 'umbrela'"),
    ],
)
def test_bad_grades_name_file_and_line(tmp_path, row, message):
    root = graded_bundle(tmp_path, GRADED + row + "\n")
    with pytest.raises(BundleError, match=r"judge\.tsv:8: ") as err:
        load_task(root)
    assert message in str(err.value)
    result = CliRunner().invoke(cli, ["validate", str(root)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "judge.tsv:8:" in lines[0]


def test_two_judges_may_grade_the_same_fact_differently(tmp_path):
    text = "query_id\tanswer\tjudge_score\tjudge\nq1\tParis\t3\ta\nq1\tParis\t0\tb\n"
    task = load_task(graded_bundle(tmp_path, text))
    assert len(task.judge) == 2


@pytest.mark.parametrize(
    "toml", ["[judge]\nscale = [3, 0]\n", "[judge]\nscale = 3\n", "[judge]\nscal = [0, 3]\n"]
)
def test_a_bad_judge_section_names_its_line(tmp_path, toml):
    root = graded_bundle(tmp_path, toml=toml)
    with pytest.raises(BundleError, match=r"task\.toml:2: "):
        load_task(root)


def test_graded_judges_score_with_ppi_and_warn_about_missing_grades(tmp_path):
    root = graded_bundle(tmp_path)
    out = tmp_path / "o"
    args = ["score", str(root), "--out", str(out), "--estimator", "ppi", "--bootstrap", "100"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    board = pd.read_csv(out / "leaderboard.csv")
    assert np.isfinite(board["precision"]).all()
    run = json.loads((out / "run.json").read_text())
    assert any("judge 'llm' did not score" in w for w in run["warnings"])
    weights = run["judge"]["combination"]
    assert set(weights) == {"llm", "umbrela"}
    assert all(abs(sum(w[a] for w in weights.values()) - 1) < 1e-3 for a in (0, 1))


def test_import_trec_with_several_graded_judges(tmp_path):
    trec = Path(__file__).parent / "fixtures" / "trec"
    umbrela = tmp_path / "umbrela.qrels"
    umbrela.write_text("q1 0 d1 3\nq1 0 d2 0\nq2 0 d5 2\n")
    other = tmp_path / "other.qrels"
    other.write_text("q1 0 d1 4\nq2 0 d5 1\n")
    args = ["import", "trec", str(tmp_path / "b"), "--qrels", str(trec / "qrels.txt")]
    args += ["--runs", str(trec / "sysA.run"), "--runs", str(trec / "sysB.run")]
    judges = ["--judge", str(umbrela), "--judge", str(other), "--judge-scale", "0,4"]
    result = CliRunner().invoke(cli, [*args, *judges])
    assert result.exit_code == 0, result.output
    task = load_task(tmp_path / "b")
    assert task.config.judge_scale == (0.0, 4.0)
    assert judge_grades(task).names == ("other", "umbrela")
    other.write_text("q1 0 d1 4\nq2 0 d5 7\n")
    bad = CliRunner().invoke(cli, [*args[:2], str(tmp_path / "c"), *args[3:], *judges])
    assert bad.exit_code == 2
    assert bad.output.strip() == (
        f"error: {other}:2: judge_score 7.0 is outside [0, 4] (its declared scale, "
        "task.toml [judge])"
    )
    assert not (tmp_path / "c").exists()
    bad = CliRunner().invoke(cli, [*args, "--judge", str(umbrela), "--judge-scale", "4,0"])
    assert bad.exit_code == 2


def test_sample_by_judge_with_graded_judges_plans_neyman_strata(tmp_path):
    root = graded_bundle(tmp_path)
    args = ["sample", str(root), "--per-system", "10", "--seed", "3", "--by-judge"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    task = load_task(root)
    designs = {s.design for s in task.samplers}
    assert any(d.startswith("judge-strata:") for d in designs)
    budget = CliRunner().invoke(
        cli, ["budget", str(root), "--total", "40", "--estimator", "ppi", "--by-judge"]
    )
    assert budget.exit_code == 0, budget.output
