"""The stream of per-draw terms that the anytime intervals bet on (:mod:`receval.estimators.anytime`
has the method and its proofs): each draw's system, its probability under the design in force
when it was drawn (q_k, from the recorded round and ``mixture_prob``), and the ranges of the
importance-weighted terms; the checks that a ``samples.tsv`` could have come from its recorded
design.  Split from :mod:`receval.estimators.anytime` so the paired tests
(:mod:`receval.estimators.anytime.pairs`) build the same stream without importing the method."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.design import random_order_rows, sampling_probabilities
from receval.errors import BundleError
from receval.estimators.anytime.control import popularity_strata, stratum_kappa
from receval.estimators.sample_data import design_probabilities, query_targets
from receval.formats.coded import codes_in
from receval.formats.tables import LINE

if TYPE_CHECKING:
    from receval.estimators.sample_data import SampleData
    from receval.task import Task

#: samples.tsv column of floor draws: q₀(x), the floor mixture's probability of the drawn fact
MIXTURE_COLUMN = "mixture_prob"

UNIT_ASSUMPTION = (
    "pool coverage: the exhaustive units are taken in file order as exchangeable draws, their "
    "number and choice fixed by the design (not by the labels), and no unit is assumed to weigh "
    "more than the largest recorded one"
)

#: bisection steps of each end (resolution 2⁻²⁴ of the search range; ends are conservative)
ITERATIONS = 24


@dataclass(frozen=True)
class Stream:
    """The stream (module docstring), in stream order.

    Per draw (K,): ``fact`` (index into the drawn facts), ``label``, ``q`` (the probability the
    draw had at that step: the mixture still to come in a shuffled round, its own source's p_s
    in a legacy one), ``own`` (K, m) the coverage Σ_s (share of s) κ_is (0: X_i not covered),
    ``horizon`` (K, m) each system's steps in the rounds started so far.

    Pool terms (pooled recall, pool total) go by *pool steps*: a draw of a shuffled round is one
    step, a batch of a legacy round (the l-th draw of every source) another.  Per draw:
    ``pool_step``, ``pool_sigma`` (the step's denominator at the draw); per pool step (P,):
    ``pool_cover`` (a lower bound of min over the pool of the denominator; 0: not covered),
    ``pool_size`` (draws in the step), ``pool_horizon``."""

    fact: np.ndarray
    label: np.ndarray
    q: np.ndarray
    own: np.ndarray
    horizon: np.ndarray
    pool_step: np.ndarray
    pool_sigma: np.ndarray
    pool_cover: np.ndarray
    pool_size: np.ndarray
    pool_horizon: np.ndarray
    shuffled_rounds: int = 0
    legacy_rounds: int = 0
    #: per stratum of popularity (:mod:`receval.estimators.anytime.control`): the coverage
    #: own_ib (K, m, STRATA), each draw's stratum (K,) and each system's target mass (m, STRATA)
    own_b: np.ndarray | None = None
    stratum: np.ndarray | None = None
    mass: np.ndarray | None = None
    #: each system's distinct facts per stratum (m, STRATA) (the pooled-recall control)
    count: np.ndarray | None = None

    @property
    def P(self) -> int:
        return int(self.pool_size.size)


@dataclass(frozen=True)
class _Design:
    """One design's p_j at the drawn facts (D, m), κ_i (m,) and min_x Σ_j p_j(x) over the pool."""

    at_drawn: np.ndarray
    kappa: np.ndarray
    pool_min: float
    kappa_b: np.ndarray  # (STRATA, m) κ_ib = min over X_i ∩ stratum b of p_i/t_i


def output_arrays(view: Task, data: SampleData):
    """Each output row's target t_i, system code and fact, and the popularity strata."""

    outputs = view.outputs
    t_all = query_targets(view, data.target_kind).to_numpy()
    sys_codes = codes_in(outputs["system"], pd.Index(data.systems)).astype(np.int64)
    facts = outputs["fact"].to_numpy(np.int64)
    return t_all, sys_codes, facts, popularity_strata(facts, sys_codes, t_all, data.m)


def _design_arrays(rows, probabilities, data: SampleData, design: str) -> _Design:
    t_all, sys_codes, facts, strata = rows
    s_all = np.asarray(probabilities(design), float)
    m = data.m
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(t_all > 0, s_all / t_all, np.inf)
    kappa = np.full(m, np.inf)
    np.minimum.at(kappa, sys_codes, ratio)
    kappa = np.where(np.isfinite(kappa), kappa, 0.0)
    per_fact = np.bincount(facts, weights=s_all)
    present = np.bincount(facts) > 0
    pool_min = float(per_fact[present].min()) if present.any() else 0.0
    near = np.flatnonzero(np.isin(facts, data.facts))
    at_drawn = np.zeros((data.facts.size, m))
    at_drawn[np.searchsorted(data.facts, facts[near]), sys_codes[near]] = s_all[near]
    kappa_b = stratum_kappa(ratio, sys_codes, strata.of_fact[facts], m)
    return _Design(at_drawn, kappa, pool_min, kappa_b)


def build_stream(task: Task, data: SampleData) -> Stream:
    """Order the judged draws of ``data`` into the stream and compute each step's probability,
    coverage and ranges (module docstring).  Checks the recorded floor probabilities: a
    ``mixture_prob`` that the recorded design cannot have produced is a BundleError naming the
    samples.tsv line.  The stream of the last (task, data) is kept while both live (both are
    frozen): a run's sequences and its paired tests build it once."""

    held = _LAST_STREAM.get("entry")
    if held is not None and held[0]() is task and held[1]() is data:
        return held[2]
    stream = _build_stream(task, data)
    forget = lambda _ref: _LAST_STREAM.clear()  # noqa: E731 - the entry goes with its inputs
    _LAST_STREAM["entry"] = (weakref.ref(task, forget), weakref.ref(data, forget), stream)
    return stream


#: the last stream built (:func:`build_stream`): (weak task, weak data, stream)
_LAST_STREAM: dict = {}


def _build_stream(task: Task, data: SampleData) -> Stream:
    """:func:`build_stream` without the memory of the last stream."""

    if hasattr(task, "stream_designs"):  # the engine path: from SQL aggregates, no output row
        view, (designs, strata) = task, task.stream_designs(data)
    else:
        view, probabilities, _ = design_probabilities(task, True)
        rows = output_arrays(view, data)
        designs = {
            d: _design_arrays(rows, probabilities, data, d) for d in set(data.sampler_design)
        }
        strata = rows[3]
    m, K = data.m, data.K
    alive = data.sizes > 0
    ctx = _RoundContext(
        data=data, designs=designs, alive=alive, m_alive=max(int(alive.sum()), 1),
        pool_min=min((d.pool_min for d in designs.values()), default=0.0),
    )  # fmt: skip
    samples = view.samples
    floor_all = floor_probabilities(samples)
    floor = floor_all[data.draw_row] if K else np.zeros(0, bool)
    _check_floor(task, samples, data, designs, floor_all, ctx.m_alive)
    # a round is shuffled when recorded so (order = random) or, in bundles written before that
    # marker, when it has floor rows (only --until-decided drew them, always in random order)
    path = task.files.get("samples", task.root / "samples.tsv")
    marked = random_order_rows(samples, path)[data.draw_row] | floor if K else floor
    rounds = data.sampler_round[data.draw_sampler] if K else np.zeros(0, np.int64)
    source = np.where(floor, m, data.sampler_system[data.draw_sampler]) if K else rounds
    parts: dict[str, list] = {k: [] for k in Stream.__dataclass_fields__ if k not in
                              ("fact", "label", "shuffled_rounds", "legacy_rounds", "stratum",
                               "mass", "count")}  # fmt: skip
    parts["draw"] = []
    drawn, steps, shuffled = np.zeros(m), 0, 0
    for r in np.unique(rounds):
        idx = np.flatnonzero(rounds == r)  # file order
        piece = (_shuffled_round if marked[idx].any() else _legacy_round)(ctx, idx, source[idx])
        shuffled += bool(marked[idx].any())
        # the steps each system's precision stream gets from the rounds started so far (a
        # legacy round: its own draws; a shuffled one: all of them), known before the round
        drawn = drawn + piece.pop("active_steps")
        piece["pool_step"] = piece["pool_step"] + steps
        steps += piece["pool_size"].size
        piece["horizon"] = np.broadcast_to(drawn, (idx.size, m))
        piece["pool_horizon"] = np.full(piece["pool_size"].size, float(steps))
        piece["draw"] = idx
        for key, value in piece.items():
            parts[key].append(value)
    if not parts["draw"]:
        e = np.zeros(0)
        return Stream(e.astype(np.int64), e, e, np.zeros((0, m)), np.zeros((0, m)),
                      e.astype(np.int64), e, e, e, e)  # fmt: skip
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    draw = cat.pop("draw")
    n_rounds = int(np.unique(rounds).size)
    fact = data.draw_fact[draw]
    return Stream(
        fact=fact, label=data.label[fact], **cat,
        shuffled_rounds=shuffled, legacy_rounds=n_rounds - shuffled,
        stratum=strata.of_fact[data.facts[fact]], mass=strata.mass, count=strata.count,
    )  # fmt: skip


@dataclass(frozen=True)
class _RoundContext:
    data: SampleData
    designs: dict
    alive: np.ndarray
    m_alive: int
    pool_min: float


def _source_probabilities(ctx: _RoundContext, idx, src):
    """p_s at every draw of the round for every source s (n, m + 1), κ_is (m, m + 1) and
    κ_isb per popularity stratum (STRATA, m, m + 1)."""
    data, m = ctx.data, ctx.data.m
    fact = data.draw_fact[idx]
    p_ext = np.zeros((idx.size, m + 1))
    kappa_ext = np.zeros((m, m + 1))
    kappa_b_ext = None
    for s_id, name in _source_designs(data, idx, src, None, m).items():
        d = ctx.designs[name]
        if kappa_b_ext is None:
            kappa_b_ext = np.zeros((d.kappa_b.shape[0], m, m + 1))
        if s_id < m:
            p_ext[:, s_id] = d.at_drawn[fact, s_id]
            kappa_ext[s_id, s_id] = d.kappa[s_id]
            kappa_b_ext[:, s_id, s_id] = d.kappa_b[:, s_id]
        else:
            p_ext[:, m] = d.at_drawn[fact].sum(axis=1) / ctx.m_alive
            kappa_ext[:, m] = d.kappa / ctx.m_alive
            kappa_b_ext[:, :, m] = d.kappa_b / ctx.m_alive
    return p_ext, kappa_ext, kappa_b_ext


def _shuffled_round(ctx: _RoundContext, idx, src) -> dict:
    """A round written in a uniformly random order (:func:`shuffled_round`)."""
    p_ext, kappa_ext, kappa_b_ext = _source_probabilities(ctx, idx, src)
    return shuffled_round(p_ext, kappa_ext, src, ctx.alive, ctx.m_alive, ctx.pool_min, kappa_b_ext)


def shuffled_round(
    p_ext, kappa_ext, src, alive, m_alive: int, pool_min: float, kappa_b_ext=None
) -> dict:
    """The step arrays of a round written in a uniformly random order: given every earlier
    draw (facts and sources), the k-th draw comes from the mixture of the sources still to
    come, q_k = Σ_s (r_s/r) p_s; one step per draw for every term.

    ``p_ext`` (n, m + 1) is p_s at each draw for every source s (column m: the floor's q₀),
    ``kappa_ext`` (m, m + 1) κ_is = min over X_i of p_s/t_i, ``src`` (n,) each draw's source.
    Returns ``q`` (n,), ``own`` (n, m) = Σ_s (r_s/r) κ_is (the precision term t_i f/q_k is at
    most 1/own), the pool step arrays and ``active_steps`` (m,); with ``kappa_b_ext``
    (B, m, m + 1), κ_isb per stratum b, also ``own_b`` (n, m, B) = Σ_s (r_s/r) κ_isb."""
    n, m = src.size, kappa_ext.shape[0]
    onehot = np.zeros((n, m + 1))
    onehot[np.arange(n), src] = 1.0
    remaining = onehot.sum(axis=0)[None, :] - (np.cumsum(onehot, axis=0) - onehot)
    frac = remaining / (n - np.arange(n))[:, None]
    q = (frac * p_ext).sum(axis=1)
    share = frac[:, :m][:, alive] + frac[:, m][:, None] / m_alive
    cover = share.min(axis=1) * pool_min if alive.any() else np.zeros(n)
    own = frac @ kappa_ext.T
    # the systems some source of the round covers (fixed before it): its steps count for them
    out = {"q": q, "own": own, "active_steps": np.where(own[0] > 0, float(n), 0.0),
           "pool_step": np.arange(n), "pool_sigma": q,
           "pool_cover": cover, "pool_size": np.ones(n)}  # fmt: skip
    if kappa_b_ext is not None:
        out["own_b"] = np.einsum("ns,bis->nib", frac, kappa_b_ext)
    return out


def _legacy_round(ctx: _RoundContext, idx, src) -> dict:
    """A round whose rows are grouped (not in a random order): each draw's distribution is its
    own source's p_s (precision: its own system's term only); pool terms go by batches, the
    l-th draw of every source, with σ_l = Σ_{s ∈ batch} p_s."""
    m, n = ctx.data.m, idx.size
    p_ext, kappa_ext, kappa_b_ext = _source_probabilities(ctx, idx, src)
    q = p_ext[np.arange(n), src]
    own = np.zeros((n, m))
    sys = np.minimum(src, m - 1)
    own[np.arange(n), sys] = np.where(src < m, kappa_ext[sys, src], 0)
    own_b = np.zeros((n, m, kappa_b_ext.shape[0]))
    own_b[np.arange(n), sys] = np.where((src < m)[:, None], kappa_b_ext[:, sys, src].T, 0)
    counts = np.bincount(src, minlength=m + 1)
    order = np.argsort(src, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - starts[src[order]]
    L = int(counts.max())
    member = counts[None, :] > np.arange(L)[:, None]  # (L, m + 1): source s in batch l
    sigma = (p_ext * member[rank]).sum(axis=1)
    everyone = member[:, :m][:, ctx.alive].all(axis=1) if ctx.alive.any() else np.zeros(L, bool)
    cover = ctx.pool_min * (everyone + member[:, m] / ctx.m_alive)
    return {"q": q, "own": own, "own_b": own_b, "active_steps": counts[:m].astype(float),
            "pool_step": rank, "pool_sigma": sigma, "pool_cover": cover,
            "pool_size": member.sum(axis=1).astype(float)}  # fmt: skip


def _source_designs(data: SampleData, idx, src, is_floor, m: int) -> dict[int, str]:
    """The design of each source of a round (a system's sampler; the floor's draws' design)."""
    sources, first = np.unique(src, return_index=True)
    return {
        int(s_id): data.sampler_design[int(data.draw_sampler[idx[k]])]
        for s_id, k in zip(sources, first, strict=True)
    }


def floor_probabilities(samples: pd.DataFrame) -> np.ndarray:
    """Which samples.tsv rows are floor draws (a ``mixture_prob`` recorded)."""
    if MIXTURE_COLUMN not in samples.columns:
        return np.zeros(len(samples), bool)
    column = samples[MIXTURE_COLUMN]
    text = column.astype("string").fillna("").str.strip().str.lower()
    given = (text != "") & (text != "nan") & (text != "<na>")
    return (pd.to_numeric(column, errors="coerce").notna() | given).to_numpy(bool)


def drawn_floor_probabilities(task: Task, design: str, facts: np.ndarray) -> np.ndarray:
    """q₀(x) = (1/m) Σ_j p_j(x) of the drawn answer strings ``facts`` (fact ids of ``task``, not
    of its class view) under ``design``: p_j the design's probability of the string in system
    j's full output, m the systems with outputs.  What ``--until-decided`` records as
    ``mixture_prob`` and the check compares with: the probability of what was drawn, fixed when
    it was drawn (the design depends on the outputs only), whatever classes later labels create
    (module :mod:`receval.estimators.anytime`, "Equivalence classes learned while labelling")."""

    if hasattr(task, "floor_probabilities"):  # the engine path: from the drawn facts' members
        return task.floor_probabilities(design, facts)
    outputs = task.outputs
    s = np.asarray(sampling_probabilities(outputs, task.queries, design), float)
    per_fact = np.bincount(outputs["fact"].to_numpy(np.int64), weights=s,
                           minlength=len(task.facts))  # fmt: skip
    alive = max(int(outputs["system"].nunique()), 1)
    return per_fact[np.asarray(facts, np.int64)] / alive


def _row_designs(task: Task, samples: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """The recorded (checked or inferred) design of samples.tsv ``rows``."""
    design = {(s.sample, s.system): s.design for s in task.samplers}
    keys = zip(samples["sample"].to_numpy()[rows], samples["system"].to_numpy()[rows], strict=True)
    return np.array([design.get((str(a), str(b)), "") for a, b in keys], dtype=object)


def _check_floor(task, samples, data: SampleData, designs, floor_all, m_alive: int) -> None:
    """Every recorded ``mixture_prob`` must be q₀ of the drawn answer string under the row's
    design (:func:`drawn_floor_probabilities`), the probability in force when it was drawn.
    For bundles written before the string was recorded, a judged draw may instead carry q₀ of
    its whole equivalence class as the labels now define it (what the sampler then wrote when
    its classes were known at draw time, and the only value such a bundle could score with)."""
    if not floor_all.any():
        return
    rows = np.flatnonzero(floor_all)
    recorded = pd.to_numeric(samples[MIXTURE_COLUMN], errors="coerce").to_numpy(float)[rows]
    bad = ~(np.isfinite(recorded) & (recorded > 0))
    if bad.any():
        row = int(rows[np.argmax(bad)])
        _floor_error(task, samples, row, f"{MIXTURE_COLUMN} "
                     f"{samples[MIXTURE_COLUMN].iloc[row]!r} is not a positive probability")  # fmt: skip
    raw = task.samples["fact"].to_numpy(np.int64)[rows]
    row_design = _row_designs(task, samples, rows)
    want = np.full(rows.size, np.nan)
    for name in pd.unique(row_design):
        here = row_design == name
        if name:
            want[here] = drawn_floor_probabilities(task, str(name), raw[here])
    ok = np.isclose(recorded, want, rtol=1e-4, atol=0)
    if ok.all():
        return
    k_of_row = np.full(len(samples), -1)
    k_of_row[data.draw_row] = np.arange(data.K)
    for i in np.flatnonzero(~ok):
        k = k_of_row[rows[i]]
        if k >= 0:  # the class's q₀ under today's classes (bundles written before)
            design = designs[data.sampler_design[int(data.draw_sampler[k])]]
            legacy = design.at_drawn[data.draw_fact[k]].sum() / m_alive
            if np.isclose(recorded[i], legacy, rtol=1e-4, atol=0):
                continue
        row = int(rows[i])
        _floor_error(
            task, samples, row,
            f"{MIXTURE_COLUMN} {recorded[i]:.6g} disagrees with the floor mixture of sample "
            f"{samples['sample'].iloc[row]!r} (the mean of every system's {row_design[i]} "
            f"probability of the drawn answer: {want[i]:.6g}); these draws cannot come from the "
            "recorded design",
        )  # fmt: skip


def _floor_error(task, samples: pd.DataFrame, row: int, problem: str) -> None:

    path = task.files.get("samples", task.root / "samples.tsv")
    line = int(samples[LINE].iloc[row]) if LINE in samples.columns else None
    raise BundleError(path, line, problem)
