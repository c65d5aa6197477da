"""The arrays every sample-based estimator works on, built once from a :class:`~receval.task.Task`.

Notation (Chaganty, Paranjape, Liang & Manning, EMNLP 2017, §3):

* systems i = 0..m-1 with distinct outputs X_i (|X_i| = ``sizes[i]``), membership g_i(x);
* target distributions t_i(x) = 1/|X_i| on X_i (micro precision; ``target="macro"`` gives
  t_i(x) = 1/(Q_i · |X_i ∩ q(x)|), every answered query weighing the same);
* samplers j = 0..J-1 (one per recorded (sample round, system)): n_j i.i.d. draws from s_j;
* draws k = 0..K-1 with their sampler ``draw_sampler[k]`` and fact ``draw_fact[k]`` (an index into
  the D distinct drawn facts), labels f(x) in [0, 1];
* exhaustive units u = 0..U-1 with inclusion weight 1/prob_u and, per unit, the number of correct
  facts found (b_u), found *and* in the pool (a_u), and found and output by system i (c_ui).

Draws whose fact has no label yet are left out (their sampler's n_j counts judged draws only):
the estimators then assume labels are missing at random, and :attr:`SampleData.unjudged_draws`
says how many were left out.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from receval.design import chunked_bincount, sampling_probabilities, unit_weights
from receval.formats.coded import codes_in, system_codes
from receval.task import Task


@dataclass(frozen=True)
class SampleData:
    """Arrays for the estimators (see module docstring).  Dense shapes are small: D × m, D × J."""

    systems: list[str]
    sizes: np.ndarray  # (m,) distinct outputs per system
    sampler_system: np.ndarray  # (J,) system index of each sampler
    sampler_n: np.ndarray  # (J,) judged draws of each sampler
    sampler_design: list[str]
    sampler_names: list[tuple[str, str]]  # (sample, system)
    draw_sampler: np.ndarray  # (K,)
    draw_fact: np.ndarray  # (K,) index into drawn facts
    facts: np.ndarray  # (D,) task fact ids of the drawn facts
    label: np.ndarray  # (D,) f(x)
    member: np.ndarray  # (D, m) bool g_i(x)
    target: np.ndarray  # (D, m) t_i(x)
    proposal: np.ndarray  # (D, J) s_j(x)
    overlap: np.ndarray  # (m, J) Σ_x t_i(x) s_j(x) over all facts
    unit_weight: np.ndarray  # (U,) 1/prob_u (1 when uniform)
    unit_found: np.ndarray  # (U,) b_u
    unit_pooled: np.ndarray  # (U,) a_u
    unit_by_system: np.ndarray  # (U, m) c_ui
    unit_names: list[str]
    unjudged_draws: int
    unjudged_facts: int
    census: np.ndarray  # (m,) bool: every output of the system is labelled
    census_precision: np.ndarray  # (m,) exact precision where census
    judged: np.ndarray  # (m,) outputs (as counted in ``sizes``) with a label
    target_kind: str = "micro"
    #: equivalence classes (per query) of the judgments holding several facts, counted once
    aliased_classes: int = 0
    #: unjudged outputs in queries with such classes: each could be an alias no judgment names
    unresolved_outputs: int = 0

    @property
    def sizes_known(self) -> bool:
        """False when some output may be an alias no judgment names: |X_i| (``sizes``) then
        over-counts classes and only self-normalised precision (Σ t f/q / Σ t/q, whose mass
        estimates |X_i| itself) stays consistent."""
        return self.unresolved_outputs == 0

    # for resampling queries as clusters
    queries: list[str] = field(default_factory=list)  # (Q,)
    draw_query: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # (K,)
    query_sizes: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))  # (Q, m) |X_i ∩ q|
    query_correct: np.ndarray = field(
        default_factory=lambda: np.empty((0, 0))
    )  # (Q, m) labelled correct
    pair_unit: np.ndarray = field(
        default_factory=lambda: np.empty(0, np.int64)
    )  # (P,) unit of (unit, query)
    pair_query: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # (P,)
    pair_found: np.ndarray = field(default_factory=lambda: np.empty(0))  # (P,) b split by query
    pair_pooled: np.ndarray = field(default_factory=lambda: np.empty(0))  # (P,) a split by query
    pair_by_system: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))  # (P, m)
    #: arrival order, for methods that need the draws as they came (confidence sequences):
    #: the row of each judged draw in samples.tsv (K,), and each sampler's round (J,), 0-based in
    #: the order the ``sample`` names first appear in samples.tsv
    draw_row: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    sampler_round: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    @property
    def K(self) -> int:
        return int(self.draw_sampler.size)

    @property
    def J(self) -> int:
        return int(self.sampler_n.size)

    @property
    def m(self) -> int:
        return len(self.systems)

    @property
    def U(self) -> int:
        return int(self.unit_weight.size)


def query_targets(task: Task, target: str) -> pd.Series:
    """t_i(x) for every row of task.outputs (micro or macro over queries)."""
    out = task.outputs
    if target == "micro":
        codes = system_codes(out["system"])[0].astype(np.int64)
        size = np.bincount(codes)[codes].astype(float) if len(codes) else np.zeros(0)
        return pd.Series(1.0 / size, index=out.index)
    if target == "macro":
        per_query = (
            out.groupby(["system", "query_id"], observed=True)["fact"]
            .transform("size")
            .to_numpy(float)
        )
        queries = (
            out.groupby("system", observed=True)["query_id"].transform("nunique").to_numpy(float)
        )
        return pd.Series(1.0 / (per_query * queries), index=out.index)
    raise ValueError(f"unknown target {target!r} (micro or macro)")


def _exhaustive_mentions(task: Task) -> tuple[pd.DataFrame, np.ndarray]:
    """Distinct (unit, fact) rows of ``exhaustive`` and each row's share 1/d(x) (fact level).

    A fact supported by d(x) units of the frame is found through any of them; the multiplicity
    (network-sampling) weight 1/d(x) makes Σ_u Σ_{x ∈ u} 1/(π_u d(x)) a Horvitz–Thompson
    estimate of the number of *facts* rather than of (unit, fact) mentions, so θ̂ estimates the
    fact-level pool coverage that ν̂ and true recall are defined on.  d(x) comes from the
    ``documents`` column of ``exhaustive.tsv`` (the number of units in the sampling frame that
    support the fact); without it every fact counts as supported by one unit (d = 1), which is
    exact when facts do not repeat across units and otherwise weights a fact by the number of
    units supporting it (:func:`repeated_facts` counts the facts seen in several units, and
    scoring warns).
    """
    ex = task.exhaustive.drop_duplicates(["unit", "fact"])
    if "documents" in ex.columns and len(ex):
        d = pd.to_numeric(ex["documents"], errors="coerce").to_numpy(float)
        d = np.where(np.isfinite(d) & (d >= 1), d, 1.0)
        # a fact must carry one multiplicity: the largest recorded (units found in the sample
        # are a lower bound for it)
        d = pd.Series(d).groupby(ex["fact"].to_numpy(), observed=True).transform("max").to_numpy()
        seen = ex.groupby("fact", observed=True)["unit"].transform("size").to_numpy(float)
        d = np.maximum(d, seen)  # found in `seen` sampled units: at least that many exist
    else:
        d = np.ones(len(ex))
    return ex, 1.0 / d


def repeated_facts(task: Task) -> int:
    """Facts found in more than one exhaustive unit while ``exhaustive.tsv`` has no ``documents``."""
    ex = task.exhaustive
    if "documents" in ex.columns or not len(ex):
        return 0
    per_fact = ex.drop_duplicates(["unit", "fact"]).groupby("fact", observed=True).size()
    return int((per_fact > 1).sum())


def _overlaps(
    fact: np.ndarray,
    system: np.ndarray,
    target: np.ndarray,
    proposal: np.ndarray,
    n_facts: int,
    m: int,
    chunk: int = 10_000_000,
) -> np.ndarray:
    """Σ_x t_i(x) s_k(x) for every pair of systems (i, k): an (m, m) matrix from the rows of
    ``outputs`` (``fact, system`` codes, ``t`` and ``s`` per row).

    Sparse products over ranges of facts, each with about ``chunk`` rows, so memory stays
    bounded on 10⁸-row tasks; one range (the same arithmetic as one product) below ``chunk``.
    """
    from scipy import sparse  # lazy: only the joint estimator gets here

    n_chunks = max(1, -(-len(fact) // chunk))
    bounds = np.linspace(0, n_facts, n_chunks + 1).astype(np.int64)
    out = np.zeros((m, m))
    for lo, hi in itertools.pairwise(bounds):
        if n_chunks == 1:
            rows, f = slice(None), fact
        else:
            rows = np.flatnonzero((fact >= lo) & (fact < hi))
            f = fact[rows] - lo
        shape = (max(int(hi - lo), 1), m) if n_chunks > 1 else (n_facts, m)
        t_sparse = sparse.csr_matrix((target[rows], (f, system[rows])), shape=shape)
        s_sparse = sparse.csr_matrix((proposal[rows], (f, system[rows])), shape=shape)
        out += (t_sparse.T @ s_sparse).toarray()
    return out


def query_cells(
    out_q: np.ndarray,
    sys_codes: np.ndarray,
    fact_codes: np.ndarray,
    label_full: np.ndarray,
    n_queries: int,
    m: int,
    chunk: int = 1 << 22,
) -> tuple[np.ndarray, np.ndarray]:
    """(outputs, summed known labels, outputs with a known label) per query and system, (Q, m)
    each, counted a few million output rows at a time (bincount adds in row order, as
    np.add.at does)."""
    cells = n_queries * m
    sizes, correct, known_count = np.zeros(cells), np.zeros(cells), np.zeros(cells)
    for lo in range(0, len(out_q), chunk):
        cell = out_q[lo : lo + chunk].astype(np.int64) * m + sys_codes[lo : lo + chunk]
        sizes += np.bincount(cell, minlength=cells)
        labels = label_full[fact_codes[lo : lo + chunk]]
        known = ~np.isnan(labels)
        correct += np.bincount(cell[known], weights=labels[known], minlength=cells)
        known_count += np.bincount(cell[known], minlength=cells)
    shape = (n_queries, m)
    return sizes.reshape(shape), correct.reshape(shape), known_count.reshape(shape)


def design_probabilities(task: Task, classes: bool):
    """(the task the estimators see, design -> s_j of each of its output rows, (classes with
    several facts, unresolved outputs)): the task itself, or its view with every equivalence
    class counted once (:mod:`receval.estimators.classes`) and each class drawn with its
    members' summed probability."""
    from receval.estimators.classes import (
        canonical_facts,
        class_probabilities,
        class_view,
        unresolved_outputs,
    )

    canon = canonical_facts(task) if classes else None
    if canon is None:

        def plain(design: str) -> np.ndarray:
            return sampling_probabilities(task.outputs, task.queries, design).to_numpy()

        return task, plain, (0, 0)
    view = class_view(task, canon)

    def summed(design: str) -> np.ndarray:
        return class_probabilities(task, view, canon, design)

    moved = np.flatnonzero(canon != np.arange(canon.size))
    counts = (int(np.unique(canon[moved]).size), unresolved_outputs(task, canon))
    return view, summed, counts


def build_sample_data(task: Task, target: str = "micro", classes: bool = True) -> SampleData:
    """Collect the sampling design, labels and exhaustive annotation of ``task`` into arrays.

    With ``classes`` (the default) the facts of one equivalence class of the judgments count
    as one fact everywhere, as TAC counts them (:mod:`receval.estimators.classes`).
    """
    samplers = task.samplers  # inferred once per task on its own outputs (classes: before the view)
    task, probabilities, (aliased, unresolved) = design_probabilities(task, classes)
    systems = task.systems
    sys_index = {s: i for i, s in enumerate(systems)}
    m = len(systems)
    outputs = task.outputs
    sys_codes = codes_in(outputs["system"], pd.Index(systems))
    sizes = chunked_bincount(sys_codes, minlength=m).astype(float)
    labels = task.labels
    n_facts = len(task.facts)

    J = len(samplers)
    samples = task.samples
    j_all, f_all = _draw_codes(samples, samplers)
    label_full = np.full(n_facts, np.nan)
    label_full[labels.index.to_numpy(np.int64)] = labels.to_numpy(float)
    judged = ~np.isnan(label_full[f_all]) if f_all.size else np.empty(0, bool)
    unjudged_draws = int((~judged).sum())
    unjudged_facts = int(np.unique(f_all[~judged]).size)
    draw_row = np.flatnonzero(judged).astype(np.int64)
    j_all, f_all = j_all[judged], f_all[judged]
    sampler_n = np.bincount(j_all, minlength=J).astype(float)

    drawn, draw_fact = np.unique(f_all, return_inverse=True)
    # membership and targets of the drawn facts
    t_all = query_targets(task, target)
    sub = outputs[outputs["fact"].isin(drawn)]
    rows = np.searchsorted(drawn, sub["fact"].to_numpy()).astype(np.int64)
    cols = sub["system"].map(sys_index).to_numpy().astype(np.int64)
    member = np.zeros((drawn.size, m), bool)
    member[rows, cols] = True
    tgt = np.zeros((drawn.size, m))
    tgt[rows, cols] = t_all.loc[sub.index].to_numpy()

    fact_codes = outputs["fact"].to_numpy(np.int64)
    proposal, overlap = _proposals_and_overlaps(
        samplers,
        probabilities,
        (fact_codes, sys_codes, t_all),
        sub,
        (rows, cols),
        sys_index,
        (drawn.size, m, n_facts),
    )

    # exhaustive units
    units = task.exhaustive_units
    unit_index = {u: k for k, u in enumerate(units["unit"])}
    unit_weight = unit_weights(units)
    ex, share = _exhaustive_mentions(task)
    in_pool = task.facts["in_pool"].to_numpy(bool)
    ex_units = _unit_arrays(in_pool, ex, share, unit_index, outputs, sys_index, (len(units), m))

    # query structure (for resampling queries as clusters)
    query_ids = list(task.queries["query_id"])
    q_index = pd.Series(np.arange(len(query_ids)), index=query_ids)
    Q = len(query_ids)
    draw_query = q_index.reindex(task.facts["query_id"].to_numpy()[drawn[draw_fact]]).to_numpy(
        np.int64
    )
    out_q = codes_in(outputs["query_id"], pd.Index(query_ids))
    query_sizes, query_correct, query_known = query_cells(
        out_q, sys_codes, fact_codes, label_full, Q, m
    )
    del out_q
    pair_unit, pair_query, pair_found, pair_pooled, pair_by_system = _unit_query_pairs(
        ex, share, ex_units, q_index, unit_index, sys_index, m
    )

    # census: every output of the system is labelled
    n_missing = query_sizes.sum(axis=0) - query_known.sum(axis=0)
    census = (n_missing == 0) & (query_sizes.sum(axis=0) > 0)
    census_precision = _census_precision(census, sys_codes, label_full, fact_codes, t_all, m)

    return SampleData(
        systems=systems,
        sizes=sizes,
        sampler_system=np.array([sys_index[s.system] for s in samplers], np.int64),
        sampler_n=sampler_n,
        sampler_design=[s.design for s in samplers],
        sampler_names=[(s.sample, s.system) for s in samplers],
        draw_sampler=j_all.astype(np.int64),
        draw_fact=draw_fact.astype(np.int64),
        facts=drawn,
        label=label_full[drawn],
        member=member,
        target=tgt,
        proposal=proposal,
        overlap=overlap,
        unit_weight=unit_weight,
        unit_found=ex_units.found,
        unit_pooled=np.asarray(ex_units.pooled, float),
        unit_by_system=ex_units.by_system,
        unit_names=list(units["unit"]),
        unjudged_draws=unjudged_draws,
        unjudged_facts=unjudged_facts,
        census=census,
        census_precision=census_precision,
        judged=sizes - np.nan_to_num(n_missing.astype(float)),
        target_kind=target,
        aliased_classes=aliased,
        unresolved_outputs=unresolved,
        queries=query_ids,
        draw_query=draw_query,
        query_sizes=query_sizes,
        query_correct=query_correct,
        pair_unit=pair_unit,
        pair_query=pair_query,
        pair_found=pair_found,
        pair_pooled=pair_pooled,
        pair_by_system=pair_by_system,
        draw_row=draw_row,
        sampler_round=_sampler_rounds(samples, samplers),
    )


def _draw_codes(samples: pd.DataFrame, samplers) -> tuple[np.ndarray, np.ndarray]:
    """(sampler index, fact code) of every row of samples.tsv, in file order."""
    sampler_key = {(s.sample, s.system): j for j, s in enumerate(samplers)}
    if len(samples):
        j_all = np.array(
            [sampler_key[(a, b)] for a, b in zip(samples["sample"], samples["system"], strict=True)]
        )
        f_all = samples["fact"].to_numpy(np.int64)
    else:
        j_all = np.empty(0, np.int64)
        f_all = np.empty(0, np.int64)
    return j_all, f_all


def _proposals_and_overlaps(
    samplers, probabilities, coded, sub: pd.DataFrame, cells, sys_index: dict, shape
) -> tuple[np.ndarray, np.ndarray]:
    """Proposal densities s_j(x) at the drawn facts (D, J) and overlaps Σ_x t_i(x) s_j(x) over
    all facts (m, J).  ``coded`` is (fact codes, system codes, targets) of every output,
    ``cells`` the (drawn row, system) of each output ``sub`` of a drawn fact, ``shape`` is
    (D, m, number of facts)."""
    fact_codes, sys_codes, t_all = coded
    rows, cols = cells
    D, m, n_facts = shape
    J = len(samplers)
    designs = sorted({s.design for s in samplers})
    proposal = np.zeros((D, J))
    overlap = np.zeros((m, J))
    for design in designs:
        s_all = probabilities(design)
        ov = _overlaps(fact_codes, sys_codes, t_all.to_numpy(), s_all, n_facts, m)
        s_drawn = np.zeros((D, m))
        s_drawn[rows, cols] = s_all[sub.index.to_numpy()] if len(sub) else 0.0
        for j, s in enumerate(samplers):
            if s.design == design:
                proposal[:, j] = s_drawn[:, sys_index[s.system]]
                overlap[:, j] = ov[:, sys_index[s.system]]
    return proposal, overlap


@dataclass
class _UnitArrays:
    """Exhaustive-unit arrays of :func:`build_sample_data` (``both``: mentions x outputs)."""

    u_codes: np.ndarray
    ex_pooled: np.ndarray
    found: np.ndarray
    pooled: np.ndarray
    by_system: np.ndarray
    both: pd.DataFrame | None


def _unit_arrays(
    in_pool: np.ndarray,
    ex: pd.DataFrame,
    share: np.ndarray,
    unit_index: dict,
    outputs: pd.DataFrame,
    sys_index: dict,
    shape: tuple[int, int],
) -> _UnitArrays:
    """Per exhaustive unit: facts found, pooled facts found, and facts found per system
    (``shape`` is (number of units, number of systems)).  ``in_pool`` (per fact id): some
    system output the fact; ``outputs``: one ``fact, system`` row per (system, fact) output
    (the task's outputs, or the engine's memberships of the small tables' facts: the sums
    per cell run in the order of ``ex`` either way)."""
    U, m = shape
    u_codes = ex["unit"].map(unit_index).to_numpy(np.int64) if len(ex) else np.empty(0, np.int64)
    ex_pooled = in_pool[ex["fact"].to_numpy(np.int64)] * share if len(ex) else np.empty(0)
    unit_found = np.bincount(u_codes, weights=share, minlength=U).astype(float)
    unit_pooled = np.bincount(u_codes, weights=ex_pooled, minlength=U) if U else np.empty(0)
    unit_by_system = np.zeros((U, m))
    both = None
    if len(ex):
        both = ex.assign(_share=share).merge(outputs[["fact", "system"]], on="fact")
        np.add.at(
            unit_by_system,
            (
                both["unit"].map(unit_index).to_numpy(np.int64),
                both["system"].map(sys_index).to_numpy(np.int64),
            ),
            both["_share"].to_numpy(float),
        )
    return _UnitArrays(u_codes, ex_pooled, unit_found, unit_pooled, unit_by_system, both)


def _unit_query_pairs(
    ex: pd.DataFrame,
    share: np.ndarray,
    units: _UnitArrays,
    q_index: pd.Series,
    unit_index: dict,
    sys_index: dict,
    m: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(unit, query, found, pooled, found per system) of each (exhaustive unit, query) pair."""
    if not len(ex):
        empty_codes = np.empty(0, np.int64)
        return empty_codes, empty_codes, np.empty(0), np.empty(0), np.zeros((0, m))
    both = units.both
    ex_q = q_index.reindex(ex["query_id"]).to_numpy(np.int64)
    pairs = pd.DataFrame({"u": units.u_codes, "q": ex_q, "pooled": units.ex_pooled, "found": share})
    grouped = pairs.groupby(["u", "q"], sort=True, observed=True)
    pair_index = grouped.size().index
    pair_unit = pair_index.get_level_values(0).to_numpy(np.int64)
    pair_query = pair_index.get_level_values(1).to_numpy(np.int64)
    pair_found = grouped["found"].sum().to_numpy(float)
    pair_pooled = grouped["pooled"].sum().to_numpy(float)
    pair_by_system = np.zeros((pair_unit.size, m))
    key = pd.Series(np.arange(pair_unit.size), index=pair_index)
    rows_b = key.reindex(
        pd.MultiIndex.from_arrays(
            [both["unit"].map(unit_index), q_index.reindex(both["query_id"]).to_numpy()]
        )
    ).to_numpy(np.int64)
    np.add.at(
        pair_by_system,
        (rows_b, both["system"].map(sys_index).to_numpy(np.int64)),
        both["_share"].to_numpy(float),
    )
    return pair_unit, pair_query, pair_found, pair_pooled, pair_by_system


def _census_precision(
    census: np.ndarray,
    sys_codes: np.ndarray,
    label_full: np.ndarray,
    fact_codes: np.ndarray,
    t_all: pd.Series,
    m: int,
) -> np.ndarray:
    """Exact precision of each census system (every output labelled), NaN for the others."""
    weighted = np.full(m, np.nan)
    if census.any():  # the same per-system (compensated) sums, over those systems' rows only
        rows = np.flatnonzero(census[sys_codes])
        sums = (
            pd.Series(label_full[fact_codes[rows]] * t_all.to_numpy()[rows])
            .groupby(sys_codes[rows], observed=True)
            .sum()
        )
        weighted[sums.index.to_numpy()] = sums.to_numpy()
    return np.where(census, weighted, np.nan)


def _sampler_rounds(samples: pd.DataFrame, samplers) -> np.ndarray:
    """Each sampler's round (J,): the order in which its ``sample`` name first appears in
    samples.tsv (rounds recorded before any draw: after every drawn round)."""
    order = {name: r for r, name in enumerate(pd.unique(samples["sample"]))} if len(samples) else {}
    return np.array([order.get(s.sample, len(order)) for s in samplers], np.int64)
