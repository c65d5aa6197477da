"""TailBand: exact head, uniform draws over the tail, exact hypergeometric bounds at every rank.

Design
------
The head t_1 … t_h is labelled exhaustively (h = g_ℓ of PAULA's grid, the same head as PAULA
and StratBand).  From the tail R = {h+1, …, N}, |R| = T = N − h, M distinct ranks are drawn
uniformly *without replacement* (M defaults to StratBand's tail labels Σ_j min(Δ, size_j), so
the plan has exactly StratBand's label count, never more than PAULA's).  The draws depend on
(seed, N, h, M) only, never on a label.

Bounds at the grid points
-------------------------
Fix, before any label, the grid h < k_1 < … < k_G = N with k_i = ⌈h·r^i⌉ (r = 1 + ``grid``,
default 1.01) and N appended.  For a grid point k let K⁺_k = Σ_{h<i≤k} ⌈v(t_i)⌉ and
K⁻_k = Σ_{h<i≤k} ⌊v(t_i)⌋ (equal to the tail yield C(k) − C(h) for 0/1 labels; a merged tie
v = ½ counts in K⁺ only), so K⁻_k ≤ C(k) − C(h) ≤ K⁺_k.  The number X⁺_k of drawn ranks in
(h, k] with ⌈v⌉ = 1 is *exactly* hypergeometric: X⁺_k ~ H(T, K⁺_k, M) (M draws without
replacement from T items of which K⁺_k are marked).  With F_K the cdf of H(T, K, M), which is
non-increasing in K,

    U_k = max{K ≤ k − h : F_K(X⁺_k) > α}

is an exact upper confidence bound: K⁺_k > U_k implies F_{K⁺_k}(X⁺_k) ≤ α, and a cdf evaluated
at its own random variable is ≤ α with probability ≤ α.  Likewise L_k = min{K : P_K(X⁻_k ≥ x)
> α} (the survival function is non-decreasing in K) has P(K⁻_k < L_k) ≤ α.  With α = δ/(2G),
a union bound over the 2G statements gives the event E = {C(h) + L_k ≤ C(k) ≤ C(h) + U_k at
every grid point} with P(E) ≥ 1 − δ.  No assumption on the list is used; the bounds adapt to
the variance (at low prevalence the hypergeometric tail is narrow, unlike Hoeffding's).

Every rank, deterministically on E
----------------------------------
Exactly as in StratBand (:mod:`receval.curves.stratband`): C is non-decreasing and grows by at
most one per rank, and every labelled rank counts exactly, so the grid bounds are first
tightened across grid points (C − P and (b − Q) − C non-decreasing) and then carried to every
rank k between grid points a < k ≤ b:

    max(C⁻(a) + P(a, k], C⁻(b) − (b − k) + Q(k, b]) ≤ C(k) ≤ min(C⁺(b) − P(k, b], C⁺(a) + (k − a) − Q(a, k])

(P, Q: labelled positives and negatives).  On output steps [x, x') (grid points plus sub-knots
every factor 1 + (r − 1)/20) the precision bounds are C⁻(x)/(x' − 1) and C⁺(x' − 1)/x.  Hence,
with probability ≥ 1 − δ, ``lower ≤ precision@k ≤ upper`` at every rank at once, for every
list (kind ``band``).  ``precision`` is the unbiased C(h) + T·(drawn positives in (h, k])/M
over k, clipped to the band.

Against the obvious baseline (H+CP, ``bench/curves_tightness.py``): the same head and the same
number of tail labels drawn i.i.d. *with* replacement, a Clopper–Pearson interval at each point
of the same grid with the same union bound, and monotonicity between grid points.  TailBand's
sample is a simple random sample without replacement, whose count is hypergeometric: the
exact test is sharper than the binomial one by the finite-population factor 1 − M/T (about 5 %
narrower at N = 10⁵ with PAULA's labels), and no label is spent twice; its interpolation adds
the growth and labelled-rank bounds.  StratBand's stratified design remains the tighter choice
just beyond the head (about 10 % of N), where uniform draws are sparse; from there on TailBand is
the tighter band (see ``bench/curves_tightness.py`` and the README's curve walkthrough).

Labels are taken as given: the band is about the labels supplied (a wrong label moves the curve
it bounds).  Memory O(M + G) with G ≈ ln(N/h)/ln r; nothing of length N is allocated.

References
----------
Hoeffding, W. (1963). JASA 58, 13–30 (sampling without replacement).  Clopper, C. J. &
Pearson, E. S. (1934). Biometrika 26, 404–413 (inverting an exact tail).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from receval.curves.base import CurveEstimate, Labels, Oracle, run_to_completion, staged_plan
from receval.curves.precision_function import monotone_from
from receval.curves.stratband import _known_between, stratum_bounds

__all__ = ["TailBand", "hypergeometric_bounds", "tighten_counts", "yield_between"]

_STREAM = 0x5442  # "TB"


def grid_points(head: int, size: int, ratio: float) -> np.ndarray:
    """h < k_1 < … < k_G = N: ⌈h·r^i⌉ for i ≥ 1 below N, then N (O(log N) memory)."""
    if size <= head:
        return np.empty(0, np.int64)
    count = math.ceil(math.log(size / head) / math.log(ratio)) + 1
    points = np.ceil(head * ratio ** np.arange(1, count + 1, dtype=np.float64)).astype(np.int64)
    points = np.unique(points[(points > head) & (points < size)])
    return np.append(points, np.int64(size))


def hypergeometric_bounds(
    up_hits: np.ndarray,
    low_hits: np.ndarray,
    population: int,
    draws: int,
    cap: np.ndarray,
    alpha: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact (L, U) with P(K⁻ < L) ≤ α and P(K⁺ > U) ≤ α for each point (see module docstring).

    ``up_hits``/``low_hits`` are X⁺, X⁻ (hits among ``draws`` without replacement from
    ``population``); ``cap`` the largest possible K.  Vectorised bisection on the integer K,
    started from a bracket around the normal approximation that is checked exactly (a bracket
    that fails the check falls back to the whole range), so the result is the exact bound.
    """
    from scipy.stats import norm

    up_hits = np.asarray(up_hits, np.int64)
    low_hits = np.asarray(low_hits, np.int64)
    cap = np.maximum(np.asarray(cap, np.int64), up_hits)
    z = float(norm.isf(alpha))
    scale = population / draws
    fpc = max(1.0 - draws / population, 0.0)

    def guess(hits: np.ndarray, sign: float) -> np.ndarray:
        share = np.clip((hits + 0.5) / draws, 1.0 / draws, 1.0 - 1.0 / draws)
        spread = z * np.sqrt(draws * share * (1.0 - share) * fpc) + 1.0
        return np.rint((hits + sign * spread) * scale)

    # The tails are computed to a relative error below 1e-5 (measured against exact rational
    # sums up to N = 2·10⁹); comparing them with α(1 − 1e-4) keeps every K the exact test
    # keeps, so the bound is exact or very slightly conservative.
    log_alpha = math.log(alpha) + math.log1p(-1e-4)

    def up_gap(k: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """log F_K(X⁺) − log α: positive where K is still plausible (non-increasing in K)."""
        return log_hypergeometric_tail(up_hits[rows], population, k, draws, True) - log_alpha

    def low_gap(k: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """log P_K(X ≥ X⁻) − log α: positive where K is plausible (non-decreasing in K)."""
        return log_hypergeometric_tail(low_hits[rows], population, k, draws, False) - log_alpha

    # upper: the largest K in [X⁺, cap] with gap > 0 (gap(X⁺) = −log α > 0)
    upper = _root(up_hits, cap, guess(up_hits, 1.0), up_gap, largest=True)
    # lower: the smallest K in [0, cap] with gap > 0 (cap when none: the test failed)
    lower = _root(np.zeros_like(cap), cap, guess(low_hits, -1.0), low_gap, largest=False)
    lower = np.where(low_hits <= 0, 0, lower)
    return lower, upper


def _root(low: np.ndarray, high: np.ndarray, start: np.ndarray, gap, largest: bool) -> np.ndarray:
    """The integer boundary of {K in [low, high] : gap(K) > 0}, gap monotone in K.

    ``largest``: gap is non-increasing with gap(low) > 0; the largest K with gap > 0.  Else gap
    is non-decreasing; the smallest K with gap > 0 (``high`` when none).  Regula falsi with the
    Illinois modification on a bracket (a plausible end ``a``, an implausible end ``b``) that
    is evaluated exactly at each step and closed to two adjacent integers, so the answer is the
    exact boundary; a few evaluations per point instead of a bisection's thirty."""
    rows = np.arange(low.size)
    inside = np.clip(np.rint(start), low, high).astype(np.int64)
    g_in = gap(inside, rows)
    good = g_in > 0
    far_good, far_bad = (low, high) if largest else (high, low)
    a = np.where(good, inside, far_good)
    b = np.where(good, far_bad, inside)
    ga = np.where(good, g_in, 0.0)
    gb = np.where(good, 0.0, g_in)
    need_a, need_b = ~good, good
    if np.any(need_a):
        ga[need_a] = gap(a[need_a], rows[need_a])
    if np.any(need_b):
        gb[need_b] = gap(b[need_b], rows[need_b])
    done = gb > 0  # the far end is plausible too: it is the answer
    answer = np.where(done, b, a)
    done |= ga <= 0  # nothing plausible (only possible for the lower bound): keep ``high``
    answer = np.where(~(gb > 0) & (ga <= 0), high, answer)
    open_ = ~done & (np.abs(b - a) > 1)
    last = np.zeros(low.size, np.int64)
    halve = np.zeros(low.size, bool)  # the last step shrank the bracket by less than half
    while np.any(open_):
        idx = np.flatnonzero(open_)
        fa = np.clip(ga[idx], -700.0, 700.0)
        fb = np.clip(gb[idx], -700.0, 700.0)
        width = np.abs(b[idx] - a[idx])
        t = fa / np.where(fa - fb > 0, fa - fb, 1.0)
        t = np.where(halve[idx], 0.5, t)  # a bisection step after a slow one
        step = np.rint(a[idx] + t * (b[idx] - a[idx])).astype(np.int64)
        step = np.clip(step, np.minimum(a[idx], b[idx]) + 1, np.maximum(a[idx], b[idx]) - 1)
        g = gap(step, idx)
        ok = g > 0
        a[idx], ga[idx] = np.where(ok, step, a[idx]), np.where(ok, g, ga[idx])
        b[idx], gb[idx] = np.where(ok, b[idx], step), np.where(ok, gb[idx], g)
        kept = np.where(ok, 1, -1)  # which end moved: 1 = a, -1 = b
        again = last[idx] == kept
        gb[idx] = np.where(again & ok, gb[idx] / 2.0, gb[idx])  # Illinois step
        ga[idx] = np.where(again & ~ok, ga[idx] / 2.0, ga[idx])
        last[idx] = kept
        halve[idx] = 2 * np.abs(b[idx] - a[idx]) > width
        open_[idx] = np.abs(b[idx] - a[idx]) > 1
    return np.where(done, answer, a)


def log_hypergeometric_tail(
    x: np.ndarray, population: int, marked: np.ndarray, draws: int, lower: bool
) -> np.ndarray:
    """log P(X ≤ x) (``lower``) or log P(X ≥ x) for X ~ H(population, marked, draws).

    The smaller of the two tails is summed from x away from the mode, each term the previous
    times the exact ratio of consecutive probabilities (starting from scipy's log-pmf at x),
    until the terms fall below 1e-17 of the sum; the larger tail is one minus the other.
    Vectorised over points; O(terms) work, never a term per item of the population.
    """
    from scipy.stats import hypergeom

    x = np.asarray(x, np.int64)
    marked = np.broadcast_to(np.asarray(marked, np.int64), x.shape)
    n, pop = float(draws), float(population)
    mean = n * marked / pop
    low_support = np.maximum(0, draws + marked - population)
    high_support = np.minimum(marked, draws)
    # the tail that is summed: below x for the lower tail when x is below the mean
    left = np.where(lower, x < mean, x - 1 < mean)
    start = np.where(left, np.where(lower, x, x - 1), np.where(lower, x + 1, x))
    empty = (start < low_support) | (start > high_support)
    start = np.clip(start, low_support, high_support)
    with np.errstate(divide="ignore"):
        log_first = hypergeom.logpmf(start, population, marked, draws)
    total = np.ones(x.shape)
    term = np.ones(x.shape)
    i = start.astype(np.float64)
    k = marked.astype(np.float64)
    active = ~empty
    offsets = np.arange(64, dtype=np.float64)
    while np.any(active):  # 64 terms per pass
        idx = np.flatnonzero(active)
        down = left[idx][:, None]
        ii = np.where(down, i[idx][:, None] - offsets, i[idx][:, None] + offsets)
        kk = k[idx][:, None]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            ratio = np.where(
                down,
                ii * (pop - kk - n + ii) / ((kk - ii + 1.0) * (n - ii + 1.0)),
                (kk - ii) * (n - ii) / ((ii + 1.0) * (pop - kk - n + ii + 1.0)),
            )
        inside = np.where(down, ii > low_support[idx][:, None], ii < high_support[idx][:, None])
        ratio = np.where(inside & np.isfinite(ratio), np.clip(ratio, 0.0, None), 0.0)
        terms = term[idx][:, None] * np.cumprod(ratio, axis=1)
        total[idx] += terms.sum(axis=1)
        term[idx] = terms[:, -1]
        i[idx] = np.where(left[idx], i[idx] - offsets.size, i[idx] + offsets.size)
        active[idx] = term[idx] > 1e-17 * total[idx]
    with np.errstate(divide="ignore"):
        summed = np.where(empty, -np.inf, log_first + np.log(total))
    # summed is the log of the tail on the side of ``left``; the asked tail is it or 1 − it
    asked_is_summed = left == lower
    other = np.log(-np.expm1(np.minimum(summed, 0.0)))
    with np.errstate(divide="ignore"):
        return np.where(asked_is_summed, summed, np.where(empty, 0.0, other))


def tighten_counts(
    lo: np.ndarray, hi: np.ndarray, knots: np.ndarray, head: int, known: Labels
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds C⁻ ≤ C ≤ C⁺ at ``knots`` (``knots[0]`` = head) tightened across knots.

    C − P (positives among unlabelled ranks) and (b − Q) − C (negatives among unlabelled ranks)
    are non-decreasing in b, P and Q the labelled positives/negatives up to b; integer counts
    are rounded inward when every label is 0/1.
    """
    b = knots.astype(np.float64)
    a = np.full(knots.shape, head, dtype=np.int64)
    pos, neg = _known_between(known, a, knots.astype(np.int64))
    c_head = lo[0]
    lo = np.maximum(lo, c_head + pos)
    hi = np.minimum(hi, c_head + (b - head) - neg)
    free = b - neg
    for _ in range(2):
        lo = np.maximum.accumulate(lo - pos) + pos
        lo = np.maximum(lo, np.maximum.accumulate((lo - free)[::-1])[::-1] + free)
        hi = np.minimum.accumulate((hi - pos)[::-1])[::-1] + pos
        hi = np.minimum(hi, np.minimum.accumulate(hi - free) + free)
    if np.all((known.labels == 0) | (known.labels == 1)):
        return np.ceil(lo - 1e-9), np.floor(hi + 1e-9)
    return lo, hi


def yield_between(
    k: np.ndarray, knots: np.ndarray, lo: np.ndarray, hi: np.ndarray, known: Labels
) -> tuple[np.ndarray, np.ndarray]:
    """(C⁻(k), C⁺(k)) at ranks ``knots[0] ≤ k ≤ knots[-1]`` from the knot bounds (on E)."""
    k = np.asarray(k, np.int64)
    j = np.clip(np.searchsorted(knots, k, side="left"), 0, knots.size - 1)
    a = knots[np.maximum(j - 1, 0)]
    a = np.where(j == 0, k, a)
    b = knots[j]
    lo_a, hi_a = lo[np.maximum(j - 1, 0)], hi[np.maximum(j - 1, 0)]
    lo_a = np.where(j == 0, lo[0], lo_a)
    hi_a = np.where(j == 0, hi[0], hi_a)
    pos_ak, neg_ak = _known_between(known, a, k)
    pos_kb, neg_kb = _known_between(known, k, b)
    kf = k.astype(np.float64)
    low = np.maximum(lo_a + pos_ak, lo[j] - (b - kf) + neg_kb)
    high = np.minimum(hi[j] - pos_kb, hi_a + (kf - a) - neg_ak)
    return low, high


@dataclass(frozen=True)
class TailBand:
    """Exact head + uniform tail sample without replacement; a band at every rank (1 − δ).

    Parameters
    ----------
    epsilon, window, r_tilde
        Fix the head h = g_ℓ (PAULA's grid: r̃ = ⌈(Δ+2)/ε⌉) and the default label count
        (StratBand's: Σ_j min(Δ, size_j) tail labels).
    labels
        M, the tail labels (default: StratBand's count for the same ε, Δ).
    grid
        r − 1 of the geometric grid of bounded ranks (default 0.01, the baseline's).
    delta
        δ: the band holds at every rank together with probability ≥ 1 − δ.
    seed
        Seed of the draws; ``plan`` is a deterministic function of (parameters, size, known).

    See the module docstring for the guarantee and its proof.
    """

    epsilon: float = 0.03
    window: int = 100
    labels: int | None = None
    grid: float = 0.01
    r_tilde: int | None = None
    delta: float = 0.05
    seed: int = 0
    name: ClassVar[str] = "tailband"

    def __post_init__(self) -> None:
        if not 0 < self.epsilon <= 1:
            raise ValueError("epsilon must lie in (0, 1]")
        if self.window < 1:
            raise ValueError("window must be ≥ 1")
        if not 0 < self.delta < 1:
            raise ValueError("delta must lie in (0, 1)")
        if not 0 < self.grid <= 1:
            raise ValueError("grid must lie in (0, 1]")
        if self.labels is not None and self.labels < 1:
            raise ValueError("labels must be ≥ 1")
        if self.r_tilde is None:
            object.__setattr__(self, "r_tilde", monotone_from(self.window, self.epsilon))
        elif self.r_tilde < 1:
            raise ValueError("r_tilde must be ≥ 1")
        if int(self.seed) < 0:
            raise ValueError("seed must be ≥ 0")

    # -- design ------------------------------------------------------------------------

    def head(self, size: int) -> int:
        """h: the exactly labelled prefix (PAULA's g_ℓ, or N when the list is shorter)."""
        assert self.r_tilde is not None
        head, _ = stratum_bounds(size, self.epsilon, self.r_tilde)
        return min(int(head), int(size))

    def tail_labels(self, size: int) -> int:
        """M: distinct tail ranks drawn (default StratBand's tail count), at most T."""
        assert self.r_tilde is not None
        head, bounds = stratum_bounds(size, self.epsilon, self.r_tilde)
        if bounds.size == 0:
            return 0
        if self.labels is not None:
            wanted = int(self.labels)
        else:
            widths = np.diff(np.concatenate([[head], bounds]))
            wanted = int(np.minimum(widths, self.window).sum())
        return min(wanted, int(size) - int(head))

    def draws(self, size: int) -> np.ndarray:
        """The sorted tail ranks drawn (uniform without replacement over (h, N])."""
        head, m = self.head(size), self.tail_labels(size)
        if m == 0:
            return np.empty(0, np.int64)
        rng = np.random.default_rng(np.random.SeedSequence([int(self.seed), _STREAM]))
        picked = rng.choice(int(size) - head, size=m, replace=False).astype(np.int64)
        return np.sort(picked) + head + 1

    def plan(self, size: int, known: Labels) -> np.ndarray:
        """Ranks to label now: first 1..h, then the M tail draws."""
        head_ranks = np.arange(1, self.head(size) + 1, dtype=np.int64)
        return staged_plan(known, head_ranks, lambda: self.draws(size))

    def budget(self, size: int) -> dict[str, object]:
        """Labels of the plan before any label: h + M (exact)."""
        head, m = self.head(size), self.tail_labels(size)
        points = grid_points(head, int(size), 1.0 + self.grid)
        return {
            "method": self.name,
            "size": int(size),
            "queries": int(points.size),
            "annotations": int(head + m),
            "head": int(head),
            "samples": int(m),
            "epsilon": self.epsilon,
            "window": self.window,
            "r_tilde": int(self.r_tilde or 0),
            "delta": self.delta,
            "guarantee": (
                "with probability >= 1 - delta the band holds at every rank at once; "
                "no assumption on the list; about the labels given"
            ),
        }

    # -- estimate ----------------------------------------------------------------------

    def estimate(self, size: int, known: Labels) -> CurveEstimate:
        """The band and the unbiased estimate (see the module docstring).

        Raises ``ValueError`` when a planned label is missing.
        """
        size = int(size)
        head = self.head(size)
        head_ranks = np.arange(1, head + 1, dtype=np.int64)
        drawn = self.draws(size)
        missing = known.missing(np.concatenate([head_ranks, drawn])).size
        if missing:
            raise ValueError(f"{missing} planned labels are missing; call plan() and label them")
        head_cum = np.cumsum(known.lookup(head_ranks))
        head_p = head_cum / head_ranks
        annotations = int(head + drawn.size)
        if drawn.size == 0:
            return CurveEstimate.exact(self.name, size, head_ranks, head_p, "band", annotations)
        c_head = float(head_cum[-1])
        values = known.lookup(drawn)
        points = grid_points(head, size, 1.0 + self.grid)
        tail, m = size - head, drawn.size
        lo_k, hi_k = self._grid_counts(points, drawn, values, head, tail)
        knots = np.concatenate([[head], points]).astype(np.int64)
        lo_k, hi_k = tighten_counts(
            np.concatenate([[c_head], c_head + lo_k]),
            np.concatenate([[c_head], c_head + hi_k]),
            knots,
            head,
            known,
        )
        x = self._steps(head, points)
        nxt = np.append(x[1:] - 1, x[-1])
        c_lo, _ = yield_between(x, knots, lo_k, hi_k, known)
        _, c_hi = yield_between(nxt, knots, lo_k, hi_k, known)
        lower = np.clip(c_lo / nxt, 0.0, 1.0)
        upper = np.clip(c_hi / x, 0.0, 1.0)
        hits = np.concatenate([[0.0], np.cumsum(values)])[np.searchsorted(drawn, x, side="right")]
        precision = np.clip((c_head + tail * hits / m) / x, lower, upper)
        return CurveEstimate(
            method=self.name,
            size=size,
            ranks=np.concatenate([head_ranks[:-1], x]),
            precision=np.concatenate([head_p[:-1], precision]),
            lower=np.concatenate([head_p[:-1], lower]),
            upper=np.concatenate([head_p[:-1], upper]),
            kind="band",
            guarantee=(
                f"with probability >= {1 - self.delta:g}: lower <= precision@k <= upper at every "
                f"rank k at once, for any list (no monotonicity assumed), about the labels "
                f"given; {m} tail ranks drawn uniformly without replacement, exact "
                f"hypergeometric bounds at {points.size} grid ranks holding together, "
                f"deterministic interpolation of the yield between them; exact for ranks "
                f"<= {head}"
            ),
            queried=points.copy(),
            annotations=annotations,
            exact_prefix=int(head),
        )

    def _grid_counts(
        self,
        points: np.ndarray,
        drawn: np.ndarray,
        values: np.ndarray,
        head: int,
        tail: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(L_k, U_k) on the tail yield C(k) − C(h) at the grid points (exact, α = δ/(2G))."""
        where = np.searchsorted(drawn, points, side="right")
        up = np.concatenate([[0], np.cumsum(np.ceil(values))])[where].astype(np.int64)
        low = np.concatenate([[0], np.cumsum(np.floor(values))])[where].astype(np.int64)
        cap = (points - head).astype(np.int64)
        alpha = self.delta / (2.0 * points.size)
        lower, upper = hypergeometric_bounds(up, low, tail, drawn.size, cap, alpha)
        return lower.astype(np.float64), upper.astype(np.float64)

    def _steps(self, head: int, points: np.ndarray) -> np.ndarray:
        """Output knots: h, the grid points and sub-knots every factor 1 + (r − 1)/20."""
        ratio = 1.0 + self.grid / 20.0
        count = math.ceil(math.log(points[-1] / head) / math.log(ratio)) + 1
        sub = np.ceil(head * ratio ** np.arange(count, dtype=np.float64)).astype(np.int64)
        x = np.unique(np.concatenate([[head], sub, points]))
        return x[(x >= head) & (x <= points[-1])]

    def run(self, size: int, oracle: Oracle) -> CurveEstimate:
        """Plan → label with ``oracle`` → plan … until done; then :meth:`estimate`."""
        return run_to_completion(self, size, oracle)
