"""The confidence sequences the anytime intervals are built from: each system's precision, the
pool's correct facts K, the pool coverage θ over the exhaustive units, and the joint ends of
recall θ·ν and F1 over a θ grid (:func:`joint_bounds`).

The terms, their ranges and the arguments that make them valid are in
:mod:`receval.estimators.anytime.method`'s docstring; this module turns them into sequences with
the bets of :mod:`receval.estimators.anytime.betting`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from receval.estimators.anytime.betting import (
    BettingStreams,
    FixedBetStreams,
    confidence_bounds,
    log_capital,
    one_sided_ends,
    plugin_bets,
)
from receval.estimators.anytime.control import known_labels
from receval.estimators.anytime.stream import ITERATIONS, Stream

if TYPE_CHECKING:
    from receval.estimators.sample_data import SampleData
    from receval.task import Task


@dataclass(frozen=True)
class PoolTotals:
    """The pool's correct-fact terms: per draw f/σ (``weight``); per pool step (P,) the term
    ``total`` = L_s + Σ f/σ over the step's draws of facts not labelled at an earlier step, L_s
    the correct facts labelled at earlier steps (conditional mean Σ_pool f: the labelled facts
    exactly, the others importance-weighted), its predictable range [0, ``high``] (the step's
    bound of Σ f/σ plus L_s), whether the step covers the pool (``active``) and the steps of
    the rounds started so far (``horizon``); ``facts`` the facts in the pool.  ``raw_total``
    and ``raw_high``: the plain sums Σ f/σ over all the step's draws and their bound (the
    ratio tests A − r·B of legacy rounds need B ≥ A step by step)."""

    weight: np.ndarray
    total: np.ndarray
    high: np.ndarray
    active: np.ndarray
    horizon: np.ndarray
    facts: float
    raw_total: np.ndarray
    raw_high: np.ndarray


def pool_totals(task: Task | None, data: SampleData, st: Stream) -> PoolTotals:
    """The pool's correct-fact terms of the stream ``st`` (:class:`PoolTotals`)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(st.pool_sigma > 0, st.label / st.pool_sigma, 0.0)  # f/σ per draw
        high = np.where(st.pool_cover > 0, st.pool_size / st.pool_cover, 0.0)
    raw = np.bincount(st.pool_step, weights=weight, minlength=st.P)
    facts = float(task.pool_size) if task is not None else float(data.sizes.sum())
    known = known_labels(st.fact, st.label, st.pool_step)
    fresh = np.bincount(st.pool_step, weights=np.where(known.known, 0.0, weight), minlength=st.P)
    # correct facts labelled at earlier steps, per step
    labelled = known.by_step(np.nan_to_num(np.asarray(st.label, float)), st.P)
    return PoolTotals(weight, labelled + fresh, high + labelled, st.pool_cover > 0,
                      st.pool_horizon, facts, raw, high)  # fmt: skip


def pool_correct_bounds(pool: PoolTotals, levels, alpha: float):
    """The sequence of the pool's correct facts Σ_pool f at ``levels`` (bets tuned at α)."""
    correct = BettingStreams.of_means(pool.total[None, :], pool.high[None, :], pool.active[None, :])
    horizon = pool.horizon[None, :] if pool.total.size else None
    return _bounds(correct, levels, (0.0, pool.facts), alpha, horizon, pool.facts / 2)


def precision_streams(target, label, q, own) -> BettingStreams:
    """Every system's precision stream (m streams of K steps): the term t_i(x_k) f(x_k)/q_k
    with its range [0, 1/own_ki]; a step with own = 0 (X_i not covered) is skipped.
    ``target`` (K, m) is t_i at each drawn fact, ``label`` (K,) f, ``q`` (K,) and ``own``
    (K, m) as in :class:`Stream`."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z = target * np.where(q > 0, label / q, 0.0)[:, None]
        high = np.where(own > 0, 1.0 / own, 0.0)
    return BettingStreams.of_means(z.T, high.T, (own > 0).T)


def sequence_bets(streams, alpha, horizon, prior=0.5, scale=None) -> np.ndarray:
    """The bets :func:`_bounds` uses for ``streams`` (tests and bench/anytime.py check the
    sequences with them at the true value)."""

    return plugin_bets(streams, alpha, prior, horizon, prior if scale is None else scale)


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


def _unit_streams(data: SampleData):
    """θ's stream over the exhaustive units in file order (w a − θ w b, range max w b) and its
    bets, or None without units that found a correct fact."""
    if data.U == 0 or not (data.unit_found > 0).any():
        return None
    u = data.unit_weight * data.unit_pooled
    v = data.unit_weight * data.unit_found
    high = np.full(v.size, float(v.max()))
    streams = BettingStreams.of_ratios(
        u[None, :], v[None, :], high[None, :], np.ones((1, v.size), bool)
    )
    # few units, a range (the largest unit) far above their spread: the truncation binds, and
    # staking up to 0.9 of what the range allows (< 1 keeps the capital positive) narrows θ
    streams = dataclasses.replace(streams, cap=UNIT_CAP)
    horizon = np.full((1, v.size), float(v.size))
    return streams, horizon, float(v.max()) / 2


def unit_bounds(data: SampleData, levels, alpha):
    """θ's sequence over the exhaustive units in file order (:func:`_unit_streams`)."""
    units = _unit_streams(data)
    if units is None:
        nan = np.full(1, np.nan)
        return {a: (nan, nan) for a in levels}
    streams, horizon, scale = units
    return _bounds(streams, levels, (0.0, 1.0), alpha, horizon, 0.5, scale)


#: θ's bets' truncation over the exhaustive units (:func:`_unit_streams`); staking up to 0.97
#: widened recall on data/kbp-sim (one random round: median 0.091 -> 0.094)
UNIT_CAP = 0.9

#: θ values at which the joint ends of recall and F1 are first found (:func:`joint_bounds`): this
#: many between θ's point and the end θ's capital alone rejects, a quarter of it on the far side
THETA_GRID = 20
#: θ values of each finer grid laid over the three cells around each system's extreme, and how
#: many times (:func:`_joint_end`); on kbp-sim a single 40-point grid gave recall 0.108, 80 points
#: 0.098
REFINE_GRID = 16
REFINE_STAGES = 2
REFINE_SPAN = 2
#: bisection steps of the draws' ends at every θ of the grid (resolution 2⁻¹², about 2.4e-4 of the
#: range: conservative, below the printed precision)
JOINT_ITERATIONS = 12
#: F1's weights of ν's and π's capitals (1/w_ν + 1/w_π = 1, fixed in advance): F1 is far more
#: sensitive to recall than to precision where recall is the smaller of the two
F1_WEIGHTS = {"pooled_recall": 1.1, "precision": 11.0}


def joint_bounds(
    units, draws: dict, alpha: float, make_direct=None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Recall θ·ν and F1 at level α from one joint test per side instead of a split of α.

    The units are drawn independently of the labels and their number is fixed by the design
    (:data:`UNIT_ASSUMPTION`), so θ's final capital X(θ) (a test martingale stopped at a fixed
    step, E X(θ_true) ≤ 1) is independent of the draw stream.  For one side, let Y_ν and Z_π be
    the running maxima of ν's and π's capitals over the draws (Ville: P(Y ≥ y) ≤ 1/y at the
    truth, every look included, whatever rule chose the draws) and V = max(Y/w_ν, Z/w_π) with
    fixed weights, 1/w_ν + 1/w_π = 1 (:data:`F1_WEIGHTS`), so P(V ≥ v) ≤ 1/v.  Conditioning on
    the units, P(X·V ≥ 2/α) = E[P(V ≥ 2/(αX) | X)] ≤ E[X] α/2 ≤ α/2 at the true values.  So
    the side rejects (θ, π, ν) when log X(θ) + max(log Y(ν) − log w_ν, log Z(π) − log w_π) ≥
    log(2/α) (recall: ν alone, w_ν = 1); the two sides cost α.  Both capitals are monotone in
    their value, so for θ in a cell [θ_j, θ_{j+1}] of a grid of the θ not rejected by X alone,
    the ν and π left at θ_j's budget log(2/α) + log w − log X(θ_j) bound those at every θ of
    the cell: the upper ends are max_j f(π_j, θ_{j+1}·ν_j) and the lower ones
    min_j f(π_{j+1}, θ_j·ν_{j+1}) (f increasing in both; recall: θν), never narrower than the
    exact ends.  The grid is refined where it matters: a coarse one, then finer grids over each
    system's extreme cell and its neighbours (:func:`_joint_end`); on data/kbp-sim (one random
    round of 150 per system) that took the median recall width from 0.108 (one 40-point grid)
    to 0.091 and F1 from 0.133 to 0.117 at about the same cost.

    Against the split it replaces (θ and ν at α/2 each; F1: π, ν and θ at α/3 each) the error
    is not divided: where θ's capital is above 1 it takes budget from the draws, where below it
    gives budget to them.  Returns ``recall`` and ``f1`` (lower, upper) per system; NaN without
    units.  ``units``: :func:`_unit_streams`; ``draws``: (streams, bets) of ``precision`` and
    ``pooled_recall``; ``make_direct``: a function of (θ's streams and bets, α) giving recall's
    and F1's one-stream tests (:class:`receval.estimators.anytime.f1.DirectF1`), which then
    replace ν's test and F1's union of π and ν."""
    m = draws["pooled_recall"][0].shape[0]
    if units is None or m == 0 or draws["pooled_recall"][0].shape[1] == 0:
        nan = np.full(m, np.nan)
        return {"recall": (nan, nan), "f1": (nan, nan)}

    t_streams, t_horizon, t_scale = units
    theta = (t_streams, plugin_bets(t_streams, alpha, 0.5, t_horizon, t_scale))
    weights = {"recall": {"pooled_recall": 1.0}, "f1": F1_WEIGHTS}
    direct = make_direct(theta, alpha) if make_direct is not None else None
    from receval.progress import stage

    out = {}
    for side in (+1, -1):
        out[side] = {}
        for name, w in weights.items():
            end = "lower" if side > 0 else "upper"
            over = "ν = r/θ" if direct is not None and name == "recall" else "θ"
            stage(f"anytime: {name}'s {end} ends over the {over} grid ({m} systems)")
            if direct is not None and name == "recall":  # one 1-D search over ν = r/θ
                out[side][name] = _recall_over_s(theta, direct[name].over_s(), alpha, side)
                continue
            if direct is not None:  # one stream per system (f1.DirectF1), its cells lazily
                out[side][name] = direct[name].joint_end(theta, alpha, side)
                continue
            values = _factor_values(draws, w, name)
            out[side][name] = _joint_end(theta, values, np.log(min(w.values())), m, alpha, side)
    none = ~draws["pooled_recall"][0].active.any(axis=1)
    return {
        name: tuple(np.where(none, np.nan, out[side][name]) for side in (+1, -1))
        for name in ("recall", "f1")
    }


def _joint_end(
    theta, values_of, offset: float, m: int, alpha: float, side: int, guided: bool = False
) -> np.ndarray:
    """One side's end of recall or F1 (:func:`joint_bounds`) for every system: the extreme over
    the cells of a coarse θ grid, then, :data:`REFINE_STAGES` times, over a finer grid
    (:data:`REFINE_GRID` points) laid per system over the cell that gave its extreme and the
    cells either side of it.  Every cell's value bounds the quantity over the whole cell, so
    the extreme over the last grid's cells and every earlier grid's cells outside the refined
    span is as valid as the coarse one, and tighter.  ``values_of(grid, budget, side)`` gives
    the cells' values (G − 1, m) from the grid (G, m) and each point's budget log(2/α) − log X(θ);
    ``offset``: log of the least weight (θ values whose capital alone exceeds the level plus it
    are rejected whatever the draws show).  ``guided``: ``values_of`` takes ``prior`` = (θ,
    values) of the previous grid's cells, which guess the finer grid's (the same values, found
    with fewer capital evaluations: :meth:`receval.estimators.anytime.f1.DirectF1.cell_values`)."""
    level = np.log(2.0 / alpha)
    t_streams, t_bets = theta
    grid, budget = _theta_grid(t_streams, t_bets, level + offset, side)
    budget = budget - offset  # log(2/α) − log X(θ)
    grid = np.repeat(grid[:, None], m, axis=1)
    budget = np.repeat(budget[:, None], m, axis=1)
    worst_of = np.max if side < 0 else np.min
    fill = -np.inf if side < 0 else np.inf
    outside_best = np.full(m, fill)
    prior = None
    for stage in range(REFINE_STAGES + 1):
        values = values_of(grid, budget, side) if prior is None else values_of(
            grid, budget, side, prior=prior
        )  # fmt: skip
        worst = np.argmax(values, axis=0) if side < 0 else np.argmin(values, axis=0)
        first = np.maximum(worst - REFINE_SPAN, 0)
        last = np.minimum(worst + 1 + REFINE_SPAN, grid.shape[0] - 1)  # closes the span
        cell = np.arange(values.shape[0])[:, None]
        outside = (cell < first[None, :]) | (cell >= last[None, :])
        outside_best = worst_of([outside_best, worst_of(np.where(outside, values, fill), axis=0)],
                                axis=0)  # fmt: skip
        if stage == REFINE_STAGES:
            break
        cols = np.arange(m)
        if guided:  # the cells' curve guesses the finer grid's ends
            prior = (grid[1:] if side < 0 else grid[:-1], values)
        grid = np.linspace(grid[first, cols], grid[last, cols], REFINE_GRID)  # (R, m)
        budget = level - _theta_log_capital(t_streams, t_bets, grid, side)
    # the last refined span's cells are bounded by the values of the grid that chose it
    inside = np.where(outside, fill, values)
    return worst_of([outside_best, worst_of(inside, axis=0)], axis=0)


#: recall's joint ends over the pooled recall s = r/θ (:func:`_recall_over_s`): points of the
#: first grid over s ∈ [0, 1], of each finer grid, how many finer grids, and the cells either
#: side of the extreme one each finer grid covers
S_GRID = 33
S_REFINE_GRID = 13
S_REFINE_STAGES = 4
S_REFINE_SPAN = 2


def _recall_over_s(theta, nu, alpha: float, side: int) -> np.ndarray:
    """One side's end of recall θ·ν per system from the joint test (:func:`joint_bounds`),
    searched over ν instead of θ.

    Recall's one-stream term n·y − r·k/θ (:class:`receval.estimators.anytime.f1.DirectF1`)
    depends on (r, θ) only through s = r/θ (it is pooled recall's term n·y − s·k), and with
    its truncation taken from the range of that term at s (not at the least θ) so does its
    capital C(s): one capital evaluation per value of s serves every θ.  The joint test
    rejects (θ, s) when log X(θ) + C(s) ≥ log(2/α), X θ's final capital over the units.  On
    the upper side C and X both grow (C with s, X with θ), so the θ left beside s is
    θ*(s) = θ's own upper end at the budget log(2/α) − C(s), found on θ's short stream, and
    over a cell [s_j, s_{j+1}] of a grid, θ·s ≤ s_{j+1}·θ*(s_j); the lower side mirrors it
    (θ·s ≥ s_j·θ_*(s_{j+1}), where no θ is left the cell bounds nothing: +∞).  The extreme
    over the cells of a grid covering [0, 1] bounds recall from outside, as the θ grid's cells
    did; the grid is refined :data:`S_REFINE_STAGES` times around each system's extreme cell
    (the cells outside keep their values).  ``nu``: (streams, bets) of the term in s.

    The grid points' capitals are evaluated lazily (:func:`_lazy_over_s`) where C is provably
    monotone in s (:func:`_monotone_in_s`: always on the upper side, where the bet does not
    move with s), and at every grid point otherwise (:func:`_dense_over_s`; data/kbp-sim's lower
    side, whose truncated bet cap·Y/room grows with s at steps with a negative term); both give
    the same ends bit for bit (a system whose lazy end the bounds of its skipped cells leave in
    doubt is computed densely).  On data/kbp-sim the upper side evaluates 4,379 of the 5,950
    capitals, each of them cheaper (:class:`~receval.estimators.anytime.betting.FixedBetStreams`)."""
    streams, bets = nu
    if not _monotone_in_s(streams, bets, side):
        return _dense_over_s(theta, nu, alpha, side)
    end, doubt = _lazy_over_s(theta, nu, alpha, side)
    rows = np.flatnonzero(doubt)
    if rows.size:
        part = (streams.take(rows), bets[rows])
        end[rows] = _dense_over_s(theta, part, alpha, side)
    return end


def _dense_over_s(theta, nu, alpha: float, side: int) -> np.ndarray:
    """:func:`_recall_over_s` evaluating the capital at every point of every grid."""
    streams, bets = nu
    m = streams.shape[0]
    level = np.log(2.0 / alpha)
    table = _theta_table(theta, side)
    grid = np.repeat(np.linspace(0.0, 1.0, S_GRID)[:, None], m, axis=1)
    worst_of = np.max if side < 0 else np.min
    fill = -np.inf if side < 0 else np.inf
    outside_best = np.full(m, fill)
    cols = np.arange(m)
    from receval.progress import stage_detail

    for stage in range(S_REFINE_STAGES + 1):
        stage_detail(f"grid {stage + 1}/{S_REFINE_STAGES + 1} of ν ({m} systems)")
        values, points = _s_cell_values(table, streams, bets, grid, level, side)
        # a cell whose bound is beyond the best value reached at a grid point may hold the
        # extreme: the finer grid spans every such cell (the others cannot)
        reached = worst_of(points, axis=0)
        maybe = values >= reached if side < 0 else values <= reached
        cell = np.arange(values.shape[0])[:, None]
        first = np.where(maybe, cell, values.shape[0]).min(axis=0)
        last = np.where(maybe, cell + 1, 0).max(axis=0)
        first, last = np.minimum(first, last - 1), np.maximum(last, first + 1)
        outside = (cell < first[None, :]) | (cell >= last[None, :])
        outside_best = worst_of([outside_best, worst_of(np.where(outside, values, fill), axis=0)],
                                axis=0)  # fmt: skip
        if stage == S_REFINE_STAGES:
            break
        grid = np.linspace(grid[first, cols], grid[last, cols], S_REFINE_GRID)
    inside = np.where(outside, fill, values)
    end = worst_of([outside_best, worst_of(inside, axis=0)], axis=0)
    return np.minimum(end, 1.0)  # no (θ, s) left at all: the range's far end, as a bisection


def _s_cell_values(table, streams, bets, grid: np.ndarray, level: float, side: int):
    """The bound of θ·s over each cell of the grid (G − 1, m) of s (:func:`_recall_over_s`),
    and θ·s at each point of the grid (G, m) with θ the end there (a value the bound reaches);
    ``table``: θ's final capital on a fine grid (:func:`_theta_table`)."""
    from receval.estimators.anytime.betting import _capitals

    budget = level - _capitals(streams, bets, grid, side, True)  # θ's budget at each s
    ends = _theta_at(table, budget, side)
    if side < 0:  # C grows with s: the cell's largest θ is at its smallest s
        return grid[1:] * ends[:-1], grid * ends
    none = np.isinf(ends)  # no θ left at that s
    finite = np.where(none, 1.0, ends)
    return np.where(none[1:], np.inf, grid[:-1] * finite[1:]), np.where(none, np.inf, grid * finite)


#: the log-capital by which rounding may break C's monotonicity in s: the lazy search bounds
#: the points it skips with θ's end at a budget this much larger (:func:`_lazy_over_s`)
S_SLACK = 1e-9
#: points of the first grid of s evaluated before any is skipped (evenly spread, ends included)
S_SEEDS = 5


def _monotone_in_s(streams, bets, side: int) -> bool:
    """Whether every counted step's factor 1 + λ(s)·Y(s) of ``streams`` is monotone in
    s ∈ [0, 1] the way ``side``'s capital is taken to be (:func:`_lazy_over_s`): Y = u − s·v
    with v ≥ 0 and the bet λ = min(b, cap/room(s)).  Upper side: the room hi0 − s·hi1 must
    not depend on s (hi1 = 0; recall's s-stream).  Lower side: the room s·lo1 − lo0 (lo1 ≥ 0)
    makes the truncated factor cap·Y/room, whose derivative has the sign of v·lo0 − u·lo1;
    where that is ≤ 0, or where the truncation cannot bind on [0, 1] (b below cap/room(1), in
    floats too), the factor (λY: the min (Y ≥ 0) or max (Y < 0) of two pieces decreasing in
    s) decreases."""
    if type(streams) is not BettingStreams:  # a capital of its own: not examined here
        return False
    act = np.asarray(streams.active, bool)

    def of(a) -> np.ndarray:
        return np.broadcast_to(np.asarray(a, float), act.shape)

    v = of(streams.v)
    if np.any(v < 0, where=act):
        return False
    if side < 0:
        return not bool(np.any(of(streams.hi1) != 0, where=act))
    u, lo0, lo1 = of(streams.u), of(streams.lo0), of(streams.lo1)
    if np.any(lo1 < 0, where=act):
        return False
    grows = np.nonzero(act & (v * lo0 > u * lo1))  # where the truncated factor grows with s
    free = of(bets)[grows] < streams.cap / np.maximum(lo1[grows] - lo0[grows], 1e-300)
    return bool(free.all())  # λ = b at every s ≤ 1 there


def _lazy_over_s(theta, nu, alpha: float, side: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_dense_over_s`'s ends (m,) with the capital evaluated at few grid points, and the
    systems (m,) whose end that leaves in doubt.

    C is monotone in s (:func:`_monotone_in_s`), so θ's end is too, and between two evaluated
    points s_a < s_b every skipped point and every cell is bounded by the two: on the upper
    side θ·s ≤ s_b·θ*(s_a), on the lower side ≥ s_a·θ_*(s_b) (θ's ends read at a budget
    :data:`S_SLACK` further out, for rounding), and where θ's end (a value of θ's table) is the
    same at both, it is that at every point between (pinned, :meth:`_SSearch.ends`: exact
    without evaluating C).  Per grid a few points are evaluated
    (:data:`S_SEEDS` spread over the first grid; each finer grid's ends, known from the
    coarser one, and the point nearest its best), then the midpoint of every interval whose
    bound could still beat the best point reached, until none can: the best point, the cells
    the finer grid spans (those that may beat it) and their values are then the dense
    search's.  The skipped cells outside the spans keep their bounds; a system where one of
    those could move the end is in doubt (it never is when C is exactly monotone)."""
    streams, bets = nu
    m = streams.shape[0]
    search = _SSearch(streams, bets, _theta_table(theta, side), np.log(2.0 / alpha), side)
    worst_of = np.max if side < 0 else np.min
    fill = search.fill
    grid = np.repeat(np.linspace(0.0, 1.0, S_GRID)[:, None], m, axis=1)
    capital, known = np.zeros(grid.shape), np.zeros(grid.shape, bool)
    request = np.zeros(grid.shape, bool)
    request[np.round(np.linspace(0, S_GRID - 1, S_SEEDS)).astype(int)] = True
    exact_out, loose_out, cols = np.full(m, fill), np.full(m, fill), np.arange(m)
    from receval.progress import stage_detail

    for stage in range(S_REFINE_STAGES + 1):
        stage_detail(f"grid {stage + 1}/{S_REFINE_STAGES + 1} of ν ({m} systems)")
        search.complete(grid, capital, known, request)
        values, exact, points = search.cells(grid, capital, known)
        first, last = _maybe_span(values, worst_of(points, axis=0), side)
        cell = np.arange(values.shape[0])[:, None]
        outside = (cell < first[None, :]) | (cell >= last[None, :])
        exact_out = worst_of([exact_out, worst_of(np.where(outside & exact, values, fill), axis=0)],
                             axis=0)  # fmt: skip
        loose_out = worst_of([loose_out, worst_of(np.where(outside, values, fill), axis=0)],
                             axis=0)  # fmt: skip
        if stage == S_REFINE_STAGES:
            break
        peak = grid[(np.argmax if side < 0 else np.argmin)(points, axis=0), cols]
        grid = np.linspace(grid[first, cols], grid[last, cols], S_REFINE_GRID)
        capital, known = _ends_known(capital, known, first, last, S_REFINE_GRID)
        request = np.zeros(grid.shape, bool)
        request[[0, -1]] = True
        request[np.abs(grid - peak).argmin(axis=0), cols] = True
    end = worst_of([exact_out, worst_of(np.where(outside | ~exact, fill, values), axis=0)], axis=0)
    loose = worst_of([loose_out, worst_of(np.where(outside, fill, values), axis=0)], axis=0)
    return np.minimum(end, 1.0), (end != loose) | search.unsure


def _maybe_span(values: np.ndarray, reached: np.ndarray, side: int):
    """The cells (first, last: cells first..last − 1) the finer grid spans: every cell whose
    bound is beyond the best value ``reached`` at a grid point (:func:`_dense_over_s`)."""
    maybe = values >= reached if side < 0 else values <= reached
    cell = np.arange(values.shape[0])[:, None]
    first = np.where(maybe, cell, values.shape[0]).min(axis=0)
    last = np.where(maybe, cell + 1, 0).max(axis=0)
    return np.minimum(first, last - 1), np.maximum(last, first + 1)


def _ends_known(capital, known, first, last, size: int):
    """The capitals (size, m) of a finer grid laid from point ``first`` to ``last`` of the
    coarser one: its ends are those points (np.linspace keeps both exactly), the rest unknown."""
    cols = np.arange(capital.shape[1])
    new, seen = np.zeros((size, cols.size)), np.zeros((size, cols.size), bool)
    new[0], seen[0] = capital[first, cols], known[first, cols]
    new[-1], seen[-1] = capital[last, cols], known[last, cols]
    return new, seen


class _SSearch:
    """The lazy evaluation of the s-stream's capital C over grids of s (:func:`_lazy_over_s`):
    θ's ``table``, the ``level`` log(2/α), ``side``; ``unsure`` marks systems whose capital was
    not finite somewhere (their ends are then computed densely).  ``capital`` and ``known``
    (G, m): C at the evaluated points of a grid."""

    def __init__(self, streams, bets, table, level: float, side: int):
        fixed = FixedBetStreams.of(streams, bets, side)  # the same capitals, cheaper
        self.streams, self.bets = (streams, bets) if fixed is None else fixed
        self.table = table
        self.level, self.side = level, side
        self.fill = -np.inf if side < 0 else np.inf
        self.unsure = np.zeros(streams.shape[0], bool)

    def complete(self, grid, capital, known, request) -> None:
        """Evaluate the ``request``-ed points, then the midpoint of every interval between
        evaluated points whose θ ends are not pinned (:meth:`ends`) and whose bound could beat
        the best point, until none is left (``capital`` and ``known`` in place)."""
        request = request & ~known
        while request.any():
            self.evaluate(grid, capital, known, request)
            request = self.live(grid, capital, known)

    def evaluate(self, grid, capital, known, request) -> None:
        """C at the requested points (G, m): the systems with as many requested points at
        once (no padding: a system evaluates only its own points)."""
        from receval.estimators.anytime.betting import _capitals

        rows = np.flatnonzero(request.any(axis=0))
        count = request[:, rows].sum(axis=0)
        for c in np.unique(count):
            who = rows[count == c]
            at = np.argsort(~request[:, who], axis=0, kind="stable")[:c]  # (c, systems)
            value = _capitals(self.streams, self.bets, grid[at, who], self.side, True, who)
            capital[at, who] = value
            known[at, who] = True
            self.unsure[who] |= ~np.isfinite(value).all(axis=0)

    def ends(self, capital, known):
        """θ's end at every point (G, m), whether it is exact (``pinned``), and the bounds
        (``high``, ``low``) of the ends between evaluated points, with the brackets (``prev``,
        ``nxt``: the last evaluated point at or before each point, the first at or after).
        θ's end falls with s on both sides (C and X move together), so between evaluated
        points a < b it lies in [end(b), end(a)], read at budgets :data:`S_SLACK` further out
        (rounding); where those two agree the end is pinned without evaluating C."""
        slack = -self.side * S_SLACK
        at = _theta_at(self.table, self.level - capital, self.side)
        high = _theta_at(self.table, self.level - capital + slack, self.side)
        low = _theta_at(self.table, self.level - capital - slack, self.side)
        prev, nxt = _brackets(known)
        cols = np.arange(capital.shape[1])
        hi, lo = high[prev, cols], low[nxt, cols]
        pinned = known | (hi == lo)
        return np.where(known, at, hi), pinned, (hi, lo), (prev, nxt)

    def points(self, grid, ends, pinned) -> np.ndarray:
        """θ·s at the pinned points (the dense search's points), the fill elsewhere."""
        return np.where(pinned, self._times(grid, ends), self.fill)

    @staticmethod
    def _times(s, ends) -> np.ndarray:
        """s·θ with θ's end ``ends`` (+∞ where it holds no θ: the lower side's cells)."""
        none = np.isinf(ends)
        return np.where(none, np.inf, s * np.where(none, 1.0, ends))

    def bound(self, grid, edges, brackets) -> np.ndarray:
        """The bound (G, m) of θ·s between each point's brackets a ≤ b: s_b·θ-end-high(a) on
        the upper side, s_a·θ-end-low(b) on the lower."""
        (high, low), (a, b) = edges, brackets
        cols = np.arange(grid.shape[1])
        return grid[b, cols] * high if self.side < 0 else self._times(grid[a, cols], low)

    def live(self, grid, capital, known) -> np.ndarray:
        """The midpoints (G, m) of the intervals between evaluated points not pinned whose
        bound is not beyond the best point reached (they may hold it, or cells beyond it)."""
        ends, pinned, edges, (prev, nxt) = self.ends(capital, known)
        worst_of = np.max if self.side < 0 else np.min
        reached = worst_of(self.points(grid, ends, pinned), axis=0)
        bound = self.bound(grid, edges, (prev, nxt))
        live = bound >= reached if self.side < 0 else bound <= reached
        index = np.arange(grid.shape[0])[:, None]
        return ~pinned & live & (index == (prev + nxt) // 2)

    def cells(self, grid, capital, known):
        """Each cell's value (G − 1, m) — exact where the end it takes is pinned (``exact``),
        else the bound of the evaluated points around it — and the points' values (G, m)."""
        ends, pinned, (high, low), (prev, nxt) = self.ends(capital, known)
        points = self.points(grid, ends, pinned)
        if self.side < 0:  # the cell's largest θ is at its smallest s
            exact, value = pinned[:-1], grid[1:] * ends[:-1]
        else:
            exact, value = pinned[1:], self._times(grid[:-1], ends[1:])
        bounds = self.bound(grid, (high[:-1], low[1:]), (prev[:-1], nxt[1:]))
        return np.where(exact, value, bounds), exact, points


def _brackets(known: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per point (G, m) the last known point at or before it and the first at or after it
    (the grids' ends are always known)."""
    G = known.shape[0]
    index = np.arange(G)[:, None]
    prev = np.maximum.accumulate(np.where(known, index, 0), axis=0)
    nxt = np.minimum.accumulate(np.where(known, index, G - 1)[::-1], axis=0)[::-1]
    return prev, nxt


#: θ values of the table θ's end is read from at any budget (:func:`_theta_table`): its
#: resolution, 2⁻¹⁴, is what the ends give away
THETA_TABLE = 2**14 + 1


def _theta_table(theta, side: int) -> tuple[np.ndarray, np.ndarray]:
    """θ's final capital log X(θ) on :data:`THETA_TABLE` values evenly over [0, 1], and the
    values: θ's end at any budget is read from it (:func:`_theta_at`) instead of bisected."""
    values = np.linspace(0.0, 1.0, THETA_TABLE)
    return values, _theta_log_capital(*theta, values, side)


def _theta_at(table, budget: np.ndarray, side: int) -> np.ndarray:
    """θ's end (any shape, as ``budget``) where its final capital reaches ``budget``, on the
    table's values: side −1 the least value rejected (log X ≥ budget; X grows with θ), 1 where
    none is; side +1 the largest rejected (X falls with θ), 0 where none is and +∞ where every
    value is (the cell holds no θ).  A rejected value bounds the end from outside, as a
    bisection's does; the first (last) rejected value is found exactly whatever the rounding,
    by a search over the running maximum from that side."""
    values, log_x = table
    b = np.asarray(budget, float).ravel()
    if side < 0:
        first = np.searchsorted(np.maximum.accumulate(log_x), b, side="left")
        out = np.where(first < values.size, values[np.minimum(first, values.size - 1)], 1.0)
    else:
        from_right = np.maximum.accumulate(log_x[::-1])  # from θ = 1 down
        count = np.searchsorted(from_right, b, side="left")  # values above the last rejected
        last = values.size - 1 - count
        out = np.where(count == 0, np.inf, np.where(last >= 0, values[np.maximum(last, 0)], 0.0))
    return out.reshape(np.shape(budget))


def _factor_values(draws, weights: dict, name: str):
    """``values_of`` of :func:`_joint_end` for recall (ν) or F1 (the union of π and ν): each
    factor's ends at the grid's budgets, combined over the cells (:func:`_cell_values`)."""

    def values_of(grid, budget, side):
        return _cell_values(grid, _factor_ends(draws, weights, budget, side), side, name)

    return values_of


def _factor_ends(draws, weights: dict, budget: np.ndarray, side: int) -> dict:
    """Each factor's ends (G, m) at the budgets (G, m) plus the log of its weight."""
    return {key: _ends_at(*draws[key], budget + np.log(w), side) for key, w in weights.items()}


def _ends_at(streams, bets, levels: np.ndarray, side: int) -> np.ndarray:
    """The draws' ends (G, S) on ``side`` at the log-levels ``levels`` (G, S)."""

    return one_sided_ends(streams, bets, levels, side, (0.0, 1.0), JOINT_ITERATIONS)


def _theta_log_capital(streams, bets, theta: np.ndarray, side: int) -> np.ndarray:
    """log X(θ), θ's final capital, at every value of ``theta`` (any shape)."""

    flat = np.asarray(theta, float).reshape(-1, 1)
    return log_capital(streams, bets, flat, side, running=False)[:, 0].reshape(np.shape(theta))


def theta_point(streams) -> float:
    """θ's point Σ w a / Σ w b from its unit streams (:func:`_unit_streams`), in [0, 1]."""
    return float(np.clip(streams.u.sum() / max(streams.v.sum(), 1e-300), 0.0, 1.0))


def _theta_grid(streams, bets, level: float, side: int):
    """The grid of θ (G,) not rejected by θ's final capital alone at ``level`` on ``side``
    (:data:`THETA_GRID` points between θ's point estimate and that end, a quarter as many on
    the other side of the point), its ends included, and each point's budget
    level − log X(θ) (G,)."""

    edge = one_sided_ends(
        streams, bets, np.full((1, 1), level), side, (0.0, 1.0), ITERATIONS, running=False
    )[0, 0]
    point = theta_point(streams)
    near = np.linspace(min(point, edge), max(point, edge), THETA_GRID)
    far = (
        np.linspace(point, 1.0, THETA_GRID // 4)
        if side > 0
        else np.linspace(0.0, point, THETA_GRID // 4)
    )
    grid = np.unique(np.concatenate([near, far]))
    return grid, level - _theta_log_capital(streams, bets, grid, side)


def _cell_values(grid: np.ndarray, factor: dict, side: int, name: str) -> np.ndarray:
    """The bound of recall (θ·ν) or F1 over each cell of the grid (G − 1, m), grid (G, m)
    sorted along its first axis (:func:`joint_bounds`): the upper side takes ν_j, π_j at
    θ_{j+1}, the lower side ν_{j+1}, π_{j+1} at θ_j."""
    nu = factor["pooled_recall"]  # (G, m)
    pi = factor.get("precision", nu)
    if side < 0:
        recall, pi = grid[1:] * nu[:-1], pi[:-1]
    else:
        recall, pi = grid[:-1] * nu[1:], pi[1:]
    return recall if name == "recall" else f1_of(pi, recall)


def f1_of(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """2pr/(p + r) (0 where both are 0): increasing in p and in r."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(p + r > 0, 2 * p * r / (p + r), 0.0)
