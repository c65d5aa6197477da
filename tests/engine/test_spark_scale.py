"""Spark (local mode) and DuckDB give identical score outputs on a 10⁶-row generated task."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_engine import SPARK_MISSING

from receval.cli import cli

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale.py"


def _scale_bench():
    spec = importlib.util.spec_from_file_location("bench_scale", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(SPARK_MISSING is not None, reason=SPARK_MISSING or "")
@pytest.mark.slow  # a JVM and 10⁶ rows through both engines: minutes on two loaded cores
def test_spark_and_duckdb_leaderboards_are_identical_on_a_million_rows(tmp_path):
    """bench/scale.py's TREC-style generator: 10 runs (teams of three) × 100 queries × 1,000
    documents = 10⁶ output rows in Parquet, qrels for the top-20 pool.  ``score --estimator
    official`` with each engine writes byte-identical leaderboard, per-query and pooling-bias
    files.  Spark runs in its own process, configured as Spark usually is (a
    ``spark-defaults.conf`` in ``SPARK_CONF_DIR``): its default 1 GB driver heap is too small
    for 10⁶ rows in local mode."""
    task = tmp_path / "task"
    rows = _scale_bench().generate(task, systems=10, queries=100, depth=1000, seed=7)
    assert rows == 10**6
    args = ["score", str(task), "--estimator", "official", "--quiet"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "duckdb")])
    assert result.exit_code == 0, result.output
    conf = tmp_path / "spark-conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.driver.memory 2g\nspark.sql.shuffle.partitions 4\n", encoding="utf-8"
    )
    env = {**os.environ, "SPARK_CONF_DIR": str(conf)}
    spark_args = [
        "--out",
        str(tmp_path / "spark"),
        "--engine",
        "spark",
        "--spark-master",
        "local[2]",
    ]
    spark = subprocess.run(
        [sys.executable, "-m", "receval.cli", *args, *spark_args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert spark.returncode == 0, spark.stderr[-2000:]
    for name in ("leaderboard.csv", "per_query.csv", "pooling_bias.csv"):
        duck, other = (tmp_path / e / name for e in ("duckdb", "spark"))
        assert duck.read_bytes() == other.read_bytes(), name
    assert len((tmp_path / "spark" / "leaderboard.csv").read_text().splitlines()) == 11
