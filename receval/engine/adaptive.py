"""``sample --adaptive`` on the engine path: the planner of :mod:`receval.planning` fed from
SQL aggregates whose results are small, never from the output rows.

The planner (Chaganty et al. 2017, "Adaptive sample size for a newly submitted system"; the
appendix's Theorem 1) needs, besides the draws and their labels (the engine's sample arrays,
:func:`receval.engine.sampled_data.engine_sample_data`), sums over *every* fact of a planned
system: Σ_{x ∈ X_i ∩ X_j} w(x) / M(x)^p with M(x) the mixture mass of x once the planned draws
are added (:class:`receval.planning.GroupPlanner`).  M(x) depends on x only through which
systems output it: the existing mass M0(x) = Σ_k n_k/|X_k| over the sampled systems that output
x, and which planned systems do.  One aggregation (:data:`PLAN_PARTS`, :data:`PLAN_GROUPS`)
groups the pool's facts by (planned systems that output them as bit masks, M0(x), label) and
counts them: a frame of at most one row per fact of the planned systems, usually far fewer
(M0 takes one value per set of sampled systems' sizes); every bisection step of the planner
then runs on it in Python.

Scope: uniform, entity-relation and ``judge-strata`` samplers in ``samples.tsv`` (an
entity-relation sampler's n_j s_j(x) is one value per (system, query): :func:`plan_cells`,
joined per (system, query); a ``judge-strata`` one's one value per (system, level):
:mod:`receval.engine.plan_designs`), the uniform, entity-relation and ``--by-judge`` planned
designs, equivalence classes, the ``micro`` target (:func:`unsupported`: the
``judge-uncertainty`` design is planned in memory).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from collections.abc import Callable

    from receval.engine.base import Engine
    from receval.engine.plan_designs import GroupKeys
    from receval.engine.sampled_data import SmallTables
    from receval.estimators.sample_data import SampleData
    from receval.planning import PlanGroups

#: planned systems per 64-bit mask word (the sign bit left alone)
WORD_BITS = 62

#: per fact of one batch of systems (or of every system): the existing mass M0(x) =
#: Σ_k w_k over the systems k that output x (``plan_systems(system, w, b0, b1, ...)``, w_k =
#: n_k/|X_k|) and which planned systems output it (bit masks); each system counted once
PLAN_PARTS = """
SELECT d.q, d.a, sum(p.w) AS m0{bits}
FROM (SELECT DISTINCT system, {q} AS q, {h} AS a FROM {source} n) d
JOIN plan_systems p ON d.system = p.system
GROUP BY d.q, d.a
"""

#: :data:`PLAN_PARTS` with the existing mass per (system, query) (``plan_cells(system, q, w)``;
#: ``{extra}``/``{joins}``: the level weights of rounds drawn --by-judge,
#: :data:`receval.engine.plan_designs.LEVEL_JOINS`)
PLAN_CELL_PARTS = """
SELECT d.q, d.a, sum(c.w{extra}) AS m0{bits}
FROM (SELECT DISTINCT system, {q} AS q, {h} AS a FROM {source} n) d
JOIN plan_systems p ON d.system = p.system
JOIN plan_cells c ON d.system = c.system AND d.q = c.q{joins}
GROUP BY d.q, d.a
"""

#: the facts of :data:`PLAN_PARTS` (``{parts}``: the parts table or the query itself) merged
#: and grouped by (masks, M0, label): M0 is set to 0 for facts of no planned system (one group);
#: ``{keys}``/``{group}``/``{joins}``: the level or query of a planned design other than
#: uniform (:class:`receval.engine.plan_designs.GroupKeys`)
PLAN_GROUPS = """
SELECT {words}, f.m0 AS m0, l.label AS label{keys}, count(*) AS facts FROM (
    SELECT q, a{merged}, CASE WHEN {none} THEN CAST(0 AS DOUBLE) ELSE sum(m0) END AS m0
    FROM {parts} GROUP BY q, a
) f LEFT JOIN plan_labels l ON f.q = l.q AND f.a = l.a{joins}
GROUP BY {words}, f.m0, l.label{group}
"""

#: the labelled facts' keys (``plan_labels_raw(query_id, answer, label)``, answers normalised)
PLAN_LABELS = "SELECT {q} AS q, {h} AS a, label FROM plan_labels_raw"


#: the planned designs of ``--distribution`` the engine path plans (``--by-judge`` besides)
PLANNED_DESIGNS = ("uniform", "entity-relation")


def unsupported(small: SmallTables, distribution: str = "uniform", by_judge: bool = False) -> str:
    """Why the engine path cannot plan ``--adaptive`` for this bundle ('' when it can)."""
    from receval.engine.plan_designs import declared, is_strata, strata_names

    if not by_judge and distribution not in PLANNED_DESIGNS:
        return f"--distribution {distribution} (the engine plans {', '.join(PLANNED_DESIGNS)})"
    designs = declared(small)
    other = {d for d in designs if not is_strata(d)} - {"uniform", "entity-relation"}
    if other:
        return f"rounds of the {sorted(other)[0]} design in samples.tsv"
    if len(strata_names(designs)) > 1:
        return "rounds drawn --by-judge by several judges (the engine plans one judge's levels)"
    return ""


def mask_words(columns: int) -> int:
    """64-bit words the masks of ``columns`` planned systems need."""
    return max(1, -(-columns // WORD_BITS))


def plan_systems(data: SampleData, columns: list[int], sizes=None) -> pd.DataFrame:
    """``system, w, b0, …``: each system's existing mass n_k/|X_k| (its samplers' labelled
    draws, as the planner counts them; ``sizes`` |X_k|, by default ``data.sizes``) and its bit
    among the planned ``columns``."""
    n = np.bincount(data.sampler_system, weights=data.sampler_n, minlength=data.m)
    sizes = np.asarray(data.sizes if sizes is None else sizes, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(sizes > 0, n / np.where(sizes > 0, sizes, 1.0), 0.0)
    frame = pd.DataFrame({"system": list(data.systems), "w": w})
    bits = np.zeros((data.m, mask_words(len(columns))), np.int64)
    for c, i in enumerate(columns):
        bits[i, c // WORD_BITS] |= np.int64(1) << np.int64(c % WORD_BITS)
    for k in range(bits.shape[1]):
        frame[f"b{k}"] = bits[:, k]
    return frame


def plan_cells(data: SampleData, designs) -> pd.DataFrame | None:
    """``system, query_id, w``: Σ_j n_j s_j(q) over each system's samplers (n_j its labelled
    draws, s_j its design's probability of a fact of query q: ``designs`` an
    :class:`receval.engine.sampled_data.EngineDesigns`) per (system, query) cell; None when
    every sampler is uniform (:func:`plan_systems`' per-system mass).  ``judge-strata``
    samplers are left out (their mass is per level: :mod:`receval.engine.plan_designs`)."""
    from receval.engine.plan_designs import is_strata

    if set(data.sampler_design) <= {"uniform"}:
        return None
    full = designs.cells("uniform") * 0.0  # every answered (system, query)
    frame = None
    for j, design in enumerate(data.sampler_design):
        if is_strata(design):
            continue
        cells = designs.cells(design)
        system = data.systems[int(data.sampler_system[j])]
        mine = cells[cells.index.get_level_values(0) == system] * float(data.sampler_n[j])
        frame = mine if frame is None else frame.add(mine, fill_value=0.0)
    out = (full if frame is None else full.add(frame, fill_value=0.0)).rename("w").reset_index()
    return out.set_axis(["system", "query_id", "w"], axis=1)


def plan_groups(
    engine: Engine,
    data: SampleData,
    columns: list[int],
    labels: pd.DataFrame,
    batches: list[list[str]] | None = None,
    cells: pd.DataFrame | None = None,
    keys: GroupKeys | None = None,
    sizes=None,
    planned=None,
) -> PlanGroups:
    """:class:`receval.planning.PlanGroups` of the runs' facts (module docstring) over the
    view ``normed`` (:func:`receval.engine.summary.register_normed`); ``labels``: ``query_id,
    answer, label`` of the labelled facts (answers normalised, labels finite); ``batches``:
    systems per batch (DuckDB, one file per system: :func:`receval.engine.summary.system_batches`),
    whose parts are merged in one more aggregation; ``cells``: :func:`plan_cells` (None:
    uniform samplers); ``keys``: the SQL of rounds drawn ``--by-judge`` and of a planned
    design other than uniform (:func:`receval.engine.plan_designs.group_keys`); ``sizes``:
    |X_k| of the existing mass (default ``data.sizes``); ``planned``: :func:`_groups`'."""
    from receval.engine.plan_designs import GroupKeys
    from receval.engine.run_files import create_view
    from receval.engine.summary import _in_systems

    keys = keys or GroupKeys()
    words = mask_words(len(columns))
    engine.register("plan_systems", plan_systems(data, columns, sizes))
    engine.register("plan_labels_raw", labels[["query_id", "answer", "label"]])
    q, h = engine.dialect.hash64("query_id"), engine.dialect.hash64("answer")
    create_view(engine, "plan_labels", PLAN_LABELS.format(q=q, h=h), materialise=True)
    bits = "".join(f", bit_or(p.b{k}) AS b{k}" for k in range(words))
    sources = [_in_systems(engine, b) for b in batches] if batches else ["normed"]
    template, more = PLAN_PARTS, {}
    if cells is not None:
        engine.register("plan_cells_raw", cells)
        sql = f"SELECT system, {q} AS q, w FROM plan_cells_raw"
        create_view(engine, "plan_cells", sql, materialise=True)
        template, more = PLAN_CELL_PARTS, {"extra": keys.extra, "joins": keys.parts}
    parts_sql = [template.format(bits=bits, q=q, h=h, source=s, **more) for s in sources]
    if len(parts_sql) > 1:
        engine.create_table("plan_parts", parts_sql[0])
        for sql in parts_sql[1:]:
            engine.con.execute(f"INSERT INTO plan_parts {sql}")
        parts = "plan_parts"
    else:
        parts = f"({parts_sql[0]}) t"
    names = [f"b{k}" for k in range(words)]
    sql = PLAN_GROUPS.format(
        words=", ".join(f"f.{b}" for b in names),
        merged="".join(f", bit_or({b}) AS {b}" for b in names),
        none=" AND ".join(f"bit_or({b}) = 0" for b in names),
        parts=parts,
        keys=keys.keys,
        joins=keys.joins,
        group=keys.group,
    )
    frame = engine.query(sql)
    if len(parts_sql) > 1:
        engine.con.execute("DROP TABLE plan_parts")
    return _groups(frame, columns, names, planned)


def _groups(frame: pd.DataFrame, columns: list[int], names: list[str], planned=None) -> PlanGroups:
    """The aggregated frame as :class:`receval.planning.PlanGroups` (masks decoded);
    ``planned(frame, rows, cols)``: the planned design's sparse s_j (None: uniform)."""
    from scipy import sparse

    from receval.planning import PlanGroups

    rows, cols = [], []
    for k, name in enumerate(names):
        word = frame[name].to_numpy(np.int64)
        for bit in range(min(WORD_BITS, len(columns) - k * WORD_BITS)):
            hit = np.flatnonzero((word >> np.int64(bit)) & 1)
            rows.append(hit)
            cols.append(np.full(hit.size, k * WORD_BITS + bit))
    r = np.concatenate(rows) if rows else np.empty(0, np.int64)
    c = np.concatenate(cols) if cols else np.empty(0, np.int64)
    member = sparse.csr_matrix((np.ones(r.size), (r, c)), shape=(len(frame), len(columns)))
    return PlanGroups(
        columns=list(columns),
        member=member,
        mass0=frame["m0"].to_numpy(float),
        label=pd.to_numeric(frame["label"], errors="coerce").to_numpy(float),
        count=frame["facts"].to_numpy(float),
        planned=None if planned is None else planned(frame, r, c),
    )


def labelled_facts(small: SmallTables) -> pd.DataFrame:
    """``query_id, answer, label`` of the facts with a finite merged label."""
    from receval.engine.sampled_data import merged_labels

    labels = merged_labels(small).labels
    labels = labels[np.isfinite(labels.to_numpy(float))]
    facts = small.facts.loc[labels.index.to_numpy(np.int64)]
    return pd.DataFrame(
        {
            "query_id": facts["query_id"].astype(str).to_numpy(object),
            "answer": facts["answer"].astype(str).to_numpy(object),
            "label": labels.to_numpy(float),
        }
    )


def adaptive_sizes(
    bundle,
    target_width: float,
    *,
    confidence: float = 0.95,
    systems: list[str] | None = None,
    max_n: int = 2000,
    bound: str = "expected",
    width_for: str = "both",
    on_system: Callable[[str], None] | None = None,
    engine: str = "duckdb",
    distribution: str = "uniform",
    by_judge: bool = False,
) -> pd.DataFrame:
    """:func:`receval.api.plan_sample` of the bundle (same options; ``by_judge``: the
    ``--by-judge`` plan, the judge-strata design for ``--estimator ppi``, as ``sample
    --adaptive --by-judge`` plans in memory), its inputs from the engine (module docstring): the
    same frame ``system, n, precision_halfwidth, recall_halfwidth, reached, note`` (equal to
    the in-memory planner's up to the order of summation)."""
    from receval.engine.plan_designs import judge_side
    from receval.engine.sampled import one_grade_check
    from receval.engine.sampled_data import read_small_tables
    from receval.options import PLANNING_BOUNDS, WIDTH_FOR, check_choice
    from receval.planning import GroupPlanner, plan_sizes

    check_choice("bound", bound, PLANNING_BOUNDS)
    check_choice("width_for", width_for, WIDTH_FOR)
    metrics = ("precision", "recall") if width_for == "both" else (width_for,)
    small = read_small_tables(bundle)
    problem = unsupported(small, distribution, by_judge)
    if problem:
        raise ValueError(f"the engine path does not plan --adaptive with {problem}")
    with planning_session(bundle, small, engine) as (con, summary, batches):
        check = one_grade_check(con, small.facts, small.config.matching, "normed")
        side = judge_side(bundle, small, distribution, by_judge, check)
        data, groups, draws = _plan_inputs(con, small, summary, batches, side, systems)
    planner = GroupPlanner(data, groups, bound, draws, side.factor)
    return plan_sizes(planner, data, target_width, confidence, systems, max_n, metrics, on_system)


def _plan_inputs(con, small: SmallTables, summary, batches, side, systems):
    """(the draws' arrays, the pool's groups, :class:`receval.planning.PlanDraws` or None) of
    a plan over ``con``'s session."""
    from functools import partial

    from receval.engine import plan_designs as pd_
    from receval.engine.sampled_data import EngineDesigns, engine_sample_data
    from receval.planning import _systems_to_plan

    staged = pd_.stage_levels(con, side.task)
    designs = EngineDesigns(small, summary, staged, batches)
    classes = pd_.plan_classes(small, summary)
    data = engine_sample_data(small, summary, "micro", classes=classes, designs=designs)
    unknown = sorted(set(systems or ()) - set(data.systems))
    if unknown:
        raise ValueError(f"unknown system(s): {', '.join(unknown)}")
    index = {s: i for i, s in enumerate(data.systems)}
    columns = [index[s] for s in _systems_to_plan(data, systems)]
    sizes = summary.sizes
    keys = pd_.group_keys(con, data, designs, side, staged, sizes)
    cells = plan_cells(data, designs)
    planned = None
    if side.design != "uniform":
        planned = partial(_planned, con, columns, side, designs, summary)
    labels = labelled_facts(small)
    groups = plan_groups(con, data, columns, labels, batches, cells, keys, sizes, planned)
    draws = pd_.plan_draws(small, summary, data, designs, classes, side)
    return data, groups, draws


def _planned(con, columns, side, designs, summary, frame, rows, cols):
    from receval.engine.plan_designs import planned_matrix

    return planned_matrix(con, frame, rows, cols, columns, side, designs, summary)


@contextlib.contextmanager
def planning_session(bundle, small: SmallTables, engine: str = "duckdb"):
    """An engine over the bundle's runs (Parquet read on disk; other formats loaded and
    registered: :class:`receval.engine.sampled._round_engine`) with the view ``normed``, the
    runs' summary (:func:`receval.engine.summary.summarise_runs`, without the pool's facts,
    which planning does not read: counted only to check a declared ``[universe] size``) and the
    batches of systems (DuckDB, one file per system) — yielded as ``(engine, summary,
    batches)``."""
    from receval.engine.sampled import _round_engine
    from receval.engine.score import _check_universe, run_layout, summarise_session
    from receval.engine.summary import system_batches

    files, by_system = run_layout(bundle, small)
    with _round_engine(bundle, engine) as con:
        universe = small.config.universe_size is not None
        summary = summarise_session(con, bundle, small, files, by_system, pool=universe)
        if universe:
            _check_universe(small, summary)
        duck = by_system is not None and con.name == "duckdb"
        batches = system_batches(summary.cells, by_system) if duck else None
        yield con, summary, batches
