"""Anytime-valid intervals (``--intervals anytime``): confidence sequences on per-draw terms.

Every interval holds simultaneously at every *look* — every ``score`` of the task as its samples
grow, whatever rule chose the next labels (``receval sample --until-decided`` included) — because
each is a betting confidence sequence (:mod:`receval.estimators.betting`) over one fixed stream
of observations that every look extends.

**The stream.**  The judged draws in round order (rounds in the order their ``sample`` name first
appears in samples.tsv), within a round in a uniformly random order fixed by a seed derived from
the round's name (not from ``--seed``: every look sees the same stream).  A round consists of
*sources* with counts fixed before it is drawn: each system's sampler (n_j i.i.d. draws from
p_j) and, for rounds drawn by ``--until-decided``, a *floor* source (rows with a
``mixture_prob``): i.i.d. draws from q₀ = (1/m) Σ_j p_j (a system chosen uniformly, then a fact
from its p_j), ``mixture_prob`` = q₀(x).  In a uniformly random interleaving, given everything
before it (facts *and* sources), the k-th draw comes from the predictable mixture

    q_k(x) = Σ_j (r_j/r) p_j(x) + (r₀/r) q₀(x),

r_j the draws of source j not yet seen in the round, r = Σ r_j.  So, with t_i(x) the target
(1/|X_i| on X_i) and f the label,

* precision π_i: Z_k = t_i(x_k) f(x_k) / q_k(x_k) has conditional mean π_i whenever q_k covers
  X_i (its own sampler or the floor still has draws; otherwise the draw is skipped for system i,
  a predictable decision).  Range [0, 1/Σ_j (r_j/r) κ_ij] with κ_ij = min_{X_i} p_j/t_i.
* pooled recall ν_i = Σ_pool g_i f / Σ_pool f: the terms (g_i − ν) f/q_k have conditional mean
  0 at the true ν whenever q_k covers the pool (a ratio: inverting the tests of A − ν·B).
* pool coverage θ: the exhaustive units in file order, terms w_u (a_u − θ b_u) (the same
  inversion); the range uses the largest w_u b_u recorded (see :data:`UNIT_ASSUMPTION`).
* recall θ·ν_i and F1 (increasing in precision and recall): from the sequences of the factors at
  split levels (union bound): recall θ and ν at α/2 each, F1 π, ν and θ at α/3 each.
* comparisons (tiers, rank sets): every system's sequence of the ranked metric at α/m (recall
  and pooled recall: ν, whose order is recall's), so all of them hold at once with probability
  ≥ 1 − α at every look; i is better than j when i's lower end exceeds j's upper end.  The
  family-wise error over all pairs *and* all looks is ≤ α.

The bets are tuned for the draws of the rounds started so far (a number fixed before each
round), so the sequences are tightest at the end of the latest round.  Points are the
estimator's (joint by default); the intervals do not use the bootstrap.

References: Waudby-Smith & Ramdas, JRSSB 2024 (betting CS); Waudby-Smith, Wu, Ramdas, Kallus &
Luedtke 2022 (anytime-valid off-policy inference: predictable importance weights); Chaganty et
al. 2017 (the importance-weighted terms).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from receval.estimators.betting import BettingStreams, confidence_bounds
from receval.estimators.intervals import Estimates, IntervalMethod
from receval.leaderboard import Comparisons

if TYPE_CHECKING:
    from receval.estimators.base import ScoringContext
    from receval.estimators.sample_data import SampleData
    from receval.task import Task

#: samples.tsv column of floor draws: q₀(x), the floor mixture's probability of the drawn fact
MIXTURE_COLUMN = "mixture_prob"

UNIT_ASSUMPTION = (
    "pool coverage: the exhaustive units are taken in file order as exchangeable draws, and no "
    "unit is assumed to weigh more than the largest recorded one"
)

#: bisection steps of each end (resolution 2⁻²⁴ of the search range; ends are conservative)
ITERATIONS = 24


def round_permutation(name: str, n: int) -> np.ndarray:
    """The fixed, uniformly random order of a round's n draws, seeded by the round's name."""
    seed = int.from_bytes(hashlib.sha256(f"receval-anytime:{name}".encode()).digest()[:8], "little")
    return np.random.default_rng(seed).permutation(n)


@dataclass(frozen=True)
class DrawStream:
    """The judged draws in stream order (module docstring); arrays over steps k (K,) or (K, m).

    ``draw`` indexes the draws of :class:`SampleData`, ``fact`` its drawn facts; ``q`` is
    q_k(x_k); ``own`` (K, m) is Σ_j (r_j/r) κ_ij (0: q_k does not cover X_i); ``pool`` (K,) a
    lower bound of min over the pool of q_k (0: the pool is not covered); ``horizon`` the draws of
    the rounds started so far."""

    draw: np.ndarray
    fact: np.ndarray
    label: np.ndarray
    q: np.ndarray
    own: np.ndarray
    pool: np.ndarray
    horizon: np.ndarray
    floor: np.ndarray  # (K,) bool: the step is a floor draw


@dataclass(frozen=True)
class _Design:
    """One design's p_j at the drawn facts (D, m), κ_i (m,) and min_x Σ_j p_j(x) over the pool."""

    at_drawn: np.ndarray
    kappa: np.ndarray
    pool_min: float


def _design_arrays(view: Task, probabilities, data: SampleData, design: str) -> _Design:
    from receval.estimators.sample_data import _targets
    from receval.task import codes_in

    outputs = view.outputs
    s_all = np.asarray(probabilities(design), float)
    t_all = _targets(view, data.target_kind).to_numpy()
    sys_codes = codes_in(outputs["system"], pd.Index(data.systems)).astype(np.int64)
    facts = outputs["fact"].to_numpy(np.int64)
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
    return _Design(at_drawn, kappa, pool_min)


def draw_stream(task: Task, data: SampleData) -> DrawStream:
    """Order the judged draws of ``data`` into the stream and compute each step's mixture q_k,
    coverage and ranges (module docstring).  Checks the recorded floor probabilities: a
    ``mixture_prob`` that the recorded design cannot have produced is a BundleError naming the
    samples.tsv line."""
    from receval.estimators.sample_data import _design_probabilities

    view, probabilities, _ = _design_probabilities(task, True)
    designs = {d: _design_arrays(view, probabilities, data, d) for d in set(data.sampler_design)}
    m, K = data.m, data.K
    alive = data.sizes > 0
    m_alive = max(int(alive.sum()), 1)
    samples = view.samples
    floor_all = _floor_probabilities(samples)
    floor = floor_all[data.draw_row] if K else np.zeros(0, bool)
    sampler_design = np.array(data.sampler_design, dtype=object)
    _check_floor(task, samples, data, designs, floor_all, m_alive)

    rounds = data.sampler_round[data.draw_sampler]
    out = {k: [] for k in ("draw", "q", "own", "pool", "horizon")}
    started = 0
    for r in np.unique(rounds):
        idx = np.flatnonzero(rounds == r)
        name = data.sampler_names[int(data.draw_sampler[idx[0]])][0]
        idx = idx[round_permutation(str(name), idx.size)]
        n = idx.size
        started += n
        src = np.where(floor[idx], m, data.sampler_system[data.draw_sampler[idx]])
        onehot = np.zeros((n, m + 1))
        onehot[np.arange(n), src] = 1.0
        remaining = onehot.sum(axis=0)[None, :] - (np.cumsum(onehot, axis=0) - onehot)
        frac = remaining / (n - np.arange(n))[:, None]
        fact = data.draw_fact[idx]
        q = np.zeros(n)
        own = np.zeros((n, m))
        pool_weight = np.full(n, np.inf)
        # each system's source in this round has one design (its sampler's)
        src_design = {}
        for j in np.unique(data.draw_sampler[idx]):
            src_design.setdefault(int(data.sampler_system[j]), sampler_design[j])
        floor_design = sampler_design[data.draw_sampler[idx][floor[idx]]]
        floor_design = floor_design[0] if floor_design.size else None
        for i in range(m):
            d = designs[src_design.get(i, floor_design or sampler_design[0])]
            q += frac[:, i] * d.at_drawn[fact, i]
            own[:, i] += frac[:, i] * d.kappa[i]
        pool_min = min(d.pool_min for d in designs.values())
        if floor_design is not None:
            d0 = designs[floor_design]
            q += frac[:, m] * d0.at_drawn[fact].sum(axis=1) / m_alive
            own += frac[:, m][:, None] * d0.kappa[None, :] / m_alive
        share = frac[:, :m][:, alive] + frac[:, m][:, None] / m_alive
        pool_weight = share.min(axis=1) if alive.any() else np.zeros(n)
        out["draw"].append(idx)
        out["q"].append(q)
        out["own"].append(own)
        out["pool"].append(pool_weight * pool_min)
        out["horizon"].append(np.full(n, float(started)))
    if not out["draw"]:
        empty = np.zeros(0)
        return DrawStream(empty.astype(np.int64), empty.astype(np.int64), empty, empty,
                          np.zeros((0, m)), empty, empty, np.zeros(0, bool))  # fmt: skip
    draw = np.concatenate(out["draw"])
    return DrawStream(
        draw=draw,
        fact=data.draw_fact[draw],
        label=data.label[data.draw_fact[draw]],
        q=np.concatenate(out["q"]),
        own=np.concatenate(out["own"]),
        pool=np.concatenate(out["pool"]),
        horizon=np.concatenate(out["horizon"]),
        floor=floor[draw],
    )


def _floor_probabilities(samples: pd.DataFrame) -> np.ndarray:
    """Which samples.tsv rows are floor draws (a ``mixture_prob`` recorded)."""
    if MIXTURE_COLUMN not in samples.columns:
        return np.zeros(len(samples), bool)
    column = samples[MIXTURE_COLUMN]
    text = column.astype("string").fillna("").str.strip().str.lower()
    given = (text != "") & (text != "nan") & (text != "<na>")
    return (pd.to_numeric(column, errors="coerce").notna() | given).to_numpy(bool)


def _check_floor(task, samples, data: SampleData, designs, floor_all, m_alive: int) -> None:
    """Every recorded ``mixture_prob`` must be q₀(x) = (1/m) Σ_j p_j(x) under the row's design."""
    if not floor_all.any():
        return
    from receval.errors import BundleError
    from receval.formats.tables import LINE

    path = task.files.get("samples", task.root / "samples.tsv")
    recorded = pd.to_numeric(samples[MIXTURE_COLUMN], errors="coerce").to_numpy(float)
    rows = np.flatnonzero(floor_all)
    k_of_row = np.full(len(samples), -1)
    k_of_row[data.draw_row] = np.arange(data.K)
    for row in rows:
        k = k_of_row[row]
        got = recorded[row]
        line = int(samples[LINE].iloc[row]) if LINE in samples.columns else None
        if not np.isfinite(got) or got <= 0:
            raise BundleError(path, line, f"{MIXTURE_COLUMN} {samples[MIXTURE_COLUMN].iloc[row]!r} "
                              "is not a positive probability")  # fmt: skip
        if k < 0:
            continue  # not judged yet: checked once labelled
        design = designs[data.sampler_design[int(data.draw_sampler[k])]]
        want = design.at_drawn[data.draw_fact[k]].sum() / m_alive
        if not np.isclose(got, want, rtol=1e-4, atol=0):
            raise BundleError(
                path,
                line,
                f"{MIXTURE_COLUMN} {got:.6g} disagrees with the floor mixture of sample "
                f"{samples['sample'].iloc[row]!r} (the mean of every system's "
                f"{data.sampler_design[int(data.draw_sampler[k])]} probability: {want:.6g}); "
                "these draws cannot come from the recorded design",
            )


@dataclass(frozen=True)
class AnytimeBounds:
    """Confidence-sequence ends per quantity and level: ``ends[name][level] = (lower, upper)``."""

    ends: dict[str, dict[float, tuple[np.ndarray, np.ndarray]]]


def _levels(alpha: float, m: int) -> list[float]:
    return sorted({alpha, alpha / 2, alpha / 3, alpha / m, alpha / (3 * m)})


def anytime_bounds(task: Task, data: SampleData, confidence: float) -> AnytimeBounds:
    """Every confidence sequence the leaderboard needs (module docstring), at the levels α,
    α/2, α/3, α/m and α/(3m)."""
    alpha = 1.0 - confidence
    m_alive = max(int((data.sizes > 0).sum()), 1)
    levels = _levels(alpha, m_alive)
    stream = draw_stream(task, data)
    ends: dict[str, dict[float, tuple[np.ndarray, np.ndarray]]] = {}
    K = stream.draw.size
    horizon = stream.horizon[None, :] if K else None
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(stream.q > 0, stream.label / stream.q, 0.0)  # f/q
        z = data.target[stream.fact] * weight[:, None]  # (K, m)
        high = np.where(stream.own > 0, 1.0 / stream.own, 0.0)
        pool_high = np.where(stream.pool > 0, 1.0 / stream.pool, 0.0)
    active = (stream.own > 0).T
    precision = BettingStreams.of_means(z.T, high.T, active)
    ends["precision"] = _bounds(precision, levels, (0.0, 1.0), alpha, horizon)
    pool_active = np.broadcast_to(stream.pool > 0, (data.m, K))
    member = data.member[stream.fact].T * weight[None, :]
    ratio = BettingStreams.of_ratios(member, weight[None, :], pool_high[None, :], pool_active)
    pool_facts = float(task.facts["in_pool"].sum()) if task is not None else float(data.sizes.sum())
    # E v = Σ_pool f: guessed as half the pool for the prior variance of the bets
    ends["pooled_recall"] = _bounds(ratio, levels, (0.0, 1.0), alpha, horizon, 0.5, pool_facts / 2)
    total = BettingStreams.of_means(weight[None, :], pool_high[None, :], pool_active[:1])
    ends["pool_correct"] = _bounds(
        total, [alpha], (0.0, pool_facts), alpha, horizon, pool_facts / 2
    )
    ends["pool_coverage"] = _unit_bounds(data, levels, alpha)
    return AnytimeBounds(ends)


def _bounds(streams, levels, search, alpha, horizon, prior=0.5, scale=None):
    if streams.shape[1] == 0:
        lo = np.full((len(levels), streams.shape[0]), np.nan)
        return {a: (lo[i], lo[i]) for i, a in enumerate(levels)}
    lower, upper = confidence_bounds(
        streams, levels, search, alpha_bets=alpha, prior_mean=prior, horizon=horizon,
        prior_scale=prior if scale is None else scale, iterations=ITERATIONS,
    )  # fmt: skip
    none = ~streams.active.any(axis=1)
    lower = np.where(none[None, :], np.nan, lower)
    upper = np.where(none[None, :], np.nan, upper)
    return {a: (lower[i], upper[i]) for i, a in enumerate(levels)}


def _unit_bounds(data: SampleData, levels, alpha):
    """θ's sequence over the exhaustive units in file order (w a − θ w b, range max w b)."""
    if data.U == 0 or not (data.unit_found > 0).any():
        nan = np.full(1, np.nan)
        return {a: (nan, nan) for a in levels}
    u = data.unit_weight * data.unit_pooled
    v = data.unit_weight * data.unit_found
    high = np.full(v.size, float(v.max()))
    streams = BettingStreams.of_ratios(
        u[None, :], v[None, :], high[None, :], np.ones((1, v.size), bool)
    )
    horizon = np.full((1, v.size), float(v.size))
    return _bounds(streams, levels, (0.0, 1.0), alpha, horizon, 0.5, float(v.mean()))


def f1_of(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """2pr/(p + r) (0 where both are 0): increasing in p and in r."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(p + r > 0, 2 * p * r / (p + r), 0.0)


def metric_bounds(b: AnytimeBounds, metric: str, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The two ends of ``metric``'s sequence at overall level α (its factors' levels split)."""
    e = b.ends
    if metric in ("precision", "pooled_recall", "pool_coverage", "pool_correct"):
        return e[metric][alpha]
    if metric == "recall":
        t_lo, t_hi = e["pool_coverage"][alpha / 2]
        n_lo, n_hi = e["pooled_recall"][alpha / 2]
        return t_lo * n_lo, t_hi * n_hi
    if metric == "f1":
        t_lo, t_hi = e["pool_coverage"][alpha / 3]
        n_lo, n_hi = e["pooled_recall"][alpha / 3]
        p_lo, p_hi = e["precision"][alpha / 3]
        return f1_of(p_lo, t_lo * n_lo), f1_of(p_hi, t_hi * n_hi)
    raise ValueError(f"no anytime interval for {metric!r}")


def simultaneous_bounds(
    b: AnytimeBounds, metric: str, alpha: float, m: int
) -> tuple[np.ndarray, np.ndarray]:
    """Ends of ``metric`` for every system that hold all at once (levels split over systems);
    for recall and pooled recall ν's (recall = θ·ν orders the systems as ν does)."""
    e = b.ends
    if metric in ("pooled_recall", "recall"):
        return e["pooled_recall"][alpha / m]
    if metric == "precision":
        return e["precision"][alpha / m]
    if metric == "f1":
        t_lo, t_hi = e["pool_coverage"][alpha / 3]
        n_lo, n_hi = e["pooled_recall"][alpha / (3 * m)]
        p_lo, p_hi = e["precision"][alpha / (3 * m)]
        return f1_of(p_lo, t_lo * n_lo), f1_of(p_hi, t_hi * n_hi)
    raise ValueError(f"no anytime comparisons for {metric!r}")


def draw_stream_floor(ctx: ScoringContext) -> int:
    """How many judged draws are floor draws (``mixture_prob`` recorded)."""
    samples = ctx.task.samples if ctx.task is not None else None
    if samples is None or not len(samples) or not ctx.data.K:
        return 0
    return int(_floor_probabilities(samples)[ctx.data.draw_row].sum())


class AnytimeIntervals(IntervalMethod):
    """Confidence sequences valid at every look (module docstring); no bootstrap replicates."""

    name: ClassVar[str] = "anytime"
    needs_bootstrap: ClassVar[bool] = False

    def __init__(self) -> None:
        self._cached: tuple[Any, AnytimeBounds] | None = None

    def check(self, options: Any) -> None:
        if options.estimator == "official":
            raise ValueError("intervals='anytime' needs a sample-based estimator (joint or simple)")
        if options.target_recall is not None or options.rank_by == "precision_at_target":
            raise ValueError(
                "precision at a target recall has no anytime interval; drop target_recall"
            )
        if options.cluster_queries:
            raise ValueError("cluster_queries applies to the bootstrap, not to intervals='anytime'")

    def label(self, options: Any, B: int | None) -> str:
        return (
            f"anytime betting confidence sequence {options.confidence:.0%} "
            "(Waudby-Smith & Ramdas 2024), valid at every look"
        )

    def record(self, ctx: ScoringContext) -> dict:
        """run.json fields: the method, its stream and assumptions, the ranking's procedure."""
        data = ctx.data
        floor = int(draw_stream_floor(ctx))
        return {
            "intervals": {
                "method": "anytime",
                "what": "betting confidence sequences (Waudby-Smith & Ramdas 2024, hedged "
                "one-sided bettors at alpha/2, predictable plug-in bets tuned to the draws of the "
                "rounds started so far), valid simultaneously at every look",
                "stream": "judged draws in round order, within a round in a random order seeded "
                "by the round's name; each term importance-weighted by the predictable mixture "
                "of the sources still to come (per-system samplers, floor mixture_prob draws)",
                "splits": "recall: theta and nu at alpha/2; f1: precision, nu, theta at alpha/3; "
                "comparisons: each system at alpha/m (m systems with outputs)",
                "assumptions": [
                    UNIT_ASSUMPTION,
                    "draws still unlabelled are left out (a round scored before it is fully "
                    "labelled is not the stream later looks see)",
                ],
                "draws": data.K,
                "floor_draws": floor,
                "points": f"{ctx.options.estimator} estimator (the sequences do not use it)",
            },
            "ranking": {
                "procedure": "anytime",
                "why": "comparisons valid over all pairs and all looks, whatever rule chose the "
                "labels (sample --until-decided included)",
                "rank_sets": "simultaneous rank sets from the same comparisons: rank_lo = 1 + "
                "#systems whose sequence lies above, rank_hi = S - #systems below",
            },
            "bootstrap": {"B": 0, "seed": ctx.options.seed, "method": None,
                          "level": ctx.options.confidence, "clusters": None},
        }  # fmt: skip

    def bounds(self, ctx: ScoringContext) -> AnytimeBounds:
        """The sequences of ``ctx`` (computed once per context)."""
        if self._cached is None or self._cached[0] is not ctx:
            self._cached = (ctx, anytime_bounds(ctx.task, ctx.data, ctx.options.confidence))
        return self._cached[1]

    def estimate(self, ctx, run, metric, bounds=(0.0, 1.0)) -> Estimates:
        point = run.point[metric] if run is not None else np.full(ctx.data.m, np.nan)
        lower, upper = metric_bounds(self.bounds(ctx), metric, 1.0 - ctx.options.confidence)
        lower = np.broadcast_to(lower, point.shape).astype(float)
        upper = np.broadcast_to(upper, point.shape).astype(float)
        nan = np.isnan(point)
        return Estimates(point, np.where(nan, np.nan, lower), np.where(nan, np.nan, upper))

    def interval(self, options, point, replicates, jackknife=None, bounds=(0.0, 1.0)):
        """No anytime interval for derived quantities (NaN ends)."""
        nan = np.full(np.shape(point), np.nan)
        return nan, nan

    def comparisons(self, ctx, point, replicates, metric) -> Comparisons:

        alpha = 1.0 - ctx.options.confidence
        m_alive = max(int((ctx.data.sizes > 0).sum()), 1)
        lower, upper = simultaneous_bounds(self.bounds(ctx), metric, alpha, m_alive)
        ok = ~np.isnan(point) & ~np.isnan(lower) & ~np.isnan(upper)
        better = (lower[:, None] > upper[None, :]) & ok[:, None] & ok[None, :]
        # no p-values: α where the sequences separate the pair (p ≤ α), 1 elsewhere
        pvalues = np.where(better | better.T, alpha, 1.0)
        pvalues[~(ok[:, None] & ok[None, :])] = np.nan
        return AnytimeComparisons(better, pvalues, "anytime", alpha, 0)


class AnytimeComparisons(Comparisons):
    """Comparisons from simultaneous confidence sequences (no replicates: ``B`` = 0)."""

    def describe(self) -> str:
        return (
            "anytime: every system's confidence sequence of the ranked metric at alpha/m "
            "(Bonferroni over systems), i better than j when its lower end exceeds j's upper "
            f"end; family-wise error <= {self.alpha:g} over all pairs and all looks"
        )
