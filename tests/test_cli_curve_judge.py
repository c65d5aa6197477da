"""`receval curve plan/estimate --method tailband --judge`: the tail stratified by judge.tsv."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from click.testing import CliRunner

from receval.cli import cli

PARAMS = ["--epsilon", "0.2", "--window", "10"]


def _bundle(tmp_path):
    root = tmp_path / "task"
    args = ["simulate", str(root), "--systems", "3", "--queries", "150", "--per-system", "20"]
    result = CliRunner().invoke(cli, [*args, "--seed", "3"])
    assert result.exit_code == 0, result.output
    truth = pd.read_csv(root / "truth.tsv", sep="\t", dtype=str, keep_default_na=False)
    return root, truth


def _label(root, truth) -> None:
    batch = pd.read_csv(root / "curve_to_annotate.tsv", sep="\t", dtype=str, keep_default_na=False)
    key = truth["query_id"] + "\x1f" + truth["answer"].str.casefold()
    label = truth.set_index(key)["label"]
    rows = pd.DataFrame(
        {
            "query_id": batch["query_id"],
            "answer": batch["answer"],
            "label": label.reindex(
                batch["query_id"] + "\x1f" + batch["answer"].str.casefold()
            ).values,
        }
    )
    old = pd.read_csv(root / "judgments.tsv", sep="\t", dtype=str, keep_default_na=False)
    pd.concat([old, rows], ignore_index=True).fillna("").to_csv(
        root / "judgments.tsv", sep="\t", index=False
    )


def test_judge_stratified_curve_round_trip(tmp_path) -> None:
    root, truth = _bundle(tmp_path)
    runner = CliRunner()
    system = "T01_1"
    plan = ["curve", "plan", str(root), "--method", "tailband", *PARAMS, "--seed", "1"]
    # no judge table yet: one error line
    first = runner.invoke(cli, [*plan[:3], "--system", system, *plan[3:], "--judge"])
    assert first.exit_code == 2 and first.output.startswith("error:"), first.output
    assert "judge" in first.output and "Traceback" not in first.output
    flips = np.random.default_rng(0).random(len(truth)) < 0.05
    correct = (truth["label"] == "C").to_numpy()
    judge = truth[["query_id", "answer"]].assign(
        judge_score=np.where(flips, ~correct, correct) * 1.0
    )
    judge.to_csv(root / "judge.tsv", sep="\t", index=False)
    for _ in range(10):
        result = runner.invoke(cli, [*plan[:3], "--system", system, *plan[3:], "--judge"])
        assert result.exit_code == 0, result.output
        if "has every label it needs" in result.output:
            break
        _label(root, truth)
    out = tmp_path / "curve.csv"
    est = ["curve", "estimate", str(root), "--system", system, "--method", "tailband", *PARAMS]
    result = runner.invoke(cli, [*est, "--seed", "1", "--judge", "--out", str(out)])
    assert result.exit_code == 0, result.output
    meta = json.loads(out.with_suffix(".csv.json").read_text())
    assert meta["kind"] == "band" and meta["parameters"]["judge"] is True
    assert "judge" in meta["guarantee"]
    bad = runner.invoke(
        cli, [*est[:5], "--method", "stratband", *PARAMS, "--judge", "--out", str(out)]
    )
    assert bad.exit_code == 2 and "tailband option" in bad.output
