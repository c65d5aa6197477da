""":class:`~receval.estimators.sample_data.SampleData` from the engine: the estimators' arrays
built from the runs' aggregates (:mod:`receval.engine.summary`) and the bundle's small tables,
never holding the output rows in Python.

Scope: uniform and entity-relation samplers (``receval sample --per-system``, either path) and
the ``judge-strata`` ones of ``sample --by-judge`` (their levels from the engine judge:
:class:`EngineDesigns`, :mod:`receval.engine.strata`), the ``micro`` and
``macro`` targets, exhaustive units (``exhaustive_units.tsv``, ``exhaustive.tsv``), equivalence
classes in the judgments (each counted once, as :mod:`receval.estimators.classes` counts them:
:func:`class_tables`), ``truth.tsv`` (:func:`true_metrics`); anything else is a ``ValueError``
or the loader's BundleError naming what to use instead (the in-memory
:func:`~receval.estimators.sample_data.build_sample_data`).  Within that
scope the arrays equal :func:`build_sample_data`'s, facts included: the small tables' facts
(judged, drawn, found in exhaustive units and in the truth) are numbered in sorted
``(query_id, answer)`` order, as the loader numbers every fact, so the drawn facts come in the
same order (the ids themselves differ: the loader numbers the runs' facts too).  The units'
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


#: the optional tables listed in :attr:`SmallTables.optional` when the bundle has them (the
#: consumers that do not use them refuse them); ``truth`` is read when asked
#: (:func:`read_small_tables` ``truth=True``), ``judge`` never
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
    #: truth.tsv (``query_id, answer, fact, value [, equivalence_class]``) when read
    truth: pd.DataFrame | None = None


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


def read_small_tables(bundle, *, truth: bool = False) -> SmallTables:
    """The small tables of ``bundle`` (:class:`SmallTables`); BundleError as the loader's.
    With ``truth``, its ``truth.tsv`` too (checked and deduplicated as the loader does; its
    facts numbered with the others')."""
    from receval.bundle.checks import _check_truth, _dedupe_truth
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
    truth_source = _table_source(root, "truth", files) if truth else None
    truth_frame = _check_truth(truth_source, config, known)
    if truth_frame is not None:
        truth_frame = truth_frame.copy()
        frames.append(truth_frame)
    for frame in frames:
        frame["query_id"] = frame["query_id"].astype(str).str.strip()
        frame["answer_raw"] = frame["answer"]
        frame["answer"] = normalize_answers(frame["answer"].astype(str), config.matching)
    facts, numbers = number_facts(frames)
    for frame, fact in zip(frames, numbers, strict=True):
        frame["fact"] = fact
    optional = tuple(name for name in NOT_READ if bundle.table(name) is not None)
    if truth_frame is not None:
        truth_frame = _dedupe_truth(truth_frame, truth_source.path)
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
        truth=truth_frame,
    )


def number_facts(frames: list[pd.DataFrame]) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """The distinct ``(query_id, answer)`` pairs of ``frames`` sorted (code-point order, as the
    loader numbers facts; index ``fact``) and each frame's rows' fact numbers.  Each column is
    dictionary-encoded and its distinct values sorted by Arrow (no string compared per row);
    the pairs are then numbered over integer keys.  Missing values: pandas' drop, sort and
    lookup (the same numbers)."""
    import pyarrow as pa

    columns = [_arrow_text([f[c] for f in frames]) for c in ("query_id", "answer")]
    if any(c is None for c in columns):
        return _number_facts_pandas(frames)
    (q_key, q_values), (a_key, a_values) = map(_sorted_codes, columns)
    width = max(len(a_values), 1)
    distinct, inverse = np.unique(q_key * width + a_key, return_inverse=True)
    facts = pd.DataFrame(
        {
            "query_id": q_values.take(pa.array(distinct // width)).to_pandas(),
            "answer": a_values.take(pa.array(distinct % width)).to_pandas(),
        }
    )
    facts.index.name = "fact"
    sizes = np.cumsum([len(f) for f in frames])[:-1]
    return facts, np.split(inverse.astype(np.int64), sizes)


def _arrow_text(parts: list[pd.Series]):
    """The series as one Arrow large-string chunked array, or None when a value is missing."""
    import pyarrow as pa

    arrays = [pa.array(p.astype(str), from_pandas=True) for p in parts]
    if any(a.null_count for a in arrays):
        return None
    return pa.chunked_array([a.cast(pa.large_string()) for a in arrays], pa.large_string())


def _sorted_codes(text) -> tuple[np.ndarray, object]:
    """(per row, the rank of its value among the distinct values; the distinct values sorted)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(text):
        return np.zeros(0, np.int64), pa.array([], pa.large_string())
    encoded = pc.dictionary_encode(text).combine_chunks()
    order = pc.sort_indices(encoded.dictionary)
    rank = np.empty(len(order), np.int64)
    rank[order.to_numpy()] = np.arange(len(order))
    codes = rank[encoded.indices.to_numpy(zero_copy_only=False)]
    return codes, encoded.dictionary.take(order)


def _number_facts_pandas(frames: list[pd.DataFrame]) -> tuple[pd.DataFrame, list[np.ndarray]]:
    pairs = pd.concat([f[["query_id", "answer"]] for f in frames], ignore_index=True)
    facts = pairs.drop_duplicates().sort_values(["query_id", "answer"], ignore_index=True)
    facts.index.name = "fact"
    lookup = pd.MultiIndex.from_frame(facts)
    numbers = [
        lookup.get_indexer(pd.MultiIndex.from_frame(f[["query_id", "answer"]])) for f in frames
    ]
    return facts, numbers


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


def drawn_proposals(
    small: SmallTables,
    raw: RunSummary,
    drawn: np.ndarray,
    member: np.ndarray,
    samplers: list,
    classes: Classes | None,
    designs: EngineDesigns | None = None,
) -> np.ndarray:
    """s_j(x) of each sampler's design at the drawn facts (D, J): the design's probability of
    the fact in system j's output (:class:`EngineDesigns`, ``raw`` the runs' aggregates as they
    are), with ``classes`` summed over each drawn class's member facts one term per member
    (:func:`receval.estimators.classes.class_probabilities`).  ``member`` (D, m)."""
    systems = pd.Index(raw.systems)
    designs = designs or EngineDesigns(small, raw)
    proposal = np.zeros((drawn.size, len(samplers)))
    for design in sorted({s.design for s in samplers}):
        at = _design_at_drawn(raw, drawn, member, designs.at_function(design), classes)
        for j, sampler in enumerate(samplers):
            if sampler.design == design:
                proposal[:, j] = at[:, systems.get_loc(sampler.system)]
    return proposal


def _design_at_drawn(
    raw: RunSummary, drawn: np.ndarray, member: np.ndarray, at, classes: Classes | None
) -> np.ndarray:
    """(D, m): a design's s_j(x) (``at(system codes, facts)``) at each drawn fact."""
    systems = pd.Index(raw.systems)
    out = np.zeros((drawn.size, len(systems)))
    if classes is None:
        rows, cols = np.nonzero(member)
        out[rows, cols] = at(cols, drawn[rows])
        return out
    members = raw.members
    fact = members["fact"].to_numpy(np.int64)
    codes = systems.get_indexer(members["system"])
    frame = pd.DataFrame({"system": codes, "fact": classes.canon[fact], "s": at(codes, fact)})
    frame = frame[np.isin(frame["fact"].to_numpy(), drawn)]
    summed = frame.groupby(["system", "fact"], sort=False, observed=True)["s"].sum()
    out[
        np.searchsorted(drawn, summed.index.get_level_values("fact").to_numpy(np.int64)),
        summed.index.get_level_values("system").to_numpy(np.int64),
    ] = summed.to_numpy(float)
    return out


class EngineDesigns:
    """s_j(x) of every design the engine path computes, at (system, small-table fact) pairs
    each output by its system: ``uniform`` and ``entity-relation`` per (system, query) cell
    (:func:`design_probabilities`), the ``judge-strata`` designs per (system, level)
    (:mod:`receval.engine.strata`, from ``judge``: the engine judge, None without a judge
    table; ``batches`` its systems' batches).  Each design is computed once."""

    def __init__(self, small: SmallTables, summary: RunSummary, judge=None, batches=None):
        self.small, self.summary, self.judge, self.batches = small, summary, judge, batches
        self._cells: dict[str, pd.Series] = {}
        self._levels: dict[str, object] = {}

    def cells(self, design: str) -> pd.Series:
        """:func:`design_probabilities` of a design constant over each (system, query)."""
        if design not in self._cells:
            self._cells[design] = design_probabilities(self.small, self.summary, design)
        return self._cells[design]

    def judge_levels(self, name: str):
        """Judge ``name``'s :class:`receval.engine.strata.JudgeLevels` (None without its
        grades), computed once (what :meth:`at_function` reads for its strata designs)."""
        from receval.engine.strata import judge_levels

        if name not in self._levels:
            self._levels[name] = judge_levels(
                self.judge, name, self.small, self.summary, self.batches
            )
        return self._levels[name]

    def at_function(self, design: str):
        """``at(system codes, facts)``: s_j(x) of ``design`` (ValueError as in memory for a
        design it cannot compute: a judge's design without that judge's grades)."""
        from receval.design import JUDGE_STRATA

        if str(design).startswith(JUDGE_STRATA + ":"):
            from receval.design import parse_judge_strata
            from receval.engine.strata import strata_probabilities

            name, _ = parse_judge_strata(design)
            levels, sizes = self.judge_levels(name), self.summary.sizes

            def strata(systems: np.ndarray, facts: np.ndarray) -> np.ndarray:
                return strata_probabilities(design, levels, sizes, systems, facts)

            return strata
        cells = self.cells(design)
        systems = pd.Index(self.summary.systems)
        fact_query = self.small.facts["query_id"].to_numpy()

        def per_cell(codes: np.ndarray, facts: np.ndarray) -> np.ndarray:
            key = pd.MultiIndex.from_arrays([systems[codes], fact_query[facts]])
            return cells.reindex(key).to_numpy(float)

        return per_cell


def samplers_of(
    small: SmallTables, summary: RunSummary, designs: EngineDesigns | None = None
) -> list:
    """The (sample, system) samplers in sorted order, each checked as
    :func:`receval.design.infer_designs` checks them (same messages): its system has outputs,
    every drawn fact is one of them, and its recorded ``prob`` is its declared design's (or,
    undeclared, the first built-in design reproducing them within 1e-4): ``uniform``
    (1/|X_j|) or ``entity-relation`` (:func:`design_probabilities`)."""
    from receval.design import Sampler, _candidate_designs, _matching_design

    samples, path = small.samples, small.samples_path
    if not len(samples):
        return []
    sizes = pd.Series(summary.sizes, index=summary.systems)
    _check_drawn(samples, summary, sizes, path)
    declared = samples["design"] if "design" in samples else pd.Series("", index=samples.index)
    expected = _DrawnProbabilities(small, summary, designs or EngineDesigns(small, summary))
    out = []
    for (sample, system), rows in samples.groupby(["sample", "system"], sort=True, observed=True):
        where = (path, sample, system)
        candidates = _candidate_designs(declared.loc[rows.index], rows, False, where)
        design = _matching_design(expected, candidates, rows, where)
        out.append(Sampler(str(sample), str(system), design, len(rows)))
    return out


class _DrawnProbabilities:
    """s_j of a design at every draw of ``small.samples`` (a Series on its index), the
    in-memory :class:`receval.design._DrawProbabilities` from the aggregates."""

    def __init__(self, small: SmallTables, summary: RunSummary, designs: EngineDesigns) -> None:
        self.small, self.summary, self.designs, self.cache = small, summary, designs, {}

    def __call__(self, design: str) -> pd.Series:
        if design not in self.cache:
            samples = self.small.samples
            codes = pd.Index(self.summary.systems).get_indexer(samples["system"])
            at = self.designs.at_function(design)
            prob = at(codes, samples["fact"].to_numpy(np.int64))
            self.cache[design] = pd.Series(prob, index=samples.index)
        return self.cache[design]


def design_probabilities(small: SmallTables, summary: RunSummary, design: str) -> pd.Series:
    """s_j(x) of ``design`` for the facts of every (system, query) cell of the runs (the same
    for every fact of one cell under the engine's designs), indexed by (system, query_id):
    ``uniform`` 1/|X_j|; ``entity-relation`` w_jq / Σ_{x ∈ X_j} w (w_jq:
    :func:`receval.engine.sampled.entity_relation_weights`; the sum over X_j taken fact by fact
    in query order, as :func:`receval.design.sampling_probabilities` sums it).  ValueError for
    a design the engine path does not compute (the judge's)."""
    cells = summary.cells
    key = pd.MultiIndex.from_frame(cells[["system", "query_id"]])
    if design == "uniform":
        size = pd.Series(summary.sizes, index=summary.systems).reindex(cells["system"])
        return pd.Series(1.0 / np.maximum(size.to_numpy(float), 1), index=key)
    if design != "entity-relation":
        raise ValueError(
            f"the engine path computes the uniform and entity-relation designs, not {design!r} "
            "(score in memory)"
        )
    from receval.engine.sampled import entity_relation_weights

    frame = cells.rename(columns={"n_rows": "copies"}).sort_values(
        ["system", "query_id"], ignore_index=True
    )
    frame = entity_relation_weights(frame, small.queries)
    out = []
    for _system, part in frame.groupby("system", sort=False):
        w = part["weight"].to_numpy(float)
        total = (
            pd.Series(np.repeat(w, part["facts"].to_numpy(np.int64)))
            .groupby(np.zeros(int(part["facts"].sum()), np.int64))
            .transform("sum")
        )
        out.append(w / (total.iloc[0] if len(total) else 1.0))
    prob = np.concatenate(out) if out else np.zeros(0)
    return pd.Series(prob, index=pd.MultiIndex.from_frame(frame[["system", "query_id"]]))


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
    designs: EngineDesigns | None = None,
) -> SampleData:
    """The estimators' arrays from the small tables and the runs' aggregates (module docstring).

    Python holds the draws, the labels, (D × m) membership of the drawn and labelled facts and
    per-system / per-query aggregates: memory flat in the number of output rows.  With
    ``classes`` (:func:`receval.engine.score.summarise_classes`) every equivalence class counts
    once (:func:`class_tables`), drawn with its members' summed probability
    (:func:`drawn_proposals`), as :func:`~receval.estimators.sample_data.build_sample_data`.
    """
    from receval.estimators.sample_data import SampleData, _sampler_rounds

    designs = designs or EngineDesigns(small, summary)
    samplers = samplers_of(small, summary, designs)  # on the runs as they are (before classes)
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
    proposal = drawn_proposals(small, raw, drawn, member, samplers, classes, designs)
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


def true_metrics(small: SmallTables, summary: RunSummary) -> pd.DataFrame | None:
    """:func:`receval.scoring.true_metrics` from the truth's memberships (its facts are in the
    ``wanted`` join of :data:`receval.engine.summary.MEMBERS`): true precision, pooled recall,
    recall and F1 per system, each class of ``truth.tsv`` counted once; None without truth or
    when some output is not in it (the runs' facts outside the truth: |X_i| larger than the
    system's truth facts)."""
    from types import SimpleNamespace

    from receval.estimators.classes import _remap, truth_classes
    from receval.estimators.recall import f1_score

    truth = small.truth
    if truth is None:
        return None
    members = summary.members
    value = np.full(len(small.facts), np.nan)
    value[truth["fact"].to_numpy(np.int64)] = truth["value"].to_numpy(float)
    covered = members[~np.isnan(value[members["fact"].to_numpy(np.int64)])]
    if len(covered) < summary.sizes.sum():
        return None
    canon = truth_classes(SimpleNamespace(truth=truth, facts=small.facts))
    if canon is not None:  # the class's largest value, on its canonical fact
        truth = _remap(truth, canon).sort_values("value", ascending=False)
        truth = truth.drop_duplicates("fact").sort_index()
        value[truth["fact"].to_numpy(np.int64)] = truth["value"].to_numpy(float)
        covered = collapse_members(covered, canon)
    frame = pd.DataFrame(
        {
            "system": covered["system"].to_numpy(),
            "fact": covered["fact"].to_numpy(np.int64),
            "label": value[covered["fact"].to_numpy(np.int64)],
        }
    )
    pool_true = frame.loc[frame["label"] == 1, "fact"].nunique()
    universe_true = int((truth["value"] == 1).sum())
    g = frame.groupby("system", observed=True)["label"]
    correct = g.sum()
    metrics = pd.DataFrame({"precision": g.mean()})
    metrics["pooled_recall"] = correct / pool_true if pool_true else np.nan
    metrics["recall"] = correct / universe_true if universe_true else np.nan
    metrics["f1"] = f1_score(metrics["precision"].to_numpy(), metrics["recall"].to_numpy())
    metrics.attrs["pool_coverage"] = pool_true / universe_true if universe_true else np.nan
    metrics.attrs["pool_correct"] = pool_true
    metrics.attrs["universe_correct"] = universe_true
    return metrics
