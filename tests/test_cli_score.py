"""receval simulate → validate → sample → score, as an organiser runs them (CliRunner)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from receval.cli import cli
from receval.scoring import LEADERBOARD_COLUMNS

ROOT = Path(__file__).resolve().parents[1]


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("score") / "demo"
    result = invoke(
        "simulate", root, "--systems", 12, "--queries", 60, "--per-system", 60, "--seed", 3
    )
    assert result.exit_code == 0, result.output
    return root


def test_validate_prints_the_summary(task):
    result = invoke("validate", task)
    assert result.exit_code == 0, result.output
    for key in (
        "systems",
        "teams",
        "queries",
        "outputs",
        "judged facts",
        "annotators",
        "conflicts",
        "exhaustive units",
    ):
        assert re.search(rf"^{key}\s+\d+", result.output, re.M), key


def test_score_writes_every_output_with_contract_columns(task, tmp_path):
    out = tmp_path / "out"
    result = invoke(
        "score", task, "--out", out, "--bootstrap", 200, "--seed", 1, "--target-recall", 0.1
    )
    assert result.exit_code == 0, result.output
    for name in (
        "leaderboard.csv",
        "pool.csv",
        "conflicts.csv",
        "run.json",
        "truth_check.csv",
        "per_query.csv",
        "annotation.csv",
        "pooling_bias.csv",
    ):
        assert (out / name).is_file(), name
    board = pd.read_csv(out / "leaderboard.csv")
    assert list(board.columns[: len(LEADERBOARD_COLUMNS)]) == LEADERBOARD_COLUMNS
    target = [
        "precision_at_target",
        "precision_at_target_lo",
        "precision_at_target_hi",
        "precision_at_target_method",
    ]
    assert set(target) <= set(board.columns)
    assert len(board) == 12 and board["rank"].is_monotonic_increasing
    assert set(board["precision_at_target_method"].dropna()) <= {"curve", "dimm"}
    # no silent NaN: every empty estimate has a note saying why
    for _, row in board.iterrows():
        for col in (
            "precision",
            "recall",
            "f1",
            "precision_at_target",
            "precision_lo",
            "recall_lo",
        ):
            if pd.isna(row[col]):
                assert isinstance(row["note"], str) and row["note"], (row["system"], col)
    assert (board["interval"] == "percentile bootstrap 95%, B=200, small-sample expanded").all()
    assert (board["rank_lo"] <= board["rank"]).all() and (board["rank"] <= board["rank_hi"]).all()
    assert board["tier"].min() == 1
    run = json.loads((out / "run.json").read_text())
    labels = run["bootstrap"].pop("labels")  # what the intervals are about (issue 20)
    assert labels.startswith("conditional on the merged labels")
    assert run["bootstrap"] == {
        "B": 200,
        "seed": 1,
        "method": "percentile",
        "level": 0.95,
        "clusters": None,
    }
    assert run["options"]["estimator"] == "joint" and "checksums" in run["inputs"]
    assert run["target"]["recall"] == 0.1 and "systems" in run["target"]
    assert (out / "curves").is_dir() and any((out / "curves").iterdir())


def test_score_is_reproducible_and_replicates_can_be_reused(task, tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert (
        invoke(
            "score",
            task,
            "--out",
            a,
            "--bootstrap",
            100,
            "--seed",
            5,
            "--save-replicates",
            "--quiet",
        ).exit_code
        == 0
    )
    assert (
        invoke("score", task, "--out", b, "--bootstrap", 100, "--seed", 5, "--quiet").exit_code == 0
    )
    assert (
        invoke(
            "score",
            task,
            "--out",
            c,
            "--bootstrap",
            100,
            "--seed",
            9,
            "--replicates",
            a / "replicates.npz",
            "--quiet",
        ).exit_code
        == 0
    )
    la, lb, lc = (pd.read_csv(d / "leaderboard.csv") for d in (a, b, c))
    pd.testing.assert_frame_equal(la, lb)
    pd.testing.assert_frame_equal(la, lc)


@pytest.mark.parametrize("method", ["basic", "BCa"])
def test_other_interval_methods(task, tmp_path, method):
    out = tmp_path / method
    result = invoke("score", task, "--out", out, "--bootstrap", 200, "--method", method, "--quiet")
    assert result.exit_code == 0, result.output
    board = pd.read_csv(out / "leaderboard.csv")
    assert board["interval"].iloc[0].startswith(method)
    ok = board["precision_lo"].notna()
    assert (board.loc[ok, "precision_lo"] <= board.loc[ok, "precision_hi"]).all()


def test_simple_and_official_estimators(task, tmp_path):
    for estimator in ("simple", "official"):
        out = tmp_path / estimator
        result = invoke(
            "score", task, "--out", out, "--estimator", estimator, "--bootstrap", 100, "--quiet"
        )
        assert result.exit_code == 0, result.output
        board = pd.read_csv(out / "leaderboard.csv")
        assert (board["estimator"] == estimator).all()
    official = pd.read_csv(tmp_path / "official" / "leaderboard.csv")
    assert official["precision_lo"].isna().all() and official["precision"].notna().all()


def test_no_report_writes_the_set_without_it_and_report_builds_it_later(task, tmp_path):
    out = tmp_path / "out"
    result = invoke("score", task, "--out", out, "--estimator", "official", "--no-report")
    assert result.exit_code == 0, result.output
    assert "no report" in result.output
    assert (out / "leaderboard.csv").is_file() and (out / "run.json").is_file()
    assert not (out / "report.html").exists()
    result = invoke("report", out, "--quiet")
    assert result.exit_code == 0, result.output
    assert "<svg" in (out / "report.html").read_text(encoding="utf-8")


def test_the_joint_estimator_beats_the_simple_one_in_width(task, tmp_path):
    widths = {}
    for estimator in ("joint", "simple"):
        out = tmp_path / estimator
        assert (
            invoke(
                "score", task, "--out", out, "--estimator", estimator, "--bootstrap", 300, "--quiet"
            ).exit_code
            == 0
        )
        board = pd.read_csv(out / "leaderboard.csv")
        widths[estimator] = float(np.median(board["precision_hi"] - board["precision_lo"]))
    assert widths["joint"] < widths["simple"]


def test_sample_adds_a_round_and_lists_what_to_annotate(task, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(task, copy)
    before = pd.read_csv(copy / "samples.tsv", sep="\t")
    result = invoke("sample", copy, "--per-system", 10, "--seed", 4)
    assert result.exit_code == 0, result.output
    after = pd.read_csv(copy / "samples.tsv", sep="\t")
    assert len(after) == len(before) + 12 * 10
    assert set(after["sample"]) == {"round-1", "round-2"}
    todo = pd.read_csv(copy / "to_annotate.tsv", sep="\t", keep_default_na=False)
    assert (todo["kind"] == "fact").all()
    assert not todo.duplicated(["query_id", "answer"]).any()
    # scoring refuses while draws are unlabelled, naming how many and how to go on
    result = CliRunner().invoke(
        cli, ["score", str(copy), "--out", str(tmp_path / "o"), "--bootstrap", "100"]
    )
    assert result.exit_code == 2
    assert "have no label yet" in result.output and "--allow-pending" in result.output
    assert len(result.output.strip().splitlines()) == 1
    # --allow-pending warns and still estimates with the labelled ones
    result = CliRunner().invoke(
        cli,
        ["score", str(copy), "--out", str(tmp_path / "o"), "--bootstrap", "100", "--allow-pending"],
    )
    assert result.exit_code == 0
    assert "have no label yet" in result.output
    # the same seed in the next round draws new items, never overwriting the earlier rounds
    assert invoke("sample", copy, "--per-system", 10, "--seed", 4).exit_code == 0
    third = pd.read_csv(copy / "samples.tsv", sep="\t")
    assert set(third["sample"]) == {"round-1", "round-2", "round-3"}


def test_adaptive_sample_sizes_for_a_late_system(task, tmp_path):
    copy = tmp_path / "late"
    shutil.copytree(task, copy)
    samples = pd.read_csv(copy / "samples.tsv", sep="\t", dtype=str, keep_default_na=False)
    late = sorted(samples["system"].unique())[-1]
    samples[samples["system"] != late].to_csv(copy / "samples.tsv", sep="\t", index=False)
    result = invoke("sample", copy, "--adaptive", "--target-width", 0.1, "--seed", 8)
    assert result.exit_code == 0, result.output
    assert re.search(rf"^{late}: n = \d+", result.output, re.M)
    after = pd.read_csv(copy / "samples.tsv", sep="\t")
    n = int(re.search(rf"^{late}: n = (\d+)", result.output, re.M).group(1))
    assert (after["system"] == late).sum() == n
    # a lone system with p = 1/2 needs (z·0.5/W)² ≈ 96 draws at W = 0.1: reuse can only lower it
    assert 1 <= n <= 1000


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s.assign(prob=s["prob"] * 3), "disagrees with the uniform design"),
        (lambda s: s.assign(answer=s["answer"] + "-never-output"), "never output"),
        (lambda s: s.assign(prob=0.0), "outside (0, 1]"),
    ],
)
def test_bad_sample_rows_are_clear_errors(task, tmp_path, edit, message):
    copy = tmp_path / "bad"
    shutil.copytree(task, copy)
    samples = pd.read_csv(
        copy / "samples.tsv",
        sep="\t",
        dtype={"query_id": str, "answer": str},
        keep_default_na=False,
    )
    head = edit(samples.iloc[:1].copy())
    pd.concat([head, samples.iloc[1:]]).to_csv(copy / "samples.tsv", sep="\t", index=False)
    result = CliRunner().invoke(
        cli, ["score", str(copy), "--out", str(tmp_path / "o"), "--bootstrap", "50"]
    )
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "samples.tsv:2:" in lines[0], (
        result.output
    )
    assert message in lines[0]
    assert not (tmp_path / "o" / "leaderboard.csv").exists()


def test_no_judged_draw_is_a_clear_error(task, tmp_path):
    copy = tmp_path / "nolabels"
    shutil.copytree(task, copy)
    (copy / "judgments.tsv").unlink()
    result = CliRunner().invoke(cli, ["score", str(copy), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and "no judged sample draws" in result.output


def test_extrapolate_json_and_refusal():
    result = invoke(
        "extrapolate",
        "--precision",
        0.6,
        "--recall",
        0.4,
        "--prevalence",
        0.05,
        "--target",
        0.5,
        "--json",
    )
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert {"beta", "precision_at_target", "flags"} <= set(data) and data["flags"] == []
    assert 0.05 < data["precision_at_target"] < 0.6
    refused = invoke(
        "extrapolate", "--precision", 0.01, "--recall", 0.4, "--prevalence", 0.05, "--target", 0.5
    )
    assert refused.exit_code == 2 and refused.output.startswith("error: ")


@pytest.mark.slow  # end to end on the 70-system task; CI runs it with the slow tests
def test_readme_main_command_runs_verbatim_after_install(readme_demo):
    """The README's main command, minus the install step (this environment has receval installed)."""
    proc, out = readme_demo
    assert proc.returncode == 0, proc.stderr
    assert (out / "leaderboard.csv").is_file()
    assert "Traceback" not in proc.stderr


def test_budget_reports_widths_that_shrink_with_the_budget(task, tmp_path):
    medians = []
    for total in (12, 1200, 12000):
        out = tmp_path / f"b{total}.csv"
        result = invoke("budget", task, "--total", total, "--out", out)
        assert result.exit_code == 0, result.output
        table = pd.read_csv(out)
        assert len(table) == 12 and (table["precision_halfwidth"] > 0).all()
        medians.append(table["precision_halfwidth"].median())
    assert medians[0] >= medians[1] >= medians[2]
    # 1000 more draws per system: a lone binomial would give ≤ 1.96·√(1/4000) ≈ 0.031
    assert medians[2] < 0.031


@pytest.mark.slow  # the 70-system task end to end; CI runs the slow set
def test_default_task_at_target_recall_half_fills_every_contract_column(tmp_path):
    out = tmp_path / "kbp"
    result = invoke(
        "score",
        ROOT / "data" / "kbp-sim",
        "--out",
        out,
        "--target-recall",
        0.5,
        "--bootstrap",
        200,
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    board = pd.read_csv(out / "leaderboard.csv")
    contract = [
        *LEADERBOARD_COLUMNS,
        "precision_at_target",
        "precision_at_target_lo",
        "precision_at_target_hi",
        "precision_at_target_method",
    ]
    assert list(board.columns[: len(contract)]) == contract
    assert board[contract].notna().all().all(), board[contract].isna().sum()[lambda s: s > 0]
    assert len(board) == 70
    # nobody reaches recall 0.5 in this task: every value is a flagged model extrapolation
    assert (board["precision_at_target_method"] == "dimm").all()
    assert board["note"].str.contains("recall distance").all()


def test_to_annotate_keeps_earlier_rounds_and_a_satisfied_system_needs_nothing(task, tmp_path):
    copy = tmp_path / "rounds"
    shutil.copytree(task, copy)
    assert invoke("sample", copy, "--per-system", 15, "--seed", 1).exit_code == 0
    first = pd.read_csv(copy / "to_annotate.tsv", sep="\t", keep_default_na=False)
    assert invoke("sample", copy, "--per-system", 5, "--seed", 2).exit_code == 0
    second = pd.read_csv(copy / "to_annotate.tsv", sep="\t", keep_default_na=False)
    # nothing was labelled in between: every fact of the first list is still listed
    key = ["query_id", "answer"]
    assert set(map(tuple, first[key].to_numpy())) <= set(map(tuple, second[key].to_numpy()))
    # a system whose labelled sample already meets a generous width needs no new draw
    system = sorted(pd.read_csv(copy / "samples.tsv", sep="\t")["system"].unique())[0]
    result = invoke(
        "sample", copy, "--adaptive", "--target-width", 0.45, "--seed", 3, "--system", system
    )
    assert result.exit_code == 0, result.output
    assert f"{system}: n = 0" in result.output and "no new draws" in result.output


def test_each_curve_ends_at_the_systems_own_estimate(task, tmp_path):
    out = tmp_path / "curves"
    assert (
        invoke(
            "score", task, "--out", out, "--bootstrap", 100, "--target-recall", 0.1, "--quiet"
        ).exit_code
        == 0
    )
    board = pd.read_csv(out / "leaderboard.csv").set_index("system")
    for system, row in board.iterrows():
        curve = pd.read_csv(out / "curves" / f"{system}.csv")
        last = curve.iloc[-1]
        assert last["rank"] == row["outputs"]
        assert np.isclose(last["precision"], row["precision"]) and np.isclose(
            last["recall"], row["recall"]
        )
        assert (curve["rank"].diff().dropna() > 0).all()


def test_target_macro_is_said_in_every_leaderboard_row(task, tmp_path):
    """``--target macro`` changes what precision means: estimator, interval and note say so."""
    root = task
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        ["score", str(root), "--out", str(out), "--bootstrap", "50", "--target", "macro"],
    )
    assert result.exit_code == 0, result.output
    board = pd.read_csv(out / "leaderboard.csv", keep_default_na=False)
    assert (board["estimator"] == "joint (macro)").all()
    assert board["interval"].str.endswith("(target macro)").all()
    assert board["note"].str.startswith("precision macro-averaged").all()
    micro = tmp_path / "micro"
    result = CliRunner().invoke(cli, ["score", str(root), "--out", str(micro), "--bootstrap", "50"])
    board = pd.read_csv(micro / "leaderboard.csv", keep_default_na=False)
    assert (board["estimator"] == "joint").all() and not board["note"].str.contains("macro").any()
