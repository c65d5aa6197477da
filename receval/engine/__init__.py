"""Columnar engines for the heavy aggregations: DuckDB (embedded, the default) and Apache Spark.

Every aggregation is written once, as SQL text (:mod:`receval.engine.queries`,
:mod:`receval.official.sql`), in the subset
of SQL that DuckDB and Spark SQL both run (CTEs, window functions, ``CASE``, ``COUNT(DISTINCT)``);
an :class:`Engine` only registers tables and runs that text.  Tables going in are integer-coded
(systems, teams, queries, facts as codes; no strings of size N), and only small results (per
system or per team) come back as pandas frames.

>>> from receval.engine import connect
>>> from receval.official.census import official_census
>>> engine = connect("duckdb")            # or connect("spark", master="local[2]")
>>> census = official_census(task, engine)  # doctest: +SKIP

Spark is an extra (``pip install 'receval[spark]'``, plus a Java runtime); its session takes the
master from ``master=``, else ``SPARK_MASTER``/``spark-defaults.conf`` as ``spark-submit`` does,
else ``local[*]``.  Spark reads Parquet runs itself (:mod:`receval.engine.spark_runs`): the run
rows never pass through the driver; :func:`receval.official.census.bundle_census` counts a bundle
without loading its runs in Python at all.
"""

from __future__ import annotations

from receval.engine.base import ENGINES, Engine, connect
from receval.engine.ranked import items_at_ranks, write_ranked_list

__all__ = [
    "ENGINES",
    "Engine",
    "connect",
    "items_at_ranks",
    "write_ranked_list",
]
