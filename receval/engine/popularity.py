"""What the anytime intervals need from the runs: the pool's facts by popularity, in SQL.

The confidence sequences of :mod:`receval.estimators.anytime` stratify the pool by
*popularity*, the number of systems that output a fact, capped at
:data:`~receval.estimators.anytime.control.STRATA` (:func:`~receval.estimators.anytime.control.
popularity_strata`), and bound each step's terms with the design's smallest probability of a
pool fact, min_x Σ_j p_j(x) (:func:`receval.estimators.anytime.stream._design_arrays`).  Both
are aggregates over every fact of the pool; what Python keeps is small:

* per (system, query, stratum): the system's distinct facts of that query in that stratum
  (:data:`STRATUM_CELLS`; at most m × Q × STRATA rows), from which the stream's per-system
  target mass and fact count per stratum and its κ_ib = min p_i/t_i follow for the uniform
  design (:func:`receval.engine.score.stream_designs`);
* the smallest Σ_{k ∈ S(x)} 1/|X_k| over the pool facts (S(x) the systems that output x): the
  uniform design's floor, from the same scan.

Facts are (query, 64-bit hash of the normalised answer), as in :mod:`receval.engine.summary`.
In DuckDB with one run file per system, each batch of systems
(:func:`receval.engine.summary.system_batches`) appends its distinct (system, fact) pairs as
fixed-size codes to table ``popularity_parts`` (spilled), which is then aggregated in slices
by a hash of the query; Spark (or a single runs table) runs the aggregation in one query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from receval.engine.base import Engine

#: one batch's distinct (system code, query hash, answer hash) triples
POPULARITY_PARTS = """
SELECT DISTINCT c.code, {q} AS q, {h} AS a
FROM {source} n JOIN system_codes c ON n.system = c.system
"""

#: per (system code, query hash, stratum): distinct facts, and the least Σ 1/|X_k| over the
#: systems k of each fact of the group (the uniform design's floor), for the slice ``{where}``;
#: with :func:`design_columns`, the least Σ_k p_k(x) of other designs and facts left out too
STRATUM_CELLS = """
WITH s AS ({rows}),
pop AS (
    SELECT s.q, s.a, count(*) AS n, sum(c.p) AS mass{sums}
    FROM s JOIN system_codes c ON s.code = c.code{joins} GROUP BY s.q, s.a
)
SELECT s.code, s.q, least(pop.n, {strata}) - 1 AS stratum{level}, count(*) AS facts,
       min(pop.mass) AS pool_min{mins}
FROM s JOIN pop ON s.q = pop.q AND s.a = pop.a
GROUP BY s.code, s.q, least(pop.n, {strata}) - 1{level_group}
"""

#: the pairs of :data:`STRATUM_CELLS` (``{rows}``), or with each fact's judge level
#: (``popularity_levels(q, a, level)``: the graded facts; ``{missing}`` the others) for the
#: ``judge-strata`` designs, whose p is one value per (system, level)
PAIRS = "SELECT code, q, a FROM {parts} {where}"
LEVELLED_PAIRS = """
SELECT t.code, t.q, t.a, coalesce(fl.level, {missing}) AS level
FROM (SELECT code, q, a FROM {parts} {where}) t
LEFT JOIN popularity_levels fl ON t.q = fl.q AND t.a = fl.a"""

#: a design's p per (system code, query hash) (``design_cells_raw_{k}(code, query_id, p)``)
DESIGN_CELLS = "SELECT code, {q} AS q, p FROM design_cells_raw_{k}"
#: a ``judge-strata`` design's p per (system code, level) (``design_levels_{k}(code, level, p)``)
LEVEL_JOIN = " LEFT JOIN design_levels_{k} d{k} ON s.code = d{k}.code AND s.level = d{k}.level"
#: the facts the floors leave out (``floor_out(query_id, answer)``, answers normalised)
FLOOR_OUT = "SELECT {q} AS q, {h} AS a, 1 AS out FROM floor_out_raw"

#: distinct (system, fact) pairs in one slice of :data:`STRATUM_CELLS` (DuckDB)
SLICE_PAIRS = 20_000_000


def design_columns(
    engine: Engine, systems: list[str], designs: dict | None, out: pd.DataFrame | None
) -> dict[str, str]:
    """The ``{sums}``, ``{joins}`` and ``{mins}`` of :data:`STRATUM_CELLS`: per design of
    ``designs`` (name → p per ``system, query_id``) its least Σ_k p_k(x) (``pool_min_<k>``),
    over the facts other than ``out`` (``query_id, answer``: the members of equivalence
    classes, whose class is one fact of the scored view; the uniform floor too); empty
    without either."""
    import numpy as np

    from receval.engine.run_files import create_view

    if not designs and out is None:
        return {"sums": "", "joins": "", "mins": ""}
    q, h = engine.dialect.hash64("query_id"), engine.dialect.hash64("answer")
    sums, joins, mins = [], [], []
    keep = ""
    if out is not None:
        engine.register("floor_out_raw", out[["query_id", "answer"]].astype(object))
        create_view(engine, "floor_out", FLOOR_OUT.format(q=q, h=h), materialise=True)
        joins.append(" LEFT JOIN floor_out x ON s.q = x.q AND s.a = x.a")
        sums.append(", max(x.out) AS out")
        keep = "CASE WHEN pop.out IS NULL THEN {mass} END"
        mins.append(", min(" + keep.format(mass="pop.mass") + ") AS pool_min_uniform")
    code = pd.Index(systems)
    for k, cells in enumerate((designs or {}).values()):
        mass = f"pop.mass{k}"
        if "level" in cells:  # a judge-strata design: p per (system, level)
            frame = pd.DataFrame(
                {
                    "code": code.get_indexer(cells["system"]).astype(np.int64),
                    "level": cells["level"].to_numpy(np.int64),
                    "p": cells["p"].to_numpy(float),
                }
            )
            engine.register(f"design_levels_{k}", frame)
            joins.append(LEVEL_JOIN.format(k=k))
            sums.append(f", sum(d{k}.p) AS mass{k}")
            mins.append(f", min({keep.format(mass=mass) if keep else mass}) AS pool_min_{k}")
            continue
        frame = pd.DataFrame(
            {
                "code": code.get_indexer(cells["system"]).astype(np.int64),
                "query_id": cells["query_id"].to_numpy(object),
                "p": cells["p"].to_numpy(float),
            }
        )
        engine.register(f"design_cells_raw_{k}", frame)
        create_view(engine, f"design_cells_{k}", DESIGN_CELLS.format(q=q, k=k), materialise=True)
        joins.append(f" LEFT JOIN design_cells_{k} d{k} ON s.code = d{k}.code AND s.q = d{k}.q")
        sums.append(f", sum(d{k}.p) AS mass{k}")
        mins.append(f", min({keep.format(mass=mass) if keep else mass}) AS pool_min_{k}")
    return {"sums": "".join(sums), "joins": "".join(joins), "mins": "".join(mins)}


def stratum_cells(
    engine: Engine,
    systems: list[str],
    sizes,
    queries: list[str],
    batches: list[list[str]] | None,
    designs: dict | None = None,
    out: pd.DataFrame | None = None,
    missing: int | None = None,
) -> tuple[pd.DataFrame, dict[str, float]]:
    """(``system, query_id, stratum, facts`` of :data:`STRATUM_CELLS`, each design's floor
    min_x Σ_{k ∈ S(x)} p_k(x): the uniform design's (1/|X_k|) under ``"uniform"``, and of each
    design of ``designs`` (name → ``system, query_id, p``, or ``system, level, p`` for a
    ``judge-strata`` design) under its name, over the pool facts other than ``out`` when given)
    over view ``normed`` (:func:`receval.engine.summary.register_normed`); ``sizes`` |X_k| of
    ``systems``.  With ``missing`` (the level of an ungraded fact; table ``popularity_levels``
    registered) the cells are split by the judge's level too (a ``level`` column)."""
    import numpy as np

    from receval.engine.summary import _in_systems
    from receval.estimators.anytime.control import STRATA

    sizes = np.asarray(sizes, float)
    codes = pd.DataFrame(
        {"system": systems, "code": np.arange(len(systems)), "p": 1.0 / np.maximum(sizes, 1)}
    )
    engine.register("system_codes", codes)
    q, h = engine.dialect.hash64("query_id"), engine.dialect.hash64("answer")
    columns = design_columns(engine, systems, designs, out)
    pairs = PAIRS if missing is None else LEVELLED_PAIRS.replace("{missing}", str(int(missing)))
    columns["level"] = "" if missing is None else ", s.level AS level"
    columns["level_group"] = "" if missing is None else ", s.level"
    if batches:  # DuckDB, one file per system: the pairs appended batch by batch, then sliced
        for i, batch in enumerate(batches):
            sql = POPULARITY_PARTS.format(q=q, h=h, source=_in_systems(engine, batch))
            if i == 0:
                engine.create_table("popularity_parts", sql)
            else:
                engine.con.execute(f"INSERT INTO popularity_parts {sql}")
        count = "SELECT count(*) AS n FROM popularity_parts"
        slices = max(1, -(-int(engine.query(count)["n"].iloc[0]) // SLICE_PAIRS))
        frames = [
            engine.query(
                STRATUM_CELLS.format(
                    rows=pairs.format(
                        parts="popularity_parts",
                        where=f"WHERE q % {slices} = {k}" if slices > 1 else "",
                    ),
                    strata=STRATA,
                    **columns,
                )
            )
            for k in range(slices)
        ]
        engine.con.execute("DROP TABLE popularity_parts")
        cells = pd.concat(frames, ignore_index=True)
    else:
        parts = "(" + POPULARITY_PARTS.format(q=q, h=h, source="normed") + ") pairs"
        rows = pairs.format(parts=parts, where="")
        cells = engine.query(STRATUM_CELLS.format(rows=rows, strata=STRATA, **columns))
    floors = {"uniform": _least(cells, "pool_min_uniform" if out is not None else "pool_min")}
    for k, name in enumerate(designs or {}):
        floors[name] = _least(cells, f"pool_min_{k}")
    return _named(engine, cells, systems, queries), floors


def _least(cells: pd.DataFrame, column: str) -> float:
    """The least value of ``column`` (inf when every fact was left out, 0 without cells)."""
    if not len(cells):
        return 0.0
    least = pd.to_numeric(cells[column], errors="coerce").min()
    return float("inf") if pd.isna(least) else float(least)


def _named(engine: Engine, cells: pd.DataFrame, systems: list[str], queries: list[str]):
    """``cells`` with system codes and query hashes named again (the hashes of the queries
    are distinct: :func:`receval.engine.summary._check_query_hashes`)."""
    engine.register("query_names", pd.DataFrame({"query_id": sorted(queries)}))
    sql = f"SELECT query_id, {engine.dialect.hash64('query_id')} AS q FROM query_names"
    hashes = engine.query(sql)
    name_of = dict(zip(hashes["q"].tolist(), hashes["query_id"].tolist(), strict=True))
    named = pd.DataFrame(
        {
            "system": [systems[int(c)] for c in cells["code"].tolist()],
            "query_id": [name_of[int(v)] for v in cells["q"].tolist()],
            "stratum": cells["stratum"].astype("int64").to_numpy(),
            "facts": cells["facts"].astype("int64").to_numpy(),
        }
    )
    if "level" in cells:
        named["level"] = cells["level"].astype("int64").to_numpy()
    return named
