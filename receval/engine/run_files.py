"""The Parquet run files as the engines read them: the columns read, the check of a file's
schema, the ``trim`` that touches only values with edge spaces (answers per ``[matching]
strip``), and how a SELECT becomes a named view on either engine.  Below both
:mod:`receval.engine.sampled` (DuckDB's ``runs`` view) and :mod:`receval.engine.spark_runs`
(Spark's single-scan reader), so neither imports the other for these."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from receval.errors import BundleError

if TYPE_CHECKING:
    from receval.engine.base import Engine


def create_view(engine: Engine, name: str, sql: str, *, materialise: bool = False) -> None:
    """Make the SELECT ``sql`` queryable as ``name``: the engine's ``create_table`` (when
    ``materialise``) or ``create_view``, else a Spark temporary view (cached when
    ``materialise``)."""
    method = getattr(engine, "create_table" if materialise else "create_view", None)
    if method is not None:
        method(name, sql)
        return
    spark = getattr(engine, "spark", None)
    if spark is None:
        raise TypeError(f"engine {engine.name!r} cannot create views")
    frame = spark.sql(sql)
    if materialise:
        frame = frame.cache()
    frame.createOrReplaceTempView(name)


#: the columns the sampled path reads and the Arrow types a Parquet run may give them
RUN_COLUMNS = ("system", "query_id", "answer")
#: columns read when a file has them (NULL otherwise)
OPTIONAL_RUN_COLUMNS = ("team",)


def check_run_schema(path: Path, keys: dict[str, str]) -> None:
    """A Parquet run file has ``query_id`` and ``answer`` (and ``system`` unless its location
    names it) as text or integers; else a BundleError naming the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise BundleError(path, None, f"not a readable Parquet file ({exc})") from None
    for name in (*RUN_COLUMNS, *OPTIONAL_RUN_COLUMNS):
        if name not in schema.names:
            if name in keys or name in OPTIONAL_RUN_COLUMNS:
                continue
            raise BundleError(path, None, f"missing required column {name}")
        kind = schema.field(name).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and not (
            pa.types.is_integer(kind) or pa.types.is_dictionary(kind)
        ):
            raise BundleError(path, None, f"column {name} has type {kind}; expected text")


def trimmed(text: str) -> str:
    """SQL of ``trim(text)`` (leading and trailing spaces removed) that calls ``trim`` only on
    the values with such a space (``trim`` copies every value: half the cost of a scan)."""
    return f"CASE WHEN {text} LIKE ' %' OR {text} LIKE '% ' THEN trim({text}) ELSE {text} END"


def answer_as_read(text: str, *, strip: bool) -> str:
    """SQL of a run's ``answer`` as the engine reads it: with ``[matching] strip``, its leading
    and trailing ASCII spaces removed (the spelling the in-memory path records,
    :func:`receval.design.first_spellings`: ``str.strip(" ")``), else as written (the fact then
    keeps them: :func:`receval.bundle.answers.normalize_answers` does not strip).

    ``trim(BOTH ' ' FROM ...)``, not DuckDB's plain ``trim``, which also removes other Unicode
    spaces (an em space, a no-break space) and so spelled such answers unlike memory and Spark.
    Called only on the values with such a space (the trim copies every value it sees)."""
    if not strip:
        return text
    return (
        f"CASE WHEN {text} LIKE ' %' OR {text} LIKE '% ' THEN trim(BOTH ' ' FROM {text}) "
        f"ELSE {text} END"
    )
