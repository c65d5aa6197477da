"""The judge table on the engine path: ``score --estimator ppi`` and the judge audit without
the output rows (issue 35 × issue 38).

What the prediction-powered estimator (:mod:`receval.estimators.ppi`) and the judge audit
(:mod:`receval.judge_audit`) read of the runs is a handful of sums over every system's distinct
facts, each weighted by a function of the fact's judge scores:

* the control's known per-sampler expectations (four m × m sums over the pool, Chaganty et
  al. 2017 §3; Angelopoulos et al. 2023 eq. 1: on DuckDB streamed by slices of the numbered
  pool, :mod:`receval.engine.judge_stream`; elsewhere the self-join :func:`pair_sums`; per
  query too with ``--cluster-queries``) and the per-system Σ t_i s, for the raw score s and for every calibrated map g that
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

The judge table is checked by the loader's own function (:func:`receval.judge.check_judge_table`:
the same ``file:line`` errors for a missing column, an unknown query or a grade outside the
declared scale), staged as Parquet with its answers normalised (in slices), and read by the
engine, which checks :func:`receval.judge.dedupe_judge`'s rule (one judge, one grade per fact)
with the loader's message, the fact numbered among the task's facts as the loader numbers it.

Equivalence classes: the facts of classes of two or more are left out of the runs' pass and
their terms come from the small tables (:mod:`receval.engine.judge_classes`); with several or
graded judges a class's canonical fact is calibrated on its members' highest grades
(:data:`CALIBRATED_FACTS`), as in memory.

Scope (:func:`receval.engine.score.unsupported` refuses the rest): the uniform design with
``--weighting size`` (every system's mixture is q₀), no anytime intervals with ppi, no
``--cluster-queries`` with ppi on Spark.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from receval.engine.base import one_line_oom

if TYPE_CHECKING:
    from receval.engine.base import Engine
    from receval.engine.judge_classes import JudgeClasses
    from receval.engine.judge_stream import PoolSums
    from receval.engine.sampled_data import SmallTables
    from receval.engine.summary import RunSummary
    from receval.estimators.judge_calibration import JudgeCalibration
    from receval.estimators.ppi import JudgeTotals
    from receval.estimators.sample_data import SampleData

#: per pool fact: its key (its own, or its query's "not graded" key), whether it is graded, and
#: whether it belongs to a class of two or more facts (``{classed}``: its terms come from the
#: small tables, receval.engine.judge_classes)
POOL_KEYS = """
SELECT p.query_id, p.a, coalesce(k.key, mk.key) AS key,
       coalesce(k.graded, 0) AS scored, {classed} AS classed
FROM (SELECT DISTINCT query_id, a FROM judge_pairs) p
LEFT JOIN judge_keys k ON p.query_id = k.query_id AND p.a = k.a
LEFT JOIN judge_missing mk ON p.query_id = mk.query_id{join}
"""
CLASSED_JOIN = "\nLEFT JOIN judge_classed cl ON p.query_id = cl.query_id AND p.a = cl.a"
CLASSED = "CASE WHEN cl.a IS NULL THEN 0 ELSE 1 END"

#: per pool fact: q₀ = Σ c_k over the systems that output it (the balance-heuristic mixture)
POOL_Q0 = """
SELECT p.query_id, p.a, sum(c.c) AS q0
FROM judge_pairs p JOIN judge_systems c ON p.code = c.code
GROUP BY p.query_id, p.a
"""


#: the self-join of :func:`pair_sums` runs in slices of the queries holding about this many
#: distinct (system, fact) pairs each (its hash tables then fit DuckDB's default 1 GiB limit:
#: at 5·10⁷ rows, 10⁷ pairs per slice ran out of it, 2.5·10⁶ scored in 1.66 GB peak RSS)
PAIRS_PER_SLICE = 2_500_000


def pair_sums(columns: int, where: str = "", *, kinds: bool = False, by_query: bool = False) -> str:
    """The four (m × m) sums of :mod:`receval.engine.judge_totals` with v_c the value per key
    of each map c (``ps{c}``, ``gs{c}``; ``pm``, ``g1`` do not depend on the map); ``where``:
    a condition on ``query_id`` keeping one slice of the queries (every table filtered).
    ``kinds``: over the samplers' kinds, each pair's probability p (``judge_pair_p``,
    :mod:`receval.engine.judge_designs`) on the right, q₀ from ``judge_q0_kinds``;
    ``by_query``: per query too (column ``query_id``)."""
    w = " * y.p" if kinds else ""
    maps = "".join(
        f", sum(t.t * v.v{c}{w} / f.q0) AS ps{c}, sum(v.v{c}{w} / f.q0) AS gs{c}"
        for c in range(columns)
    )

    def table(name: str) -> str:
        return f"(SELECT * FROM {name} WHERE {where})" if where else name

    k, right = ("y.u", "judge_pair_p") if kinds else ("y.code", "judge_pairs")
    q0 = "judge_q0_kinds" if kinds else "judge_q0"
    query = ", x.query_id" if by_query else ""
    return f"""
SELECT x.code AS i, {k} AS k{query}, sum(t.t{w} / f.q0) AS pm, sum(1.0{w} / f.q0) AS g1{maps}
FROM {table("judge_pairs")} x
JOIN {table(right)} y ON x.query_id = y.query_id AND x.a = y.a
JOIN {table(q0)} f ON x.query_id = f.query_id AND x.a = f.a
JOIN {table("judge_pool")} k ON x.query_id = k.query_id AND x.a = k.a
JOIN judge_values v ON k.key = v.key
JOIN judge_targets t ON x.code = t.code AND x.query_id = t.query_id
WHERE f.q0 > 0 AND k.classed = 0
GROUP BY x.code, {k}{query}
"""


def system_sums(columns: int) -> str:
    """Per system: Σ t v_c over its outputs for every map c (``jp{c}``), and how many of them
    are graded."""
    maps = "".join(f", sum(t.t * v.v{c}) AS jp{c}" for c in range(columns))
    return f"""
SELECT x.code AS i, sum(k.scored) AS scored{maps}
FROM judge_pairs x
JOIN judge_pool k ON x.query_id = k.query_id AND x.a = k.a
JOIN judge_values v ON k.key = v.key
JOIN judge_targets t ON x.code = t.code AND x.query_id = t.query_id
WHERE k.classed = 0
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

#: :data:`AUDIT_SUMS` over the numbered pool (DuckDB, receval.engine.judge_stream): the pairs
#: joined to the judges' grades on the integer fact number (``judge_long_f``)
AUDIT_SUMS_F = """
SELECT x.code AS i, g.j, sum(t.t * g.s) AS ts, sum(t.t) AS tt, count(*) AS n
FROM judge_incidence x
JOIN judge_long_f g ON x.f = g.f
JOIN judge_targets t ON x.code = t.code AND g.query_id = t.query_id
GROUP BY x.code, g.j
"""

#: every judge's grade of every pool fact it graded, by the fact's number (``judge_pool_f``)
LONG_F = """
SELECT k.f, k.query_id, l.j, l.s FROM judge_pool_f k
JOIN judge_long l ON k.query_id = l.query_id AND k.a = l.a
"""

#: per system: Σ t over its outputs
TARGET_SUMS = """
SELECT x.code AS i, sum(t.t) AS tt
FROM judge_pairs x JOIN judge_targets t ON x.code = t.code AND x.query_id = t.query_id
GROUP BY x.code
"""

#: per judge: the pool facts it graded and the sum of their normalised grades (``judge_pool``:
#: the pool's distinct facts)
AUDIT_POOL = """
SELECT g.j, count(*) AS n, sum(g.s) AS s
FROM judge_pool p
JOIN judge_long g ON p.query_id = g.query_id AND p.a = g.a
GROUP BY g.j
"""


#: rows of the checked judge table normalised and staged for the engine at once
STAGE_ROWS = 500_000


@dataclass(frozen=True)
class JudgeTable:
    """The bundle's judge table, checked by the loader's functions and staged for the engine:
    ``staged`` (Parquet) holds ``query_id, answer`` (normalised), ``judge, judge_score`` and
    ``line`` (the file's line, for error messages) of every row."""

    path: Path
    staged: Path
    rows: int
    names: tuple[str, ...]
    scales: np.ndarray  # (J, 2)
    calibrated: bool  # several judges or a declared scale (ppi calibrates and combines them)


def stage_judge_table(bundle, small: SmallTables, folder: Path) -> JudgeTable | None:
    """The bundle's judge table (None without one or without rows), checked as the loader
    checks it (:func:`receval.judge.check_judge_table`: BundleError naming file and line) and
    written to ``folder`` in slices with its answers normalised; its path joins
    ``small.files``.  The one-grade-per-judge-and-fact check runs in the engine
    (:func:`_check_one_grade`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from receval.bundle.sources import NUMERIC, _Source
    from receval.formats.tables import LINE, find_table, read_table
    from receval.judge import check_judge_table
    from receval.task import normalize_answers

    path = find_table(Path(bundle.root), "judge")
    if path is None:
        return None
    small.files["judge"] = path
    known = set(small.queries["query_id"])
    frame = check_judge_table(_Source(read_table(path, NUMERIC), path), known, small.config)
    if not len(frame):
        return None
    schema = pa.schema(
        [("query_id", pa.string()), ("answer", pa.string()), ("judge", pa.string()),
         ("judge_score", pa.float64()), ("line", pa.int64())]
    )  # fmt: skip
    staged = folder / "judge.parquet"
    names: set[str] = set()
    with pq.ParquetWriter(staged, schema) as writer:
        for start in range(0, len(frame), STAGE_ROWS):
            part = frame.iloc[start : start + STAGE_ROWS]
            judge = part["judge"].astype(str)
            names.update(judge.unique())
            columns = {
                "query_id": part["query_id"].astype(str).str.strip(),
                "answer": normalize_answers(part["answer"].astype(str), small.config.matching),
                "judge": judge,
                "judge_score": part["judge_score"].astype(float),
                "line": part[LINE].astype(np.int64),
            }
            arrays = [pa.array(np.asarray(columns[f.name], object if f.name in
                      ("query_id", "answer", "judge") else None), f.type) for f in schema]  # fmt: skip
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
    rows = len(frame)
    del frame
    ordered = tuple(sorted(names))
    scales = np.array([small.config.scale_of(n) for n in ordered], float).reshape(len(ordered), 2)
    calibrated = len(ordered) > 1 or bool(small.config.judge_graded)
    return JudgeTable(path, staged, rows, ordered, scales, calibrated)


@dataclass(frozen=True)
class JudgeKeys:
    """The keys every score map is a function of (module docstring): per key its query code,
    every judge's level (``levels`` (K, J), the "not graded" level ``counts[j]``) and the raw
    score s (NaN for a query's "not graded" key); per query its "not graded" key."""

    s: np.ndarray  # (K,)
    query: np.ndarray  # (K,) codes over ``queries``
    levels: np.ndarray  # (K, J)
    counts: np.ndarray  # (J,)
    missing_key: np.ndarray  # (Q,)
    queries: pd.Index


#: the judge table's facts: one grade per (judge code, fact) (checked by _check_one_grade)
JUDGE_FACTS = """
SELECT n.j, r.query_id, r.answer, min(r.judge_score) AS grade
FROM judge_rows r JOIN judge_names n ON r.judge = n.judge
GROUP BY n.j, r.query_id, r.answer
"""

#: the first row (in file order) grading a fact differently from the judge's first grade of it
ONE_GRADE = """
WITH f AS (SELECT judge, query_id, answer, min(line) AS first_line FROM judge_rows
           GROUP BY judge, query_id, answer),
     g AS (SELECT r.judge, r.query_id, r.answer, r.judge_score AS first FROM judge_rows r
           JOIN f ON r.judge = f.judge AND r.query_id = f.query_id AND r.answer = f.answer
           AND r.line = f.first_line)
SELECT r.line, r.query_id, r.answer, r.judge, g.first FROM judge_rows r
JOIN g ON r.judge = g.judge AND r.query_id = g.query_id AND r.answer = g.answer
WHERE r.judge_score <> g.first ORDER BY r.line LIMIT 1
"""

#: the grades the calibration reads (``judge_calibrated_facts``): the judge table's facts with,
#: for several or graded judges and classes, a class's canonical fact graded by its members'
#: highest grade per judge (receval.estimators.judge_calibration.class_grades; ``judge_override``);
#: ``raw`` the judge's own grade of the fact (NULL: none)
CALIBRATED_FACTS = """
SELECT coalesce(o.j, f.j) AS j, coalesce(o.query_id, f.query_id) AS query_id,
       coalesce(o.answer, f.answer) AS answer, coalesce(o.grade, f.grade) AS grade, f.grade AS raw
FROM judge_facts f FULL OUTER JOIN judge_override o
ON f.j = o.j AND f.query_id = o.query_id AND f.answer = o.answer
"""

#: per judge: its graded facts and distinct grades (judge_levels: levels or equal-count bins)
LEVEL_STATS = (
    "SELECT j, count(*) AS n, count(DISTINCT grade) AS d FROM judge_calibrated_facts GROUP BY j"
)

#: every judge's level of every fact it graded (receval.judge.judge_levels: the rank of its
#: grade among the judge's distinct grades, or its equal-count bin of the grades in the
#: loader's fact order, sorted (query_id, answer)); s its own grade on [0, 1] (NULL: none)
LEVELS = """
SELECT f.j, f.query_id, f.answer, f.grade, (f.raw - s.lo) / (s.hi - s.lo) AS s,
       CASE WHEN s.binned = 0 THEN dense_rank() OVER (PARTITION BY f.j ORDER BY f.grade) - 1
       ELSE CAST(floor((row_number() OVER (PARTITION BY f.j ORDER BY f.grade, f.query_id,
            f.answer) - 1) * {bins} / s.n) AS BIGINT) END AS level
FROM judge_calibrated_facts f JOIN judge_stats s ON f.j = s.j
"""


def _key_sql(calibrated: bool, counts: np.ndarray) -> tuple[str, str]:
    """(per judged fact ``query_id, answer, s, graded, levels…``, its key) SQL over
    ``judge_levels`` (``graded``: some judge graded the fact itself, not only its class)."""
    if not calibrated:  # one probability judge: its score as given (on [0, 1])
        facts = "SELECT query_id, answer, grade AS s, 1 AS graded FROM judge_levels"
        return facts, "dense_rank() OVER (ORDER BY s) - 1"
    levels = ", ".join(
        f"coalesce(max(CASE WHEN j = {j} THEN level END), {int(n)}) AS l{j}"
        for j, n in enumerate(counts)
    )
    facts = (
        "SELECT query_id, answer, avg(s) AS s, CASE WHEN count(s) > 0 THEN 1 ELSE 0 END AS "
        f"graded, {levels} FROM judge_levels GROUP BY query_id, answer"
    )
    order = ", ".join(["query_id", *(f"l{j}" for j in range(len(counts))), "s"])
    return facts, f"dense_rank() OVER (ORDER BY {order}) - 1"


def judge_keys(engine: Engine, table: JudgeTable, queries: pd.Index) -> JudgeKeys:
    """Number the keys of the judge table's facts (module docstring) in the engine: tables
    ``judge_levels`` (per judge and fact) and ``judge_fact_keys`` (per fact: its key)."""
    from receval.judge import BINS, MAX_LEVELS

    J = len(table.names)
    stats = engine.query(LEVEL_STATS).sort_values("j")
    n = np.zeros(J, np.int64)
    d = np.zeros(J, np.int64)
    n[stats["j"].to_numpy(np.int64)] = stats["n"].to_numpy(np.int64)
    d[stats["j"].to_numpy(np.int64)] = stats["d"].to_numpy(np.int64)
    binned = d > MAX_LEVELS
    counts = np.where(binned, BINS, np.maximum(d, 1))
    engine.register(
        "judge_stats",
        pd.DataFrame({"j": np.arange(J), "n": n, "binned": binned.astype(np.int64),
                      "lo": table.scales[:, 0], "hi": table.scales[:, 1]}),
    )  # fmt: skip
    engine.create_table("judge_levels", LEVELS.format(bins=BINS))
    facts, key = _key_sql(table.calibrated, counts)
    engine.create_table("judge_fact_keys", f"SELECT *, {key} AS key FROM ({facts}) x")
    level_cols = [f"l{j}" for j in range(J)] if table.calibrated else []
    cols = ", ".join(["key", "s", *(["query_id", *level_cols] if table.calibrated else [])])
    distinct = engine.query(f"SELECT DISTINCT {cols} FROM judge_fact_keys ORDER BY key")
    K, Q = len(distinct), len(queries)
    s = distinct["s"].to_numpy(float)
    query = queries.get_indexer(distinct["query_id"]) if table.calibrated else np.zeros(K, int)
    levels = distinct[level_cols].to_numpy(np.int64) if level_cols else np.zeros((K, 1), np.int64)
    if not table.calibrated:
        counts = np.zeros(1, np.int64)
    return JudgeKeys(
        s=np.concatenate([s, np.full(Q, np.nan)]),
        query=np.concatenate([query, np.arange(Q)]).astype(np.int64),
        levels=np.vstack([levels, np.broadcast_to(counts, (Q, counts.size))]).astype(np.int64),
        counts=np.asarray(counts, np.int64),
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
    #: the pool's facts numbered for the streamed sums (receval.engine.judge_stream; -1: the
    #: self-join of pair_sums, on Spark)
    numbered: int = -1
    #: the judgments' classes of two or more facts (receval.engine.judge_classes)
    classes: JudgeClasses | None = None
    #: the rounds' designs at the small facts (receval.engine.sampled_data.EngineDesigns: set
    #: by the view; rounds of other designs than uniform, receval.engine.judge_designs)
    designs: Any = field(default=None, repr=False)
    _q0: dict = field(default_factory=dict, repr=False)
    _targets: dict = field(default_factory=dict, repr=False)

    # -- what judge.py's functions ask of a task ----------------------------------------

    def __len__(self) -> int:
        return self.table.rows

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

    def drawn_scores(self, data: SampleData) -> np.ndarray:
        """(K,) the raw score of every draw's fact (what ``score_drawn[draw_fact]`` gives)."""
        values, _ = self.small_values(self.key_scores()[None, :])
        return values[0, data.facts][data.draw_fact]

    def small_values(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """((C, F) each map's value of every small fact, (F,) whether it is graded), a class's
        canonical fact taking the mean over its graded members
        (:func:`receval.engine.judge_classes.class_values`); ``values`` (C, K) per key."""
        from receval.engine.judge_classes import class_values

        strings = values[:, self.small_key]
        if self.classes is None:
            return strings, self.small_scored
        return class_values(self.classes, strings, self.small_scored)

    def totals(
        self, data: SampleData, target: str, transform=None, by_query: bool = False
    ) -> JudgeTotals:
        """:func:`receval.estimators.ppi.judge_totals` (``--weighting size``) for the map
        ``transform`` of the key scores (None: the raw scores), with the expectations given
        the draw's query when ``by_query`` (``--cluster-queries``)."""
        return self.totals_many(data, target, [transform], by_query)[0]

    def totals_many(
        self, data: SampleData, target: str, transforms: list, by_query: bool = False
    ) -> list[JudgeTotals]:
        """:meth:`totals` of every map of ``transforms`` (None: the raw scores) from one pass
        over the pool (:meth:`pool_sums`), every map's sums at once.  With classes the
        probabilities count every string (|X_k| of the runs), the targets and the graded share
        each class once (:mod:`receval.engine.judge_classes`)."""
        from receval.engine.judge_classes import drawn_class_strings
        from receval.engine.judge_designs import SamplerKinds, design_expectations, uniform_only
        from receval.estimators.ppi import JudgeTotals

        sizes = np.asarray(self.summary.sizes, float)
        N = float(data.sampler_n.sum())
        raw = self.key_scores()
        columns = np.vstack([raw if t is None else np.asarray(t(raw), float) for t in transforms])
        kinds = None if uniform_only(data) else SamplerKinds.of(data)
        with one_line_oom():
            sums = self.pool_sums(data, target, columns, by_query, kinds)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = sums.scored / np.asarray(self.target_summary.sizes, float)
        values, graded = self.small_values(columns)
        out = []
        for c in range(columns.shape[0]):
            grams = {"ps": sums.ps[c], "pm": sums.pm, "gs": sums.gs[c], "g1": sums.g1}
            if kinds is None:
                expected_score, expected_mass = expectations(data, grams, sizes, N)
            else:
                expected_score, expected_mass = design_expectations(data, grams, kinds, N)
            per_query = {}
            if by_query:
                per_query = self.query_expectations(data, sums.by_query, c, N, kinds)
            per_class = None
            if self.classes is not None:
                strings = columns[c][self.small_key]
                per_class = drawn_class_strings(self.classes, data.facts, strings)
            out.append(
                JudgeTotals(
                    score_drawn=values[c, data.facts],
                    scored_drawn=graded[data.facts],
                    expected_score=expected_score,
                    expected_mass=expected_mass,
                    scored_share=share,
                    judge_precision=sums.jp[c],
                    class_sum_drawn=None if per_class is None else per_class[0],
                    class_count_drawn=None if per_class is None else per_class[1],
                    **per_query,
                )
            )
        return out

    @property
    def target_summary(self) -> RunSummary:
        """The runs' aggregates the targets t_i count: each class once with classes."""
        return self.summary if self.classes is None else self.classes.view

    def query_expectations(
        self, data: SampleData, sums: PoolSums, c: int, N: float, kinds=None
    ) -> dict:
        """``expected_score_q``, ``expected_mass_q`` (J, Q, 2m + 1) of map ``c`` from the
        per-query sums (:func:`receval.estimators.ppi._query_expectations`: a draw's terms given
        that its sampler drew a fact of query q), Q the queries of ``data``; ``kinds``: the
        sums are over sampler kinds (:mod:`receval.engine.judge_designs`)."""
        at = self.keys.queries.get_indexer(pd.Index(data.queries))
        ok = at >= 0
        sizes = np.asarray(self.summary.sizes, float)
        m, Q = data.m, len(data.queries)

        def of(gram: np.ndarray) -> np.ndarray:  # (Q, m, m or U) in data.queries' order
            out = np.zeros((Q, *gram.shape[1:]))
            out[ok] = gram[at[ok]]
            return out

        grams = {"ps": of(sums.ps[c]), "pm": of(sums.pm), "gs": of(sums.gs[c]), "g1": of(sums.g1)}
        if kinds is not None:
            from receval.engine.judge_designs import design_query_expectations

            return design_query_expectations(data, grams, of(sums.mass_q), kinds, N)
        cells = self.summary.cells
        facts = np.zeros((m, Q))
        q = pd.Index(data.queries).get_indexer(cells["query_id"])
        i = pd.Index(self.summary.systems).get_indexer(cells["system"])
        keep = (q >= 0) & (i >= 0)
        facts[i[keep], q[keep]] = cells["facts"].to_numpy(float)[keep]
        return query_expectations(data, grams, sizes, N, facts)

    def pool_sums(
        self, data: SampleData, target: str, values: np.ndarray, by_query: bool = False,
        kinds=None,
    ) -> PoolSums:  # fmt: skip
        """The pool's sums (:class:`receval.engine.judge_stream.PoolSums`) for the maps
        ``values`` (C, K): streamed by slices of the numbered pool on DuckDB
        (:func:`receval.engine.judge_stream.stream_sums`), the self-join elsewhere; the
        classes' terms from the small tables (:func:`receval.engine.judge_classes.class_sums`).
        With ``kinds`` (:class:`receval.engine.judge_designs.SamplerKinds`) over the samplers'
        kinds instead of the systems (:meth:`design_sums`)."""
        from receval.engine.judge_classes import class_sums
        from receval.engine.judge_stream import stream_sums

        if kinds is not None:
            return self.design_sums(data, target, values, by_query, kinds)
        c = mixture_c(data, np.asarray(self.summary.sizes, float))
        targets = target_matrix(self.target_summary, target, self.keys.queries)
        if self.numbered < 0:
            sums = self._joined_sums(data, target, values, by_query)
        else:
            pairs = float(np.asarray(self.summary.sizes, float).sum())
            graded = (
                int(self.keys.missing_key[0]) if self.keys.missing_key.size else len(self.keys.s)
            )
            sums = stream_sums(
                self.engine, self.numbered, pairs, c, targets, values, graded, by_query
            )
        if self.classes is None:
            return sums
        strings = values[:, self.small_key]
        class_values_, graded_ = self.small_values(values)
        extra = class_sums(self.classes, c, targets, strings, class_values_, graded_, by_query)
        return sums.plus(extra)

    def design_sums(
        self, data: SampleData, target: str, values: np.ndarray, by_query: bool, kinds
    ) -> PoolSums:
        """:meth:`pool_sums` over the sampler kinds of rounds of other designs than uniform
        (:mod:`receval.engine.judge_designs`): streamed on DuckDB, the classes' terms from the
        small tables."""
        from receval.engine.judge_designs import (
            PairProbabilities,
            class_design_sums,
            stream_design_sums,
        )

        if self.designs is None:
            raise RuntimeError("the engine judge's rounds' designs were not set (BundleView)")
        probs = PairProbabilities(self, self.designs, kinds.design)
        targets = target_matrix(self.target_summary, target, self.keys.queries)
        if self.numbered < 0:
            sums = self._joined_design_sums(data, target, values, by_query, kinds, probs)
        else:
            pairs = float(np.asarray(self.summary.sizes, float).sum())
            sums = stream_design_sums(
                self.engine, self.numbered, pairs, kinds, probs, targets, values,
                self._graded_keys(), by_query,
            )  # fmt: skip
        if self.classes is None:
            return sums
        strings = values[:, self.small_key]
        class_values_, graded_ = self.small_values(values)
        extra = class_design_sums(
            self.classes, kinds, self.designs, targets, strings, class_values_, graded_, by_query
        )
        return sums.plus(extra)

    def _graded_keys(self) -> int:
        """The keys below this are graded facts', the rest the queries' "not graded" keys."""
        return int(self.keys.missing_key[0]) if self.keys.missing_key.size else len(self.keys.s)

    def _joined_design_sums(self, data, target, values, by_query, kinds, probs) -> PoolSums:
        """:meth:`design_sums` by the self-join (Spark): each pair's probability per kind in
        the engine (:func:`receval.engine.judge_designs.joined_pair_probabilities`)."""
        from receval.engine.judge_designs import joined_pair_probabilities

        joined_pair_probabilities(self.engine, kinds, probs, self._q0)
        return self._joined_sums(data, target, values, by_query, kinds.size)

    def _joined_sums(
        self, data: SampleData, target: str, values: np.ndarray, by_query: bool = False,
        kinds: int = 0,
    ) -> PoolSums:  # fmt: skip
        """:meth:`pool_sums` by the self-join of :func:`pair_sums` (Spark: the join runs on
        the cluster); per query too with ``by_query``; over ``kinds`` sampler kinds (tables
        of :func:`receval.engine.judge_designs.joined_pair_probabilities`) when not 0."""
        from receval.engine.judge_stream import PoolSums

        engine, m, C = self.engine, data.m, values.shape[0]
        frame = pd.DataFrame({"key": np.arange(values.shape[1])})
        for c in range(C):
            frame[f"v{c}"] = values[c]
        if kinds:  # q₀ over the kinds: joined_pair_probabilities
            self._target(target, self.target_summary)
        else:
            self._prepare(data, target)
        engine.register("judge_values", frame)
        sums = self._pair_sums(C, bool(kinds), by_query)
        per_system = engine.query(system_sums(C))
        width = kinds or m
        names = ["g1", "pm", *(f"gs{c}" for c in range(C)), *(f"ps{c}" for c in range(C))]
        grams = _gram_arrays(sums, names, m, width, self.keys.queries if by_query else None)
        at = per_system["i"].to_numpy(np.int64)

        def per(col: str) -> np.ndarray:
            out = np.zeros(m)
            out[at] = per_system[col].to_numpy(float)
            return out

        def pool(g: dict, **more) -> PoolSums:
            return PoolSums(
                g1=g["g1"], pm=g["pm"],
                gs=np.stack([g[f"gs{c}"] for c in range(C)]),
                ps=np.stack([g[f"ps{c}"] for c in range(C)]),
                jp=np.stack([per(f"jp{c}") for c in range(C)]),
                scored=per("scored"), **more,
            )  # fmt: skip

        if not by_query:
            return pool(grams)
        mass_q = None
        if kinds:
            from receval.engine.judge_designs import joined_query_mass

            mass_q = joined_query_mass(engine, self.keys.queries, kinds)
        whole = {name: g.sum(axis=0) for name, g in grams.items()}
        return pool(whole, by_query=pool(grams, mass_q=mass_q))

    def _pair_sums(self, columns: int, kinds: bool = False, by_query: bool = False) -> pd.DataFrame:
        """:func:`pair_sums`, in slices of the queries when the pairs exceed
        :data:`PAIRS_PER_SLICE` (each slice's m × m sums added)."""
        pairs = float(np.asarray(self.summary.sizes, float).sum())
        slices = max(1, int(np.ceil(pairs / PAIRS_PER_SLICE)))
        if slices == 1:
            return self.engine.query(pair_sums(columns, kinds=kinds, by_query=by_query))
        h = self.engine.dialect.hash64("query_id")
        parts = [
            self.engine.query(
                pair_sums(
                    columns, f"(({h} % {slices}) + {slices}) % {slices} = {s}",
                    kinds=kinds, by_query=by_query,
                )
            )
            for s in range(slices)
        ]  # fmt: skip
        keys = ["i", "k", "query_id"] if by_query else ["i", "k"]
        return pd.concat(parts).groupby(keys, as_index=False).sum()

    def _prepare(self, data: SampleData, target: str) -> None:
        """Tables ``judge_systems`` (c_k), ``judge_q0`` and ``judge_targets`` for ``data``'s
        samplers and ``target`` (kept while they stay the same)."""
        summary, engine = self.summary, self.engine
        m = data.m
        c = mixture_c(data, np.asarray(summary.sizes, float))
        if self._q0.get("c") is None or not np.array_equal(self._q0["c"], c):
            frame = pd.DataFrame({"system": summary.systems, "code": np.arange(m), "c": c})
            engine.register("judge_systems", frame)
            engine.create_table("judge_q0", POOL_Q0)
            self._q0["c"] = c
        self._target(target, self.target_summary)

    def _target(self, target: str, summary: RunSummary) -> None:
        """Table ``judge_targets`` of ``target`` over ``summary`` (the judge's sums: each class
        once; the audit: the runs as they are)."""
        if self._targets.get("now") != (target, id(summary)):
            self.engine.register("judge_targets", target_table(summary, target))
            self._targets["now"] = (target, id(summary))

    def audit(self, target: str) -> dict[str, np.ndarray]:
        """Per judge (J, m): Σ t s_j and Σ t over each system's outputs the judge graded, their
        number; (m,) Σ t over each system's outputs."""
        engine = self.engine
        self._target(target, self.summary)
        m, J = len(self.summary.systems), len(self.table.names)
        if self.numbered >= 0 and "long_f" not in self._targets:
            engine.create_table("judge_long_f", LONG_F)
            self._targets["long_f"] = True
        sums = engine.query(AUDIT_SUMS if self.numbered < 0 else AUDIT_SUMS_F)
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
            with one_line_oom():
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


def _gram_arrays(
    sums: pd.DataFrame, names: list[str], m: int, width: int, queries: pd.Index | None
) -> dict[str, np.ndarray]:
    """Each column ``names`` of the self-join's rows (``i``, ``k`` and with ``queries`` a
    ``query_id``) as an (m, width) array, or (Q, m, width) per query code of ``queries``."""
    i, k = sums["i"].to_numpy(np.int64), sums["k"].to_numpy(np.int64)
    if queries is None:
        at: tuple = (i, k)
        shape: tuple = (m, width)
    else:
        at = (queries.get_indexer(sums["query_id"]), i, k)
        shape = (len(queries), m, width)
    out = {}
    for name in names:
        gram = np.zeros(shape)
        gram[at] = sums[name].to_numpy(float)
        out[name] = gram
    return out


def mixture_c(data: SampleData, sizes: np.ndarray) -> np.ndarray:
    """c_k = n_k/(N |X_k|) of the balance-heuristic mixture q₀ = Σ_k c_k [k output x]
    (``--weighting size``; n_k the judged draws of system k's samplers)."""
    m = data.m
    N = float(data.sampler_n.sum())
    n_system = np.bincount(data.sampler_system, weights=data.sampler_n, minlength=m)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sizes > 0, n_system / (N * sizes), 0.0) if N > 0 else np.zeros(m)


def target_matrix(summary: RunSummary, target: str, queries: pd.Index) -> np.ndarray:
    """(m, Q) t_i per system and query code (0 where the system answered nothing)."""
    frame = target_table(summary, target)
    out = np.zeros((len(summary.systems), len(queries)))
    q = queries.get_indexer(frame["query_id"])
    ok = q >= 0
    out[frame["code"].to_numpy(np.int64)[ok], q[ok]] = frame["t"].to_numpy(float)[ok]
    return out


def target_table(summary: RunSummary, target: str) -> pd.DataFrame:
    """``code, query_id, t``: t_i(x) of system i's outputs in each query it answered (micro
    1/|X_i|, macro 1/(Q_i |X_i ∩ q|), as :func:`receval.estimators.sample_data.query_targets`)."""
    cells = summary.cells
    code = pd.Index(summary.systems).get_indexer(cells["system"])
    if target == "micro":
        t = 1.0 / np.asarray(summary.sizes, float)[code]
    else:
        answered = cells.groupby("system")["query_id"].transform("size").to_numpy(float)
        t = 1.0 / (cells["facts"].to_numpy(float) * answered)
    return pd.DataFrame({"code": code, "query_id": cells["query_id"].to_numpy(), "t": t})


def expectations(data: SampleData, grams: dict, sizes: np.ndarray, N: float):
    """(expected_score, expected_mass), each (J, 2m + 1), from the four sums."""
    from receval.estimators.precision import mixture_weights

    w = mixture_weights(data, "size")
    k = data.sampler_system
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(data.sampler_n > 0, w / data.sampler_n, 0.0)  # (m, J)
        per_draw = np.where(sizes[k] > 0, 1.0 / sizes[k], 0.0)  # s_j(x) on X_{k_j}
        pool = per_draw / N if N > 0 else np.zeros_like(per_draw)
    out = []
    for s_name, m_name in (("ps", "gs"), ("pm", "g1")):
        prec = scale.T * grams[s_name][:, k].T * per_draw[:, None]  # (J, m)
        num = grams[m_name][:, k].T * pool[:, None]  # (J, m)
        den = grams[m_name][k, k] * pool  # (J,)
        out.append(np.concatenate([prec, num, den[:, None]], axis=1))
    return out[0], out[1]


def query_expectations(
    data: SampleData, grams: dict, sizes: np.ndarray, N: float, facts: np.ndarray
) -> dict[str, np.ndarray]:
    """``expected_score_q``, ``expected_mass_q`` (J, Q, 2m + 1) from the four sums over each
    query's facts (``grams``: (Q, m, m) each) and ``facts`` (m, Q), each system's facts per
    query: Σ_{x∈q} s_j(x) = |X_k ∩ q|/|X_k| (every string counted, as s_j counts them)."""
    from receval.estimators.precision import mixture_weights

    w = mixture_weights(data, "size")
    k = data.sampler_system
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(data.sampler_n > 0, w / data.sampler_n, 0.0)  # (m, J)
        per_draw = np.where(sizes[k] > 0, 1.0 / sizes[k], 0.0)
        pool = per_draw / N if N > 0 else np.zeros_like(per_draw)
        mass = facts[k] * per_draw[:, None]  # (J, Q)
        inv = np.where(mass > 0, 1.0 / mass, 0.0)[:, :, None]
    out = []
    for s_name, m_name in (("ps", "gs"), ("pm", "g1")):
        prec = (
            scale.T[:, None, :]
            * grams[s_name][:, :, k].transpose(2, 0, 1)
            * per_draw[:, None, None]
        )
        num = grams[m_name][:, :, k].transpose(2, 0, 1) * pool[:, None, None]
        den = grams[m_name][:, k, k].T * pool[:, None]  # (J, Q)
        out.append(np.concatenate([prec, num, den[:, :, None]], axis=2) * inv)
    return {"expected_score_q": out[0], "expected_mass_q": out[1]}


def engine_judge(bundle, small: SmallTables, summary: RunSummary, engine: Any, own: bool):
    """The :class:`EngineJudge` of ``bundle`` (None without a judge table) over the engine
    session ``engine`` (its runs registered, view ``normed``), closed with the object when
    ``own``; the staged judge table's folder is removed with it."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix=".receval-judge-", dir=staging_dir(bundle, engine)))
    try:
        table = stage_judge_table(bundle, small, folder)
        if table is None:
            shutil.rmtree(folder, ignore_errors=True)
            if own:
                engine.close()
            return None
        judge = _engine_judge(table, small, summary, engine)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    weakref.finalize(judge, _release, engine if own else None, folder)
    return judge


def staging_dir(bundle, engine: Any) -> Path | None:
    """Where the judge table is staged: for Spark, the bundle's folder (on a cluster every
    executor reads it there: the bundle sits on shared storage, as its runs do), else — and when
    that folder is not writable — the system's temporary folder (None)."""
    import os

    root = Path(bundle.root)
    if getattr(engine, "name", engine) == "spark" and os.access(root, os.W_OK):
        return root
    return None


def _release(engine, folder: Path) -> None:
    import shutil

    if engine is not None:
        engine.close()
    shutil.rmtree(folder, ignore_errors=True)


def _engine_judge(
    table: JudgeTable, small: SmallTables, summary: RunSummary, engine
) -> EngineJudge:
    """The tables of the module docstring in ``engine``, and what Python keeps of them."""
    from receval.engine.judge_classes import judge_classes
    from receval.engine.judge_stream import number_pool

    queries = pd.Index(sorted(set(small.queries["query_id"])), dtype=object)
    h = engine.dialect.hash64("answer")
    engine.register("judge_staged", table.staged)
    engine.create_table("judge_rows", "SELECT * FROM judge_staged")
    _check_one_grade(engine, table, small, queries)
    engine.register("judge_names", pd.DataFrame({"judge": list(table.names),
                                                 "j": np.arange(len(table.names))}))  # fmt: skip
    engine.create_table("judge_facts", JUDGE_FACTS)
    classes = judge_classes(small, summary, queries)
    _calibrated_facts(engine, table, small, classes)
    keys = judge_keys(engine, table, queries)
    codes = pd.DataFrame(
        {"system": summary.systems, "code": np.arange(len(summary.systems), dtype=np.int64)}
    )
    engine.register("judge_codes", codes)
    _create_pairs(engine, summary, h)
    engine.create_table(
        "judge_keys", f"SELECT query_id, {h} AS a, key, graded FROM judge_fact_keys"
    )
    engine.register(
        "judge_missing",
        pd.DataFrame({"query_id": queries.to_numpy(object), "key": keys.missing_key}),
    )
    if classes is None:
        engine.create_table("judge_pool", POOL_KEYS.format(classed="0", join=""))
    else:
        group = small.facts.iloc[classes.group]
        engine.register("judge_classed_answers", pd.DataFrame({
            "query_id": group["query_id"].to_numpy(object),
            "answer": group["answer"].to_numpy(object),
        }))  # fmt: skip
        engine.create_table(
            "judge_classed", f"SELECT DISTINCT query_id, {h} AS a FROM judge_classed_answers"
        )
        engine.create_table("judge_pool", POOL_KEYS.format(classed=CLASSED, join=CLASSED_JOIN))
    numbered = number_pool(engine) if engine.name == "duckdb" else -1
    engine.create_table(
        "judge_long",
        f"SELECT query_id, {h} AS a, j, greatest(0.0, least(1.0, s)) AS s FROM judge_levels "
        "WHERE s IS NOT NULL",
    )
    small_grades = _small_grades(engine, table, small)
    small_key, small_scored = _small_keys(engine, keys, small)
    counts = engine.query("SELECT key, count(*) AS n FROM judge_pool WHERE scored = 1 GROUP BY key")
    pool = engine.query("SELECT count(*) AS n FROM judge_pool")
    graded = engine.query(AUDIT_POOL)
    J = len(table.names)
    pool_graded, pool_sum = np.zeros(J), np.zeros(J)
    pool_graded[graded["j"].to_numpy(np.int64)] = graded["n"].to_numpy(float)
    pool_sum[graded["j"].to_numpy(np.int64)] = graded["s"].to_numpy(float)
    n = counts["n"].to_numpy(float)
    key_s = keys.s[counts["key"].to_numpy(np.int64)]
    fill = float((key_s * n).sum() / n.sum()) if n.sum() else 0.5
    return EngineJudge(
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
        numbered=numbered,
        classes=classes,
    )


def _create_pairs(engine, summary: RunSummary, h: str) -> None:
    """Table ``judge_pairs(code, query_id, a)``: every system's distinct facts; on DuckDB in
    batches of systems of at most :data:`PAIRS_PER_SLICE` pairs (one DISTINCT over 5·10⁷
    rows ran out of its 1 GB limit), each batch reading its own systems' rows only (the other
    run files are pruned: :func:`receval.engine.summary._in_systems`; a filter on the joined
    code read every file once per batch, 25 times at 5·10⁷ rows)."""
    from receval.engine.summary import _in_systems

    sql = (
        f"SELECT DISTINCT c.code, n.query_id, {h} AS a FROM {{rows}} n "
        "JOIN judge_codes c ON n.system = c.system"
    )
    sizes = np.asarray(summary.sizes, float)
    batches: list[list[int]] = [[]]
    total = 0.0
    for code, size in enumerate(sizes):
        if batches[-1] and total + size > PAIRS_PER_SLICE:
            batches.append([])
            total = 0.0
        batches[-1].append(code)
        total += size
    if engine.name != "duckdb" or len(batches) == 1:
        engine.create_table("judge_pairs", sql.format(rows="normed"))
        return
    for k, batch in enumerate(batches):
        part = sql.format(rows=_in_systems(engine, [summary.systems[c] for c in batch]))
        if k == 0:
            engine.create_table("judge_pairs", part)
        else:
            engine.con.execute(f"INSERT INTO judge_pairs {part}")


def _check_one_grade(engine, table: JudgeTable, small: SmallTables, queries: pd.Index) -> None:
    """:func:`receval.judge.dedupe_judge`'s check in the engine: a judge grading a fact twice
    with different scores is a BundleError naming the second row's line (the fact numbered as
    the loader numbers it: its rank among the task's facts, counted in the engine)."""
    from receval.errors import BundleError

    bad = engine.query(ONE_GRADE)
    if not len(bad):
        return
    row = bad.iloc[0]
    fact = _fact_number(engine, small, str(row["query_id"]), str(row["answer"]))
    who = str(row["judge"])
    by = f" from judge {who!r}" if who else ""
    raise BundleError(
        table.path,
        int(row["line"]),
        f"the fact ({row['query_id']!r}, {row['answer']!r}) already has judge_score "
        f"{float(row['first'])!r}{by} (fact {fact}); one judge gives one score per fact",
    )


def _fact_number(engine, small: SmallTables, query: str, answer: str) -> int:
    """The loader's id of the fact (``query``, ``answer``): how many of the task's facts (the
    runs', the small tables', the judge table's) sort before it."""
    facts = small.facts[["query_id", "answer"]]
    engine.register("judge_small_facts", facts.reset_index(drop=True))
    q, a = (v.replace("'", "''") for v in (query, answer))
    before = f"query_id < '{q}' OR (query_id = '{q}' AND answer < '{a}')"
    sql = (
        "SELECT count(*) AS n FROM (SELECT query_id, answer FROM normed UNION "
        "SELECT query_id, answer FROM judge_rows UNION "
        f"SELECT query_id, answer FROM judge_small_facts) x WHERE {before}"
    )
    return int(engine.query(sql)["n"].iloc[0])


def _small_grades(engine, table: JudgeTable, small: SmallTables) -> np.ndarray:
    """Every judge's own grade of every small fact (F, J; NaN: none); table ``judge_small``."""
    facts = small.facts
    frame = pd.DataFrame(
        {
            "query_id": facts["query_id"].to_numpy(object),
            "answer": facts["answer"].to_numpy(object),
            "fact": np.arange(len(facts), dtype=np.int64),
        }
    )
    engine.register("judge_small", frame)
    graded = engine.query(
        "SELECT s.fact, f.j, f.grade FROM judge_small s JOIN judge_facts f "
        "ON s.query_id = f.query_id AND s.answer = f.answer"
    )
    grades = np.full((len(facts), len(table.names)), np.nan)
    at = (graded["fact"].to_numpy(np.int64), graded["j"].to_numpy(np.int64))
    grades[at] = graded["grade"].to_numpy(float)
    return grades


def _calibrated_facts(engine, table: JudgeTable, small: SmallTables, classes) -> None:
    """Table ``judge_calibrated_facts`` (:data:`CALIBRATED_FACTS`): with classes and several
    or graded judges, each class's canonical fact graded by its members' highest grade per
    judge that graded one of them, as the in-memory calibration grades it."""
    if classes is None or not table.calibrated:
        engine.create_view("judge_calibrated_facts", "SELECT *, grade AS raw FROM judge_facts")
        return
    grades = _small_grades(engine, table, small)
    best = np.full((classes.heads.size, grades.shape[1]), -np.inf)
    for j in range(grades.shape[1]):
        g = grades[classes.group, j]
        ok = ~np.isnan(g)
        np.maximum.at(best[:, j], classes.of[ok], g[ok])
    cls, j = np.nonzero(np.isfinite(best))
    heads = small.facts.iloc[classes.heads[cls]]
    override = pd.DataFrame({
        "j": j.astype(np.int64),
        "query_id": heads["query_id"].to_numpy(object),
        "answer": heads["answer"].to_numpy(object),
        "grade": best[cls, j],
    })  # fmt: skip
    engine.register("judge_override", override)
    engine.create_table("judge_calibrated_facts", CALIBRATED_FACTS)


def _small_keys(engine, keys: JudgeKeys, small: SmallTables):
    """Per small fact (table ``judge_small``): its key, and whether a judge graded it itself."""
    facts = small.facts
    keyed = engine.query(
        "SELECT s.fact, k.key, k.graded FROM judge_small s JOIN judge_fact_keys k "
        "ON s.query_id = k.query_id AND s.answer = k.answer"
    )
    q = keys.queries.get_indexer(facts["query_id"])
    key = keys.missing_key[np.maximum(q, 0)] if len(facts) else np.zeros(0, np.int64)
    key = key.copy()
    at = keyed["fact"].to_numpy(np.int64)
    key[at] = keyed["key"].to_numpy(np.int64)
    scored = np.zeros(len(facts), bool)
    scored[at] = keyed["graded"].to_numpy(np.int64) > 0
    return key.astype(np.int64), scored


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
        with one_line_oom():
            register_runs(con, bundle.parquet_runs(), strip=small.config.matching.strip)
            register_normed(con, small.config.matching)
            return engine_judge(bundle, small, summary, con, own)
    except BaseException:
        if own:
            con.close()
        raise
