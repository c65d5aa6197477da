"""The SQL text of the official census, written once for DuckDB and Spark SQL
(:mod:`receval.official.census` runs it on an :class:`~receval.engine.Engine`).

Only constructs both dialects share: CTEs, ``ROW_NUMBER() OVER``, ``CASE``, ``COUNT(DISTINCT)``,
``COALESCE``, integer arithmetic.  Placeholders in braces are filled with :meth:`str.format`
from receval's own constants (category codes, policy words), never from user data.

Input tables (integer codes; see :func:`receval.official.census.coded_tables`):

* ``responses(sys, team, query, fact, single)``: one row per hop-0 run row;
* ``judgments(query, fact, category, ord)``: category 0 correct, 1 wrong, 2 inexact, 3 ignore;
  ``ord`` = file order;
* ``queries(query, single, judged)``: the hop-0 queries, ``single`` = 1 for a single-valued slot,
  ``judged`` = 1 when the query has a judgment.
"""

from __future__ import annotations

#: Category codes of the ``judgments`` table (4 = unassessed, for responses).
CATEGORY_CODES = {"correct": 0, "wrong": 1, "inexact": 2, "ignore": 3}

#: Per fact: whether one team output it (``teams`` = 1; 2 means two or more) and which.
#: MIN = MAX tells one team from several without the cost of COUNT(DISTINCT).
FACT_TEAMS = """
fact_teams AS (
    SELECT fact, CASE WHEN MIN(team) = MAX(team) THEN 1 ELSE 2 END AS teams, MIN(team) AS owner
    FROM responses GROUP BY fact
)"""

#: The assessment a response is matched to: a correct one if any, else the first in file order.
CHOSEN = """
chosen AS (
    SELECT fact, category FROM (
        SELECT fact, category,
               ROW_NUMBER() OVER (
                   PARTITION BY fact
                   ORDER BY CASE WHEN category = 0 THEN 0 ELSE 1 END, ord
               ) AS pick
        FROM judgments
    ) ranked
    WHERE pick = 1
)"""

#: Per-system official counts over ``classified(sys, query, fact, single, category, post)``:
#: one right response per (system, fact), or per (system, query) for a single-valued slot.
COUNTS = """
SELECT sys,
       COUNT(*) AS outputs,
       SUM(CASE WHEN category < 4 THEN 1 ELSE 0 END) AS judged,
       SUM(CASE WHEN category = 0 THEN 1 ELSE 0 END) AS assessed_correct,
       SUM(CASE WHEN category = 1 THEN 1 ELSE 0 END) AS assessed_wrong,
       SUM(CASE WHEN category = 2 THEN 1 ELSE 0 END) AS assessed_inexact,
       SUM(CASE WHEN category = 3 THEN 1 ELSE 0 END) AS assessed_ignore,
       SUM(CASE WHEN category = 4 THEN 1 ELSE 0 END) AS unassessed,
       SUM(CASE WHEN post = 'right' THEN 1 ELSE 0 END) AS eligible,
       COUNT(DISTINCT CASE WHEN post = 'right'
                           THEN CASE WHEN single = 1 THEN -1 - query ELSE fact END END) AS first_right,
       SUM(CASE WHEN post = 'wrong' THEN 1 ELSE 0 END) AS wrong_rows
FROM classified
GROUP BY sys
ORDER BY sys"""

_POST = """
    CASE category WHEN 0 THEN 'right' WHEN 1 THEN 'wrong' WHEN 2 THEN '{inexact}'
                  WHEN 3 THEN 'ignored' ELSE '{unassessed}' END AS post"""

_CLASSIFIED = (
    """,
classified AS (
    SELECT sys, query, fact, single, category,"""
    + _POST
    + """
    FROM matched
)"""
)

#: The official census (fact-matched bundles), per system.  An unassessed response to a query
#: nobody judged is ignored whatever the policy (trec_eval skips topics absent from the qrels);
#: ``evaluated`` counts the queries a system answered that have a judgment.
OFFICIAL_COUNTS = (
    "WITH"
    + CHOSEN
    + """,
matched AS (
    SELECT r.sys, r.query, r.fact, r.single, COALESCE(c.category, 4) AS category,
           q.judged AS judged_query
    FROM responses r
    LEFT JOIN chosen c ON r.fact = c.fact
    LEFT JOIN queries q ON r.query = q.query
),
classified AS (
    SELECT sys, query, fact, single, category, judged_query,
           CASE WHEN category = 4 AND judged_query = 0 THEN 'ignored' ELSE post0 END AS post
    FROM (
        SELECT sys, query, fact, single, category, judged_query,"""
    + _POST.replace("AS post", "AS post0")
    + """
        FROM matched
    ) m
)"""
    + COUNTS.replace(
        "       SUM(CASE WHEN post = 'wrong' THEN 1 ELSE 0 END) AS wrong_rows\n",
        "       SUM(CASE WHEN post = 'wrong' THEN 1 ELSE 0 END) AS wrong_rows,\n"
        "       COUNT(DISTINCT CASE WHEN judged_query = 1 THEN query END) AS evaluated\n",
    )
)

#: Leave-one-team-out: each response on a fact only its own team output loses its assessment.
LEAVE_TEAM_OUT_COUNTS = (
    "WITH"
    + CHOSEN
    + ","
    + FACT_TEAMS
    + """,
matched AS (
    SELECT r.sys, r.query, r.fact, r.single,
           CASE WHEN ft.teams = 1 AND ft.owner = r.team THEN 4
                ELSE COALESCE(c.category, 4) END AS category
    FROM responses r
    LEFT JOIN chosen c ON r.fact = c.fact
    LEFT JOIN fact_teams ft ON r.fact = ft.fact
)"""
    + _CLASSIFIED
    + COUNTS
)

#: CS-Score's recall denominator: distinct correct or inexact facts per hop-0 query (one class
#: at most for a single-valued slot), summed.
GROUND_TRUTH = """
WITH classed AS (
    SELECT DISTINCT j.query, j.fact, q.single
    FROM judgments j JOIN queries q ON j.query = q.query
    WHERE j.category IN (0, 2)
),
per_query AS (
    SELECT query, COUNT(*) AS n, MAX(single) AS single FROM classed GROUP BY query
)
SELECT COALESCE(SUM(CASE WHEN single = 1 THEN 1 ELSE n END), 0) AS gt FROM per_query"""

#: Per team: classes of the recall denominator that vanish with the team's unique facts (a
#: single-valued query's one class vanishes when all its classes are the team's).
GROUND_TRUTH_LOST = (
    "WITH"
    + FACT_TEAMS
    + """,
classed AS (
    SELECT DISTINCT j.query, j.fact, q.single
    FROM judgments j JOIN queries q ON j.query = q.query
    WHERE j.category IN (0, 2)
),
owned AS (
    SELECT c.query, c.fact, c.single, COALESCE(ft.teams, 0) AS teams, ft.owner
    FROM classed c LEFT JOIN fact_teams ft ON c.fact = ft.fact
),
lost_multi AS (
    SELECT owner AS team, COUNT(*) AS lost FROM owned
    WHERE single = 0 AND teams = 1 GROUP BY owner
),
single_queries AS (
    SELECT query, MIN(owner) AS lo, MAX(owner) AS hi, MIN(teams) AS tmin, MAX(teams) AS tmax
    FROM owned WHERE single = 1 GROUP BY query
),
lost_single AS (
    SELECT lo AS team, COUNT(*) AS lost FROM single_queries
    WHERE tmin = 1 AND tmax = 1 AND lo = hi GROUP BY lo
),
both_kinds AS (
    SELECT team, lost FROM lost_multi UNION ALL SELECT team, lost FROM lost_single
)
SELECT team, SUM(lost) AS lost FROM both_kinds GROUP BY team ORDER BY team"""
)
