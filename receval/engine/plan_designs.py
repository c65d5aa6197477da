"""``sample --adaptive`` on the engine path beyond uniform designs: what the grouped planner
(:class:`receval.planning.GroupPlanner`, :mod:`receval.engine.adaptive`) needs of the judge's
strata, of a planned design other than uniform and of equivalence classes, as the in-memory
planner (:class:`receval.planning._Planner`) computes it from the output rows.

* **Rounds drawn** ``--by-judge`` (``judge-strata:<judge>:<u_0>,…`` in samples.tsv): their
  s_j(x) is one value per (system, level of x) (:func:`receval.engine.strata.level_probabilities`),
  so the existing mass M0(x) = Σ_j n_j s_j(x) adds Σ_k over the systems k that output x of one
  weight per (k, level) (:func:`level_weights`), joined per fact in SQL.
* **A planned design** other than uniform: ``--by-judge`` (the ``judge-strata`` design of
  :func:`receval.engine.sampled.judge_strata`, one value per (system, level)) or
  ``--distribution entity-relation`` (one value per (system, query)).  The planner's sums then
  weight each fact by s_j(x): the facts are grouped by their level or query as well
  (:func:`group_keys`), and :func:`planned_matrix` gives each group's s_j.  ``--by-judge``
  also plans for ``--estimator ppi``: the judge's factor 1 − ρ_lo²
  (:func:`receval.planning.judge_factor`) computed on :func:`receval.engine.sampled.judge_task`,
  whose labelled facts carry the whole task's scores and calibration.
* **Equivalence classes**: the in-memory planner reads labels, units and pooled-recall terms
  from the task seen with one fact per class (:func:`receval.estimators.sample_data.build_sample_data`)
  but the masses, targets and membership of the drawn (canonical) facts from the runs as they
  are (``task.outputs``); :func:`plan_draws` gives those arrays
  (:class:`receval.planning.PlanDraws`), and the groups are the runs' own facts.

One judge's levels are planned: rounds drawn ``--by-judge`` by two judges, or a plan by a judge
other than the one of the rounds already drawn, is a ``ValueError`` (:func:`strata_judge`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from receval.engine.base import Engine
    from receval.engine.sampled_data import Classes, EngineDesigns, SmallTables
    from receval.engine.summary import RunSummary
    from receval.estimators.sample_data import SampleData
    from receval.planning import PlanDraws

#: the graded facts' levels of the strata judge, keyed as the planner's facts
PLAN_LEVELS = "SELECT {q} AS q, {h} AS a, level FROM judge_levels WHERE j = {j}"

#: :data:`receval.engine.adaptive.PLAN_CELL_PARTS`' joins adding the level weights of the
#: rounds drawn --by-judge (``plan_level_w(system, level, w)``) to each member's mass
LEVEL_JOINS = """
LEFT JOIN plan_levels fl ON d.q = fl.q AND d.a = fl.a
LEFT JOIN plan_level_w lw ON d.system = lw.system AND coalesce(fl.level, {missing}) = lw.level"""

#: :data:`receval.engine.adaptive.PLAN_GROUPS`' join of each fact's level
GROUP_LEVEL_JOIN = "\nLEFT JOIN plan_levels lv ON f.q = lv.q AND f.a = lv.a"


@dataclass(frozen=True)
class JudgeSide:
    """The judge's part of a plan: ``task`` (:func:`receval.engine.sampled.judge_task`, None
    when neither the plan nor a drawn round needs the judge), the planned ``design``
    (``uniform``, ``entity-relation`` or the ``judge-strata`` design of ``--by-judge``) and
    ``factor`` (:func:`receval.planning.judge_factor`; 1 without ``--by-judge``)."""

    task: Any
    design: str
    factor: float = 1.0


def is_strata(design: str) -> bool:
    """Whether ``design`` is a ``judge-strata`` design."""
    from receval.design import JUDGE_STRATA

    return str(design).startswith(JUDGE_STRATA + ":")


def strata_names(designs) -> set[str]:
    """The judges of the ``judge-strata`` designs among ``designs``."""
    from receval.design import parse_judge_strata

    return {parse_judge_strata(d)[0] for d in designs if is_strata(d)}


def declared(small: SmallTables) -> set[str]:
    """The designs samples.tsv declares."""
    if "design" not in small.samples:
        return set()
    return set(small.samples["design"].fillna("").astype(str).str.strip()) - {""}


def judge_side(
    bundle, small: SmallTables, distribution: str, by_judge: bool, check=None
) -> JudgeSide:
    """The :class:`JudgeSide` of a plan (module docstring); BundleError as ``sample
    --by-judge``'s without a judge table; ``check``: the judge table's one-grade check
    (:func:`receval.engine.sampled.one_grade_check`)."""
    from pathlib import Path

    from receval.engine.sampled import judge_task, task_strata

    drawn = strata_names(declared(small))
    if not by_judge and not (drawn and bundle.table("judge") is not None):
        return JudgeSide(None, distribution)
    task = judge_task(Path(bundle.root), {}, small.config, small.queries, small.judgments, check)
    if not by_judge:
        return JudgeSide(task, distribution)
    from receval.planning import judge_factor

    return JudgeSide(task, task_strata(task).design, judge_factor(task))


@dataclass(frozen=True)
class StagedLevels:
    """The judges' levels staged in ``engine`` as table ``judge_levels(query_id, answer,
    level, j)`` (the graded facts, answers normalised): what
    :func:`receval.engine.strata.judge_levels` reads of an engine judge."""

    engine: Engine
    names: tuple[str, ...]
    missing: tuple[int, ...]


def stage_levels(engine: Engine, task) -> StagedLevels | None:
    """Every judge's graded levels of ``task`` (:func:`receval.engine.sampled.graded_levels`)
    registered in ``engine``; None without a task."""
    if task is None:
        return None
    from receval.engine.sampled import graded_levels
    from receval.judge import judge_grades

    names = tuple(judge_grades(task).names)
    parts, missing = [], []
    for j, name in enumerate(names):
        levels, top = graded_levels(task, name)
        parts.append(levels.assign(j=j))
        missing.append(top)
    frame = pd.concat(parts, ignore_index=True).astype({"level": np.int64, "j": np.int64})
    engine.register("judge_levels", frame)
    return StagedLevels(engine, names, tuple(missing))


def strata_judge(data: SampleData, side: JudgeSide) -> str | None:
    """The one judge whose levels the plan reads (of the rounds drawn ``--by-judge`` and of a
    ``--by-judge`` plan), None when none; ValueError for two."""
    names = strata_names([*data.sampler_design, side.design])
    if len(names) > 1:
        raise ValueError(
            "the engine path does not plan --adaptive with the strata of several judges "
            f"({', '.join(sorted(names))}: rounds drawn --by-judge and the plan); plan in memory "
            "(--in-memory)"
        )
    return next(iter(names), None)


def level_weights(data: SampleData, designs: EngineDesigns, sizes: np.ndarray) -> pd.DataFrame:
    """``system, level, w``: Σ_k n_k s_k(h) over each system's samplers of a ``judge-strata``
    design (n_k its labelled draws), at every level h."""
    from receval.design import parse_judge_strata
    from receval.engine.strata import level_probabilities

    m = len(data.systems)
    total = None
    for k, design in enumerate(data.sampler_design):
        if not is_strata(design):
            continue
        name, _ = parse_judge_strata(design)
        table = level_probabilities(design, designs.judge_levels(name), sizes)
        j = int(data.sampler_system[k])
        if total is None:
            total = np.zeros((m, table.shape[1]))
        width = min(total.shape[1], table.shape[1])
        total[j, :width] = total[j, :width] + float(data.sampler_n[k]) * table[j, :width]
    if total is None:
        return pd.DataFrame({"system": [], "level": [], "w": []})
    rows, levels = np.nonzero(np.ones_like(total, bool))
    keep = total.any(axis=1)[rows]
    return pd.DataFrame(
        {
            "system": np.asarray(data.systems, object)[rows[keep]],
            "level": levels[keep].astype(np.int64),
            "w": total[rows[keep], levels[keep]],
        }
    )


@dataclass(frozen=True)
class GroupKeys:
    """The SQL pieces that key the planner's facts beyond (masks, M0, label): ``parts`` the
    existing mass's extra term and joins (rounds drawn ``--by-judge``), ``keys``/``group``/
    ``joins`` the groups' extra key (the level or the query of a planned design other than
    uniform), ``by`` which (``''``, ``level``, ``query``)."""

    extra: str = ""
    parts: str = ""
    keys: str = ""
    group: str = ""
    joins: str = ""
    by: str = ""


def group_keys(
    engine: Engine,
    data: SampleData,
    designs: EngineDesigns,
    side: JudgeSide,
    staged: StagedLevels | None,
    sizes: np.ndarray,
) -> GroupKeys:
    """The :class:`GroupKeys` of a plan, the tables they read registered
    (``plan_levels``, ``plan_level_w``)."""
    from receval.engine.run_files import create_view

    name = strata_judge(data, side)
    extra = parts = keys = group = joins = by = ""
    if name is not None:
        if staged is None or name not in staged.names:
            raise ValueError(f"the design of judge {name!r} needs its grades (judge.tsv)")
        j = staged.names.index(name)
        missing = staged.missing[j]
        q, h = engine.dialect.hash64("query_id"), engine.dialect.hash64("answer")
        create_view(engine, "plan_levels", PLAN_LEVELS.format(q=q, h=h, j=j), materialise=True)
        weights = level_weights(data, designs, sizes)
        if len(weights):
            engine.register("plan_level_w", weights)
            extra, parts = " + coalesce(lw.w, 0)", LEVEL_JOINS.format(missing=missing)
        if is_strata(side.design):
            level = f"coalesce(lv.level, {missing})"
            keys, group, joins, by = f", {level} AS level", f", {level}", GROUP_LEVEL_JOIN, "level"
    if side.design == "entity-relation":
        keys, group, by = ", f.q AS gq", ", f.q", "query"
    return GroupKeys(extra, parts, keys, group, joins, by)


def planned_matrix(
    engine: Engine,
    frame: pd.DataFrame,
    rows: np.ndarray,
    cols: np.ndarray,
    columns: list[int],
    side: JudgeSide,
    designs: EngineDesigns,
    summary: RunSummary,
):
    """(groups × columns) sparse s_j(x) of the planned design at each group's facts (``rows``,
    ``cols``: the groups' memberships of the planned columns; ``frame``: the groups with their
    ``level`` or ``gq``), None for the uniform design."""
    from scipy import sparse

    if side.design == "uniform":
        return None
    systems = np.asarray(columns, np.int64)[cols]
    if is_strata(side.design):
        from receval.design import parse_judge_strata
        from receval.engine.strata import level_probabilities

        name, _ = parse_judge_strata(side.design)
        table = level_probabilities(side.design, designs.judge_levels(name), summary.sizes)
        values = table[systems, frame["level"].to_numpy(np.int64)[rows]]
    else:
        values = _cell_values(engine, frame["gq"].to_numpy(np.int64)[rows], systems, designs)
    shape = (len(frame), len(columns))
    return sparse.csr_matrix((values, (rows, cols)), shape=shape)


def _cell_values(engine: Engine, q: np.ndarray, systems: np.ndarray, designs: EngineDesigns):
    """The entity-relation s_j(q) of each (query key ``q``, system code) pair."""
    queries = designs.small.queries["query_id"].astype(str).to_numpy(object)
    engine.register("plan_queries", pd.DataFrame({"query_id": queries}))
    keyed = engine.query(
        f"SELECT query_id, {engine.dialect.hash64('query_id')} AS q FROM plan_queries"
    )
    name = pd.Series(keyed["query_id"].to_numpy(object), index=keyed["q"].to_numpy(np.int64))
    cells = designs.cells("entity-relation")
    key = pd.MultiIndex.from_arrays(
        [np.asarray(designs.summary.systems, object)[systems], name.reindex(q).to_numpy(object)]
    )
    return cells.reindex(key).to_numpy(float)


def plan_classes(small: SmallTables, summary: RunSummary) -> Classes | None:
    """The judgments' equivalence classes for the planner's data (no aggregation over the
    runs: the count of outputs nobody classed, which planning does not read, is left at 0)."""
    from receval.engine.sampled_data import Classes, class_canon, collapse_members

    canon = class_canon(small)
    if canon is None:
        return None
    members = collapse_members(summary.members, canon)
    return Classes(canon=canon, members=members, query_facts=pd.Series(dtype=np.int64))


def plan_draws(
    small: SmallTables,
    summary: RunSummary,
    data: SampleData,
    designs: EngineDesigns,
    classes: Classes | None,
    side: JudgeSide,
) -> PlanDraws | None:
    """The drawn facts' arrays as the in-memory planner reads them (module docstring), None
    when they are ``data``'s own (no classes, the uniform planned design)."""
    from receval.engine.sampled_data import drawn_proposals, member_matrix, samplers_of
    from receval.planning import PlanDraws

    if classes is None and side.design == "uniform":
        return None
    drawn = np.asarray(data.facts, np.int64)
    sizes = np.asarray(summary.sizes, float)
    member = np.asarray(data.member, bool)
    mass0 = None
    if classes is not None:  # the runs' own membership and proposals at the canonical facts
        member = member_matrix(summary, drawn)
        samplers = samplers_of(small, summary, designs)
        if set(data.sampler_design) != {"uniform"} and member.size:
            proposal = drawn_proposals(small, summary, drawn, member, samplers, None, designs)
            mass0 = proposal @ np.asarray(data.sampler_n, float)
    elif set(data.sampler_design) != {"uniform"} and member.size:
        mass0 = data.proposal @ np.asarray(data.sampler_n, float)
    if mass0 is None:
        n_by_sys = np.bincount(data.sampler_system, weights=data.sampler_n, minlength=data.m)
        with np.errstate(divide="ignore"):
            inverse = np.where(sizes > 0, 1.0 / np.where(sizes > 0, sizes, 1.0), 0.0)
        mass0 = member.astype(float) @ (n_by_sys * inverse) if member.size else np.zeros(0)
    planned = None
    if side.design != "uniform":
        planned = np.zeros(member.shape)
        rows, cols = np.nonzero(member)
        planned[rows, cols] = designs.at_function(side.design)(cols, drawn[rows])
    return PlanDraws(sizes=sizes, member=member.astype(float), mass0=mass0, planned=planned)
