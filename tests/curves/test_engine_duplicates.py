"""The curve engine's run reader applies the loader's duplicate check (issue 23, item 10): a run
row repeated with another score is an error naming both lines; identical copies are a counted
warning."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from receval.cli import cli
from receval.curves.sources import CurveBundle, duplicate_rows, frame_system
from receval.errors import BundleError
from receval.task import load_task

SYSTEM = "T01_1"


@pytest.fixture()
def bundle(tmp_path):
    root = tmp_path / "task"
    args = ["simulate", str(root), "--systems", "2", "--queries", "40", "--per-system", "10"]
    result = CliRunner().invoke(cli, [*args, "--seed", "3"])
    assert result.exit_code == 0, result.output
    runs = pd.read_csv(root / "runs.tsv", sep="\t", dtype=str, keep_default_na=False)
    (root / "runs").mkdir()
    for system, rows in runs.groupby("system"):
        rows = rows.assign(score=pd.to_numeric(rows["score"]))
        rows.drop(columns=["system"]).to_parquet(root / "runs" / f"{system}.parquet", index=False)
    (root / "runs.tsv").unlink()
    return root


def _repeat(root, row: int, score: float | None, *, provenance: bool = False) -> None:
    """Append a copy of run row ``row`` (0-based) of SYSTEM with ``score`` (None: the same)."""
    path = root / "runs" / f"{SYSTEM}.parquet"
    runs = pd.read_parquet(path)
    if provenance:
        runs["provenance"] = "doc" + pd.Series(range(len(runs))).astype(str)
    copy = runs.iloc[[row]].copy()
    if score is not None:
        copy["score"] = score
    if provenance:
        copy["provenance"] = "another doc"
    pd.concat([runs, copy]).to_parquet(path, index=False)


def test_a_conflicting_copy_is_the_loaders_error_naming_both_rows(bundle):
    _repeat(bundle, 2, 123.0)
    with pytest.raises(BundleError) as want:
        load_task(bundle)
    with pytest.raises(BundleError) as got:
        CurveBundle.load(bundle).ranked(SYSTEM)
    assert str(got.value) == str(want.value)
    message = str(got.value)
    assert f"{SYSTEM}.parquet:3" in message and "123.0" in message
    assert message.startswith(str(bundle / "runs" / f"{SYSTEM}.parquet"))


def test_a_conflicting_copy_in_a_text_run_names_the_file_lines(bundle):
    path = bundle / "runs" / f"{SYSTEM}.parquet"
    _repeat(bundle, 0, -1.0)
    runs = pd.read_parquet(path)
    runs.to_csv(path.with_suffix(".tsv"), sep="\t", index=False)
    path.unlink()
    with pytest.raises(BundleError) as want:
        load_task(bundle)
    from receval.engine import connect
    from receval.engine.ranked import rank_run_file

    light = CurveBundle.load(bundle)
    with pytest.raises(BundleError) as got:
        rank_run_file(
            path.with_suffix(".tsv"),
            bundle / ".receval" / "ranked" / SYSTEM,
            connect("duckdb"),
            queries=light.query_ids,
            matching=light.config.matching,
        )
    assert str(got.value) == str(want.value)
    assert f"{SYSTEM}.tsv:2" in str(got.value)  # the header is line 1
    assert got.value.line == len(runs) + 1


def test_the_cli_exits_2_with_one_error_line(bundle, monkeypatch):
    monkeypatch.setenv("RECEVAL_CURVE_ENGINE_ROWS", "0")
    _repeat(bundle, 4, 7.5)
    for command in ("plan", "estimate"):
        args = ["curve", command, str(bundle), "--system", SYSTEM, "--method", "stratband"]
        args += ["--epsilon", "0.2", "--window", "10"]
        if command == "estimate":
            args += ["--out", str(bundle / "c.csv")]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ")
        assert f"{SYSTEM}.parquet:5" in lines[0] and "7.5" in lines[0]
        assert "different scores" in lines[0]


@pytest.mark.parametrize("provenance", [False, True], ids=["identical", "other-provenance"])
def test_identical_copies_are_a_counted_warning(bundle, monkeypatch, provenance):
    _repeat(bundle, 2, None, provenance=provenance)
    _repeat(bundle, 5, None, provenance=False)
    task = load_task(bundle)
    light = CurveBundle.load(bundle)
    assert frame_system(task, SYSTEM).duplicate_rows == 2 == task.duplicate_rows
    assert light.ranked(SYSTEM).duplicate_rows == 2 == duplicate_rows(light, SYSTEM)
    assert light.ranked("T01_2").duplicate_rows == 0
    assert CurveBundle.load(bundle).ranked(SYSTEM).duplicate_rows == 2  # from the cache stamp
    for rows in ("0", "1000000000"):  # the engine and the loader
        monkeypatch.setenv("RECEVAL_CURVE_ENGINE_ROWS", rows)
        args = ["curve", "plan", str(bundle), "--system", SYSTEM, "--method", "stratband"]
        result = CliRunner().invoke(cli, [*args, "--epsilon", "0.2", "--window", "10"])
        assert result.exit_code == 0, result.output
        assert "warning: 2 duplicate output row(s) collapsed" in result.output


def test_copies_in_other_row_groups_and_with_other_provenance(bundle):
    """Another provenance makes another output of the fact (collapsed, no error) as in the
    loader; a conflict across Parquet row groups still names both rows."""
    path = bundle / "runs" / f"{SYSTEM}.parquet"
    runs = pd.read_parquet(path)
    runs["provenance"] = "doc" + pd.Series(range(len(runs))).astype(str)
    other = runs.iloc[[1]].assign(provenance="another doc", score=55.0)
    pd.concat([runs, other]).to_parquet(path, index=False, row_group_size=3)
    task = load_task(bundle)
    light = CurveBundle.load(bundle)
    assert light.ranked(SYSTEM).duplicate_rows == 1 == frame_system(task, SYSTEM).duplicate_rows
    same = runs.iloc[[1]].assign(score=56.0)
    pd.concat([runs, other, same]).to_parquet(path, index=False, row_group_size=3)
    with pytest.raises(BundleError) as want:
        load_task(bundle)
    with pytest.raises(BundleError) as got:
        CurveBundle.load(bundle).ranked(SYSTEM)
    assert str(got.value) == str(want.value)
    assert f"{SYSTEM}.parquet:2" in str(got.value) and got.value.line == len(runs) + 2


def test_the_api_raises_and_counts(bundle, monkeypatch):
    import receval

    monkeypatch.setenv("RECEVAL_CURVE_ENGINE_ROWS", "0")
    params = {"epsilon": 0.2, "window": 10}
    _repeat(bundle, 0, None)
    plan = receval.curve_plan(bundle, SYSTEM, "stratband", **params)
    assert plan.duplicate_rows == 1
    _repeat(bundle, 0, 0.123)
    with pytest.raises(BundleError, match="twice with different scores"):
        receval.curve_plan(bundle, SYSTEM, "stratband", **params)
    with pytest.raises(BundleError, match="twice with different scores"):
        receval.curve_estimate(bundle, SYSTEM, "stratband", **params)
