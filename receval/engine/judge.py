"""The judge table on the engine path: ``score --estimator ppi`` and the judge audit without
the output rows (issue 35 × issue 38).

What the prediction-powered estimator (:mod:`receval.estimators.ppi`) and the judge audit
(:mod:`receval.judge_audit`) read of the runs is a handful of sums over every system's distinct
facts, each weighted by a function of the fact's judge scores:

* the control's known per-sampler expectations (four m × m sums over the pool, the self-join
  of :mod:`receval.engine.judge_totals`, Chaganty et al. 2017 §3; Angelopoulos et al. 2023
  eq. 1) and the per-system Σ t_i s, for the raw score s and for every calibrated map g that
  ppi fits on a fold's labels (the logistic map of a probability judge; the per-judge
  isotonic × per-query calibration and combination of several or graded judges);
* per judge and system, the audit's implied precision Σ t_i s_j and the outputs it did not
  grade; per judge, the pool facts it did not grade and its mean over those it did.

Every such map is a function of a fact's **key**: with one probability judge its score; with
several judges or a declared scale its query, every judge's level (:func:`receval.judge.judge_levels`,
computed over the judge table's facts exactly as the loader's fact order gives them) and its
mean normalised grade.  :class:`EngineJudge` numbers the keys (at most one per judged fact,
plus one "not graded" key per query), the engine tags every pool fact with its key, and a map
is sent to the engine as one value per key: the sums are then the same SQL for every map, and
Python holds per-key and per-system arrays only, never a row per output.

The judge table itself is read and checked by the loader's own functions
(:func:`receval.judge.check_judge_table`, :func:`receval.judge.dedupe_judge`): the same
``file:line`` errors for a grade outside the declared scale or one judge grading a fact twice
differently (the message numbers the fact among the judge table's facts, not the task's).

Scope (:func:`receval.engine.score.unsupported` refuses the rest): the uniform design with
``--weighting size`` (every system's mixture is q₀), no ``--cluster-queries`` with ppi, no
anytime intervals with ppi, no equivalence classes.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from receval.engine.base import Engine
    from receval.engine.sampled_data import SmallTables
    from receval.engine.summary import RunSummary
    from receval.estimators.judge_calibration import JudgeCalibration
    from receval.estimators.ppi import JudgeTotals
    from receval.estimators.sample_data import SampleData

#: per pool fact: its key (its own, or its query's "not graded" key) and whether it is graded
POOL_KEYS = """
SELECT p.query_id, p.a, coalesce(k.key, mk.key) AS key,
       CASE WHEN k.key IS NULL THEN 0 ELSE 1 END AS scored
FROM (SELECT DISTINCT query_id, a FROM judge_pairs) p
LEFT JOIN judge_keys k ON p.query_id = k.query_id AND p.a = k.a
LEFT JOIN judge_missing mk ON p.query_id = mk.query_id
"""

#: per pool fact: q₀ = Σ c_k over the systems that output it (the balance-heuristic mixture)
POOL_Q0 = """
SELECT p.query_id, p.a, sum(c.c) AS q0
FROM judge_pairs p JOIN judge_systems c ON p.code = c.code
GROUP BY p.query_id, p.a
"""

#: the four (m × m) sums of :mod:`receval.engine.judge_totals` with v the map's value per key
PAIR_SUMS = """
SELECT x.code AS i, y.code AS k,
       sum(t.t * v.v / f.q0) AS ps, sum(t.t / f.q0) AS pm,
       sum(v.v / f.q0) AS gs, sum(1.0 / f.q0) AS g1
FROM judge_pairs x
JOIN judge_pairs y ON x.query_id = y.query_id AND x.a = y.a
JOIN judge_q0 f ON x.query_id = f.query_id AND x.a = f.a
JOIN judge_pool k ON x.query_id = k.query_id AND x.a = k.a
JOIN judge_values v ON k.key = v.key
JOIN judge_targets t ON x.code = t.code AND x.query_id = t.query_id
WHERE f.q0 > 0
GROUP BY x.code, y.code
"""

#: per system: Σ t v over its outputs and how many of them are graded
SYSTEM_SUMS = """
SELECT x.code AS i, sum(t.t * v.v) AS judge_precision, sum(k.scored) AS scored
FROM judge_pairs x
JOIN judge_pool k ON x.query_id = k.query_id AND x.a = k.a
JOIN judge_values v ON k.key = v.key
JOIN judge_targets t ON x.code = t.code AND x.query_id = t.query_id
GROUP BY x.code
"""

#: per judge j and system: Σ t s_j and Σ t over its outputs j graded, and their number
AUDIT_SUMS = """
SELECT x.code AS i, g.j, sum(t.t * g.s) AS ts, sum(t.t) AS tt, count(*) AS n
FROM judge_pairs x
JOIN judge_long g ON x.query_id = g.query_id AND x.a = g.a
JOIN judge_targets t ON x.code = t.code AND x.query_id = t.query_id
GROUP BY x.code, g.j
"""

#: per system: Σ t over its outputs
TARGET_SUMS = """
SELECT x.code AS i, sum(t.t) AS tt
FROM judge_pairs x JOIN judge_targets t ON x.code = t.code AND x.query_id = t.query_id
GROUP BY x.code
"""

#: per judge: the pool facts it graded and the sum of their normalised grades
AUDIT_POOL = """
SELECT g.j, count(*) AS n, sum(g.s) AS s
FROM (SELECT DISTINCT query_id, a FROM judge_pairs) p
JOIN judge_long g ON p.query_id = g.query_id AND p.a = g.a
GROUP BY g.j
"""


@dataclass(frozen=True)
class JudgeTable:
    """The checked judge table: one row per (judge, fact) with ``query_id, answer``
    (normalised), ``judge, judge_score`` and ``fact`` (numbered over the table's own facts in
    sorted (query_id, answer) order, the order the loader's fact ids give them)."""

    frame: pd.DataFrame
    names: tuple[str, ...]
    scales: np.ndarray  # (J, 2)
    calibrated: bool  # several judges or a declared scale (ppi calibrates and combines them)


def read_judge_table(bundle, small: SmallTables) -> JudgeTable | None:
    """The bundle's judge table (None without one), checked as the loader checks it
    (BundleError naming the file and line); its path joins ``small.files``."""
    from receval.bundle.sources import _table_source
    from receval.judge import check_judge_table, dedupe_judge
    from receval.task import normalize_answers

    files: dict = {}
    known = set(small.queries["query_id"])
    frame = check_judge_table(_table_source(bundle.root, "judge", files), known, small.config)
    if frame is None:
        return None
    small.files.update(files)
    frame["query_id"] = frame["query_id"].astype(str).str.strip()
    frame["answer"] = normalize_answers(frame["answer"].astype(str), small.config.matching)
    frame["fact"] = frame.groupby(["query_id", "answer"], sort=True).ngroup()
    frame = dedupe_judge(frame, files["judge"])
    names = tuple(sorted(set(frame["judge"].astype(str))))
    scales = np.array([small.config.scale_of(n) for n in names], float).reshape(len(names), 2)
    calibrated = len(names) > 1 or bool(small.config.judge_graded)
    keep = frame[["query_id", "answer", "judge", "judge_score", "fact"]]
    return JudgeTable(keep.reset_index(drop=True), names, scales, calibrated)


@dataclass(frozen=True)
class JudgeKeys:
    """The keys every score map is a function of (module docstring): per key its query code,
    every judge's level (``levels`` (K, J), the "not graded" level ``counts[j]``) and the raw
    score s (NaN for a query's "not graded" key); per judged fact its key; per query its
    "not graded" key."""

    s: np.ndarray  # (K,)
    query: np.ndarray  # (K,) codes over ``queries``
    levels: np.ndarray  # (K, J)
    counts: np.ndarray  # (J,)
    fact_key: np.ndarray  # (judged facts,)
    missing_key: np.ndarray  # (Q,)
    queries: pd.Index


def judge_keys(table: JudgeTable, queries: pd.Index) -> JudgeKeys:
    """Number the keys of :class:`JudgeTable` ``table`` (module docstring)."""
    from receval.judge import judge_levels

    frame = table.frame
    n_facts = int(frame["fact"].max()) + 1 if len(frame) else 0
    col = pd.Index(table.names).get_indexer(frame["judge"].astype(str))
    grades = np.full((n_facts, len(table.names)), np.nan)
    grades[frame["fact"].to_numpy(np.int64), col] = frame["judge_score"].to_numpy(float)
    first = frame.drop_duplicates("fact").sort_values("fact")
    fact_query = queries.get_indexer(first["query_id"])
    if table.calibrated:
        lo, hi = table.scales[:, 0], table.scales[:, 1]
        s = np.nanmean((grades - lo) / (hi - lo), axis=1) if n_facts else np.zeros(0)
        levels, counts = judge_levels(grades)
        parts = np.column_stack([fact_query, levels, s]) if n_facts else np.zeros((0, 2))
    else:
        s = grades[:, 0] if n_facts else np.zeros(0)
        counts = np.zeros(1, np.int64)
        levels = np.zeros((n_facts, 1), np.int64)
        parts = s[:, None]
    uniq, fact_key = (
        np.unique(parts, axis=0, return_inverse=True) if n_facts else (parts, np.zeros(0, int))
    )
    fact_key = np.asarray(fact_key, np.int64).reshape(-1)
    K, Q = len(uniq), len(queries)
    one = np.unique(fact_key, return_index=True)[1]  # a fact of every key, in key order
    key_s = np.concatenate([s[one], np.full(Q, np.nan)])
    key_query = np.concatenate([fact_query[one], np.arange(Q)])
    key_levels = np.vstack([levels[one], np.broadcast_to(counts, (Q, counts.size))])
    return JudgeKeys(
        s=key_s,
        query=key_query.astype(np.int64),
        levels=key_levels.astype(np.int64),
        counts=np.asarray(counts, np.int64),
        fact_key=fact_key,
        missing_key=np.arange(K, K + Q, dtype=np.int64),
        queries=queries,
    )


@dataclass(eq=False)
class EngineJudge:
    """The judge on the engine path: its table's keys, the small facts' grades, and a live
    engine session over the runs (view ``normed``, table ``judge_pairs``) that computes the
    sums of the module docstring for any map of the keys.  The session is closed with this
    object (or at exit) when it was opened for it."""

    table: JudgeTable
    keys: JudgeKeys
    small: SmallTables
    summary: RunSummary
    engine: Engine
    #: per small fact: its key, whether it is graded, every judge's raw grade (NaN: none)
    small_key: np.ndarray = field(repr=False)
    small_scored: np.ndarray = field(repr=False)
    small_grades: np.ndarray = field(repr=False)
    #: the judges' mean over the graded pool facts (the score of an ungraded fact)
    fill: float = 0.5
    pool_facts: int = 0
    #: per judge: pool facts it graded, and the sum of their normalised grades
    pool_graded: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    pool_sum: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    _q0: dict = field(default_factory=dict, repr=False)
    _targets: dict = field(default_factory=dict, repr=False)

    # -- what judge.py's functions ask of a task ----------------------------------------

    def __len__(self) -> int:
        return len(self.table.frame)

    @property
    def names(self) -> tuple[str, ...]:
        return self.table.names

    @property
    def calibrated(self) -> bool:
        return self.table.calibrated

    def grades(self):
        """:class:`receval.judge.JudgeGrades` over the small facts (labelled, drawn, units)."""
        from receval.judge import JudgeGrades

        return JudgeGrades(self.table.names, self.table.scales, self.small_grades)

    def pool_missing(self) -> dict[str, int]:
        """Per judge, the pool facts it did not grade."""
        return {
            n: int(self.pool_facts - self.pool_graded[j]) for j, n in enumerate(self.table.names)
        }

    # -- the calibrated maps ---------------------------------------------------------------

    def calibration(self, train: np.ndarray, label: np.ndarray) -> JudgeCalibration:
        """:func:`receval.estimators.judge_calibration.task_calibration` over the keys: fitted
        on the small facts ``train`` (ids) with labels ``label``; ``per_judge`` and
        ``combined`` are per key (what :meth:`totals` maps)."""
        from receval.estimators.judge_calibration import calibrate_levels

        keys = self.keys
        return calibrate_levels(
            keys.levels,
            keys.counts,
            keys.query,
            self.small_key[np.asarray(train, np.int64)],
            label,
            self.table.names,
        )

    def key_scores(self) -> np.ndarray:
        """(K,) the raw score of every key, the fill for the "not graded" keys."""
        return np.where(np.isnan(self.keys.s), self.fill, self.keys.s)

    # -- the sums ---------------------------------------------------------------------------

    def totals(self, data: SampleData, target: str, transform=None) -> JudgeTotals:
        """:func:`receval.estimators.ppi.judge_totals` (``--weighting size``, no query
        clusters) for the map ``transform`` of the key scores (None: the raw scores)."""
        from receval.engine.judge_totals import _expectations
        from receval.estimators.ppi import JudgeTotals

        engine, summary = self.engine, self.summary
        m = data.m
        sizes = np.asarray(summary.sizes, float)
        N = float(data.sampler_n.sum())
        values = self.key_scores()
        if transform is not None:
            values = np.asarray(transform(values), float)
        self._prepare(data, target)
        engine.register("judge_values", pd.DataFrame({"key": np.arange(values.size), "v": values}))
        sums = engine.query(PAIR_SUMS)
        per_system = engine.query(SYSTEM_SUMS)
        grams = {}
        for name in ("ps", "pm", "gs", "g1"):
            grams[name] = np.zeros((m, m))
            grams[name][sums["i"].to_numpy(np.int64), sums["k"].to_numpy(np.int64)] = sums[name]
        expected_score, expected_mass = _expectations(data, grams, sizes, N)
        i = per_system["i"].to_numpy(np.int64)
        judge_precision = np.zeros(m)
        judge_precision[i] = per_system["judge_precision"].to_numpy(float)
        scored = np.zeros(m)
        scored[i] = per_system["scored"].to_numpy(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = scored / sizes
        at = self.small_key[data.facts]
        return JudgeTotals(
            score_drawn=values[at],
            scored_drawn=self.small_scored[data.facts],
            expected_score=expected_score,
            expected_mass=expected_mass,
            scored_share=share,
            judge_precision=judge_precision,
        )

    def _prepare(self, data: SampleData, target: str) -> None:
        """Tables ``judge_systems`` (c_k), ``judge_q0`` and ``judge_targets`` for ``data``'s
        samplers and ``target`` (kept while they stay the same)."""
        summary, engine = self.summary, self.engine
        m = data.m
        sizes = np.asarray(summary.sizes, float)
        N = float(data.sampler_n.sum())
        n_system = np.bincount(data.sampler_system, weights=data.sampler_n, minlength=m)
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(sizes > 0, n_system / (N * sizes), 0.0) if N > 0 else np.zeros(m)
        if self._q0.get("c") is None or not np.array_equal(self._q0["c"], c):
            frame = pd.DataFrame({"system": summary.systems, "code": np.arange(m), "c": c})
            engine.register("judge_systems", frame)
            engine.create_table("judge_q0", POOL_Q0)
            self._q0["c"] = c
        self._target(target)

    def _target(self, target: str) -> None:
        from receval.engine.judge_totals import _targets

        if self._targets.get("now") != target:
            self.engine.register("judge_targets", _targets(self.summary, target))
            self._targets["now"] = target

    def audit(self, target: str) -> dict[str, np.ndarray]:
        """Per judge (J, m): Σ t s_j and Σ t over each system's outputs the judge graded, their
        number; (m,) Σ t over each system's outputs."""
        engine = self.engine
        self._target(target)
        m, J = len(self.summary.systems), len(self.table.names)
        sums = engine.query(AUDIT_SUMS)
        out = {k: np.zeros((J, m)) for k in ("ts", "tt", "n")}
        at = (sums["j"].to_numpy(np.int64), sums["i"].to_numpy(np.int64))
        for k in out:
            out[k][at] = sums[k].to_numpy(float)
        whole = engine.query(TARGET_SUMS)
        out["total"] = np.zeros(m)
        out["total"][whole["i"].to_numpy(np.int64)] = whole["tt"].to_numpy(float)
        return out

    def judge_pool_figures(self, j: int, systems: list[str], target: str):
        """(fill, implied (m,), imputed outputs (m,), pool facts not graded) of judge ``j``
        (:func:`receval.judge_audit.judge_rows`), the sums over ``systems``' outputs."""
        cache = self._targets.setdefault("audit", {})
        if target not in cache:
            cache[target] = self.audit(target)
        sums = cache[target]
        order = pd.Index(self.summary.systems).get_indexer(systems)
        n = self.pool_graded[j]
        fill = float(self.pool_sum[j] / n) if n > 0 else 0.5
        implied = sums["ts"][j] + fill * (sums["total"] - sums["tt"][j])
        imputed = np.asarray(self.summary.sizes, float) - sums["n"][j]
        return (
            fill,
            implied[order],
            imputed[order].astype(np.int64),
            int(self.pool_facts - n),
        )


def engine_judge(bundle, small: SmallTables, summary: RunSummary, engine: Any, own: bool):
    """The :class:`EngineJudge` of ``bundle`` (None without a judge table) over the engine
    session ``engine`` (its runs registered, view ``normed``), closed with the object when
    ``own``."""
    table = read_judge_table(bundle, small)
    if table is None:
        if own:
            engine.close()
        return None
    queries = pd.Index(sorted(set(small.queries["query_id"])), dtype=object)
    keys = judge_keys(table, queries)
    frame = table.frame
    first = frame.drop_duplicates("fact").sort_values("fact")
    h = engine.dialect.hash64("answer")
    codes = pd.DataFrame(
        {"system": summary.systems, "code": np.arange(len(summary.systems), dtype=np.int64)}
    )
    engine.register("judge_codes", codes)
    engine.create_table(
        "judge_pairs",
        f"SELECT DISTINCT c.code, n.query_id, {h} AS a FROM normed n "
        "JOIN judge_codes c ON n.system = c.system",
    )
    engine.register(
        "judge_key_answers",
        pd.DataFrame(
            {
                "query_id": first["query_id"].to_numpy(object),
                "answer": first["answer"].to_numpy(object),
                "key": keys.fact_key,
            }
        ),
    )
    engine.create_table("judge_keys", f"SELECT query_id, {h} AS a, key FROM judge_key_answers")
    engine.register(
        "judge_missing",
        pd.DataFrame({"query_id": queries.to_numpy(object), "key": keys.missing_key}),
    )
    engine.create_table("judge_pool", POOL_KEYS)
    _register_long(engine, table, h)
    small_key, small_scored, small_grades = _small_facts(table, keys, small)
    counts = engine.query("SELECT key, count(*) AS n FROM judge_pool WHERE scored = 1 GROUP BY key")
    pool = engine.query("SELECT count(*) AS n FROM judge_pool")
    graded = engine.query(AUDIT_POOL)
    J = len(table.names)
    pool_graded, pool_sum = np.zeros(J), np.zeros(J)
    pool_graded[graded["j"].to_numpy(np.int64)] = graded["n"].to_numpy(float)
    pool_sum[graded["j"].to_numpy(np.int64)] = graded["s"].to_numpy(float)
    n = counts["n"].to_numpy(float)
    fill = float((keys.s[counts["key"].to_numpy(np.int64)] * n).sum() / n.sum()) if n.sum() else 0.5
    judge = EngineJudge(
        table=table,
        keys=keys,
        small=small,
        summary=summary,
        engine=engine,
        small_key=small_key,
        small_scored=small_scored,
        small_grades=small_grades,
        fill=fill,
        pool_facts=int(pool["n"].iloc[0]),
        pool_graded=pool_graded,
        pool_sum=pool_sum,
    )
    if own:
        weakref.finalize(judge, engine.close)
    return judge


def _register_long(engine, table: JudgeTable, h: str) -> None:
    """Table ``judge_long(query_id, a, j, s)``: every judge's normalised grade (clipped to
    [0, 1], as the audit reads it) of every fact it graded."""
    frame = table.frame
    j = pd.Index(table.names).get_indexer(frame["judge"].astype(str))
    lo, hi = table.scales[j, 0], table.scales[j, 1]
    s = np.clip((frame["judge_score"].to_numpy(float) - lo) / (hi - lo), 0.0, 1.0)
    engine.register(
        "judge_long_answers",
        pd.DataFrame({"query_id": frame["query_id"].to_numpy(object),
                      "answer": frame["answer"].to_numpy(object), "j": j, "s": s}),
    )  # fmt: skip
    engine.create_table("judge_long", f"SELECT query_id, {h} AS a, j, s FROM judge_long_answers")


def _small_facts(table: JudgeTable, keys: JudgeKeys, small: SmallTables):
    """Per small fact: its key, whether it is graded, every judge's raw grade (F, J)."""
    frame = table.frame
    first = frame.drop_duplicates("fact").sort_values("fact")
    lookup = pd.MultiIndex.from_frame(first[["query_id", "answer"]])
    facts = small.facts
    at = lookup.get_indexer(pd.MultiIndex.from_frame(facts[["query_id", "answer"]]))
    scored = at >= 0
    q = keys.queries.get_indexer(facts["query_id"])
    key = np.where(scored, keys.fact_key[np.maximum(at, 0)] if at.size else at, 0)
    key = np.where(scored, key, keys.missing_key[np.maximum(q, 0)] if q.size else key)
    grades = np.full((len(facts), len(table.names)), np.nan)
    to_small = np.full(len(first), -1, np.int64)
    to_small[at[scored]] = np.flatnonzero(scored)
    rows = to_small[frame["fact"].to_numpy(np.int64)]
    ok = rows >= 0
    col = pd.Index(table.names).get_indexer(frame["judge"].astype(str))
    grades[rows[ok], col[ok]] = frame["judge_score"].to_numpy(float)[ok]
    return key.astype(np.int64), scored, grades


def open_engine_judge(bundle, small: SmallTables, summary: RunSummary, engine: Any):
    """:func:`engine_judge` over a session of its own on the bundle's Parquet runs (``engine``
    a name: a new one, closed with the judge; a connected engine: used and left open)."""
    from receval.engine.base import connect
    from receval.engine.sampled import register_runs
    from receval.engine.summary import register_normed

    own = engine is None or isinstance(engine, str)
    name = engine or "duckdb"
    con = connect(name, **({"on_disk": True} if name == "duckdb" else {})) if own else engine
    try:
        register_runs(con, bundle.parquet_runs())
        register_normed(con, small.config.matching)
        return engine_judge(bundle, small, summary, con, own)
    except BaseException:
        if own:
            con.close()
        raise
