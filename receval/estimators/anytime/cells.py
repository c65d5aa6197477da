"""F1's joint ends over the cells of the θ grid, found lazily (:func:`lazy_joint_end`).

:func:`receval.estimators.anytime.sequences._joint_end` bounds F1 on one side by the extreme,
over the cells of a θ grid refined twice around each system's extreme cell, of each cell's end:
F1's end at the cell's edge θ and the larger of its two budgets
(:meth:`receval.estimators.anytime.f1.DirectF1.cell_values`; the bound is the union over the
cells, so it holds for every θ, :func:`~receval.estimators.anytime.sequences.joint_bounds`).
Only that extreme is read, and before the last grid which cell holds it (the finer grid is laid
around it), so most cells' ends are never needed — only that they cannot beat the extreme.

**One evaluation per cell.**  A cell's end is a point of the bisection's lattice
{k·2⁻¹²} (:data:`~receval.estimators.anytime.sequences.JOINT_ITERATIONS` steps over [0, 1]):
on the upper side the least lattice value the cell's running capital rejects (1 where it
rejects none), on the lower side the greatest (0 where none).  The capital is monotone in F1
(:mod:`receval.estimators.anytime.betting`), so for a lattice value t one evaluation tells
whether the end is on t's side: the upper end is ≤ t exactly when t is rejected, the lower end
≥ t exactly when t is.  So per grid (:meth:`_Cells.extreme`) one cell is bisected (the cell
guessed to hold the extreme), every other is evaluated once at the best end found so far
(one lattice step inside it for a cell before the best one, so that the first of tied cells
is the one found, as an argmax finds it), and only the cells that pass it are bisected, the
one whose capital fell furthest short of its budget first; the others are evaluated again at
each new best.  Cells outside the span the next grid refines keep a bound only (no farther
than that grid's best); they are evaluated once more with the last grid's cells
(:meth:`_Cells.last`, one tournament over both) and bisected if they pass its best.  Every extreme, every refined span and so every end is the one
computing each cell's end gives (tests: the same ends bit for bit), with about a third of
the capital evaluations on data/kbp-sim.

**Fewer evaluations still** (the same ends from any start: only the work changes).  The
first grid's first cell (the θ point's) is bisected from a closed-form guess of its end
(:func:`_second_order_ends`); a finer grid starts, on the lower side, at the cell that keeps
the coarser extreme cell's larger budget, where the finer extreme most often is
(:func:`_finer_start`).  Every round's evaluations at the best end are one batched pass over
all systems (:meth:`_Cells.margins`), and a cell is passed over where a cell of its system
evaluated at the same end shows it: at a fixed end the capital is monotone in θ step by step,
so a cell of smaller θ (lower side; larger on the upper) whose capital reaches this cell's
budget shows this cell's key is no farther out.  On data/kbp-sim (bench/f1_ends.py) that
halves the cells evaluated (13,252 → 7,104) and bisects 713 cells instead of 801.
:data:`COUNTS` tallies the work per side and stage.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from receval.estimators.anytime import sequences
from receval.estimators.anytime.betting import (
    CAP,
    CHUNK,
    BettingStreams,
    _block_log,
    _capitals,
    one_sided_ends,
)
from receval.estimators.anytime.sequences import (
    JOINT_ITERATIONS,
    _theta_grid,
    _theta_log_capital,
    theta_point,
)

#: the lattice step of the cells' ends (the bisection's resolution over [0, 1])
LATTICE = 2.0**-JOINT_ITERATIONS

#: the work of every :func:`lazy_joint_end` since it was last cleared, by (side, stage, what):
#: ``bisected`` cells (one bisection each), ``checked`` cells (one fast capital each),
#: ``shown`` cells passed over (:meth:`_Cells.margins`), ``streamed`` checks evaluated again
#: from the streams, ``rounds`` of the tournaments; the last stage's count the earlier grids'
#: cells evaluated again with the last grid's.  For benchmarks (``COUNTS.clear()`` first).
COUNTS: Counter = Counter()


def lazy_joint_end(direct, theta, alpha: float, side: int) -> np.ndarray:
    """One side's end (m,) of F1 (or recall) from the joint test over the θ grid: the value
    :func:`receval.estimators.anytime.sequences._joint_end` gives with ``direct.cell_values``,
    found with one capital evaluation for most cells (module docstring).  ``direct``: the
    :class:`~receval.estimators.anytime.f1.DirectF1` (f1 imports this module, so it is not
    named here); ``theta``: θ's streams and bets over the units; side +1 the lower end, −1
    the upper."""
    from receval.progress import stage_detail

    level = np.log(2.0 / alpha)
    t_streams, t_bets = theta
    grid, budget = _theta_grid(t_streams, t_bets, level, side)
    m = direct.u.shape[0]
    cols = np.arange(m)
    grid = np.repeat(grid[:, None], m, axis=1)
    budget = np.repeat(budget[:, None], m, axis=1)
    cells = _Cells(direct, side)
    best = np.full(m, -np.inf)  # the best key of the cells left out of the refined spans
    pending = []  # (θ, budgets, mask) of those bounded by their grid's best only
    start, guess = None, None
    # the grid's shape as sequences has it when called (bench/anytime_grid.py varies it)
    stages, span, fine = sequences.REFINE_STAGES, sequences.REFINE_SPAN, sequences.REFINE_GRID
    for stage in range(stages + 1):
        stage_detail(f"grid {stage + 1}/{stages + 1} of θ ({m} systems)")
        thetas, budgets = _cell_edges(grid, budget, side)
        if start is None:
            start = _nearest(thetas, theta_point(t_streams))
            guess = _second_order_ends(direct, thetas[start, cols], budgets[start, cols], side)
        cells.stage = stage
        if stage == stages:  # the last grid's cells with those bounded only by their grid's
            best = cells.last(thetas, budgets, start, guess, pending, best)
            break
        key, top, j = cells.extreme(thetas, budgets, start, guess, strict=True)
        C = thetas.shape[0]
        first = np.maximum(j - span, 0)
        last = np.minimum(j + 1 + span, C)  # cells first..last-1 are refined
        cell = np.arange(C)[:, None]
        outside = (cell < first) | (cell >= last)
        exact = outside & ~np.isnan(key)
        best = np.maximum(best, np.where(exact, key, -np.inf).max(axis=0))
        pending.append((thetas, budgets, outside & np.isnan(key)))
        held = grid[j, cols], grid[j + 1, cols]  # the extreme cell's θ interval
        grid = np.linspace(grid[first, cols], grid[last, cols], fine)
        budget = level - _theta_log_capital(t_streams, t_bets, grid, side)
        start = _finer_start(grid, budget, side, thetas[j, cols], held)
        guess = -side * top
    end = -side * best
    return np.where(end == 0, 0.0, end)  # no negative zero


def _cell_edges(grid: np.ndarray, budget: np.ndarray, side: int):
    """Each cell's θ (the edge whose end bounds the cell: the upper side's capital falls with
    θ, the lower side's grows) and its larger budget, (G − 1, m) each."""
    theta = grid[1:] if side < 0 else grid[:-1]
    return theta, np.maximum(budget[:-1], budget[1:])


def _second_order_ends(direct, theta: np.ndarray, budget: np.ndarray, side: int) -> np.ndarray:
    """A guess (m,) of the cells' ends at θ ``theta`` and budgets ``budget`` (m,), in closed
    form: the final log capital Σ log(1 + λY) with Y = ±(u − f·(n + k/θ)) and the bets λ
    taken as fixed (no truncation), to second order, Σ λY − ½ Σ λ²Y², a quadratic in f whose
    root on the point's side of its vertex is the guess (the range's far end where it never
    reaches the budget).  Only a start for the bisection (:meth:`_Cells.keys`), the same
    ends: on data/kbp-sim the first cells' bisections took 4.5 capital evaluations per system
    from it on the lower side, 15 without (upper side 4.2, 9)."""
    d = direct
    lam = np.where(np.asarray(d.active, bool), d.bets, 0.0)
    lam_u = lam * d.u
    sq, sq_u = lam * lam, lam_u * lam
    k, w, n = d.k, 1.0 / np.asarray(theta, float), d.n
    slope = n * lam.sum(axis=1) + w * (lam @ k)  # Σ λ·(n + k/θ)
    cross = n * sq_u.sum(axis=1) + w * (sq_u @ k)  # Σ λ²·u·(n + k/θ)
    square = n * n * sq.sum(axis=1) + 2 * n * w * (sq @ k) + w * w * (sq @ (k * k))
    half = side * lam_u.sum(axis=1) - 0.5 * (lam_u * lam_u).sum(axis=1) - budget
    b = cross - side * slope  # the log capital is −½·square·f² + b·f + half (its excess)
    with np.errstate(divide="ignore", invalid="ignore"):
        disc = b * b + 2.0 * square * half
        end = (b + side * np.sqrt(disc)) / square
    end = np.where(disc < 0.0, 0.0 if side > 0 else 1.0, end)
    return np.clip(np.where(np.isfinite(end), end, 0.5), 0.0, 1.0)


def _finer_start(grid, budget, side: int, theta, held) -> np.ndarray:
    """The cell (m,) of the finer grid (G, m; budgets (G, m)) bisected first, within the
    coarser grid's extreme cell (θ interval ``held``, its θ ``theta``): on the lower side
    the one that keeps its larger budget (:func:`_richest`), on the upper side the one at
    its θ.  Any cell gives the same ends; these hold the finer extreme most often on
    data/kbp-sim (bench/f1_ends.py: lower side's fine cells bisected 296 → 201, upper side's
    fewest as they were)."""
    thetas, budgets = _cell_edges(grid, budget, side)
    if side > 0:
        return _richest(grid, budgets, *held)
    return _nearest(thetas, theta)


def _richest(grid: np.ndarray, budgets: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """Per system the cell of ``grid`` (G, m) overlapping the θ interval ``lo``..``hi`` (m,)
    (the coarser grid's extreme cell) with the largest budget (``budgets``, (G − 1, m)): the
    coarser cell's end is taken at its larger budget."""
    inside = (grid[1:] > lo) & (grid[:-1] < hi)
    return np.argmax(np.where(inside, budgets, -np.inf), axis=0)


def _nearest(thetas: np.ndarray, target) -> np.ndarray:
    """Per system the cell whose θ is nearest ``target`` (scalar or (m,))."""
    return np.abs(thetas - np.asarray(target, float)).argmin(axis=0)


class _Cells:
    """The ends of cells of ``direct`` on ``side`` as *keys* (−side·end: larger is farther
    out on either side), computed (:meth:`keys`) or bounded by one evaluation (:meth:`beyond`)."""

    def __init__(self, direct, side: int):
        self.direct = direct
        self.side = side
        self.m = direct.u.shape[0]
        self.stage = 0  # the grid worked on (:data:`COUNTS`)
        active = np.asarray(direct.active, bool)
        self.inactive = None if active.all() else ~active  # steps that do not count

    def count(self, what: str, n: int) -> None:
        """Add ``n`` to :data:`COUNTS` under this side, stage and ``what``."""
        COUNTS[self.side, self.stage, what] += int(n)

    def streams(self, rows: np.ndarray, theta: np.ndarray):
        """The streams (and bets) of the systems ``rows`` at θ ``theta`` (one per row), as
        :meth:`~receval.estimators.anytime.f1.DirectF1.streams` builds them."""
        d = self.direct
        if rows.size == self.m and np.array_equal(rows, np.arange(self.m)):
            return d.streams(theta), d.bets
        n = d.n[rows]
        v = n[:, None] + d.k[None, :] / np.asarray(theta, float)[:, None]
        hi1 = np.broadcast_to(n[:, None], v.shape)
        take = (np.asarray(a)[rows] for a in (d.u, d.lo0, d.lo1, d.hi0, d.active))
        u, lo0, lo1, hi0, active = take
        return BettingStreams(u, v, lo0, lo1, hi0, hi1, active), d.bets[rows]

    def keys(self, theta, budget, rows, guess=None) -> np.ndarray:
        """The cells' keys (len(rows),) by bisection (guided by ``guess``, ends (len(rows),)):
        one cell per row, of θ ``theta`` and budget ``budget`` (both (m,)), rows ``rows``."""
        zero = theta[rows] <= 0  # T infinite: F1 is 0
        self.count("bisected", rows.size)
        out = np.zeros(rows.size)
        live = rows[~zero]
        if live.size:
            streams, bets = self.streams(live, theta[live])
            near = None if guess is None else np.asarray(guess, float)[~zero][None, :]
            ends = one_sided_ends(streams, bets, budget[live][None, :], self.side, (0.0, 1.0),
                                  JOINT_ITERATIONS, guess=near)[0]  # fmt: skip
            out[~zero] = -self.side * ends
        return out

    def factors(self, rows: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The systems ``rows``' capitals at the ends ``ends`` (one per row) as step factors
        p − q·c ((rows, K) each), c = end/θ, for every θ at once: the term u − f·(n + k/θ) and
        the bet's truncation at f do not depend on θ, so p = 1 + λ(u − f·n) and q = λk
        (upper side: the negated term, q = −λk), with p = 1, q = 0 where the step does not
        count.  Equal to the streams' factors up to rounding."""
        d = self.direct
        every = rows.size == self.m and np.array_equal(rows, np.arange(self.m))  # no copies

        def take(a):
            return np.asarray(a) if every else np.asarray(a)[rows]

        f = np.asarray(ends, float)[:, None]
        fn = f * d.n[rows][:, None]
        if self.side > 0:  # the bet on Y = u − f·v, truncated by its room −min Y = f·lo1 − lo0
            room = np.multiply(f, take(d.lo1))
            np.subtract(room, take(d.lo0), out=room)
            term = np.subtract(take(d.u), fn)
        else:  # the bet on −Y, truncated by max Y = hi0 − f·hi1 (hi1 = n)
            room = np.subtract(take(d.hi0), fn)
            term = np.subtract(fn, take(d.u))
        np.maximum(room, 1e-300, out=room)
        np.divide(CAP, room, out=room)
        lam = np.minimum(room, take(d.bets), out=room)
        np.multiply(term, lam, out=term)
        term += 1.0
        np.multiply(lam, d.k if self.side > 0 else -d.k, out=lam)
        if self.inactive is not None:
            inactive = take(self.inactive)
            np.copyto(term, 1.0, where=inactive)
            np.copyto(lam, 0.0, where=inactive)
        return term, lam

    @staticmethod
    def fast(p: np.ndarray, q: np.ndarray, end: float, theta: np.ndarray) -> np.ndarray:
        """One system's running-max log capital at ``end`` in each cell of θ ``theta`` (n,),
        from its :meth:`factors` ``p``, ``q`` (K,) there (:func:`_fast_rows`)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            c = end / np.asarray(theta, float)
        return _fast_rows(p[None, :], q[None, :], np.zeros(c.size, int), c)

    def margins(self, thetas, budgets, asked, at) -> np.ndarray:
        """Per cell ``asked`` (C, m) the margin (C, m; +inf elsewhere) by which its capital at
        the end of its key ``at`` (C, m) (lattice points) exceeds its budget: ≥ 0 exactly when
        the cell's own key is ≤ that key (its end is no farther out); +inf where the range
        itself says so, −inf where nothing can.  From :func:`_fast_rows` with the
        :meth:`factors` of each system at each end asked, and from the streams where that
        margin is within :data:`MARGIN` of 0 (rounding could decide it).

        A cell is passed over where one of its system's cells at the same end, evaluated
        already, shows it: the capital at one end is monotone in θ step by step (rising on
        the lower side, falling on the upper), so a cell of smaller θ (lower side; larger on
        the upper) whose capital is at least this cell's budget + :data:`MARGIN` shows its
        margin ≥ that capital − its budget (a lower bound, returned as its margin: only its
        sign is read).  Every system's cells at each end are taken in that order, one per
        system and end per batch (data/kbp-sim: about half the cells passed over)."""
        side = self.side
        out = np.full(thetas.shape, np.inf)
        end = -side * at
        far = asked & (end == (1.0 if side < 0 else 0.0))  # no end is beyond the range's
        zero = asked & ~far & (thetas <= 0)
        out[zero] = np.where(at[zero] >= 0.0, np.inf, -np.inf)
        live = asked & ~far & ~zero & (end >= 0.0) & (end <= 1.0)
        out[asked & ~far & ~zero & ~live] = -np.inf
        cell, col = np.nonzero(live)
        if cell.size:
            out[cell, col] = self._live_margins(thetas[cell, col], budgets[cell, col], col,
                                                end[cell, col])  # fmt: skip
        return out

    def _live_margins(self, theta, budget, col, end) -> np.ndarray:
        """:meth:`margins` of cells of θ ``theta``, budgets ``budget``, systems ``col`` at
        ends ``end`` (n,) each, all inside the range."""
        pairs, group = np.unique(np.stack([col, end]), axis=1, return_inverse=True)
        group = group.reshape(-1)
        rows = pairs[0].astype(int)
        P, Q = self.factors(rows, pairs[1])
        with np.errstate(divide="ignore", invalid="ignore"):
            c = end / theta
        order = np.lexsort((self.side * theta, group))  # per (system, end), by dominance
        out = np.empty(theta.size)
        lanes = _Lanes(group[order], budget[order])
        while True:
            shown, bound = lanes.shown()
            out[order[shown]] = bound
            due = lanes.next()
            if due is None:
                break
            at = order[due]
            capital = _fast_rows(P, Q, group[at], c[at])
            out[at] = capital - budget[at]
            lanes.learn(capital)
        self.count("checked", lanes.evaluated)
        self.count("shown", theta.size - lanes.evaluated)
        unclear = ~(np.abs(out) >= MARGIN)
        if unclear.any():
            self.count("streamed", unclear.sum())
            streams, bets = self.streams(col[unclear], theta[unclear])
            capital = _capitals(streams, bets, end[unclear][None, :], self.side, True)[0]
            out[unclear] = capital - budget[unclear]
        return out

    def tournament(self, thetas, budgets, key, open_, strict: bool):
        """:meth:`extreme` from the keys known so far (``key``, NaN elsewhere; at least one per
        system): every ``open_`` cell is evaluated at the best key (one lattice step inside it
        where ``strict`` and the cell comes before the best one: one beyond that but not beyond
        the best has the best's key, a tie, known without bisecting it); of those beyond it,
        the one guessed farthest (:meth:`reach`) is bisected, and the rest evaluated again at
        the new best, until none is beyond."""
        open_ = open_.copy()
        while True:
            self.count("rounds", 1)
            top, j = _best(key)
            cell = np.arange(thetas.shape[0])[:, None]
            before = strict & (cell < j) & open_
            at = np.where(before, top - LATTICE, top)
            margin = self.margins(thetas, budgets, open_, at)
            tie = before & (margin < 0)  # beyond one step inside the best
            if tie.any():  # not beyond the best itself: the best's key exactly, a tie
                again = self.margins(thetas, budgets, tie, np.broadcast_to(top, at.shape))
                margin = np.where(tie, again, margin)
                key = np.where(tie & (again >= 0), top, key)
            open_ &= margin < 0
            if not open_.any():
                return (key, *_best(key))
            reach, far = self.reach(thetas, budgets, open_, top, margin)
            pick = _farthest(np.where(open_, reach, -np.inf), far)
            who = open_.any(axis=0)
            for c in np.unique(pick[who]):
                rows = np.flatnonzero(who & (pick == c))
                guess = -self.side * reach[c, rows]
                key[c, rows] = self.keys(thetas[c], budgets[c], rows, guess)
                open_[c, rows] = False

    def reach(self, thetas, budgets, open_, top, margin) -> tuple[np.ndarray, np.ndarray]:
        """A guess (C, m) of the keys of the ``open_`` cells, beyond the best ``top`` by their
        ``margin`` there (< 0): each cell's capital evaluated once more (:func:`_fast_rows`)
        :data:`PROBE` lattice steps farther out, and the crossing of its budget read off the
        line through the two (the best key where that line says nothing), no farther than
        :data:`REACH` lattice steps beyond the best (a line through two close points that
        barely rise sends the crossing anywhere); and that margin farther out (C, m)."""
        out = np.full(margin.shape, np.nan)
        probe = np.full(margin.shape, np.nan)
        who = np.flatnonzero(open_.any(axis=0))
        ends = np.clip(-self.side * (top[who] + PROBE * LATTICE), 0.0, 1.0)
        P, Q = self.factors(who, ends)
        lane = np.full(self.m, -1)
        lane[who] = np.arange(who.size)
        cell, col = np.nonzero(open_)
        end = ends[lane[col]]
        with np.errstate(divide="ignore", invalid="ignore"):
            far = _fast_rows(P, Q, lane[col], end / thetas[cell, col]) - budgets[cell, col]
            near = margin[cell, col]
            best = top[col]
            guess = best + (-self.side * end - best) * -near / (far - near)
        guess = np.minimum(guess, best + REACH * LATTICE)
        out[cell, col] = np.where(np.isfinite(guess) & (far > near), guess, best)
        probe[cell, col] = far
        return out, probe

    def extreme(self, thetas, budgets, start, guess, strict: bool):
        """The extreme cell of one grid: keys (C, m) (NaN where only bounded by the best), the
        best key (m,) and the first cell holding it (m,).  ``start``: the cell bisected first;
        ``guess``: a guess of its end.  ``strict``: the cells before the best one are shown
        strictly below it (the first of tied cells is the extreme), else only the best key is
        exact."""
        C, m = thetas.shape
        cols = np.arange(m)
        key = np.full((C, m), np.nan)
        key[start, cols] = self.keys(thetas[start, cols], budgets[start, cols], cols, guess)
        return self.tournament(thetas, budgets, key, np.isnan(key), strict)

    def last(self, thetas, budgets, start, guess, pending, best) -> np.ndarray:
        """The best key (m,) over the last grid's cells (``thetas``, ``budgets``, its cell
        ``start`` bisected first from ``guess``), ``best`` and the cells of ``pending`` (θ,
        budgets, mask per earlier grid: cells bounded only by their grid's best): one
        :meth:`tournament` over all of them (only the best key exact)."""
        m = best.size
        cols = np.arange(m)
        key = np.full(thetas.shape, np.nan)
        key[start, cols] = self.keys(thetas[start, cols], budgets[start, cols], cols, guess)
        parts = [(thetas, budgets, np.isnan(key)), *pending]
        every = np.concatenate([t for t, _, _ in parts] + [np.ones((1, m))])
        budget = np.concatenate([b for _, b, _ in parts] + [np.zeros((1, m))])
        open_ = np.concatenate([mask for _, _, mask in parts] + [np.zeros((1, m), bool)])
        known = np.full(every.shape, np.nan)
        known[: key.shape[0]] = key
        known[-1] = best  # the cells known already, as one more row
        return self.tournament(every, budget, known, open_, strict=False)[1]


#: lattice steps beyond the best at which the cells beyond it are evaluated once more, to
#: guess their ends (:meth:`_Cells.reach`)
PROBE = 16

#: the farthest beyond the best, in lattice steps, that :meth:`_Cells.reach` guesses a key
REACH = 64

#: a capital this close to its budget (in log) is evaluated again from its streams: the
#: fast capitals of :class:`_AtEnds` differ from them by rounding only (~1e-12 over 10⁴ steps)
MARGIN = 1e-9


def _fast_rows(P: np.ndarray, Q: np.ndarray, rows: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The running-max log capitals (n,) of the step factors P[r] − Q[r]·c (each of the n
    ``rows`` r of the :meth:`_Cells.factors` ``P``, ``Q`` (R, K), at its c = end/θ), equal to
    the streams' up to rounding (NaN where a block's product left the floats; a cell at
    θ = 0 gives inf or NaN factors, hence NaN, silently).  In chunks of :data:`CHUNK` entries."""
    out = np.empty(rows.size)
    step = max(1, CHUNK // max(P.shape[1], 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        for s in range(0, rows.size, step):
            r = rows[s : s + step]
            factor = np.multiply(Q[r], c[s : s + step, None])
            np.subtract(P[r], factor, out=factor)
            np.maximum(factor, 1e-15, out=factor)
            blocks = _block_log(factor, np.empty_like(factor))
            top = np.maximum(np.cumsum(blocks, axis=-1).max(axis=-1), 0.0)
            out[s : s + step] = np.where(np.isfinite(blocks).all(axis=-1), top, np.nan)
    return out


class _Lanes:
    """Cells taken in order within lanes (one per system and end: ``group``, sorted, with
    the cells' ``budget`` (n,) in that order), each cell evaluated unless an evaluated cell
    before it in its lane has a capital of at least its budget + :data:`MARGIN`
    (:meth:`_Cells.margins`)."""

    def __init__(self, group: np.ndarray, budget: np.ndarray):
        first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        self.pos = first.copy()  # the next cell of each lane
        self.stop = np.r_[first[1:], group.size]
        self.best = np.full(first.size, -np.inf)  # the largest capital evaluated per lane
        self.budget = budget
        self.due = first[:0]
        self.evaluated = 0

    def shown(self) -> tuple[np.ndarray, np.ndarray]:
        """The cells (positions) shown by their lanes' capitals so far, passed over, and
        their margins' lower bounds."""
        shown, bounds = [], []
        while True:
            lanes = np.flatnonzero(self.pos < self.stop)
            at = self.pos[lanes]
            ok = self.best[lanes] >= self.budget[at] + MARGIN
            if not ok.any():
                break
            lanes, at = lanes[ok], at[ok]
            shown.append(at)
            bounds.append(self.best[lanes] - self.budget[at])
            self.pos[lanes] += 1
        if not shown:
            return self.due[:0], np.empty(0)
        return np.concatenate(shown), np.concatenate(bounds)

    def next(self):
        """The next cell (positions) of every lane not done, or None."""
        self.due = np.flatnonzero(self.pos < self.stop)
        return self.pos[self.due] if self.due.size else None

    def learn(self, capital: np.ndarray) -> None:
        """The capitals of the cells :meth:`next` gave."""
        self.best[self.due] = np.fmax(self.best[self.due], capital)
        self.pos[self.due] += 1
        self.evaluated += self.due.size


def _farthest(reach: np.ndarray, far: np.ndarray) -> np.ndarray:
    """Per column the row guessed farthest (``reach``, −inf where not a candidate), of rows
    guessed equally far the one whose capital fell furthest short of its budget ``far``."""
    tied = reach == reach.max(axis=0)
    return np.argmin(np.where(tied, np.nan_to_num(far, nan=np.inf), np.inf), axis=0)


def _best(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The largest known key per column and the first row holding it."""
    filled = np.where(np.isnan(key), -np.inf, key)
    j = np.argmax(filled, axis=0)
    return filled[j, np.arange(key.shape[1])], j
