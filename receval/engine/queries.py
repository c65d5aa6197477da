"""The SQL text of the engine's ranked-list and hashing aggregations, written once for DuckDB
and Spark SQL (the official census's texts are in :mod:`receval.official.sql`).

Only constructs both dialects share: CTEs, ``ROW_NUMBER() OVER``, ``CASE``, ``COUNT(DISTINCT)``,
``COALESCE``, integer arithmetic.  Placeholders in braces are filled with :meth:`str.format`
from receval's own constants, never from user data.
"""

from __future__ import annotations

#: The whole list with its rank, in rank order (written once; later batches read by rank).
RANKED_LIST = """
SELECT t.*, ROW_NUMBER() OVER (ORDER BY {score} DESC, {tiebreak}) AS rank
FROM items t
ORDER BY rank"""

#: Rows of an already ranked list (``RANKED_LIST`` output) at the requested ranks.
AT_RANKS = """
SELECT * FROM items WHERE rank IN ({ranks}) ORDER BY rank"""

#: Items at requested ranks of a ranked list (``items``: any columns with ``{score}``), ranked
#: by decreasing score, ties by ``{tiebreak}``; ``wanted(rank)`` lists the 1-based ranks.
ITEMS_AT_RANKS = """
WITH ranked AS (
    SELECT t.*, ROW_NUMBER() OVER (ORDER BY {score} DESC, {tiebreak}) AS rank
    FROM items t
)
SELECT ranked.* FROM ranked JOIN wanted w ON ranked.rank = w.rank
ORDER BY ranked.rank"""

#: A system's run as integer sort keys (``keys(row, score, qcode, prefix, prefix2)``: ``row``
#: the 1-based row of the run file; ``score`` NULL when missing; ``qcode`` the query's position
#: among the sorted query ids and ``prefix``, ``prefix2`` the answer's first 16 UTF-8 bytes as
#: integers, NULL when unscored) -> the rows in rank order: score descending, ties by query and answer (ties of the 16-byte prefix
#: are ordered by the full answer afterwards), unscored rows last in file order.
RANKED_KEYS = """
SELECT row, tie FROM keys
ORDER BY score IS NULL, score DESC, qcode, prefix, prefix2, row"""

#: The fact hash of each row of ``batch_facts(query_id, answer)``, in row order (DuckDB SQL).
FACT_HASHES = """
SELECT hash(query_id, answer) AS h FROM batch_facts"""

#: The fact hash of each row of ``labels(query_id, answer, label)`` (DuckDB SQL).
LABEL_HASHES = """
SELECT label, hash(query_id, answer) AS h FROM labels"""
