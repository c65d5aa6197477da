"""A system's ranked list built by Spark: the curve commands with ``--engine spark``.

:func:`receval.engine.ranked.rank_run_file` ranks a run in DuckDB with Python reading the file
in batches.  Here Spark reads the run file itself (the executors; only its Parquet footer is
read by Python, for the loader's header checks), checks its rows as the loader does (one
aggregation returns the first bad row of each kind), normalises the answers in Spark SQL
(:func:`receval.engine.spark_runs.normalised`), keeps one row per fact (the highest score,
first in file order among equal ones, as :func:`receval.task.load_task`), sorts the list and
writes it with its rank as Parquet into ``TASK/.receval/ranked-spark/<system>/`` (part files
in rank order), with a JSON stamp beside it (the run's fingerprint, N, the copies dropped).

The order is :func:`receval.curves.ranked.system_ranked_list`'s: score descending, ties by
query id then normalised answer (Spark compares strings by their UTF-8 bytes: code-point order,
as Python), unscored rows last in file order (``_metadata.row_index``).  Ranks are numbered
without one partition holding the list: the sorted partitions are counted and each row's rank
is its partition's offset plus its place in the partition.

Later commands ask Spark for the ranks of the labelled facts (a join with the small labels
table) and for the items at the ranks a plan draws (a join with the small ranks table; part
files whose rank range misses them are skipped).  No run row passes through the driver.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from receval.engine.ranked import (
    CACHE_VERSION,
    _check_copies,
    _fingerprint,
    _open_run,
    write_stamp,
)
from receval.errors import BundleError

#: the run's rows as Spark reads them (a temporary view per ranking)
RUN_VIEW = "_receval_curve_run"
#: the ranked list of a cache (re-registered for each query)
CACHE_VIEW = "_receval_curve_ranked"

#: Arrow type families whose text Spark's ``CAST(… AS STRING)`` writes as the loader does
_TEXT_TYPES = ("string", "large_string", "int", "uint", "dictionary")


def spark_cache(root: Path, system: str) -> Path:
    """Where Spark's ranked list of ``system`` lives in the bundle ``root``."""
    return Path(root) / ".receval" / "ranked-spark" / system


def spark_rank_run_file(run: Path | str, cache: Path | str, engine, *, queries, matching) -> Path:
    """The ranked list of one system's Parquet run file, built by ``engine`` (a
    :class:`~receval.engine.base.SparkEngine`) into the folder ``cache`` (see the module
    docstring); a cache whose stamp matches the run's fingerprint is used as it is.

    Raises BundleError with the loader's message and row for a bad run (the first problem in
    the loader's order), or naming both rows of an answer given two scores."""
    run, cache = Path(run), Path(cache)
    stamp = cache.with_name(cache.name + ".json")
    fingerprint = _spark_fingerprint(run, matching)
    if _fresh(cache, stamp, fingerprint):
        return cache
    source = _open_run(run)  # the header checks (Python reads the footer only)
    names = source.schema_arrow.names
    _check_types(run, source.schema_arrow)
    with engine._one_line_errors(str(run)):
        rows = _register_run(engine, run, names, queries)
        _check_rows(engine, run, names, _numeric_score(source.schema_arrow))
    cache.parent.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    work = cache.with_name(f".{cache.name}.work-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    try:
        if rows:
            with engine._one_line_errors(str(run)):
                size = _write_ranked(engine, run, work, matching)
        else:  # an empty submission: an empty list (Spark infers no schema from no rows)
            work.mkdir()
            size = 0
        shutil.rmtree(cache, ignore_errors=True)
        work.replace(cache)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record = {
        "run_fingerprint": fingerprint,
        "cache_size": _cache_size(cache),
        "size": size,
        "duplicate_rows": rows - size,
    }
    write_stamp(stamp, record)
    return cache


def _spark_fingerprint(run: Path, matching) -> dict:
    """:func:`receval.engine.ranked._fingerprint` with Spark's version for DuckDB's."""
    import pyspark

    found = _fingerprint(run, matching)
    found.pop("duckdb", None)
    return {**found, "version": CACHE_VERSION, "spark": pyspark.__version__}


def _cache_size(cache: Path) -> list[int]:
    return [p.stat().st_size for p in sorted(cache.glob("*.parquet"))]


def _fresh(cache: Path, stamp: Path, fingerprint: dict) -> bool:
    if not (cache.is_dir() and stamp.is_file()):
        return False
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    return recorded.get("run_fingerprint") == fingerprint and recorded.get(
        "cache_size"
    ) == _cache_size(cache)


def _stamp(cache: Path | str) -> dict:
    cache = Path(cache)
    return json.loads(cache.with_name(cache.name + ".json").read_text())


def _check_types(run: Path, schema) -> None:
    """The text columns Spark reads must be text or integers (their text is then the
    loader's); another type is refused, naming the column."""
    import pyarrow as pa

    for name in ("system", "query_id", "answer", "team", "provenance"):
        if name not in schema.names:
            continue
        kind = schema.field(name).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_integer(kind)):  # fmt: skip
            raise BundleError(
                run, 1, f"column {name!r} is {kind}: --engine spark reads it as text or integers"
            )


def _text(column: str) -> str:
    """A column's text as the loader reads it (null: empty)."""
    return f"coalesce(CAST(`{column}` AS STRING), '')"


def _stripped(sql: str) -> str:
    """``sql`` stripped of the whitespace the loader strips (:meth:`str.strip`)."""
    from receval.engine.dialect import DIALECTS
    from receval.engine.matching import _whitespace

    space = _whitespace()
    return DIALECTS["spark"].regexp_replace(sql, f"\\A{space}+|{space}+\\z", "")


def _score_sql(names: list[str], kind) -> tuple[str, str]:
    """(the score as a double, NULL when missing or NaN, -0.0 as 0.0; whether the row's score
    is not a finite number)."""
    import pyarrow as pa

    if "score" not in names:
        return "CAST(NULL AS DOUBLE)", "false"
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        value = "CAST(`score` AS DOUBLE)"
        return (
            f"CASE WHEN isnan({value}) THEN NULL ELSE {value} + 0.0 END",
            f"coalesce(abs({value}) = CAST('Infinity' AS DOUBLE), false)",
        )
    text = _stripped(_text("score"))
    value = f"try_cast({text} AS DOUBLE)"
    return (
        f"CASE WHEN isnan({value}) THEN NULL ELSE {value} + 0.0 END",
        f"(({value} IS NULL AND {text} <> '') OR coalesce(abs({value}) = CAST('Infinity' AS DOUBLE), "
        "false))",
    )


def _register_run(engine, run: Path, names: list[str], queries) -> int:
    """Register the run as :data:`RUN_VIEW` (``row`` 1-based, ``system``, ``query``, ``raw``
    (the answer's text), ``score``, ``bad_score``, ``score_text``, ``team``, ``provenance``,
    ``known``);
    returns its number of rows (from the footer)."""
    import pyarrow.parquet as pq

    from receval.engine.spark_runs import _local_uri

    spark = engine.spark
    file = pq.ParquetFile(run)
    kind = file.schema_arrow.field("score").type if "score" in names else None
    score, bad = _score_sql(names, kind)
    engine.register("_receval_known", pd.DataFrame({"query_id": sorted(queries), "known": 1}))
    frame = spark.read.parquet(_local_uri(run))
    frame = frame.selectExpr("*", "_metadata.row_index + 1 AS _receval_row")
    frame.createOrReplaceTempView("_receval_curve_file")
    optional = {
        name: (_text(name) if name in names else "''") for name in ("system", "team", "provenance")
    }
    engine.create_view(
        RUN_VIEW,
        f"""SELECT /*+ BROADCAST(k) */ f._receval_row AS row, {optional["system"]} AS system,
        f._receval_query AS query, {_text("answer")} AS raw, {score} AS score, {bad} AS bad_score,
        {_score_text(names)} AS score_text,
        {_stripped(optional["team"])} AS team, {optional["provenance"]} AS provenance,
        k.known IS NOT NULL AS known
        FROM (SELECT *, {_stripped(_text("query_id"))} AS _receval_query
              FROM _receval_curve_file) f
        LEFT JOIN _receval_known k ON f._receval_query = k.query_id""",
    )
    return int(file.metadata.num_rows)


#: the first bad row of each kind (:class:`receval.engine.ranked._RunChecks`' order)
CHECKS = """
SELECT min(CASE WHEN {system} THEN row END) AS system,
       min(CASE WHEN query = '' THEN row END) AS query_id,
       min(CASE WHEN {blank} THEN row END) AS answer,
       min(CASE WHEN NOT known THEN row END) AS unknown,
       sum(CASE WHEN known THEN 0 ELSE 1 END) AS unknowns,
       min(CASE WHEN bad_score THEN row END) AS score,
       min_by(team, row) FILTER (WHERE team <> '') AS first_team,
       count(DISTINCT team) FILTER (WHERE team <> '') AS teams
FROM {view}
"""


def _numeric_score(schema) -> bool:
    import pyarrow as pa

    if "score" not in schema.names:
        return False
    kind = schema.field("score").type
    return pa.types.is_integer(kind) or pa.types.is_floating(kind)


def _check_rows(engine, run: Path, names: list[str], numeric: bool) -> None:
    """BundleError with the loader's message at the first bad row of the first kind in the
    loader's order (one aggregation; the bad rows' values are read only on a problem)."""
    system = run.stem
    literal = engine.dialect.literal(system)
    found = engine.query(
        CHECKS.format(
            system=f"{_stripped('system')} <> {literal}" if "system" in names else "false",
            blank=f"{_stripped('raw')} = ''",
            view=RUN_VIEW,
        )
    ).iloc[0]
    if int(found["teams"] or 0) > 1:
        first = engine.dialect.literal(str(found["first_team"]))
        row = engine.query(
            f"SELECT min(row) AS row FROM {RUN_VIEW} WHERE team <> '' AND team <> {first}"
        )["row"].iloc[0]
        found["team"] = row
    order = ("system", "query_id", "answer", "unknown", "score", "team")
    bad = [(kind, found.get(kind)) for kind in order]
    bad = [(kind, int(row)) for kind, row in bad if row is not None and not pd.isna(row)]
    if not bad:
        return
    kind, row = bad[0]
    values = engine.query(
        f"SELECT system, query, raw, team, score, score_text FROM {RUN_VIEW} WHERE row = {row}"
    ).iloc[0]
    score = repr(float(values["score"])) if numeric else values["score_text"]
    messages = {
        "system": lambda: f"system {values['system']!r} differs from the file name {system!r}",
        "query_id": lambda: "empty value in required column 'query_id'",
        "answer": lambda: "empty value in required column 'answer'",
        "unknown": lambda: (
            f"query_id {values['query']!r} is not in queries ({int(found['unknowns'])} such rows)"
        ),
        "score": lambda: f"column 'score': {score!r} is not a finite number",
        "team": lambda: (
            f"system {system!r} is given two teams ({found['first_team']!r} and {values['team']!r})"
        ),
    }
    raise BundleError(run, row, messages[kind]())


def _score_text(names: list[str]) -> str:
    """The score as the loader's message spells it: a number's ``repr``, else the text."""
    if "score" not in names:
        return "''"
    return _stripped(_text("score"))


def _write_ranked(engine, run: Path, work: Path, matching) -> int:
    """Normalise, keep one row per fact, sort and write the ranked list to ``work``; returns
    N (the facts).  BundleError (the loader's) when one answer has two scores."""
    from pyspark.sql import functions as F

    from receval.engine.spark_runs import _local_uri, normalised

    spark = engine.spark
    rows = spark.table(RUN_VIEW).select("row", "query", "raw", "score")
    normed = normalised(rows, matching, column="raw", out="answer").localCheckpoint(eager=True)
    normed.createOrReplaceTempView("_receval_curve_normed")
    _check_duplicates(engine, run)
    engine.describe(f"rank {run.name}: keep one row per fact, sort")
    kept = spark.sql(
        """SELECT row, query, answer, raw, score FROM (
            SELECT *, row_number() OVER (PARTITION BY query, answer
                                         ORDER BY score IS NULL, score DESC, row) AS pick
            FROM _receval_curve_normed) t WHERE pick = 1"""
    )
    unscored = F.expr("score IS NULL")
    ordered = kept.orderBy(  # unscored rows: in file order only
        unscored, F.col("score").desc(), F.when(~unscored, F.col("query")),
        F.when(~unscored, F.col("answer")), "row",
    )  # fmt: skip
    placed = ordered.select(
        "*",
        F.spark_partition_id().alias("part"),
        F.monotonically_increasing_id().alias("mono"),
    ).localCheckpoint(eager=True)
    counts = placed.groupBy("part").count().toPandas().sort_values("part")
    sizes = counts["count"].to_numpy(np.int64)
    offsets = np.cumsum(sizes) - sizes
    engine.register(
        "_receval_curve_offsets",
        pd.DataFrame({"part": counts["part"].to_numpy(np.int64), "offset": offsets}),
    )
    placed.createOrReplaceTempView("_receval_curve_placed")
    engine.write_parquet(
        """SELECT /*+ BROADCAST(o) */
               p.mono - shiftleft(CAST(p.part AS BIGINT), 33) + o.offset + 1 AS rank,
               p.query AS query_id, p.answer,
               CASE WHEN p.raw = p.answer THEN NULL ELSE p.raw END AS answer_raw, p.score
        FROM _receval_curve_placed p JOIN _receval_curve_offsets o ON p.part = o.part""",
        _local_uri(work),
    )
    normed.unpersist()
    placed.unpersist()
    return int(sizes.sum())


def _check_duplicates(engine, run: Path) -> None:
    """The loader's check of a fact output twice on its copies (the only rows that come back
    to the driver): :func:`receval.engine.ranked._check_copies`."""
    copies = engine.query(
        """SELECT n.row, n.query AS query_id, n.raw AS answer_raw, n.score
        FROM _receval_curve_normed n JOIN (
            SELECT query, answer FROM _receval_curve_normed GROUP BY query, answer
            HAVING count(*) > 1) d ON n.query = d.query AND n.answer = d.answer"""
    )
    if len(copies):
        copies["score"] = copies["score"].astype(np.float64)
        _check_copies(run, run.parent, copies)


def spark_labelled_ranks(
    cache: Path | str, labels: pd.DataFrame, engine
) -> tuple[int, np.ndarray, np.ndarray]:
    """(N, ranks, label values) of the facts of ``labels(query_id, answer, value)`` (answers
    normalised) in the ranked list ``cache`` (:func:`spark_rank_run_file`): one join in Spark
    on the facts' text; only the labelled facts' ranks come back."""
    size = spark_cached_size(cache)
    if not len(labels) or not size:
        return size, np.empty(0, np.int64), np.empty(0, np.float64)
    frame = labels[["query_id", "answer"]].reset_index(drop=True)
    engine.register("_receval_curve_labels", frame.assign(label=np.arange(len(frame))))
    _register_cache(engine, cache)
    found = engine.query(
        f"""SELECT /*+ BROADCAST(l) */ l.label, c.rank FROM {CACHE_VIEW} c
        JOIN _receval_curve_labels l ON c.query_id = l.query_id AND c.answer = l.answer"""
    )
    values = labels["value"].to_numpy(np.float64)[found["label"].to_numpy(np.int64)]
    return size, found["rank"].to_numpy(np.int64), values


def spark_cached_items(cache: Path | str, ranks: np.ndarray, engine) -> pd.DataFrame:
    """The items (``rank, query_id, answer`` as the run spells it) at the 1-based ``ranks`` of
    the ranked list ``cache``, in rank order (part files outside their range are skipped)."""
    ranks = np.unique(np.asarray(ranks, dtype=np.int64))
    empty = pd.DataFrame({"rank": ranks[:0], "query_id": [], "answer": []})
    if not ranks.size:
        return empty.astype({"query_id": object, "answer": object})
    engine.register("_receval_curve_ranks", pd.DataFrame({"rank": ranks}))
    _register_cache(engine, cache)
    found = engine.query(
        f"""SELECT /*+ BROADCAST(w) */ c.rank, c.query_id, coalesce(c.answer_raw, c.answer)
               AS answer
        FROM {CACHE_VIEW} c JOIN _receval_curve_ranks w ON c.rank = w.rank
        WHERE c.rank BETWEEN {int(ranks[0])} AND {int(ranks[-1])} ORDER BY c.rank"""
    )
    return pd.DataFrame(
        {
            "rank": found["rank"].to_numpy(np.int64),
            "query_id": found["query_id"].to_numpy(object),
            "answer": found["answer"].to_numpy(object),
        }
    )


def _register_cache(engine, cache: Path | str) -> None:
    from receval.engine.spark_runs import _local_uri

    engine.register(CACHE_VIEW, _local_uri(Path(cache)))


def spark_cached_size(cache: Path | str) -> int:
    """N, the length of the ranked list ``cache`` (its stamp)."""
    return int(_stamp(cache)["size"])


def spark_cached_duplicates(cache: Path | str) -> int:
    """Rows of the run behind ``cache`` dropped as copies of a fact output again."""
    return int(_stamp(cache).get("duplicate_rows", 0))
