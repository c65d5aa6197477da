""":class:`~receval.estimators.sample_data.SampleData` from the engine: the estimators' arrays
built from the runs' aggregates (:mod:`receval.engine.summary`) and the bundle's small tables,
never holding the output rows in Python.

Scope: uniform samplers (``receval sample --per-system``, either path), the ``micro`` and
``macro`` targets, exhaustive units (``exhaustive_units.tsv``, ``exhaustive.tsv``), no
equivalence classes in the judgments; anything else is a ``ValueError`` naming what to use
instead (the in-memory :func:`~receval.estimators.sample_data.build_sample_data`).  Within that
scope the arrays equal :func:`build_sample_data`'s, facts included: the small tables' facts
(judged, drawn and found in exhaustive units) are numbered in sorted ``(query_id, answer)``
order, as the loader numbers every fact, so the drawn facts come in the same order.  The units'
arrays (a_u, b_u, c_ui, per (unit, query)) need only which systems output each fact found in a
unit: the same membership join as the drawn facts' (:data:`receval.engine.summary.MEMBERS`).
One array differs: ``overlap`` (Σ_x t_i(x) s_j(x) over *every* fact, which only
``--weighting overlap`` reads) is NaN: it would need a per-fact aggregation over the whole pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.formats.checks import raise_first_bad

if TYPE_CHECKING:
    from receval.config import TaskConfig
    from receval.engine.summary import RunSummary
    from receval.estimators.sample_data import SampleData


#: the optional tables :func:`read_small_tables` does not read (their names kept in
#: :attr:`SmallTables.optional`: the engine path refuses them)
NOT_READ = ("truth", "judge")


@dataclass(frozen=True)
class SmallTables:
    """The bundle's tables other than the runs, checked as the loader checks them, answers
    normalised (``answer_raw`` keeps the text), each row's ``fact`` numbered over ``facts``."""

    config: TaskConfig
    queries: pd.DataFrame
    judgments: pd.DataFrame
    samples: pd.DataFrame
    facts: pd.DataFrame  # fact (index), query_id, answer: sorted
    files: dict[str, Path]
    samples_path: Path
    optional: tuple[str, ...]  # the optional tables the bundle has and that are not read here
    exhaustive_units: pd.DataFrame  # unit, prob [, draws, design, ...] (checked)
    exhaustive: pd.DataFrame  # unit, query_id, answer (normalised), answer_raw, fact [, documents]


class SmallTablesView:
    """What a view over a bundle reads straight from its :class:`SmallTables` (``self.small``):
    the task's configuration and name, queries, judgments, samples and file paths."""

    small: SmallTables

    @property
    def config(self) -> TaskConfig:
        return self.small.config

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def queries(self) -> pd.DataFrame:
        return self.small.queries

    @property
    def judgments(self) -> pd.DataFrame:
        return self.small.judgments

    @property
    def samples(self) -> pd.DataFrame:
        return self.small.samples

    @property
    def files(self) -> dict[str, Path]:
        return self.small.files


def read_small_tables(bundle) -> SmallTables:
    """The small tables of ``bundle`` (:class:`SmallTables`); BundleError as the loader's."""
    from receval.config import load_config
    from receval.task import (
        _check_exhaustive,
        _check_judgments,
        _check_queries,
        _check_samples,
        _table_source,
        normalize_answers,
    )

    bundle.check_folder()
    root = Path(bundle.root)
    files: dict[str, Path] = {}
    toml = root / "task.toml"
    if toml.is_file():
        files["task.toml"] = toml
    config = load_config(toml, default_name=root.resolve().name)
    queries = _check_queries(_table_source(root, "queries", files))
    known = set(queries["query_id"])
    bundle.run_files()  # an ambiguous or empty runs layout fails here, as the loader's does
    judgments = _check_judgments(_table_source(root, "judgments", files), config, known)
    samples = _check_samples(_table_source(root, "samples", files), known)
    units, exhaustive = _check_exhaustive(
        _table_source(root, "exhaustive_units", files),
        _table_source(root, "exhaustive", files),
        known,
    )
    exhaustive = exhaustive.copy()
    frames = [judgments, samples, exhaustive]
    for frame in frames:
        frame["query_id"] = frame["query_id"].astype(str).str.strip()
        frame["answer_raw"] = frame["answer"]
        frame["answer"] = normalize_answers(frame["answer"].astype(str), config.matching)
    pairs = pd.concat([f[["query_id", "answer"]] for f in frames], ignore_index=True)
    facts = pairs.drop_duplicates().sort_values(["query_id", "answer"], ignore_index=True)
    facts.index.name = "fact"
    lookup = pd.MultiIndex.from_frame(facts)
    for frame in frames:
        frame["fact"] = lookup.get_indexer(pd.MultiIndex.from_frame(frame[["query_id", "answer"]]))
    optional = tuple(name for name in NOT_READ if bundle.table(name) is not None)
    return SmallTables(
        config=config,
        queries=queries,
        judgments=judgments.reset_index(drop=True),
        samples=samples.reset_index(drop=True),
        facts=facts,
        files=files,
        samples_path=files.get("samples", root / "samples.tsv"),
        optional=optional,
        exhaustive_units=units,
        exhaustive=exhaustive.reset_index(drop=True),
    )


def merged_labels(small: SmallTables):
    """:func:`receval.merge.merge_labels` of the judgments (labels indexed by fact)."""
    from receval.merge import merge_labels

    return merge_labels(small.judgments, small.config.merge_rule, small.config.tie_policy)


# ---------------------------------------------------------------------------------------------
# equivalence classes counted once


@dataclass(frozen=True)
class Classes:
    """The judgments' equivalence classes over the small tables' facts
    (:mod:`receval.estimators.classes`): ``canon`` the canonical fact of every small-table fact
    (the smallest fact id of its class; itself outside classes); ``members`` the runs'
    memberships collapsed per (canonical fact, system): ``copies`` summed and ``facts`` the
    class's member facts the system output; ``query_facts`` the distinct facts the runs output
    in each query where some class holds two facts (for :attr:`unresolved`)."""

    canon: np.ndarray
    members: pd.DataFrame
    query_facts: pd.Series

    @property
    def aliased(self) -> int:
        """Classes of the judgments holding several facts."""
        moved = np.flatnonzero(self.canon != np.arange(self.canon.size))
        return int(np.unique(self.canon[moved]).size)

    def queries(self, facts: pd.DataFrame) -> np.ndarray:
        """The queries where some class holds two facts."""
        moved = np.flatnonzero(self.canon != np.arange(self.canon.size))
        return pd.unique(facts["query_id"].to_numpy()[moved])


def class_canon(small: SmallTables) -> np.ndarray | None:
    """The canonical fact of every small-table fact, or None when no class of the judgments
    holds two facts (:func:`receval.estimators.classes.canonical_facts`, which reads only the
    merged votes and labels: every class member is a judged fact of the small tables)."""
    from types import SimpleNamespace

    from receval.estimators.classes import canonical_facts

    merged = merged_labels(small)
    return canonical_facts(SimpleNamespace(merged=merged, labels=merged.labels, facts=small.facts))


def collapse_members(members: pd.DataFrame, canon: np.ndarray) -> pd.DataFrame:
    """``fact, system, copies, facts``: ``members`` per (canonical fact, system)."""
    out = members.assign(fact=canon[members["fact"].to_numpy(np.int64)], facts=1)
    grouped = out.groupby(["fact", "system"], sort=True, observed=True)
    collapsed = grouped[["copies", "facts"]].sum().reset_index()
    return collapsed.astype({"fact": np.int64, "copies": np.int64, "facts": np.int64})


def class_tables(
    small: SmallTables, summary: RunSummary, classes: Classes
) -> tuple[SmallTables, RunSummary]:
    """The small tables and the runs' aggregates seen with one fact per class, as
    :func:`receval.estimators.classes.class_view` sees the task: each system's aliases of one
    class count once in |X_i| and in its (system, query) cell (k aliases output: k − 1 fewer
    facts), memberships per canonical fact, the judgments, draws and exhaustive rows remapped
    (an exhaustive unit finding two aliases finds the class once, with the largest
    ``documents``).  ``rows``, the pool and the teams' facts stay as the runs have them."""
    import dataclasses

    from receval.estimators.classes import _remap

    canon = classes.canon
    members = classes.members
    extra = members[members["facts"] > 1].assign(
        query_id=small.facts["query_id"].to_numpy()[members.loc[members["facts"] > 1, "fact"]],
        less=lambda f: f["facts"] - 1,
    )
    systems = pd.Index(summary.systems)
    fewer = extra.groupby("system")["less"].sum().reindex(systems, fill_value=0).to_numpy(float)
    per_cell = extra.groupby(["system", "query_id"])["less"].sum()
    cells = summary.cells.copy()
    key = pd.MultiIndex.from_frame(cells[["system", "query_id"]])
    cells["facts"] = cells["facts"] - per_cell.reindex(key, fill_value=0).to_numpy()
    exhaustive = small.exhaustive
    if len(exhaustive):
        exhaustive = _remap(exhaustive, canon)
        if "documents" in exhaustive.columns:
            d = pd.to_numeric(exhaustive["documents"], errors="coerce")
            most = d.groupby(exhaustive["fact"].to_numpy(), observed=True).transform("max")
            exhaustive = exhaustive.assign(documents=most.to_numpy())
        exhaustive = exhaustive.drop_duplicates(["unit", "fact"]).reset_index(drop=True)
    small = dataclasses.replace(
        small,
        judgments=_remap(small.judgments, canon),
        samples=_remap(small.samples, canon),
        exhaustive=exhaustive,
    )
    summary = dataclasses.replace(
        summary,
        sizes=summary.sizes - fewer,
        cells=cells,
        members=members[["fact", "system", "copies"]],
    )
    return small, summary


def unresolved_outputs(small: SmallTables, summary: RunSummary, classes: Classes) -> int:
    """:func:`receval.estimators.classes.unresolved_outputs` from the aggregates: the distinct
    facts output in the queries where a class holds two facts (``classes.query_facts``, SQL)
    less the labelled ones among them (their memberships)."""
    labels = merged_labels(small).labels
    queries = classes.queries(small.facts)
    pooled = np.unique(summary.members["fact"].to_numpy(np.int64))
    labelled = np.intersect1d(pooled, labels.index.to_numpy(np.int64))
    in_queries = np.isin(small.facts["query_id"].to_numpy()[labelled], queries)
    total = int(classes.query_facts.reindex(queries, fill_value=0).sum())
    return total - int(in_queries.sum())


def class_proposal(
    small: SmallTables, summary: RunSummary, drawn: np.ndarray, classes: Classes | None
) -> np.ndarray | None:
    """s_j(x) under the uniform design of each drawn canonical fact for every system j (D, m):
    the member facts' probabilities 1/|X_j| (|X_j| as the runs have it) summed per class, as
    :func:`receval.estimators.classes.class_probabilities` sums them (one term per member);
    None without classes."""
    if classes is None:
        return None
    raw = summary.members
    codes = pd.Index(summary.systems).get_indexer(raw["system"])
    frame = pd.DataFrame(
        {
            "system": codes,
            "fact": classes.canon[raw["fact"].to_numpy(np.int64)],
            "s": 1.0 / summary.sizes[codes],
        }
    )
    frame = frame[np.isin(frame["fact"].to_numpy(), drawn)]
    summed = frame.groupby(["system", "fact"], sort=False, observed=True)["s"].sum()
    out = np.zeros((drawn.size, len(summary.systems)))
    out[
        np.searchsorted(drawn, summed.index.get_level_values("fact").to_numpy(np.int64)),
        summed.index.get_level_values("system").to_numpy(np.int64),
    ] = summed.to_numpy(float)
    return out


def samplers_of(small: SmallTables, summary: RunSummary) -> list:
    """The (sample, system) samplers in sorted order, each checked: its system has outputs,
    every drawn fact is one of them, ``prob`` = 1/|X_j| (within 1e-4, as
    :func:`receval.design.infer_designs` checks the uniform design)."""
    from receval.design import Sampler

    samples, path = small.samples, small.samples_path
    if not len(samples):
        return []
    sizes = pd.Series(summary.sizes, index=summary.systems)
    _check_drawn(samples, summary, sizes, path)
    declared = samples["design"] if "design" in samples else pd.Series("", index=samples.index)
    expected = 1.0 / sizes.reindex(samples["system"]).to_numpy(float)
    ok = np.isclose(samples["prob"].to_numpy(float), expected, rtol=1e-4, atol=0)
    ok &= declared.astype(str).str.strip().isin(["", "uniform"]).to_numpy()
    raise_first_bad(
        samples,
        path,
        ~ok,
        "not a uniform draw of this system's facts: the engine's sample data covers the "
        "uniform design only (use the in-memory path)",
    )
    groups = samples.groupby(["sample", "system"], sort=True, observed=True).size()
    return [Sampler(str(a), str(b), "uniform", int(n)) for (a, b), n in groups.items()]


def _check_drawn(samples: pd.DataFrame, summary: RunSummary, sizes: pd.Series, path) -> None:
    """The loader's checks of the draws against the outputs (same messages)."""
    no_outputs = ~(sizes.reindex(samples["system"]).fillna(0).to_numpy() > 0)
    raise_first_bad(
        samples, path, no_outputs, lambda i: f"system {samples['system'].iloc[i]!r} has no outputs"
    )
    pairs = pd.MultiIndex.from_frame(summary.members[["fact", "system"]])
    drawn = pd.MultiIndex.from_arrays([samples["fact"], samples["system"]])
    raise_first_bad(
        samples,
        path,
        ~drawn.isin(pairs),
        lambda i: (
            f"system {samples['system'].iloc[i]!r} never output the drawn answer "
            f"{samples['answer_raw'].iloc[i]!r} for query {samples['query_id'].iloc[i]!r}"
        ),
    )


def member_matrix(summary: RunSummary, facts: np.ndarray) -> np.ndarray:
    """(len(facts), m) bool: which systems output each fact of ``facts`` (sorted ids)."""
    members = summary.members[summary.members["fact"].isin(facts)]
    out = np.zeros((facts.size, len(summary.systems)), bool)
    out[
        np.searchsorted(facts, members["fact"].to_numpy(np.int64)),
        pd.Index(summary.systems).get_indexer(members["system"]),
    ] = True
    return out


def fact_targets(
    small: SmallTables, summary: RunSummary, facts: np.ndarray, member: np.ndarray, target: str
) -> np.ndarray:
    """t_i(x) of each fact of ``facts`` (micro: 1/|X_i|; macro: 1/(Q_i |X_i ∩ q(x)|)), 0 where
    system i did not output x (:func:`receval.estimators.sample_data.query_targets`)."""
    systems = pd.Index(summary.systems)
    with np.errstate(divide="ignore", invalid="ignore"):
        if target == "micro":
            return np.where(member, 1.0 / summary.sizes, 0.0)
        if target != "macro":
            raise ValueError(f"unknown target {target!r} (micro or macro)")
        cells = summary.cells
        answered = cells.groupby("system").size().reindex(systems, fill_value=0).to_numpy(float)
        per_query = cells.pivot_table(index="query_id", columns="system", values="facts")
        per_query = per_query.reindex(columns=systems).reindex(
            small.facts["query_id"].to_numpy()[facts]
        )
        sizes = per_query.to_numpy(float) * answered
        return np.where(member, 1.0 / sizes, 0.0)


def engine_sample_data(
    small: SmallTables,
    summary: RunSummary,
    target: str = "micro",
    classes: Classes | None = None,
) -> SampleData:
    """The estimators' arrays from the small tables and the runs' aggregates (module docstring).

    Python holds the draws, the labels, (D × m) membership of the drawn and labelled facts and
    per-system / per-query aggregates: memory flat in the number of output rows.  With
    ``classes`` (:func:`receval.engine.score.summarise_classes`) every equivalence class counts
    once (:func:`class_tables`), drawn with its members' summed probability
    (:func:`class_proposal`), as :func:`~receval.estimators.sample_data.build_sample_data`.
    """
    from receval.estimators.sample_data import SampleData, _sampler_rounds

    samplers = samplers_of(small, summary)  # on the runs as they are (before the classes)
    raw, unresolved = summary, 0
    if classes is not None:
        unresolved = unresolved_outputs(small, summary, classes)
        small, summary = class_tables(small, summary, classes)
    samples, m = small.samples, len(summary.systems)
    sys_index = {s: i for i, s in enumerate(summary.systems)}
    key_of = {(s.sample, s.system): j for j, s in enumerate(samplers)}
    j_all = np.array(
        [key_of[(a, b)] for a, b in zip(samples["sample"], samples["system"], strict=True)],
        np.int64,
    )
    f_all = samples["fact"].to_numpy(np.int64)
    labels = merged_labels(small).labels
    label_full = np.full(len(small.facts), np.nan)
    label_full[labels.index.to_numpy(np.int64)] = labels.to_numpy(float)
    judged = ~np.isnan(label_full[f_all]) if f_all.size else np.empty(0, bool)
    draw_row = np.flatnonzero(judged).astype(np.int64)
    unjudged_facts = int(np.unique(f_all[~judged]).size)
    j_all, f_all = j_all[judged], f_all[judged]
    drawn, draw_fact = np.unique(f_all, return_inverse=True)
    member = member_matrix(summary, drawn)
    tgt = fact_targets(small, summary, drawn, member, target)
    own = np.array([sys_index[s.system] for s in samplers], np.int64)
    summed = class_proposal(small, raw, drawn, classes)
    with np.errstate(divide="ignore", invalid="ignore"):
        if summed is None:
            proposal = np.where(member[:, own], 1.0 / summary.sizes[own], 0.0)
        else:
            proposal = summed[:, own]
    census, census_precision, judged_out = _census(small, summary, labels, target)
    queries = list(small.queries["query_id"])
    q_index = pd.Series(np.arange(len(queries)), index=queries)
    fact_query = q_index.reindex(small.facts["query_id"]).to_numpy(np.int64)
    per_unit, per_pair = unit_arrays(small, summary, q_index)
    return SampleData(
        systems=summary.systems,
        sizes=summary.sizes,
        sampler_system=own,
        sampler_n=np.bincount(j_all, minlength=len(samplers)).astype(float),
        sampler_design=[s.design for s in samplers],
        sampler_names=[(s.sample, s.system) for s in samplers],
        draw_sampler=j_all,
        draw_fact=draw_fact.astype(np.int64),
        facts=drawn,
        label=label_full[drawn],
        member=member,
        target=tgt,
        proposal=proposal,
        overlap=np.full((m, len(samplers)), np.nan),
        **per_unit,
        unjudged_draws=int((~judged).sum()),
        unjudged_facts=unjudged_facts,
        census=census,
        census_precision=census_precision,
        judged=judged_out,
        target_kind=target,
        aliased_classes=0 if classes is None else classes.aliased,
        unresolved_outputs=unresolved,
        queries=queries,
        draw_query=fact_query[drawn[draw_fact]] if drawn.size else np.empty(0, np.int64),
        query_sizes=query_sizes(summary, q_index),
        query_correct=_query_correct(summary, labels, fact_query, len(queries)),
        **per_pair,
        draw_row=draw_row,
        sampler_round=_sampler_rounds(samples, samplers),
    )


def unit_arrays(small: SmallTables, summary: RunSummary, q_index: pd.Series) -> tuple[dict, dict]:
    """The exhaustive units' fields of :class:`SampleData` (per unit, per (unit, query)), as
    :func:`~receval.estimators.sample_data.build_sample_data` builds them, from the units'
    facts' memberships (``summary.members``: their copies in each run).

    Per unit u: inclusion weight 1/π_u, b_u = Σ_{x ∈ u} 1/d(x), a_u the same over the pooled
    facts and c_ui over system i's outputs (the network-sampling multiplicity weights of
    :func:`~receval.estimators.sample_data._exhaustive_mentions`), the terms of θ̂ and true
    recall θ̂·ν̂_i (Chaganty et al. 2017, §3)."""
    from receval.design import unit_weights
    from receval.estimators.sample_data import (
        _exhaustive_mentions,
        _unit_arrays,
        _unit_query_pairs,
    )

    systems = summary.systems
    m = len(systems)
    units = small.exhaustive_units
    unit_index = {u: k for k, u in enumerate(units["unit"])}
    sys_index = {s: i for i, s in enumerate(systems)}
    ex, share = _exhaustive_mentions(small)
    members = summary.members
    in_pool = np.zeros(len(small.facts), bool)
    in_pool[members["fact"].to_numpy(np.int64)] = True
    pairs = members.loc[members["fact"].isin(ex["fact"]), ["fact", "system"]]
    found = _unit_arrays(in_pool, ex, share, unit_index, pairs, sys_index, (len(units), m))
    unit, query, pair_found, pair_pooled, by_system = _unit_query_pairs(
        ex, share, found, q_index, unit_index, sys_index, m
    )
    per_unit = {
        "unit_weight": unit_weights(units),
        "unit_found": found.found,
        "unit_pooled": np.asarray(found.pooled, float),
        "unit_by_system": found.by_system,
        "unit_names": list(units["unit"]),
    }
    return per_unit, {
        "pair_unit": unit,
        "pair_query": query,
        "pair_found": pair_found,
        "pair_pooled": pair_pooled,
        "pair_by_system": by_system,
    }


def query_sizes(summary: RunSummary, q_index: pd.Series) -> np.ndarray:
    """|X_i ∩ q| (Q × m)."""
    cells = summary.cells
    out = np.zeros((len(q_index), len(summary.systems)))
    out[
        q_index.reindex(cells["query_id"]).to_numpy(np.int64),
        pd.Index(summary.systems).get_indexer(cells["system"]),
    ] = cells["facts"].to_numpy(float)
    return out


def _labelled(summary: RunSummary, labels: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(fact ids of the labelled facts, their (L × m) membership)."""
    ids = np.sort(labels.index.to_numpy(np.int64))
    return ids, member_matrix(summary, ids)


def _census(small: SmallTables, summary: RunSummary, labels: pd.Series, target: str):
    """(census (m,), exact precision of the census systems, judged outputs per system)."""
    ids, member = _labelled(summary, labels)
    judged = member.sum(axis=0).astype(float)
    census = (summary.sizes - judged == 0) & (summary.sizes > 0)
    exact = np.full(len(summary.systems), np.nan)
    if census.any():
        t = fact_targets(small, summary, ids, member, target)
        value = labels.reindex(ids).to_numpy(float)
        rows, cols = np.nonzero(member[:, census])
        systems = np.flatnonzero(census)[cols]
        sums = pd.Series(value[rows] * t[rows, systems]).groupby(systems).sum()
        exact[sums.index.to_numpy()] = sums.to_numpy()
    return census, np.where(census, exact, np.nan), judged


def _query_correct(summary: RunSummary, labels: pd.Series, fact_query: np.ndarray, Q: int):
    """Σ of the labels of each (query, system)'s labelled outputs (Q × m)."""
    ids, member = _labelled(summary, labels)
    out = np.zeros((Q, len(summary.systems)))
    if ids.size:
        np.add.at(out, fact_query[ids], member * labels.reindex(ids).to_numpy(float)[:, None])
    return out
