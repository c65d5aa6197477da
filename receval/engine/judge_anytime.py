"""The judge as the anytime streams' control on the engine path: ``score --estimator ppi
--intervals anytime`` (and ``anytime-asymptotic``) and ``sample --until-decided --estimator
ppi`` without the output rows (issue 35 × issue 38).

In memory the precision streams predict every fresh fact by the judge's score calibrated on the
labels of the stream's earlier rows (:mod:`receval.estimators.judge_stream`): segment c of the
stream has a map g_c of the facts, and per system a logistic map g_ci = σ(a_ci + b_ci logit
g_c).  What the streams read of the runs is, per segment and system,

* Σ_{x ∈ X_i} t_i(x) g_ci(x), the control's exact mean (Angelopoulos et al. 2023, eq. 1), and
* the largest and smallest g_ci(x) over X_i per popularity stratum (the terms' ranges),

everything else (the prediction at a drawn fact, the labelled facts' sums) is read at the drawn
facts only.  Every map is a function of a fact's key (:mod:`receval.engine.judge`):

* a calibrated segment's g_c is :func:`receval.estimators.judge_calibration.calibrate_levels`
  over the **level keys** of :func:`level_keys`, (query, every judge's level) — coarser than
  the judge's own keys, which also hold the mean grade — so one aggregation counts each
  system's facts per (popularity stratum, level key) (:data:`KEY_CELLS`): at most systems × 3
  × queries × the level combinations that occur, whatever the number of distinct scores;
* a segment before the first fit is the raw score: summed over the numbered pool's pairs a
  slice at a time on DuckDB (:func:`raw_sums`, as ppi's pool sums are), from per (system,
  stratum, judge key) cells on Spark.

Python evaluates each segment's maps per cell or pair: the sums add in another order than the
output rows' (equal to ~1e-16 relative; the outputs, rounded as written, are the in-memory
bytes on the test bundles), the extremes are exact.

:func:`stream_controls` returns what :func:`receval.estimators.judge_stream.segment_controls`
returns from the output rows, with the :class:`~receval.estimators.judge_stream.StreamJudge`
indexed by the small tables' facts followed by the judge's keys and the level keys
(:func:`stream_scores`).

Equivalence classes: the facts of classes of two or more leave the aggregation
(``judge_pool.classed``); each such class is a row per system that output a member
(:func:`class_cells`, from :class:`receval.engine.judge_classes.JudgeClasses`), scored at its
canonical fact as in memory, in the stratum of the systems that output a member.  A
probability judge's levels are then taken over the grades with each canonical fact graded by
its members' highest grade (:data:`GRADED_FACTS`, as
:func:`receval.estimators.judge_calibration.class_grades`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from receval.engine.base import one_line_oom

if TYPE_CHECKING:
    from receval.engine.judge import EngineJudge
    from receval.estimators.judge_stream import StreamJudge
    from receval.estimators.sample_data import SampleData

#: per system, popularity stratum (systems that output the fact, capped at 3, minus one) and
#: key of the judge (``{key}``), the system's distinct facts (``{query}``: and its query); the
#: facts of classes of two or more left out (their rows: :func:`class_cells`)
KEY_CELLS = """
WITH pop AS (SELECT query_id, a, count(*) AS n FROM judge_pairs GROUP BY query_id, a)
SELECT x.code AS code, least(pop.n, 3) - 1 AS b, {key} AS key{query}, count(*) AS n
FROM judge_pairs x
JOIN pop ON x.query_id = pop.query_id AND x.a = pop.a
JOIN judge_pool k ON x.query_id = k.query_id AND x.a = k.a
{join}
WHERE k.classed = 0
GROUP BY x.code, least(pop.n, 3) - 1, {key}{query}
"""
#: the level key of each pool fact: its own, or its query's "not graded" one
LEVEL_KEY_JOIN = """LEFT JOIN stream_level_facts lk ON x.query_id = lk.query_id AND x.a = lk.a
LEFT JOIN stream_level_missing mk ON x.query_id = mk.query_id"""

#: one probability judge's grades as the calibration reads them: a class's canonical fact
#: graded by its members' highest grade (``stream_override``; as
#: :data:`receval.engine.judge.CALIBRATED_FACTS`, which does so for calibrated judges only)
GRADED_FACTS = """
SELECT coalesce(o.j, f.j) AS j, coalesce(o.query_id, f.query_id) AS query_id,
       coalesce(o.answer, f.answer) AS answer, coalesce(o.grade, f.grade) AS grade, f.grade AS raw
FROM judge_facts f FULL OUTER JOIN stream_override o
ON f.j = o.j AND f.query_id = o.query_id AND f.answer = o.answer
"""

#: the level keys: (query, every judge's level) of every fact of the judge table
LEVEL_KEYS = """
SELECT query_id, answer, {cols}, dense_rank() OVER (ORDER BY query_id, {cols}) - 1 AS lkey
FROM {source}
"""


@dataclass(frozen=True)
class LevelKeys:
    """The keys the calibrated maps are functions of: per key its query code and every judge's
    level (``levels`` (L, J), ``counts`` (J,) levels per judge), per small fact its key
    (``small``), and the per (system, stratum, key) fact counts ``cells`` (code, b, key, n)."""

    levels: np.ndarray
    counts: np.ndarray
    query: np.ndarray
    small: np.ndarray
    cells: pd.DataFrame


@dataclass(frozen=True)
class StreamCells:
    """What :func:`stream_controls` reads of the runs, aggregated once per view: the raw
    score's cells (code, b, key, n[, query_id]; None on DuckDB, where the raw segments' sums
    stream over the numbered pool instead, :func:`raw_sums`) and :class:`LevelKeys`."""

    raw: pd.DataFrame | None
    levels: LevelKeys
    macro: bool = False


#: the cells of each live judge session, per target
_CELLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def stream_cells(judge: EngineJudge, target: str) -> StreamCells:
    """:class:`StreamCells` of ``judge``'s session (kept while the judge lives, per
    ``target``: the bounds and the paired tests read them)."""
    cache = _CELLS.setdefault(judge, {})
    if target not in cache:
        with one_line_oom():
            cache[target] = _stream_cells(judge, target)
    return cache[target]


def _stream_cells(judge: EngineJudge, target: str) -> StreamCells:
    raw = None
    if judge.numbered < 0:  # Spark: no numbered pool; the raw keys' cells from the engine
        # one probability judge's keys are global scores: macro targets need the query
        query = ", x.query_id" if target != "micro" and not judge.calibrated else ""
        raw = _sorted(judge.engine.query(KEY_CELLS.format(key="k.key", query=query, join="")))
    return StreamCells(raw, level_keys(judge), target != "micro")


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    """The cells in a fixed order (the engine returns groups in any order)."""
    cols = ["code", "b", "key"] + (["query_id"] if "query_id" in frame else [])
    return frame.sort_values(cols, ignore_index=True)


def level_keys(judge: EngineJudge) -> LevelKeys:
    """:class:`LevelKeys`: the judge table's facts numbered by (query, every judge's level)
    (:data:`LEVEL_KEYS`; for one probability judge its levels of :func:`probability_levels`),
    each query's "not graded" key after them; tables ``stream_level_keys``,
    ``stream_level_facts`` and ``stream_level_missing``, and the per (system, stratum, key)
    cells."""
    engine, queries = judge.engine, judge.keys.queries
    if judge.calibrated:
        counts = judge.keys.counts
        cols = [f"l{j}" for j in range(counts.size)]
        source = "judge_fact_keys"
    else:
        counts = probability_levels(judge)
        cols, source = (
            ["l0"],
            ("(SELECT query_id, answer, level AS l0 FROM stream_levels WHERE j = 0) x"),
        )
    listed = ", ".join(cols)
    engine.create_table("stream_level_keys", LEVEL_KEYS.format(cols=listed, source=source))
    h = engine.dialect.hash64("answer")
    engine.create_table(
        "stream_level_facts", f"SELECT query_id, {h} AS a, lkey FROM stream_level_keys"
    )
    distinct = engine.query(
        f"SELECT DISTINCT lkey, query_id, {listed} FROM stream_level_keys ORDER BY lkey"
    )
    L, Q = len(distinct), len(queries)
    missing = np.arange(L, L + Q, dtype=np.int64)
    engine.register(
        "stream_level_missing",
        pd.DataFrame({"query_id": queries.to_numpy(object), "lkey": missing}),
    )
    sql = KEY_CELLS.format(key="coalesce(lk.lkey, mk.lkey)", query="", join=LEVEL_KEY_JOIN)
    levels = distinct[cols].to_numpy(np.int64).reshape(L, len(cols))
    return LevelKeys(
        levels=np.vstack([levels, np.broadcast_to(counts, (Q, counts.size))]).astype(np.int64),
        counts=np.asarray(counts, np.int64),
        query=np.concatenate([queries.get_indexer(distinct["query_id"]), np.arange(Q)]),
        small=_small_level_keys(judge, missing),
        cells=_sorted(engine.query(sql)),
    )


def _small_level_keys(judge: EngineJudge, missing: np.ndarray) -> np.ndarray:
    """Every small fact's level key (its query's "not graded" key when no judge graded it)."""
    small = judge.small.facts
    frame = pd.DataFrame(
        {
            "query_id": small["query_id"].to_numpy(object),
            "answer": small["answer"].to_numpy(object),
            "fact": np.arange(len(small), dtype=np.int64),
        }
    )
    judge.engine.register("stream_small", frame)
    keyed = judge.engine.query(
        "SELECT s.fact, k.lkey FROM stream_small s JOIN stream_level_keys k "
        "ON s.query_id = k.query_id AND s.answer = k.answer"
    )
    q = judge.keys.queries.get_indexer(small["query_id"])
    out = missing[np.maximum(q, 0)] if len(small) else np.zeros(0, np.int64)
    out = out.copy()
    out[keyed["fact"].to_numpy(np.int64)] = keyed["lkey"].to_numpy(np.int64)
    return out.astype(np.int64)


def probability_levels(judge: EngineJudge) -> np.ndarray:
    """One probability judge's levels as the calibration takes them (table ``stream_levels``:
    :data:`receval.engine.judge.LEVELS` over :data:`GRADED_FACTS`, the classes' canonical facts
    graded by their members' highest grade); returns its number of levels (1,)."""
    from receval.engine.judge import LEVEL_STATS, LEVELS
    from receval.judge import BINS, MAX_LEVELS

    engine = judge.engine
    override = class_override(judge)
    if len(override):
        engine.register("stream_override", override)
        engine.create_table("stream_graded_facts", GRADED_FACTS)
    else:  # (Spark cannot register an empty frame)
        engine.create_view("stream_graded_facts", "SELECT *, grade AS raw FROM judge_facts")
    stats = engine.query(LEVEL_STATS.replace("judge_calibrated_facts", "stream_graded_facts"))
    n = int(stats["n"].iloc[0]) if len(stats) else 0
    d = int(stats["d"].iloc[0]) if len(stats) else 0
    engine.register(
        "stream_stats",
        pd.DataFrame({"j": [0], "n": [n], "binned": [int(d > MAX_LEVELS)],
                      "lo": judge.table.scales[:1, 0], "hi": judge.table.scales[:1, 1]}),
    )  # fmt: skip
    levels = LEVELS.format(bins=BINS).replace("judge_calibrated_facts", "stream_graded_facts")
    engine.create_table("stream_levels", levels.replace("judge_stats", "stream_stats"))
    return np.array([BINS if d > MAX_LEVELS else max(d, 1)], np.int64)


def class_override(judge: EngineJudge) -> pd.DataFrame:
    """``j, query_id, answer, grade``: each class's canonical fact graded by the highest grade
    of its members (:func:`receval.estimators.judge_calibration.class_grades`; none without
    classes)."""
    frame = pd.DataFrame(
        {
            "j": np.zeros(0, np.int64),
            "query_id": np.zeros(0, object),
            "answer": np.zeros(0, object),
            "grade": np.zeros(0),
        }
    )
    classes = judge.classes
    if classes is None:
        return frame
    grades = judge.small_grades[classes.group, 0]
    ok = ~np.isnan(grades)
    best = np.full(classes.heads.size, -np.inf)
    np.maximum.at(best, classes.of[ok], grades[ok])
    have = np.flatnonzero(np.isfinite(best))
    heads = judge.small.facts.iloc[classes.heads[have]]
    return pd.DataFrame(
        {
            "j": np.zeros(have.size, np.int64),
            "query_id": heads["query_id"].to_numpy(object),
            "answer": heads["answer"].to_numpy(object),
            "grade": best[have],
        }
    )


def class_cells(judge: EngineJudge) -> pd.DataFrame:
    """The classes of two or more facts as the streams' rows, one per (class, system that
    output a member): ``code``, ``b`` (the systems that output a member, capped at 3, minus
    one), ``fact`` (the class's canonical small fact: its score is the class's) and ``query``
    (its query code); empty without classes."""
    classes = judge.classes
    if classes is None:
        return pd.DataFrame({k: np.zeros(0, np.int64) for k in ("code", "b", "fact", "query")})
    cls, code = np.nonzero(classes.count > 0)
    popularity = (classes.count > 0).sum(axis=1)
    return pd.DataFrame(
        {
            "code": code.astype(np.int64),
            "b": np.minimum(popularity[cls], 3) - 1,
            "fact": classes.heads[cls].astype(np.int64),
            "query": classes.query[cls],
        }
    )


def stream_scores(judge: EngineJudge, cells: StreamCells):
    """(raw, calibrate) for :func:`receval.estimators.judge_stream.stream_judge` over the index
    [small facts | raw keys | level keys]: the raw score (NaN over the level keys) and, for the
    labelled small facts ``ids`` with labels ``y``, the calibrated score (NaN over the raw
    keys), each clipped to [0, 1] as in memory."""
    from receval.estimators.judge_calibration import calibrate_levels

    lk = cells.levels
    key_raw = np.clip(judge.key_scores(), 0.0, 1.0)
    L = lk.levels.shape[0]
    raw = np.concatenate([key_raw[judge.small_key], key_raw, np.full(L, np.nan)])
    nan_keys = np.full(key_raw.size, np.nan)

    def calibrate(ids: np.ndarray, y: np.ndarray) -> np.ndarray:
        train = lk.small[np.asarray(ids, np.int64)]
        fit = calibrate_levels(lk.levels, lk.counts, lk.query, train, y, judge.names)
        g = np.clip(fit.combined, 0.0, 1.0)
        return np.concatenate([g[lk.small], nan_keys, g])

    return raw, calibrate


def stream_controls(view: Any, data: SampleData, st: Any, strata: int):
    """(:class:`~receval.estimators.judge_stream.StreamJudge`, Σ_{X_i} t g_ci (C, m), the
    largest and smallest g_ci per system and stratum (C, m, ``strata``)) of the stream ``st``
    of ``data`` on the engine path ``view`` (module docstring; ``strata`` 1: one stratum)."""
    from receval.estimators.judge_stream import stream_judge

    judge = view.engine_judge
    if list(data.systems) != list(judge.summary.systems):
        raise RuntimeError("the judge's system codes are not the sample data's")
    cells = stream_cells(judge, data.target_kind)
    sj = stream_judge(view, data, st, scores=stream_scores(judge, cells))
    return (sj, *segment_sums(view, data, sj, cells, strata))


def segment_sums(view: Any, data: SampleData, sj: StreamJudge, cells: StreamCells, strata: int):
    """Per segment: Σ_{X_i} t g_ci (C, m) and the extremes of g_ci per (system, stratum) (C, m,
    ``strata``): a calibrated segment read at the level keys' cells, a segment whose maps were
    never fitted (the raw score) at the raw keys' cells or streamed over the numbered pool
    (:func:`raw_sums`), and the classes' rows at their canonical facts."""
    from receval.engine.judge import target_matrix

    judge = view.engine_judge
    m, C = data.m, sj.tables.shape[0]
    F, K = len(judge.small_key), judge.keys.s.size
    sums = Sums(
        targets=target_matrix(judge.target_summary, data.target_kind, judge.keys.queries),
        sizes=np.asarray(judge.target_summary.sizes, float),
        macro=cells.macro,
        total=np.zeros((C, m)),
        high=np.zeros((C, m, strata)),
        low=np.ones((C, m, strata)),
    )
    classed = class_cells(judge)
    for c in range(C):
        if not np.isnan(sj.tables[c][F + K :]).all():  # fitted: the level keys
            frame, query = cells.levels.cells, cells.levels.query
            sums.add(c, sj, frame, F + K + frame["key"].to_numpy(np.int64), query)
        elif cells.raw is not None:
            key = cells.raw["key"].to_numpy(np.int64)
            sums.add(c, sj, cells.raw, F + key, judge.keys.query, judge.keys.queries)
        else:
            raw_sums(judge, sj, c, sums)
        sums.add(c, sj, classed, classed["fact"].to_numpy(np.int64), None)
    return sums.total, sums.high, sums.low


@dataclass(frozen=True)
class Sums:
    """The segments' sums being added up (:func:`segment_sums`): ``total`` (C, m), ``high``
    and ``low`` (C, m, B), and the targets they weigh by (``targets`` (m, Q) per system and
    query code, ``sizes`` (m,) for the micro target)."""

    targets: np.ndarray
    sizes: np.ndarray
    macro: bool
    total: np.ndarray
    high: np.ndarray
    low: np.ndarray

    def t(self, code: np.ndarray, query: np.ndarray) -> np.ndarray:
        """t_i of facts of systems ``code`` in queries ``query`` (codes)."""
        return self.targets[code, query] if self.macro else 1.0 / self.sizes[code]

    def add(self, c, sj, frame: pd.DataFrame, at: np.ndarray, key_query, queries=None) -> None:
        """Add segment ``c``'s map at ``at`` (the stream judge's index) over the cells
        ``frame`` (code, b, n or one fact each; the query: its ``query``/``query_id`` column,
        else ``key_query`` of its ``key``)."""
        if not len(frame):
            return
        code = frame["code"].to_numpy(np.int64)
        n = frame["n"].to_numpy(float) if "n" in frame else np.ones(code.size)
        if "query" in frame:
            query = frame["query"].to_numpy(np.int64)
        elif "query_id" in frame:
            query = queries.get_indexer(frame["query_id"])
        else:
            query = key_query[frame["key"].to_numpy(np.int64)]
        g = sj.of(c, at, code)
        self.accumulate(c, code, frame["b"].to_numpy(np.int64), n * self.t(code, query), g)

    def accumulate(self, c, code, b, weight, g) -> None:
        """Σ weight·g per system into ``total[c]``, the extremes of g per (system, stratum)."""
        m, strata = self.total.shape[1], self.high.shape[2]
        b = np.minimum(b, strata - 1)
        self.total[c] += np.bincount(code, weights=weight * g, minlength=m)
        np.maximum.at(self.high[c], (code, b), g)
        np.minimum.at(self.low[c], (code, b), g)


def raw_sums(judge: EngineJudge, sj: StreamJudge, c: int, sums: Sums) -> None:
    """Add segment ``c`` (its maps never fitted: the raw score of each fact's key) over the
    numbered pool's pairs, a slice of the facts at a time (the slices of
    :func:`receval.engine.judge_stream.stream_sums`; the classes' facts left out): memory
    bounded whatever the number of distinct scores."""
    from receval.engine.judge_stream import PAIRS_PER_SLICE, _read_slice

    F = len(judge.small_key)
    facts = judge.numbered
    pairs = float(np.asarray(judge.summary.sizes, float).sum())
    graded = int(judge.keys.missing_key[0]) if judge.keys.missing_key.size else judge.keys.s.size
    slices = max(1, int(np.ceil(pairs / PAIRS_PER_SLICE)))
    step = max(1, int(np.ceil(facts / slices)))
    for lo in range(0, facts, step):
        f, code, key, query = _read_slice(judge.engine, lo, min(lo + step, facts), graded)
        popularity = np.bincount(f, minlength=key.size)
        b = np.minimum(popularity[f], 3) - 1
        g = sj.of(c, F + key[f], code)
        sums.accumulate(c, code, b, sums.t(code, query[f]), g)
