"""``curve plan`` / ``curve estimate --engine spark``: Spark reads and ranks the run itself, with
the same ranked list, labels, batches and curve as DuckDB and the loader's errors.

The Spark tests start a JVM (shared by this module's tests) and are marked slow, as the other
Spark tests; the option checks that need no JVM are fast."""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import SPARK_MISSING, needs_spark
from test_sources import PARAMS, _parquet_runs, _plan_to_the_end

from receval.cli import cli
from receval.curves.sources import CurveBundle, frame_system
from receval.errors import BundleError
from receval.task import load_task

MASTER = "local[2]"


@pytest.fixture()
def bundle(tmp_path):
    root = tmp_path / "task"
    args = ["simulate", str(root), "--systems", "3", "--queries", "120", "--per-system", "20"]
    result = CliRunner().invoke(cli, [*args, "--seed", "5"])
    assert result.exit_code == 0, result.output
    _parquet_runs(root)
    return root


def _plan_args(root, *more) -> list[str]:
    return ["curve", "plan", str(root), "--system", "T01_1", "--method", "stratband", *more]


@pytest.mark.skipif(SPARK_MISSING is not None and "pyspark" in SPARK_MISSING, reason="no pyspark")
@pytest.mark.parametrize("command", ["plan", "estimate"])
def test_unreachable_master_is_one_error_line(bundle, tmp_path, command, monkeypatch):
    monkeypatch.setenv("RECEVAL_CURVE_ENGINE_ROWS", "0")
    args = ["curve", command, str(bundle), "--system", "T01_1", "--method", "stratband"]
    if command == "estimate":
        args += ["--out", str(tmp_path / "c.csv")]
    result = CliRunner().invoke(
        cli, [*args, "--engine", "spark", "--spark-master", "spark://127.0.0.1:9"]
    )
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: spark://127.0.0.1:9: cannot reach")
    assert not (bundle / ".receval").exists()


def test_missing_pyspark_is_a_usage_error(bundle, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    result = CliRunner().invoke(cli, [*_plan_args(bundle), "--engine", "spark"])
    assert result.exit_code == 2
    assert "receval[spark]" in result.output
    assert not (bundle / "curve_to_annotate.tsv").exists()


@pytest.fixture(scope="module")
def spark():
    if SPARK_MISSING:
        pytest.skip(SPARK_MISSING)
    from receval.engine import connect

    return connect("spark", master=MASTER)


@needs_spark
@pytest.mark.slow  # a JVM (shared by this module's Spark tests)
def test_spark_ranked_list_equals_the_pandas_one(spark, bundle):
    """Order (ties, unscored rows in file order, copies of a fact), labels and items."""
    task = load_task(bundle)
    light = CurveBundle.load(bundle, engine="spark", spark_master=MASTER)
    for system in task.systems:
        want, got = frame_system(task, system), light.ranked(system)
        assert (got.size, got.duplicate_rows) == (want.size, want.duplicate_rows)
        np.testing.assert_array_equal(got.known.ranks, want.known.ranks)
        np.testing.assert_array_equal(got.known.labels, want.known.labels)
        ranks = np.arange(1, want.size + 1)
        pd.testing.assert_frame_equal(
            got.items(ranks),
            want.items(ranks).astype({"query_id": object, "answer": object}),
            check_dtype=False,
        )
        assert (bundle / ".receval" / "ranked-spark" / f"{system}.json").is_file()
    assert not (bundle / ".receval" / "ranked").exists()  # DuckDB ranked nothing
    empty = bundle / "runs" / "T01_9.parquet"
    pd.read_parquet(bundle / "runs" / "T01_1.parquet").iloc[:0].to_parquet(empty, index=False)
    again = CurveBundle.load(bundle, engine="spark", spark_master=MASTER)
    assert again.ranked("T01_9").size == 0
    assert again.ranked("T01_9").items(np.array([], dtype=np.int64)).empty


@needs_spark
@pytest.mark.slow
def test_spark_writes_the_same_batches_and_curve_as_duckdb(spark, bundle, tmp_path, monkeypatch):
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    monkeypatch.setenv("RECEVAL_CURVE_ENGINE_ROWS", "0")
    outputs = {}
    for root, engine in ((bundle, "duckdb"), (copy, "spark")):
        options = ["--engine", engine, "--spark-master", MASTER]
        batches = _plan_to_the_end(root, "stratband", options)
        out = tmp_path / f"{engine}.csv"
        args = ["curve", "estimate", str(root), "--system", "T01_1", "--method", "stratband"]
        result = CliRunner().invoke(cli, [*args, *PARAMS, *options, "--out", str(out)])
        assert result.exit_code == 0, result.output
        outputs[engine] = (batches, out.read_text(), out.with_name(out.name + ".json").read_text())
    assert (copy / ".receval" / "ranked-spark" / "T01_1").is_dir()
    assert not (copy / ".receval" / "ranked").exists()
    assert outputs["spark"] == outputs["duckdb"]


BAD_RUNS = {
    "unknown-query": lambda f: f.assign(
        query_id=np.where(np.arange(len(f)) >= 4, "nope", f["query_id"])
    ),
    "empty-answer": lambda f: f.assign(answer=np.where(np.arange(len(f)) == 6, "  ", f["answer"])),
    "inf-score": lambda f: f.assign(score=np.where(np.arange(len(f)) == 2, np.inf, f["score"])),
    "text-score": lambda f: f.assign(
        score=np.where(np.arange(len(f)) == 8, "high", f["score"].astype(str))
    ),
    "system": lambda f: f.assign(system=np.where(np.arange(len(f)) == 3, "other", "T01_3")),
    "teams": lambda f: f.assign(team=np.where(np.arange(len(f)) == 9, "X", "T01")),
    "two-scores": lambda f: pd.concat([f, f.iloc[[0]].assign(score=f["score"].iloc[0] + 1)]),
    "reserved": lambda f: f.assign(fact=1),
    "missing": lambda f: f.drop(columns=["answer"]),
}


@needs_spark
@pytest.mark.slow
def test_run_errors_are_the_loaders(spark, bundle):
    path = bundle / "runs" / "T01_3.parquet"
    good = pd.read_parquet(path)
    for name, change in BAD_RUNS.items():
        change(good.copy()).to_parquet(path, index=False)
        with pytest.raises(BundleError) as want:
            load_task(bundle)
        with pytest.raises(BundleError) as got:
            CurveBundle.load(bundle, engine="spark", spark_master=MASTER).ranked("T01_3")
        assert str(got.value) == str(want.value), name


@needs_spark
@pytest.mark.slow
def test_an_unreadable_run_is_one_error_line(spark, bundle, tmp_path, monkeypatch):
    monkeypatch.setenv("RECEVAL_CURVE_ENGINE_ROWS", "0")
    (bundle / "runs" / "T01_1.parquet").write_bytes(b"PAR1 not really")
    args = [*_plan_args(bundle), "--engine", "spark", "--spark-master", MASTER]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "T01_1.parquet" in lines[0]
