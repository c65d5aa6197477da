"""judge.tsv: loading, matching to facts, imputation, malformed files; `--estimator ppi` via CLI."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import make_bundle

from receval.cli import cli
from receval.errors import BundleError
from receval.judge import fact_scores
from receval.task import Task, load_task

JUDGE = (
    "query_id\tanswer\tjudge_score\tjudge\n"
    "q1\tPARIS\t0.9\tllm\n"  # matched to the fact "paris" as judgments are
    "q2\tRome\t0.8\tllm\n"
    "q2\tMilan\t0.3\tllm\n"
    "q3\tMadrid\t0.6\tllm\n"
    "q1\t paris \t0.9\tllm\n"  # the same fact again with the same score: collapsed
)


def test_judge_scores_are_matched_to_facts_and_missing_ones_imputed(tmp_path):
    task = load_task(make_bundle(tmp_path, files={"judge.tsv": JUDGE}))
    assert len(task.judge) == 4  # one row per fact
    scores, scored = fact_scores(task)
    facts = task.facts.reset_index()
    paris = facts.index[(facts["query_id"] == "q1") & (facts["answer"] == "paris")][0]
    assert scores[paris] == 0.9 and scored[paris]
    barcelona = facts.index[facts["answer"] == "barcelona"][0]
    assert not scored[barcelona]
    pooled = scored & task.facts["in_pool"].to_numpy()
    assert scores[barcelona] == pytest.approx(scores[pooled].mean())
    assert task.summary()  # a bundle with a judge still validates


def test_a_bundle_without_judge_has_none(bundle):
    assert load_task(bundle).judge is None


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("q1\tParis\t1.5", "judge_score 1.5 is outside [0, 1]"),
        ("q1\tParis\t-0.1", "judge_score -0.1 is outside [0, 1]"),
        ("q1\tParis\thigh", "'high' is not a finite number"),
        ("q9\tParis\t0.5", "query_id 'q9' is not in queries"),
        ("q2\trome\t0.4", "already has judge_score 0.8"),
    ],
)
def test_malformed_judge_rows_name_file_and_line(tmp_path, row, message):
    text = "query_id\tanswer\tjudge_score\nq2\tRome\t0.8\n" + row + "\n"
    root = make_bundle(tmp_path, files={"judge.tsv": text})
    with pytest.raises(BundleError, match=r"judge\.tsv:3: ") as err:
        load_task(root)
    assert message in str(err.value)
    out = CliRunner().invoke(cli, ["validate", str(root)])
    assert out.exit_code == 2
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "judge.tsv:3:" in lines[0]


def test_missing_judge_score_column_is_refused(tmp_path):
    root = make_bundle(tmp_path, files={"judge.csv": "query_id,answer,score\nq1,Paris,0.5\n"})
    with pytest.raises(BundleError, match=r"missing required column.*judge_score"):
        load_task(root)


def test_from_frames_takes_a_judge_table_parquet_style_numbers():
    runs = pd.DataFrame({"system": ["A", "A", "B"], "query_id": "q", "answer": ["x", "y", "x"]})
    judge = pd.DataFrame({"query_id": "q", "answer": ["X", "y"], "judge_score": [0.25, 1.0]})
    task = Task.from_frames(runs=runs, judge=judge)
    assert sorted(task.judge["judge_score"]) == [0.25, 1.0]
    with pytest.raises(BundleError, match=r"^judge:2: judge_score 2.0 is outside"):
        Task.from_frames(runs=runs, judge=judge.assign(judge_score=[0.5, 2.0]))


def test_cli_ppi_needs_a_judge_file(bundle, tmp_path):
    out = CliRunner().invoke(
        cli, ["score", str(bundle), "--out", str(tmp_path / "o"), "--estimator", "ppi"]
    )
    assert out.exit_code == 2
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "judge.tsv" in lines[0]


def test_cli_scores_with_ppi_and_names_the_method(tmp_path):
    root = make_bundle(tmp_path, files={"judge.tsv": JUDGE})
    out_dir = tmp_path / "o"
    args = ["score", str(root), "--out", str(out_dir), "--estimator", "ppi", "--bootstrap", "200"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    board = pd.read_csv(out_dir / "leaderboard.csv")
    assert (board["estimator"] == "ppi").all()
    assert board["interval"].str.contains("prediction-powered").all()
    assert np.isfinite(board["precision"]).all()
    run = json.loads((out_dir / "run.json").read_text())
    assert run["options"]["estimator"] == "ppi"


def test_cli_ppi_resamples_queries_as_clusters(tmp_path):
    root = make_bundle(tmp_path, files={"judge.tsv": JUDGE})
    out_dir = tmp_path / "o"
    args = ["score", str(root), "--out", str(out_dir), "--estimator", "ppi"]
    args += ["--bootstrap", "200", "--cluster-queries"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    board = pd.read_csv(out_dir / "leaderboard.csv")
    assert board["interval"].str.contains("queries resampled as clusters").all()
    assert (board["precision_lo"] <= board["precision"]).all()
    assert (board["precision"] <= board["precision_hi"]).all()


def test_import_trec_with_a_judge_file(tmp_path):
    from pathlib import Path

    trec = Path(__file__).parent / "fixtures" / "trec"
    judge = tmp_path / "umbrela.txt"
    judge.write_text("q1 0 d1 0.8\nq1 0 d2 0.1\n\nq2 0 d5 0.6\n")
    args = ["import", "trec", str(tmp_path / "b"), "--qrels", str(trec / "qrels.txt")]
    args += ["--runs", str(trec / "sysA.run"), "--runs", str(trec / "sysB.run")]
    result = CliRunner().invoke(cli, [*args, "--judge", str(judge)])
    assert result.exit_code == 0, result.output
    task = load_task(tmp_path / "b")
    assert sorted(task.judge["judge_score"]) == [0.1, 0.6, 0.8]
    judge.write_text("q1 0 d1 0.8\nq1 0 d2 3\n")
    bad = CliRunner().invoke(
        cli, [*args[:2], str(tmp_path / "c"), *args[3:], "--judge", str(judge)]
    )
    assert bad.exit_code == 2
    assert bad.output.strip() == f"error: {judge}:2: judge_score 3.0 is outside [0, 1]"
    assert not (tmp_path / "c").exists()  # checked before anything is written


def test_run_json_audits_the_judge(tmp_path):
    root = make_bundle(tmp_path, files={"judge.tsv": JUDGE})
    out_dir = tmp_path / "o"
    args = ["score", str(root), "--out", str(out_dir), "--estimator", "ppi", "--bootstrap", "100"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    judge = json.loads((out_dir / "run.json").read_text())["judge"]
    assert judge["judges"] == ["llm"]
    assert judge["labelled_scored_facts"] + judge["labelled_unscored_facts"] == 3
    assert set(judge["systems"]) == {"A", "B"}
    assert all(0 <= b["mean_score"] <= 1 for b in judge["calibration"])
    assert 0 <= judge["systems"]["A"]["lambda_precision"] <= 1


def test_sample_by_judge_records_its_design_and_scores(tmp_path):
    root = make_bundle(tmp_path, files={"judge.tsv": JUDGE})
    args = ["sample", str(root), "--per-system", "20", "--seed", "3", "--by-judge"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    samples = pd.read_csv(root / "samples.tsv", sep="\t", keep_default_na=False)
    new = samples[samples["sample"] != "s1"]
    design = new["design"].iloc[0]
    assert design.startswith("judge-strata:llm:") and len(new) == 40
    assert (new["design"] == design).all()
    task = load_task(root)  # the recorded probabilities reproduce the design
    assert design in {s.design for s in task.samplers}
    # Neyman over the judge's levels, 30 % uniform: no fact below 0.3 of its uniform chance
    out = task.outputs
    from receval.design import JUDGE_STRATA_FLOOR, sampling_probabilities

    p = sampling_probabilities(out, task.queries, design)
    size = out.groupby("system", observed=True)["fact"].transform("size")
    assert (p >= JUDGE_STRATA_FLOOR / size - 1e-12).all()
    assert np.isclose(p.groupby(out["system"], observed=True).sum(), 1.0).all()
    # the older judge-uncertainty design stays valid
    p = sampling_probabilities(out, task.queries, "judge-uncertainty")
    assert np.isclose(p.groupby(out["system"], observed=True).sum(), 1.0).all()


def test_sample_by_judge_needs_a_judge(bundle):
    result = CliRunner().invoke(
        cli, ["sample", str(bundle), "--per-system", "5", "--seed", "1", "--by-judge"]
    )
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "judge.tsv" in lines[0]


def test_report_shows_the_judge_audit(tmp_path):
    from receval.report.html import section_html

    root = make_bundle(tmp_path, files={"judge.tsv": JUDGE})
    out_dir = tmp_path / "o"
    args = ["score", str(root), "--out", str(out_dir), "--estimator", "ppi", "--bootstrap", "100"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert CliRunner().invoke(cli, ["report", str(out_dir)]).exit_code == 0
    page = (out_dir / "report.html").read_text()
    section = section_html(page, "judge")
    assert "llm" in section and "Reliability" in section and "λ precision" in section
