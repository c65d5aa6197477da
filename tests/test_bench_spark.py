"""bench/spark.py's event-log profile and bench/scale_sampled.py's curve labelling (fast: small
files written here, no Spark)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from conftest import load_bench

SQL = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecution"


def _stage(stage: int, tasks: int, run_ms: int, cpu_ns: int, shuffle: int) -> dict:
    accumulables = [
        {"Name": "internal.metrics.executorRunTime", "Value": run_ms},
        {"Name": "internal.metrics.executorCpuTime", "Value": cpu_ns},
        {"Name": "internal.metrics.shuffle.write.bytesWritten", "Value": shuffle},
        {"Name": "internal.metrics.unrelated", "Value": 7},
    ]
    info = {"Stage ID": stage, "Number of Tasks": tasks, "Accumulables": accumulables}
    return {"Event": "SparkListenerStageCompleted", "Stage Info": info}


def test_profile_sums_each_sql_querys_stages(tmp_path: Path) -> None:
    spark = load_bench("spark")
    events = [
        {"Event": SQL + "Start", "executionId": 0, "description": "SELECT  a\nFROM t", "time": 1000},
        {"Event": "SparkListenerJobStart", "Stage IDs": [0, 1],
         "Properties": {"spark.sql.execution.id": "0"}},
        _stage(0, 4, 3000, 2 * 10**9, 2**20),
        _stage(1, 2, 1000, 10**9, 0),
        {"Event": SQL + "End", "executionId": 0, "time": 4500},
        {"Event": SQL + "Start", "executionId": 1, "description": "keep", "time": 5000},
        {"Event": "SparkListenerJobStart", "Stage IDs": [2],
         "Properties": {"spark.sql.execution.id": "1"}},
        _stage(2, 1, 9000, 5 * 10**9, 0),
        {"Event": SQL + "End", "executionId": 1, "time": 15000},
    ]  # fmt: skip
    log = tmp_path / "events"
    log.mkdir()
    (log / "events_1_app").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    found = spark.profile(log)
    first, second = found["queries"]  # costliest first
    assert second == {"description": "SELECT a FROM t", "stages": 2, "tasks": 6, "run_s": 4.0,
                      "cpu_s": 3.0, "shuffle_write_mib": 1.0, "wall_s": 3.5}  # fmt: skip
    assert (first["description"], first["run_s"], first["wall_s"]) == ("keep", 9.0, 10.0)
    assert found["total"] == {"cpu_s": 8.0, "run_s": 13.0, "shuffle_write_mib": 1.0,
                              "queries": 2, "stages": 3, "tasks": 7}  # fmt: skip


def test_curve_batch_labelled_from_the_synthetic_truth(tmp_path: Path) -> None:
    scale = load_bench("scale_sampled")
    (tmp_path / "judgments.tsv").write_text("query_id\tanswer\tlabel\tannotator\nq0\td\tC\tx")
    rows = [("q1", "doc-1-5"), ("q2", "doc-2-9"), ("q7", "doc-7-0")]
    batch = "rank\tquery_id\tanswer\tsystem\tmethod\n" + "".join(
        f"{k}\t{q}\t{a}\trun000\tstratband\n" for k, (q, a) in enumerate(rows, 1)
    )
    (tmp_path / "curve_to_annotate.tsv").write_text(batch)
    assert scale.label_curve_batch(tmp_path) == 3
    assert not (tmp_path / "curve_to_annotate.tsv").exists()
    lines = (tmp_path / "judgments.tsv").read_text().splitlines()
    assert lines[:2] == ["query_id\tanswer\tlabel\tannotator", "q0\td\tC\tx"]
    for line, (q, a) in zip(lines[2:], rows, strict=True):
        digit = int(hashlib.md5(f"{q}\x1f{a}".encode()).hexdigest()[0], 16)
        assert line == f"{q}\t{a}\t{'C' if digit < 5 else 'W'}\tbench"
    assert scale.label_curve_batch(tmp_path) == 0  # no batch: nothing appended


def test_cpu_ratios_compare_each_engine_before_and_after() -> None:
    """``--baseline``: each engine's CPU (Python + JVM) after ÷ before, and Spark ÷ DuckDB
    before and after; a failed command gives no ratio."""
    spark = load_bench("spark")

    def one(python: float, jvm: float, code: int = 0) -> dict:
        return {"exit": code, "python_cpu_s": python, "descendants_cpu_s": jvm}

    figures = {
        "spark@base": {"score": one(4, 116), "validate": one(2, 98)},
        "spark": {"score": one(4, 56), "validate": one(2, 58, code=1)},
        "duckdb@base": {"score": one(20, 0), "validate": one(16, 0)},
        "duckdb": {"score": one(20, 0), "validate": one(16, 0)},
    }
    ratios = spark.cpu_ratios(figures, ["spark", "duckdb"], ["score", "validate", "curve"])
    assert ratios["score"] == {
        "spark_cpu_s": [120, 60],
        "spark_after_over_before": 0.5,
        "duckdb_cpu_s": [20, 20],
        "duckdb_after_over_before": 1.0,
        "spark_over_duckdb_before": 6.0,
        "spark_over_duckdb_after": 3.0,
    }
    assert ratios["validate"]["spark_cpu_s"] == [100, None]
    assert "spark_over_duckdb_after" not in ratios["validate"]
    assert "curve" not in ratios
