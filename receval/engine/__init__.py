"""Columnar engines for the heavy aggregations: DuckDB (embedded, the default) and Apache Spark.

Every aggregation is written once, as SQL text in :mod:`receval.engine.queries`, in the subset
of SQL that DuckDB and Spark SQL both run (CTEs, window functions, ``CASE``, ``COUNT(DISTINCT)``);
an :class:`Engine` only registers tables and runs that text.  Tables going in are integer-coded
(systems, teams, queries, facts as codes; no strings of size N), and only small results (per
system or per team) come back as pandas frames.

>>> from receval.engine import connect
>>> engine = connect("duckdb")            # or connect("spark", master="local[2]")
>>> census = official_census(task, engine)  # doctest: +SKIP

Spark is an extra (``pip install 'receval[spark]'``, plus a Java runtime); its session takes the
master from ``master=``, else ``SPARK_MASTER``/``spark-defaults.conf`` as ``spark-submit`` does,
else ``local[*]``.  Spark reads Parquet runs itself (:mod:`receval.engine.spark_runs`): the run
rows never pass through the driver; :func:`bundle_census` counts a bundle without loading its
runs in Python at all.
"""

from __future__ import annotations

from receval.engine.base import ENGINES, Engine, connect
from receval.engine.census import leave_team_out, official_census
from receval.engine.ranked import items_at_ranks, write_ranked_list
from receval.engine.spark_runs import bundle_census

__all__ = [
    "ENGINES",
    "Engine",
    "bundle_census",
    "connect",
    "items_at_ranks",
    "leave_team_out",
    "official_census",
    "write_ranked_list",
]
