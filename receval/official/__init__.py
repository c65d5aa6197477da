"""The official closed-world census (``--estimator official``): TAC Cold Start's CS-Score hop-0
P/R/F1 and trec_eval's set and rank-cutoff measures, over the assessed pool.

One set of rules, three backends that give the same counts (tests check them against each
other), imported one way (each module only from those before it):

1. :mod:`~receval.official.rules` — the rules every backend shares: the policy
   (:class:`~receval.official.rules.OfficialPolicy`), the count columns, hop-0 queries, which
   bundles are fact-matched, counts -> precision / recall / F1.
2. :mod:`~receval.official.sql` — the census's SQL texts (DuckDB and Spark SQL), the only SQL.
3. backends, each giving the per-system (and per-query) counts:
   :mod:`~receval.official.responses` (pandas, response by response: every bundle, TAC's
   provenance matching and equivalence classes included; the reference),
   :mod:`~receval.official.coded` (numpy over integer codes, in process, for fact-matched
   bundles) and :mod:`~receval.official.census` (the SQL texts on an
   :class:`~receval.engine.Engine`: DuckDB, or Spark reading Parquet runs itself).
4. :mod:`~receval.official.scores` — the public functions (``official_scores``,
   ``official_per_query``, ``official_leaderboard``): options, the backend chosen, micro and
   macro averages; its docstring states every rule.
5. :mod:`~receval.official.direct` — the census of a plainly fact-matched bundle counted from
   its run table's codes read straight from Arrow, without building the Task
   (:func:`~receval.official.direct.official_view`, taken by :func:`receval.api.score`).
6. :mod:`~receval.official.estimator` — :class:`~receval.official.estimator.OfficialEstimator`,
   the estimator the registry names ``official``.

:mod:`receval.engine` does not import this package's backends (its Spark reader takes the rules
and the category codes from 1 and 2); the package imports none of its modules itself.
"""
