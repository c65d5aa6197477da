"""Uniform draws in SQL without an MD5 per output row or a sort of the runs: three scans whose
results are small, so Python holds the draws only (:func:`receval.engine.sampled.sample_round`).

Draws are a deterministic function of ``(seed, round, system, draw index)`` and the system's
set of facts, whatever the engine and however the runs are split into files:

* a system's distinct facts ``x = (query_id, a)`` (``a`` the answer normalised per
  ``[matching]``, :mod:`receval.engine.matching`) are ordered by ``(query_id, tail(a), a)``,
  ``tail(a)`` the last character of ``a``, texts compared as UTF-8 bytes (the order DuckDB and
  Spark SQL both give strings, and Python's code-point order): ``x_(0) < ... < x_(N_j - 1)``;
* draw ``d`` of system ``j`` in round ``r`` picks ``x_(k)`` with ``k = ⌊u · N_j⌋``, ``u`` from
  the MD5 of ``seed ␟ r ␟ j ␟ d`` (:func:`receval.engine.sampled.draw_uniform`): i.i.d.
  uniform draws with replacement from the system's distinct facts, ``prob`` = 1/N_j (Chaganty
  et al. 2017, §3, the ``uniform`` design);
* ``k`` is located in three scans: one aggregation counts distinct facts per
  ``(system, query, tail)`` *cell* (:data:`CELLS`, a small table kept in the engine); a window
  over the cells turns each ``k`` into a cell and a position in it (:data:`LOCATE`); a second
  scan keeps the rows of the wanted cells only, ranks their few facts and keeps the drawn ones
  with the system's own spelling (:data:`PICK`).  A third scan joins the runs with the facts to
  annotate: which systems output each (:data:`MEMBERS`).

Only the rows of the drawn cells are sorted (the ``tail`` splits a query's facts into cells of
a few dozen to a few hundred; answers with very many distinct last characters, CJK text say,
make more and smaller cells: a larger ``fact_cells``, the same draws); the one aggregation over
every row is the distinct count.  Answers are normalised in SQL exactly as Python does
(:func:`receval.engine.sampled.normalised_answer_sql`); an answer that is printable ASCII
without doubled, leading or trailing spaces by ``lower`` alone, and the cell count records
which (system, query) pairs hold only such answers, so that the later scans skip the test
there.

The in-memory ``sample`` draws the same ranks (:func:`draw_ranks`, :func:`weighted_ranks`,
:func:`strata_ranks`) and locates them in the loaded outputs sorted by the same key
(:func:`receval.design.hashed_precision_samples`): the same round for the same seed.  The one
design only memory draws, ``judge-uncertainty`` (s_j(x) = a/N_j + (1 − a) w(x)/Σ w, w = s(1 − s),
a = ½), is drawn by the same kind of mixture: u < a takes rank ⌊(u/a) · N_j⌋ in this order, else
the inverse CDF of w over the facts in this order at t = (u − a)/(1 − a) · Σ w
(:func:`receval.design._mixture_rows`).  The hashed texts are listed in :mod:`receval.draw_hash`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from receval.engine.base import Engine

#: the cell of a normalised answer ``a`` within its query: its last character
TAIL = "right({a}, 1)"

#: printable ASCII without a leading, trailing or doubled space: its normal form is ``lower``
#: of it (or itself), the test :func:`receval.engine.sampled.normalised_answer_sql` makes
PLAIN = "[^\\x{20}-\\x{7e}]|  |\\A | \\z"

#: the runs with each answer as read, normalised, and ``odd`` = 1 where it is not
#: :data:`PLAIN` (the test made once per row)
NORMED_RUNS = """
SELECT system, query_id, answer_raw, odd, CASE WHEN odd = 0 THEN {fast} ELSE {full} END AS answer
FROM (SELECT system, query_id, answer AS answer_raw, {odd} AS odd FROM runs) r
"""

#: distinct facts per (system, query, tail), and whether a value of the cell is not plain: the
#: one aggregation over every output row (``{source}``: ``normed_runs``, or one batch of it);
#: with ``{count}`` and ``{copies}`` of :data:`COPIES`, also its input rows (``copies``, for
#: the ``entity-relation`` design), else both empty
CELLS = """
SELECT system, query_id, tail, count(*) AS facts, max(odd) AS odd{copies} FROM (
    SELECT system, query_id, answer, {tail} AS tail, max(odd) AS odd{count} FROM {source}
    GROUP BY system, query_id, answer
) t GROUP BY system, query_id, tail
"""
#: the ``{count}`` and ``{copies}`` of :data:`CELLS` that count input rows
COPIES = {"count": ", count(*) AS copies", "copies": ", sum(copies) AS copies"}

#: distinct facts and input rows per (system, query), in (system, query) order
QUERY_SIZES = """
SELECT system, query_id, sum(facts) AS facts, sum(copies) AS copies FROM fact_cells
GROUP BY system, query_id ORDER BY system, query_id
"""

#: distinct facts per system (N_j)
SIZES = "SELECT system, sum(facts) AS facts FROM fact_cells GROUP BY system"

#: each draw's rank ``k`` (``draw_ranks(system, draw, k)``) as a cell and a position in it,
#: with ``odd`` of the draw's (system, query)
LOCATE = """
SELECT d.system, d.draw, c.query_id, c.tail, d.k - c.before AS pos, c.odd FROM (
    SELECT system, query_id, tail, facts, max(odd) OVER (PARTITION BY system, query_id) AS odd,
           sum(facts) OVER (PARTITION BY system ORDER BY query_id, tail
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - facts AS before
    FROM fact_cells
) c JOIN draw_ranks d
ON c.system = d.system AND d.k >= c.before AND d.k < c.before + c.facts
"""

#: the drawn facts (``draw_cells(system, draw, query_id, tail, pos)``): the rows of the wanted
#: (system, query) pairs (``wanted_queries(system, query_id, odd)``, picked before the answers
#: are normalised: ``lower`` alone where the pair has plain answers only), of those the wanted
#: cells, one per distinct fact with the system's first spelling, ranked in their cell
PICK = """
WITH picked AS (
    SELECT r.system, r.query_id, r.answer AS answer_raw, q.odd FROM {runs} r JOIN wanted_queries q
    ON r.system = q.system AND r.query_id = q.query_id
), normed AS (
    SELECT system, query_id, answer_raw, CASE WHEN odd = 0 THEN {fast} ELSE {full} END AS answer
    FROM picked
), facts AS (
    SELECT n.system, n.query_id, n.answer, w.tail, min(n.answer_raw) AS answer_raw
    FROM normed n JOIN wanted_cells w
    ON n.system = w.system AND n.query_id = w.query_id AND {tail} = w.tail
    GROUP BY n.system, n.query_id, n.answer, w.tail
), ranked AS (
    SELECT system, query_id, tail, answer_raw,
           row_number() OVER (PARTITION BY system, query_id, tail ORDER BY answer) - 1 AS pos
    FROM facts
)
SELECT d.system, d.draw, f.query_id, f.answer_raw FROM ranked f JOIN draw_cells d
ON f.system = d.system AND f.query_id = d.query_id AND f.tail = d.tail AND f.pos = d.pos
"""

#: the systems that output each fact of ``wanted_facts(h, query_id, answer)`` (normalised):
#: the rows of the facts' queries (picked before the answers are normalised, by ``lower``
#: alone where the query has plain answers only) joined to them
MEMBERS = """
WITH queries AS (
    SELECT c.query_id, max(c.odd) AS odd FROM fact_cells c
    JOIN (SELECT DISTINCT query_id FROM wanted_facts) w ON c.query_id = w.query_id
    GROUP BY c.query_id
), picked AS (
    SELECT r.system, r.query_id, r.answer AS answer_raw, q.odd FROM {runs} r JOIN queries q
    ON r.query_id = q.query_id
), normed AS (
    SELECT system, query_id, CASE WHEN odd = 0 THEN {fast} ELSE {full} END AS answer
    FROM picked
)
SELECT w.h, n.system FROM normed n JOIN wanted_facts w
ON n.query_id = w.query_id AND n.answer = w.answer GROUP BY w.h, n.system
"""


def answer_forms(dialect, full: str, column: str, casefold: bool) -> dict[str, str]:
    """SQL over ``column`` for :data:`NORMED_RUNS`, :data:`PICK` and :data:`MEMBERS`: ``odd``
    (1 where the value is not :data:`PLAIN`), ``fast`` (its normal form when plain) and
    ``full`` (its normal form in general, given:
    :func:`receval.engine.sampled.normalised_answer_sql`)."""
    if full == column:  # nothing to normalise
        return {"odd": "0", "fast": column, "full": column}
    odd = f"CASE WHEN {dialect.regexp_matches(column, PLAIN)} THEN 1 ELSE 0 END"
    return {"odd": odd, "fast": f"lower({column})" if casefold else column, "full": full}


def sizes(engine: Engine) -> pd.DataFrame:
    """N_j per system (``system, facts``; systems with a fact only) from ``fact_cells``
    (:data:`CELLS`)."""
    out = engine.query(SIZES)
    return out.astype({"facts": np.int64}).sort_values("system", ignore_index=True)


def draw_ranks(sizes: pd.DataFrame, uniforms: dict[str, np.ndarray]) -> pd.DataFrame:
    """``system, draw, k, prob``: rank ``k = ⌊u · N_j⌋`` of draw ``d`` of system ``j``, ``u``
    its ``uniforms[j][d - 1]`` (module docstring); systems without a fact are skipped."""
    size = dict(zip(sizes["system"], sizes["facts"], strict=True))
    pieces = []
    for system in sorted(uniforms):
        u, facts = uniforms[system], int(size.get(system, 0))
        n = len(u)
        if n <= 0 or facts <= 0:
            continue
        pieces.append(
            pd.DataFrame(
                {
                    "system": system,
                    "draw": np.arange(1, n + 1, dtype=np.int64),
                    "k": np.minimum(np.floor(u * facts), facts - 1).astype(np.int64),
                    "prob": 1.0 / facts,
                }
            )
        )
    if not pieces:
        return pd.DataFrame(
            {"system": [], "draw": np.empty(0, np.int64), "k": np.empty(0, np.int64), "prob": []}
        )
    return pd.concat(pieces, ignore_index=True)


def weighted_ranks(cells: pd.DataFrame, uniforms: dict[str, np.ndarray]) -> pd.DataFrame:
    """``system, draw, k, prob`` (as :func:`draw_ranks`) of a design whose probability is the
    same for every fact of a (system, query): ``cells`` holds ``system, query_id, facts,
    weight`` in (system, query) order, s_j(x) = w_jq / Σ_q N_jq w_jq.  Draw ``d`` takes
    t = u · Σ_q N_jq w_jq, the query q where the cumulative mass passes t (inverse CDF), and
    the fact ⌊(t − mass before q) / w_jq⌋ of q's facts in their order: ``k`` = the facts
    of the queries before q plus that position, a rank in the order :data:`LOCATE` reads."""
    pieces = []
    for system, rows in cells.groupby("system", sort=True):
        u = uniforms.get(system)
        if u is None or not len(u):
            continue
        facts = rows["facts"].to_numpy(np.int64)
        w = rows["weight"].to_numpy(float)
        mass = facts * w
        cum = np.cumsum(mass)
        total = cum[-1]
        if not total > 0:
            continue
        t = u * total
        last = int(np.flatnonzero(mass > 0)[-1])
        q = np.minimum(np.searchsorted(cum, t, side="right"), last)
        pos = np.floor((t - (cum[q] - mass[q])) / w[q]).astype(np.int64)
        pos = np.clip(pos, 0, facts[q] - 1)
        start = np.cumsum(facts) - facts
        pieces.append(
            pd.DataFrame(
                {
                    "system": system,
                    "draw": np.arange(1, len(u) + 1, dtype=np.int64),
                    "k": start[q] + pos,
                    "prob": w[q] / total,
                }
            )
        )
    if not pieces:
        return draw_ranks(pd.DataFrame({"system": [], "facts": []}), {})
    return pd.concat(pieces, ignore_index=True)


def entity_relation_weights(cells: pd.DataFrame, queries: pd.DataFrame) -> pd.DataFrame:
    """``cells`` (``system, query_id, facts, copies`` per (system, query)) with the
    entity-relation design's ``weight`` w_jq
    (:func:`receval.engine.sampled.entity_relation_cells`; in memory,
    :func:`receval.design.hashed_precision_samples`)."""
    q = queries.set_index("query_id")
    entity = q["entity"] if "entity" in q.columns else pd.Series(q.index, index=q.index)
    slot = q["slot"] if "slot" in q.columns else pd.Series("", index=q.index)
    subj = pd.factorize(entity.reindex(cells["query_id"]), use_na_sentinel=False)[0]
    rel = pd.factorize(slot.reindex(cells["query_id"]), use_na_sentinel=False)[0]
    frame = cells.assign(subj=subj, rel=rel)
    by_subj = frame.groupby(["system", "subj"])
    distinct = by_subj["facts"].transform("sum").to_numpy(float)
    inst_subj = by_subj["copies"].transform("sum").to_numpy(float)
    inst_rel = frame.groupby(["system", "rel"])["copies"].transform("sum").to_numpy(float)
    return cells.assign(weight=distinct / (inst_subj * inst_rel))


def pick_draws(
    engine: Engine, ranks: pd.DataFrame, forms: dict[str, str], batches: list[str] | None = None
) -> pd.DataFrame:
    """Every draw of ``ranks`` (:func:`draw_ranks`) as ``system, draw, query_id, answer_raw,
    prob`` in (system, draw) order (:data:`LOCATE`, then :data:`PICK`; with ``batches``, the
    runs' batches of :func:`receval.engine.sampled.run_batches`, one query per batch)."""
    out = ["system", "draw", "query_id", "answer_raw", "prob"]
    if ranks.empty:
        return pd.DataFrame({c: [] for c in out})
    engine.register("draw_ranks", ranks[["system", "draw", "k"]])
    cells = engine.query(LOCATE)
    engine.register("draw_cells", cells)
    engine.register("wanted_cells", cells[["system", "query_id", "tail"]].drop_duplicates())
    engine.register("wanted_queries", cells[["system", "query_id", "odd"]].drop_duplicates())
    tail = TAIL.format(a="n.answer")
    picked = _batched(engine, batches, lambda runs: PICK.format(tail=tail, runs=runs, **forms))
    drawn = ranks.merge(picked, on=["system", "draw"], how="left", validate="1:1")
    if drawn["query_id"].isna().any():  # pragma: no cover - the scans saw different runs
        raise RuntimeError("the runs changed between two scans of one sample round")
    return drawn.sort_values(["system", "draw"], ignore_index=True)[out]


def members(
    engine: Engine, facts: pd.DataFrame, forms: dict[str, str], batches: list[str] | None = None
) -> pd.DataFrame:
    """``h, system`` for every system that output a fact of ``facts`` (``h, query_id,
    answer``, the answer normalised), sorted (``batches`` as in :func:`pick_draws`)."""
    if facts.empty:
        return pd.DataFrame({"h": np.empty(0, np.int64), "system": []})
    engine.register("wanted_facts", facts[["h", "query_id", "answer"]])
    out = _batched(engine, batches, lambda runs: MEMBERS.format(runs=runs, **forms))
    return out.sort_values(["h", "system"], ignore_index=True)


def _batched(engine: Engine, batches: list[str] | None, sql) -> pd.DataFrame:
    """The rows of ``sql(runs)`` over ``runs``, or concatenated over each batch's runs (the
    queries group by system, so the batches' results are disjoint)."""
    if not batches:
        return engine.query(sql("runs"))
    return pd.concat([engine.query(sql(runs)) for runs in batches], ignore_index=True)


# ---------------------------------------------------------------------------------------------
# the judge-strata design (``sample --by-judge``): cells split by the judge's level

#: :data:`NORMED_RUNS` with each fact's level of the design's judge (``fact_levels(query_id,
#: answer, level)``: the graded facts, answers normalised; ``{missing}`` elsewhere)
LEVELLED_RUNS = """
SELECT n.system, n.query_id, n.answer_raw, n.odd, n.answer,
       coalesce(l.level, {missing}) AS level
FROM normed_runs n LEFT JOIN fact_levels l ON n.query_id = l.query_id AND n.answer = l.answer
"""

#: :data:`CELLS` per (system, query, tail, level)
LEVEL_CELLS = """
SELECT system, query_id, tail, level, count(*) AS facts, max(odd) AS odd FROM (
    SELECT system, query_id, answer, {tail} AS tail, max(odd) AS odd, max(level) AS level
    FROM {source} GROUP BY system, query_id, answer
) t GROUP BY system, query_id, tail, level
"""

#: distinct facts per (system, level) (N_jh)
LEVEL_SIZES = "SELECT system, level, sum(facts) AS facts FROM fact_cells GROUP BY system, level"

#: :data:`LOCATE` over level cells: a draw of ``draw_ranks(system, draw, k, level)`` with
#: ``level`` = -1 is the k-th of all the system's facts in ``(query_id, tail, level, answer)``
#: order, one with ``level`` = h the k-th of its level-h facts in ``(query_id, tail, answer)``
#: order
LOCATE_LEVELS = """
WITH c AS (
    SELECT system, query_id, tail, level, facts,
           max(odd) OVER (PARTITION BY system, query_id) AS odd,
           sum(facts) OVER (PARTITION BY system ORDER BY query_id, tail, level
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - facts AS before,
           sum(facts) OVER (PARTITION BY system, level ORDER BY query_id, tail
                            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - facts AS within
    FROM fact_cells
)
SELECT d.system, d.draw, c.query_id, c.tail, c.level, d.k - c.before AS pos, c.odd
FROM c JOIN draw_ranks d
ON c.system = d.system AND d.level = -1 AND d.k >= c.before AND d.k < c.before + c.facts
UNION ALL
SELECT d.system, d.draw, c.query_id, c.tail, c.level, d.k - c.within AS pos, c.odd
FROM c JOIN draw_ranks d
ON c.system = d.system AND d.level = c.level AND d.k >= c.within AND d.k < c.within + c.facts
"""

#: :data:`PICK` over level cells: the picked rows' levels from ``fact_levels``
PICK_LEVELS = """
WITH picked AS (
    SELECT r.system, r.query_id, r.answer AS answer_raw, q.odd FROM {runs} r JOIN wanted_queries q
    ON r.system = q.system AND r.query_id = q.query_id
), normed AS (
    SELECT system, query_id, answer_raw, CASE WHEN odd = 0 THEN {fast} ELSE {full} END AS answer
    FROM picked
), levelled AS (
    SELECT n.system, n.query_id, n.answer_raw, n.answer, coalesce(l.level, {missing}) AS level
    FROM normed n LEFT JOIN fact_levels l ON n.query_id = l.query_id AND n.answer = l.answer
), facts AS (
    SELECT n.system, n.query_id, n.answer, w.tail, w.level, min(n.answer_raw) AS answer_raw
    FROM levelled n JOIN wanted_cells w
    ON n.system = w.system AND n.query_id = w.query_id AND {tail} = w.tail AND n.level = w.level
    GROUP BY n.system, n.query_id, n.answer, w.tail, w.level
), ranked AS (
    SELECT system, query_id, tail, level, answer_raw,
           row_number() OVER (PARTITION BY system, query_id, tail, level ORDER BY answer) - 1
           AS pos
    FROM facts
)
SELECT d.system, d.draw, f.query_id, f.answer_raw FROM ranked f JOIN draw_cells d
ON f.system = d.system AND f.query_id = d.query_id AND f.tail = d.tail AND f.level = d.level
AND f.pos = d.pos
"""


def strata_ranks(
    level_sizes: pd.DataFrame, weights: np.ndarray, floor: float, uniforms: dict[str, np.ndarray]
) -> pd.DataFrame:
    """``system, draw, k, level`` of the ``judge-strata`` design s_j(x) = a/N_j + (1 − a)
    u_h(x)/U_j, U_j = Σ_h N_jh u_h (a = ``floor``, u = ``weights``; ``level_sizes``: ``system,
    level, facts``), a mixture drawn from one uniform v per draw: v < a draws uniformly from
    all the system's facts (``k`` = ⌊(v/a) · N_j⌋, ``level`` = -1); otherwise t = (v − a)/(1 −
    a) · U_j picks the level h where the cumulative mass N_jh u_h passes t (levels in order),
    and ``k`` = ⌊(t − mass before h) / u_h⌋ among its facts (``level`` = h).  Each draw's
    probability needs its fact's level: :func:`pick_strata_draws`."""
    pieces = []
    for system, rows in level_sizes.groupby("system", sort=True):
        v = uniforms.get(system)
        if v is None or not len(v):
            continue
        rows = rows.sort_values("level")
        level = rows["level"].to_numpy(np.int64)
        facts = rows["facts"].to_numpy(np.int64)
        total = int(facts.sum())
        mass = facts * weights[level]
        cum = np.cumsum(mass)
        uniform = (v < floor) | ~(cum[-1] > 0)
        k = np.minimum(np.floor(v / floor * total), total - 1).astype(np.int64)
        t = (v - floor) / (1.0 - floor) * cum[-1]
        last = int(np.flatnonzero(mass > 0)[-1]) if cum[-1] > 0 else 0
        h = np.minimum(np.searchsorted(cum, t, side="right"), last)
        with np.errstate(invalid="ignore", divide="ignore"):
            pos = np.floor((t - (cum[h] - mass[h])) / weights[level[h]])
        pos = np.clip(np.nan_to_num(pos), 0, facts[h] - 1).astype(np.int64)
        pieces.append(
            pd.DataFrame(
                {
                    "system": system,
                    "draw": np.arange(1, len(v) + 1, dtype=np.int64),
                    "k": np.where(uniform, k, pos),
                    "level": np.where(uniform, -1, level[h]),
                }
            )
        )
    if not pieces:
        return pd.DataFrame(
            {c: pd.Series([], dtype=t) for c, t in (("system", object), ("draw", np.int64),
                                                    ("k", np.int64), ("level", np.int64))}
        )  # fmt: skip
    return pd.concat(pieces, ignore_index=True)


def strata_mass(counts: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Σ_{X_j} u_h = Σ_h N_jh u_h of a ``judge-strata`` design per system, from ``counts``
    (m, L + 1) its distinct facts per level, summed level by level: the same bits from the
    output rows and from the engine's per-level counts (:mod:`receval.engine.strata`)."""
    total = np.zeros(counts.shape[0])
    for h in range(counts.shape[1]):
        total = total + counts[:, h] * u[h]
    return total


def strata_probability(level_sizes: pd.DataFrame, weights: np.ndarray, floor: float):
    """``prob(systems, levels)``: s_j(x) = a/N_j + (1 − a) u_h/Σ_h N_jh u_h of the
    ``judge-strata`` design at a fact of level h (uniform where U_j = 0; a = ``floor``, u =
    ``weights``, ``level_sizes``: ``system, level, facts``; the masses summed level by level,
    :func:`strata_mass`, so that every path gets the same bits)."""
    counts = level_sizes.pivot_table(
        index="system", columns="level", values="facts", aggfunc="sum", fill_value=0
    ).reindex(columns=range(len(weights)), fill_value=0)
    n = counts.sum(axis=1).astype(float)
    mass = pd.Series(strata_mass(counts.to_numpy(np.int64), weights), index=counts.index)

    def prob(systems: np.ndarray, levels: np.ndarray) -> np.ndarray:
        size = n.reindex(systems).to_numpy(float)
        total = mass.reindex(systems).to_numpy(float)
        share = np.where(total > 0, weights[levels] / np.where(total > 0, total, 1.0), 1.0 / size)
        return floor / size + (1.0 - floor) * share

    return prob


def pick_strata_draws(
    engine: Engine,
    ranks: pd.DataFrame,
    forms: dict[str, str],
    missing: int,
    prob,
    batches: list[str] | None = None,
) -> pd.DataFrame:
    """Every draw of ``ranks`` (:func:`strata_ranks`) as :func:`pick_draws` returns them,
    ``prob`` = ``prob(system, level)`` at each drawn fact's level (:data:`LOCATE_LEVELS`, then
    :data:`PICK_LEVELS`)."""
    out = ["system", "draw", "query_id", "answer_raw", "prob"]
    if ranks.empty:
        return pd.DataFrame({c: [] for c in out})
    engine.register("draw_ranks", ranks[["system", "draw", "k", "level"]])
    cells = engine.query(LOCATE_LEVELS)
    engine.register("draw_cells", cells)
    keys = ["system", "query_id", "tail", "level"]
    engine.register("wanted_cells", cells[keys].drop_duplicates())
    engine.register("wanted_queries", cells[["system", "query_id", "odd"]].drop_duplicates())
    tail = TAIL.format(a="n.answer")
    picked = _batched(
        engine,
        batches,
        lambda runs: PICK_LEVELS.format(tail=tail, runs=runs, missing=int(missing), **forms),
    )
    levels = cells[["system", "draw", "level"]].astype({"level": np.int64})
    drawn = ranks[["system", "draw"]].merge(picked, on=["system", "draw"], how="left")
    drawn = drawn.merge(levels, on=["system", "draw"], how="left", validate="1:1")
    if drawn["query_id"].isna().any():  # pragma: no cover - the scans saw different runs
        raise RuntimeError("the runs changed between two scans of one sample round")
    drawn["prob"] = prob(drawn["system"].to_numpy(object), drawn["level"].to_numpy(np.int64))
    return drawn.sort_values(["system", "draw"], ignore_index=True)[out]
