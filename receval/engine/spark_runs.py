"""Spark reads a bundle's runs itself: Parquet files or datasets, from any path Spark can read.

The layouts of the bundle format (``runs.parquet``, ``runs/<system>.parquet``, a
``runs.parquet/`` folder of parts, ``runs/system=<name>/*.parquet``) are found with Hadoop's
file system API (``file:``, ``hdfs://``, ``s3a://`` alike) and read by the executors; answers are
normalised per ``[matching]`` in Spark SQL (:mod:`receval.engine.matching`); facts get integer
ids in Spark.  The driver only sends the small tables (systems, queries, judgments) and only
receives per-system or per-team counts: the run rows never pass through Python or the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from receval.errors import BundleError
from receval.official.rules import fact_matched, hop0_queries
from receval.official.sql import CATEGORY_CODES

#: text columns the loader strips of whitespace (:func:`receval.task._strip`)
_STRIPPED = ("system", "query_id", "team")


@dataclass(frozen=True)
class RunLayout:
    """Where a bundle's runs are: ``kind`` ``file`` (one table with a ``system`` column),
    ``dataset`` (a folder of parts, perhaps partitioned ``system=<name>``) or ``systems`` (one
    file per system, system = file stem); ``paths`` as Spark reads them."""

    kind: str
    paths: tuple[str, ...]
    systems: tuple[str, ...] = ()


def _fs(spark, location: str):
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(location)
    return path.getFileSystem(spark._jsc.hadoopConfiguration()), path


def _children(fs, path) -> list[tuple[str, bool, str]]:
    """(name, is folder, full path) of a folder's entries, hidden ones left out."""
    out = []
    for status in fs.listStatus(path):
        name = status.getPath().getName()
        if not name.startswith((".", "_")):
            out.append((name, bool(status.isDirectory()), status.getPath().toString()))
    return sorted(out)


def run_layout(spark, location: str | Path) -> RunLayout | None:
    """The Parquet runs of the bundle at ``location`` (a bundle folder, or the runs file or
    folder itself); None when the runs are text tables (read by the Python loader).

    Raises BundleError when ``location`` cannot be listed or holds no runs."""
    location = str(location)
    try:
        fs, path = _fs(spark, location)
        if fs.isFile(path):
            return RunLayout("file", (path.toString(),)) if _parquet(location) else None
        entries = {name: (folder, full) for name, folder, full in _children(fs, path)}
        if "runs.parquet" in entries:
            folder, full = entries["runs.parquet"]
            return RunLayout("dataset" if folder else "file", (full,))
        if "runs" in entries and entries["runs"][0]:
            return _runs_folder(spark, fs, entries["runs"][1])
        if any(n.lower().startswith("runs.") for n in entries):
            return None  # runs.tsv / runs.csv
        if any(_parquet(n) or "=" in n for n in entries):
            return RunLayout("dataset", (path.toString(),))  # the runs folder itself
    except BundleError:
        raise
    except Exception as exc:  # py4j: the file system's own exception
        raise BundleError(location, None, f"cannot read the runs: {_java_message(exc)}") from None
    raise BundleError(location, None, "no runs found (runs.parquet or a runs/ folder)")


def _runs_folder(spark, fs, folder: str) -> RunLayout | None:
    entries = _children(fs, spark._jvm.org.apache.hadoop.fs.Path(folder))
    if any(is_dir and "=" in name for name, is_dir, _ in entries):
        return RunLayout("dataset", (folder,))
    files = [(n, full) for n, is_dir, full in entries if not is_dir]
    parquet = [(n, full) for n, full in files if _parquet(n)]
    if not parquet:
        if files:
            return None  # runs/<system>.tsv
        raise BundleError(folder, None, "runs/ holds no .tsv, .csv or .parquet file")
    if len(parquet) < len(files):
        return None  # a mix of text and Parquet: the Python loader reads (and checks) them
    return RunLayout(
        "systems",
        tuple(full for _, full in parquet),
        tuple(n[: -len(".parquet")] for n, _ in parquet),
    )


def _parquet(name: str) -> bool:
    return name.lower().endswith(".parquet")


def _java_message(exc: Exception) -> str:
    """The first line of a Java exception's message, without the py4j wrapping."""
    java = getattr(exc, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(exc)
    return " ".join((text.strip().splitlines() or [type(exc).__name__])[0].split())


def read_runs(spark, layout: RunLayout):
    """A Spark frame ``(system, query_id, answer)`` of every run row, as text (``system`` and
    ``query_id`` stripped as the loader strips them); nothing is read until a query runs.

    Raises BundleError when a path cannot be read or lacks a required column."""
    import functools

    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    try:
        if layout.kind == "systems":
            frames = [
                _keyed_files(spark, files)
                for files in _like_files(spark, layout.paths, layout.systems).values()
            ]
            return functools.reduce(lambda a, b: a.unionByName(b), frames)
        frame = spark.read.parquet(*layout.paths)
        return _columns(frame, layout.paths[0], None)
    except BundleError:
        raise
    except Exception as exc:
        raise BundleError(
            layout.paths[0], None, f"cannot read the runs: {_java_message(exc)}"
        ) from None


def _like_files(spark, paths, systems) -> dict[str, list[tuple[str, str]]]:
    """(path, system) of the run files grouped by their Parquet schema (Spark reads only
    the footers here)."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for path, system in zip(paths, systems, strict=True):
        schema = spark.read.parquet(path).schema.simpleString()
        groups.setdefault(schema, []).append((path, system))
    return groups


def _keyed_files(spark, files: list[tuple[str, str]]):
    """One scan of like run files (any paths Spark reads), each row's system from its file's
    path (``_metadata.file_path``, a broadcast join; a file the keys miss fails the query)."""
    from pyspark.sql import functions as F

    rows = []
    for path, system in files:
        hadoop, located = _fs(spark, path)
        qualified = hadoop.makeQualified(located)
        for spelling in {str(qualified.toString()), str(qualified.toUri().toString())}:
            rows.append((spelling, system))
    keys = spark.createDataFrame(pd.DataFrame(rows, columns=["_receval_file", "_receval_system"]))
    frame = spark.read.parquet(*[path for path, _ in files])
    frame = frame.withColumn("_receval_file", F.col("_metadata.file_path"))
    frame = frame.join(F.broadcast(keys), "_receval_file", "left")
    system = F.coalesce(
        F.col("_receval_system"),
        F.raise_error(F.concat(F.lit("a run file is not one of the bundle's: "),
                               F.col("_receval_file"))),
    )  # fmt: skip
    return _columns(frame, files[0][0], system)


def _columns(frame, path: str, system):
    from pyspark.sql import functions as F

    from receval.engine.dialect import DIALECTS
    from receval.engine.matching import _whitespace

    needed = ("query_id", "answer") if system is not None else ("system", "query_id", "answer")
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise BundleError(path, None, f"runs: missing column(s) {', '.join(missing)}")
    space = _whitespace()
    strip = DIALECTS["spark"].regexp_replace("{s}", f"\\A{space}+|{space}+\\z", "")

    def stripped(column: str):
        return F.expr(strip.replace("{s}", f"CAST(`{column}` AS STRING)"))

    return frame.select(
        (system if system is not None else stripped("system")).alias("system"),
        stripped("query_id").alias("query_id"),
        F.col("answer").cast("string").alias("answer"),
    )


def normalised(frame, matching, column: str = "answer", out: str = "norm"):
    """``frame`` with ``out``: ``column`` normalised per ``matching`` in Spark SQL (equal to
    :func:`receval.task.normalize_answers`; :mod:`receval.engine.matching`)."""
    from pyspark.sql import functions as F

    from receval.engine.dialect import DIALECTS
    from receval.engine.matching import normalise_steps

    frame = frame.withColumn(out, F.col(column))
    for step in normalise_steps(matching, DIALECTS["spark"]):
        frame = frame.withColumn(out, F.expr(step.format(s=f"`{out}`")))
    return frame


#: a fact id is its query's code times this plus the answer's rank within the query
_FACT_STRIDE = 1 << 32


def register_task_runs(engine, task, location: str | Path | None = None) -> bool:
    """Register the coded ``responses``, ``judgments`` and ``queries`` views of
    :mod:`receval.engine.queries` in ``engine`` (a SparkEngine), reading the runs of ``task``
    with Spark: from ``location`` (any path Spark reads), by default the bundle's Parquet run
    files as ``score``'s engine path reads them (:func:`_bundle_runs`).  False when the runs
    are text tables or the task was built in memory (the caller then sends the coded tables).

    Facts get ids in Spark: ``query code · 2³² + dense rank of the normalised answer within the
    query``, over the run rows and the judgments together, so the ids are exact (no hash) and do
    not depend on the partitioning.  The coded rows are checkpointed on the executors
    (``localCheckpoint``): the census and the leave-one-team-out queries reuse them."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spark = engine.spark
    if location is None:
        frame = _bundle_runs(engine, task)
        if frame is None:
            return False
        location = _local_uri(Path(task.root))
    else:
        layout = run_layout(spark, location)
        if layout is None:
            return False
        frame = read_runs(spark, layout)
    runs = normalised(frame, task.config.matching)
    queries = hop0_queries(task)
    code = pd.Index(queries["query_id"])
    small = _small_tables(task, queries, code, CATEGORY_CODES)
    for name, frame in small.items():
        engine.register(f"_receval_{name}", frame)
    q = spark.table("_receval_query_codes")
    s = spark.table("_receval_systems")
    rows = (
        runs.join(F.broadcast(q), "query_id")
        .join(F.broadcast(s), "system")
        .select("sys", "team", "query", "single", "norm", F.lit(-1).alias("category"),
                F.lit(-1).alias("ord"))
    )  # fmt: skip
    judged = spark.table("_receval_judgments").select(
        F.lit(-1).alias("sys"), F.lit(-1).alias("team"), "query", F.lit(0).alias("single"),
        "norm", "category", "ord",
    )  # fmt: skip
    rank = F.dense_rank().over(Window.partitionBy("query").orderBy("norm"))
    coded = rows.unionByName(judged).withColumn(
        "fact", F.col("query").cast("long") * _FACT_STRIDE + rank
    )
    try:
        coded = coded.drop("norm").localCheckpoint(eager=True)
    except Exception as exc:
        raise BundleError(location, None, f"cannot read the runs: {_java_message(exc)}") from None
    coded.where("sys >= 0").select(
        "sys", "team", "query", "fact", "single"
    ).createOrReplaceTempView("responses")
    coded.where("sys < 0").select("query", "fact", "category", "ord").createOrReplaceTempView(
        "judgments"
    )
    engine.register("queries", small["queries"])
    return True


def _bundle_runs(engine, task):
    """The Parquet runs of the loaded bundle ``task`` as :func:`read_runs`' frame, read as
    ``score``'s engine path reads them (:func:`register_parquet_runs`: one scan per schema of
    like files, each file's key columns from its location, local paths as Hadoop reads them);
    None when the task was built in memory or its runs are text tables."""
    from receval.bundle.sources import _run_sources, parquet_sources

    if not task.files or not Path(task.root).is_dir():
        return None
    files: dict[str, Path] = {}
    _run_sources(Path(task.root), files, ("score",))
    sources = parquet_sources(files)
    if not sources:
        return None
    register_parquet_runs(engine, sources, strip=task.config.matching.strip)
    return _columns(engine.spark.table("runs"), str(sources[0][0]), None)


def _small_tables(task, queries: pd.DataFrame, code: pd.Index, categories) -> dict:
    """The small tables the driver sends: query codes, systems with their team codes, the
    hop-0 judgments (normalised answers, category codes, file order) and the coded queries."""
    systems = pd.Index(task.systems)
    teams = pd.Index(sorted(set(task.teams.values())))
    judg = task.judgments
    jq = code.get_indexer(judg["query_id"])
    keep = jq >= 0
    judged = np.zeros(len(queries), dtype=np.int64)
    judged[jq[keep]] = 1
    return {
        "query_codes": pd.DataFrame(
            {
                "query_id": queries["query_id"].astype(str).to_numpy(object),
                "query": np.arange(len(queries), dtype=np.int64),
                "single": queries["single"].to_numpy(np.int64),
            }
        ),
        "systems": pd.DataFrame(
            {
                "system": np.asarray(systems, dtype=object),
                "sys": np.arange(len(systems), dtype=np.int64),
                "team": teams.get_indexer([task.teams[s] for s in systems]).astype(np.int64),
            }
        ),
        "judgments": pd.DataFrame(
            {
                "query": jq[keep].astype(np.int64),
                "norm": judg["answer"].astype(str).to_numpy(object)[keep],
                "category": judg["category"].map(categories).to_numpy(np.int64)[keep],
                "ord": np.flatnonzero(keep).astype(np.int64),
            }
        ),
        "queries": pd.DataFrame(
            {
                "query": np.arange(len(queries), dtype=np.int64),
                "single": queries["single"].to_numpy(np.int64),
                "judged": judged,
            }
        ),
    }


def _skeleton(root: Path, spark, layout: RunLayout, frame):
    """The bundle's small tables as a Task with no run rows, its systems and teams read from
    the runs by Spark (one row per system comes back)."""
    import os
    import tempfile

    from receval.task import load_task

    columns = _schema_columns(spark, layout)
    teams = _teams(spark, layout, frame, "team" in columns)
    with tempfile.TemporaryDirectory(prefix="receval-skeleton-") as tmp:
        for path in root.iterdir():
            if path.stem in ("task", "queries", "judgments") and path.is_file():
                os.symlink(path.resolve(), Path(tmp) / path.name)
        # one placeholder row (a bundle needs outputs); systems and teams are set below
        query = _first_query(root)
        (Path(tmp) / "runs.tsv").write_text(
            f"system\tquery_id\tanswer\n{_PLACEHOLDER}\t{query}\t{_PLACEHOLDER}\n",
            encoding="utf-8",
        )
        task = load_task(tmp, tables=("judgments",))
    object.__setattr__(task, "root", root)
    task.__dict__["systems"] = sorted(teams)
    task.__dict__["teams"] = teams
    if (
        "hop" in columns
        or not fact_matched(task)
        or ("provenance" in columns and "provenance" in task.judgments.columns)
    ):
        raise BundleError(root, None, "the Spark census covers fact-matched bundles only")
    return task


_PLACEHOLDER = "receval-skeleton"


def _first_query(root: Path) -> str:
    """The first query id of the bundle's queries table (the loader names a missing one)."""
    from receval.task import _table_source

    source = _table_source(root, "queries", {})
    if source is None or "query_id" not in source.frame.columns or source.frame.empty:
        raise BundleError(root / "queries.tsv", None, "missing file or no query_id column")
    return str(source.frame["query_id"].iloc[0]).strip()


def _schema_columns(spark, layout: RunLayout) -> set[str]:
    return set(spark.read.parquet(layout.paths[0]).columns)


def _teams(spark, layout: RunLayout, frame, has_team: bool) -> dict[str, str]:
    """system -> team (blank or absent: the system) from the runs, one row per system."""
    import functools

    from pyspark.sql import functions as F

    from receval.engine.dialect import DIALECTS

    if not has_team:
        names = frame.select("system").distinct().toPandas()["system"]
        return {s: s for s in (*names, *layout.systems)}  # an empty run file: no rows
    from receval.engine.matching import _whitespace

    space = _whitespace()
    strip = DIALECTS["spark"].regexp_replace("CAST(team AS STRING)", f"\\A{space}+|{space}+\\z", "")
    if layout.kind == "systems":
        frames = [
            spark.read.parquet(p).select(F.lit(s).alias("system"), F.expr(strip).alias("team"))
            for p, s in zip(layout.paths, layout.systems, strict=True)
        ]
        raw = functools.reduce(lambda a, b: a.unionByName(b), frames)
    else:
        raw = spark.read.parquet(*layout.paths).select(
            F.expr(
                DIALECTS["spark"].regexp_replace(
                    "CAST(system AS STRING)", f"\\A{space}+|{space}+\\z", ""
                )
            ).alias("system"),
            F.expr(strip).alias("team"),
        )
    pairs = (
        raw.groupBy("system").agg(F.min("team").alias("lo"), F.max("team").alias("hi")).toPandas()
    )
    out = {}
    for system, lo, hi in pairs.itertuples(index=False):
        system, lo, hi = str(system).strip(), str(lo or "").strip(), str(hi or "").strip()
        if lo != hi:
            raise BundleError(
                layout.paths[0], None, f"system {system!r} has two teams ({lo!r}, {hi!r})"
            )
        out[system] = lo or system
    for system in layout.systems:  # an empty run file: an empty submission
        out.setdefault(system, system)
    return out


# ---------------------------------------------------------------------------------------------
# the engine path's ``runs`` view: one read per group of like files


def register_parquet_runs(
    engine, sources: list[tuple[Path, dict[str, str]]], *, strip: bool
) -> None:
    """Register the Parquet run files as the view ``runs(system, query_id, answer, team)`` of
    :func:`receval.engine.sampled.register_runs` (``strip``: ``[matching] strip``, how the
    answers are read), with Spark reading every file of one schema
    in a single scan: a file's location (``runs/A.parquet``, ``runs/system=A/``) sets its key
    columns through a broadcast join on the file's path (``_metadata.file_path``), not one
    scan per file (a 50-way union compiled the normalisation 50 times per query).

    Raises BundleError naming the file when a file is unreadable or lacks a column."""
    from receval.engine.run_files import check_run_schema, create_view

    groups: dict[tuple, list[tuple[Path, dict[str, str]]]] = {}
    for path, keys in sources:
        check_run_schema(path, keys)
        groups.setdefault(_signature(path, keys), []).append((path, keys))
    engine.run_rows = sum(_rows(path) for path, _ in sources)
    engine.run_teams = any(
        "team" in keys or any(c.startswith("team:") for c in columns) for keys, columns in groups
    )
    parts = [
        _group_view(engine, f"_receval_runs_{i}", columns, files, strip)
        for i, ((_, columns), files) in enumerate(sorted(groups.items()))
    ]
    create_view(engine, "runs", "\nUNION ALL\n".join(parts))


def _signature(path: Path, keys: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(key names, columns read from the file with their Arrow types): files alike in both are
    read together."""
    import pyarrow.parquet as pq

    from receval.engine.run_files import OPTIONAL_RUN_COLUMNS, RUN_COLUMNS

    schema = pq.read_schema(path)
    columns = tuple(
        f"{c}:{schema.field(c).type}"
        for c in (*RUN_COLUMNS, *OPTIONAL_RUN_COLUMNS)
        if c not in keys and c in schema.names
    )
    return tuple(sorted(keys)), columns


def _group_view(engine, name: str, columns: tuple[str, ...], files: list, strip: bool) -> str:
    """Register one group's files as ``name`` (and its keys as ``name_keys``); the SELECT of
    the ``runs`` columns over them (answers per ``strip``)."""
    from receval.engine.run_files import (
        OPTIONAL_RUN_COLUMNS,
        RUN_COLUMNS,
        answer_as_read,
        trimmed,
    )

    spark = engine.spark
    present = {c.split(":", 1)[0] for c in columns}
    keyed = sorted(files[0][1])
    uris = [_local_uri(path) for path, _ in files]
    with engine._one_line_errors(str(files[0][0])):
        frame = spark.read.parquet(*uris)
        picked = [f"`{c}`" for c in sorted(present)]
        if keyed:
            picked.append("_metadata.file_path AS _receval_file")
        frame.selectExpr(*picked).createOrReplaceTempView(name)
    select = []
    for column in (*RUN_COLUMNS, *OPTIONAL_RUN_COLUMNS):
        if column in keyed:
            select.append(f"{_placed(column, column == keyed[0])} AS {column}")
        elif column == "answer":
            select.append(f"{answer_as_read('CAST(r.`answer` AS STRING)', strip=strip)} AS answer")
        elif column in present:
            select.append(f"{trimmed(f'CAST(r.`{column}` AS STRING)')} AS {column}")
        else:
            select.append(f"CAST(NULL AS STRING) AS {column}")
    if not keyed:
        return f"SELECT {', '.join(select)} FROM {name} r"
    engine.register(f"{name}_keys", _file_keys(spark, files, keyed))
    return (
        f"SELECT /*+ BROADCAST(k) */ {', '.join(select)} FROM {name} r "
        f"LEFT JOIN {name}_keys k ON r._receval_file = k._receval_file"
    )


def _placed(column: str, checked: bool) -> str:
    """A key column from the file's path; ``checked``: a row of a file the keys do not name
    fails the query (a path spelt otherwise than :func:`_file_keys` expects) instead of
    being dropped."""
    if not checked:
        return f"k.`{column}`"
    return (
        f"coalesce(k.`{column}`, raise_error(concat('a run file Spark read is not one of the "
        f"bundle run files: ', r._receval_file)))"
    )


def _local_uri(path: Path) -> str:
    """A local file as Hadoop reads it: ``file://`` and the path as it is (``as_uri`` would
    percent-encode the ``=`` of ``system=A``, which Hadoop does not decode)."""
    return "file://" + Path(path).resolve().as_posix()


def _file_keys(spark, files: list, keyed: list[str]) -> pd.DataFrame:
    """Each file's key values under every spelling of its path Spark may report
    (``_metadata.file_path``: the qualified Hadoop path, or its URI)."""
    rows = []
    for path, keys in files:
        hadoop, located = _fs(spark, _local_uri(path))
        qualified = hadoop.makeQualified(located)
        for spelling in {str(qualified.toString()), str(qualified.toUri().toString())}:
            rows.append({"_receval_file": spelling, **{k: keys[k] for k in keyed}})
    return pd.DataFrame(rows, columns=["_receval_file", *keyed])


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)


#: rows per partition of the kept ``normed`` table: each partition's (system, query, answer)
#: groups fit a task's share of a 1 GB driver heap (no spill, no sort) on ``local[2]``
ROWS_PER_PARTITION = 1_000_000


def _kept_level():
    """pyspark's ``MEMORY_AND_DISK``: the kept rows serialised in memory (Scala's default for
    a checkpoint keeps them as Java objects: a 1 GB local heap then spent its aggregations'
    memory and garbage collection on them), then on the local disks."""
    from pyspark import StorageLevel

    return StorageLevel.MEMORY_AND_DISK


def keep_normed(engine) -> None:
    """Replace the view ``normed`` by the same rows hash-partitioned by ``query_id`` and
    cached (serialised in memory, then the executors' disks: :func:`_kept_level`): the runs
    are read and normalised once, shuffled once, and the aggregations of
    :mod:`receval.engine.summary` (each grouping by ``query_id`` and more) read the cache with
    no further shuffle of rows.  Partitions: enough for :data:`ROWS_PER_PARTITION` rows each,
    at least ``spark.sql.shuffle.partitions``.  A table kept earlier is released."""
    spark = engine.spark
    previous = getattr(engine, "kept_normed", None)
    if previous is not None:
        previous.unpersist()
    rows = getattr(engine, "run_rows", 0) or 0
    partitions = max(
        int(spark.conf.get("spark.sql.shuffle.partitions")), -(-rows // ROWS_PER_PARTITION)
    )
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    # without adaptive execution the checkpoint keeps its partitioning (hash of query_id), so
    # the aggregations that group by query_id and more plan no further exchange
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        with engine._one_line_errors("normed"):
            engine.describe(f"keep normed: {partitions} partitions by query_id")
            kept = spark.table("normed").repartition(partitions, "query_id")
            kept = kept.localCheckpoint(eager=True, storageLevel=_kept_level())
            kept.createOrReplaceTempView("normed")
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    engine.kept_normed = kept
