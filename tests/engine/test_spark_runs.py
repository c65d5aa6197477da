"""Spark reads the runs itself: same census and leave-one-team-out numbers as DuckDB, answer
normalisation equal to Python's, no run row through the driver, one-line errors.

The tests that start a JVM share one local[1] session (start-up costs ~10 s on an idle machine,
a minute on a loaded one) and are marked slow, as the other Spark tests; the SQL normalisation
is also checked in DuckDB (same SQL table, no JVM) and the error paths without a session.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from test_engine import SPARK_MISSING, random_task

from receval.cli import cli
from receval.config import Matching
from receval.engine import connect
from receval.engine.base import check_master
from receval.engine.matching import casefold_table, normalise_steps
from receval.errors import BundleError
from receval.official.census import leave_team_out, official_census
from receval.task import load_task, normalize_answers

needs_spark = pytest.mark.skipif(SPARK_MISSING is not None, reason=SPARK_MISSING or "")

#: answers where Java's lower() and str.casefold differ, whitespace Python's isspace accepts,
#: compatibility characters, non-BMP letters
CORNERS = [
    "Straße",
    "STRASSE",
    "ẞ",
    "ﬁle ﬂow",
    "ΟΔΟΣ",
    "οδος",
    "ᏣᎳᎩ ꮳꮃꭹ",
    "İstanbul",
    "ſ ϐ µ ϑ ῼ ᾈ",
    "𐐀𐐨",
    "  a\u3000\u2028b\x85c\t\x1f  ",
    "Å Å",
    "e\u0301",
    "①  Ⅻ ｆｕｌｌ",
    "plain ASCII Text",
    "",
]

MATCHINGS = [
    Matching(),
    Matching(unicode="NFC"),
    Matching(unicode="NFKC"),
    Matching(casefold=False, collapse_whitespace=False),
    Matching(strip=False),
]


def test_casefold_table_is_pythons():
    source, target, several = casefold_table()
    assert len(source) == len(target) > 1000
    assert dict(several)["ß"] == "ss" and "ß" not in source
    assert all(c.casefold() == t for c, t in zip(source, target, strict=True))


@pytest.mark.parametrize("matching", [m for m in MATCHINGS if m.unicode != "NFKC"])
def test_normalisation_sql_equals_python_in_duckdb(matching):
    """The same SQL table run by DuckDB (no NFKC there) equals normalize_answers."""
    import duckdb

    from receval.engine.dialect import DIALECTS

    con = duckdb.connect()
    con.register("a", pd.DataFrame({"norm": CORNERS}))
    sql = "SELECT norm FROM a"
    for step in normalise_steps(matching, DIALECTS["duckdb"]):
        sql = f"SELECT {step.format(s='norm')} AS norm FROM ({sql})"
    got = con.execute(sql).fetch_df()["norm"].tolist()
    assert got == normalize_answers(pd.Series(CORNERS), matching).tolist()


def test_duckdb_refuses_nfkc():
    from receval.engine.dialect import DIALECTS

    with pytest.raises(ValueError, match="NFKC"):
        normalise_steps(Matching(unicode="NFKC"), DIALECTS["duckdb"])


def test_unreachable_master_is_one_error_within_seconds():
    import time

    start = time.perf_counter()
    with pytest.raises(BundleError, match="cannot reach the Spark master"):
        check_master("spark://127.0.0.1:9", timeout=2)
    assert time.perf_counter() - start < 10


def test_cli_unreachable_master_is_one_error_line(tmp_path):
    if SPARK_MISSING and "pyspark" in SPARK_MISSING:
        pytest.skip(SPARK_MISSING)
    task = _bundle(tmp_path / "task")
    args = ["score", str(task), "--estimator", "official", "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(
        cli, [*args, "--engine", "spark", "--spark-master", "spark://127.0.0.1:9"]
    )
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: spark://127.0.0.1:9: cannot reach")


def test_missing_pyspark_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(ImportError, match=r"receval\[spark\]"):
        connect("spark")
    task = _bundle(tmp_path / "task")
    args = ["score", str(task), "--estimator", "official", "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(cli, [*args, "--engine", "spark"])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert "receval[spark]" in result.output


def _bundle(root: Path, layout: str = "partitioned", seed: int = 3) -> Path:
    """``random_task(seed)`` written as a bundle with Parquet runs in ``layout``:
    ``partitioned`` (runs.parquet/system=<name>/part-*.parquet, two parts each) or ``files``
    (runs/<system>.parquet); answers get corner-case surface forms of the same fact."""
    task = random_task(seed)
    runs = task.raw_outputs
    root.mkdir(parents=True)
    for system, rows in runs.groupby("system", observed=True):
        answers = rows["answer_raw"].astype(str).tolist()
        answers = [f"\u3000{a.upper()}\x85" if i % 3 == 0 else a for i, a in enumerate(answers)]
        table = pa.table(
            {
                "query_id": rows["query_id"].astype(str).tolist(),
                "answer": answers,
                "team": rows["team"].astype(str).tolist(),
            }
        )
        if layout == "files":
            (root / "runs").mkdir(exist_ok=True)
            pq.write_table(table, root / "runs" / f"{system}.parquet")
            continue
        folder = root / "runs.parquet" / f"system={system}"
        folder.mkdir(parents=True)
        half = table.num_rows // 2
        pq.write_table(table.slice(0, half), folder / "part-0.parquet")
        pq.write_table(table.slice(half), folder / "part-1.parquet")
    judg = task.judgments
    pq.write_table(
        pa.table(
            {
                "query_id": judg["query_id"].astype(str).tolist(),
                "answer": judg["answer_raw"].astype(str).tolist(),
                "label": judg["label_raw"].astype(str).tolist(),
            }
        ),
        root / "judgments.parquet",
    )
    task.queries[["query_id", "slot"]].to_csv(root / "queries.tsv", sep="\t", index=False)
    return root


@pytest.fixture(scope="module")
def spark():
    if SPARK_MISSING:
        pytest.skip(SPARK_MISSING)
    engine = connect("spark", master="local[1]")
    engine.spark.conf.set("spark.sql.shuffle.partitions", "2")
    return engine


@needs_spark
@pytest.mark.slow  # a JVM (shared by this module's Spark tests)
def test_spark_reads_runs_itself_and_counts_as_duckdb(spark, tmp_path, monkeypatch):
    """A partitioned dataset of parts and a folder of per-system files: census and
    leave-one-team-out equal DuckDB's (from the coded tables), and no frame the driver sends
    Spark is larger than the small tables (queries, systems, judgments)."""
    from pyspark.sql import SparkSession

    from receval.official.census import bundle_census

    sent = []
    original = SparkSession.createDataFrame

    def recording(self, data, *args, **kwargs):
        sent.append(len(data))
        return original(self, data, *args, **kwargs)

    monkeypatch.setattr(SparkSession, "createDataFrame", recording)
    with connect("duckdb") as duck:
        for layout in ("partitioned", "files"):
            task = load_task(_bundle(tmp_path / layout, layout))
            pd.testing.assert_frame_equal(official_census(task, spark), official_census(task, duck))
            pd.testing.assert_frame_equal(leave_team_out(task, spark), leave_team_out(task, duck))
            small = max(len(task.judgments), len(task.queries), len(task.systems))
            assert sent and max(sent) <= small < len(task.raw_outputs)
            sent.clear()
            # the runs never loaded in Python: the small tables only
            census, lto = bundle_census(tmp_path / layout, spark)
            pd.testing.assert_frame_equal(census, official_census(task, duck))
            pd.testing.assert_frame_equal(lto, leave_team_out(task, duck))
            assert max(sent) <= small


@needs_spark
@pytest.mark.slow
def test_spark_normalisation_equals_python(spark):
    from receval.engine.spark_runs import normalised

    frame = spark.spark.createDataFrame(pd.DataFrame({"answer": CORNERS}))
    for matching in MATCHINGS:
        got = normalised(frame, matching).select("norm").toPandas()["norm"].tolist()
        assert got == normalize_answers(pd.Series(CORNERS), matching).tolist(), matching


@needs_spark
@pytest.mark.slow
def test_unreadable_runs_path_is_one_error(spark, tmp_path):
    task = load_task(_bundle(tmp_path / "task"))
    with pytest.raises(BundleError, match="cannot read the runs"):
        spark.register_census_runs(task, "file:///no/such/folder")
    broken = tmp_path / "broken"
    (broken / "runs").mkdir(parents=True)
    (broken / "runs" / "A.parquet").write_bytes(b"not parquet")
    with pytest.raises(BundleError, match="cannot read the runs"):
        spark.register_census_runs(task, broken.as_uri())


@needs_spark
@pytest.mark.slow
@pytest.mark.parametrize("layout", ["partitioned", "files", "one-file"])
def test_spark_official_score_reads_the_bundle_runs_as_duckdb_counts(tmp_path, monkeypatch, layout):
    """``score --estimator official --engine spark`` on Parquet runs in ``runs/system=A/``
    (a partitioned dataset: the ``=`` stays as it is in the paths Spark reads), one file per
    system, or one file: Spark reads the runs itself (the driver sends the small tables only)
    and every CSV equals DuckDB's."""
    import os

    from pyspark.sql import SparkSession
    from test_engine_score import _partitioned, make_bundle

    monkeypatch.setenv("SPARK_MASTER", os.environ.get("SPARK_MASTER", "local[1]"))
    root = make_bundle(tmp_path / "b", rounds=1, teams=True,
                       layout="one-file" if layout == "one-file" else "per-system")  # fmt: skip
    if layout == "partitioned":
        _partitioned(root)
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in root.rglob("*.parquet"))
    sent = []
    original = SparkSession.createDataFrame

    def recording(self, data, *args, **kwargs):
        sent.append(len(data))
        return original(self, data, *args, **kwargs)

    monkeypatch.setattr(SparkSession, "createDataFrame", recording)
    outs = {}
    for engine in ("duckdb", "spark"):
        out = tmp_path / engine
        args = ["score", str(root), "--estimator", "official", "--out", str(out), "--no-report"]
        result = CliRunner().invoke(cli, [*args, "--quiet", "--engine", engine])
        assert result.exit_code == 0, result.output
        outs[engine] = {p.name: p.read_bytes() for p in sorted(out.glob("*.csv"))}
    assert outs["spark"] and outs["spark"] == outs["duckdb"]
    assert sent and max(sent) < rows / 4  # small tables only, never the run rows
