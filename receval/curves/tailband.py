"""TailBand: exact head, strata just beyond it, a uniform tail sample; a band at every rank.

Design
------
The head t_1 … t_h is labelled exhaustively (h = g_ℓ of PAULA's grid, the same head as PAULA
and StratBand).  The tail labels M default to StratBand's count Σ_j min(Δ, size_j) (so the plan
never has more labels than StratBand or PAULA) and are split, before any tail label, between

* a **uniform sample**: M_u distinct ranks drawn uniformly *without replacement* from the tail
  R = {h+1, …, N}, |R| = T = N − h, bounded at the grid ranks K_u = {k*} ∪ {k_i ≥ k*} of the
  geometric grid k_i = ⌈h·r^i⌉ (r = 1 + ``grid``, default 1.01; N included), k* = ⌊``reach``·N⌋
  (default N/10);
* and one of two designs for (h, k*]:

  - **strata**: PAULA's (1+ε)-geometric strata cut at k*, n distinct ranks drawn uniformly
    without replacement from each (all of a stratum smaller than n), bounded at the stratum
    ends b_1 < … < b_J = k*;
  - a **pool**: M_r = M − M_u further ranks of (h, k*] drawn uniformly without replacement
    among those the uniform sample did not draw, bounded *together with the uniform draws
    that fall in (h, k*]* at the grid ranks K_r = {k_i < k*} ∪ {k*}.

The split is fixed from the design alone: with δ_u = (1 − ``split``)·δ for the uniform part
(default split 0.2) and z_u, z_0 the normal quantiles at the per-point levels δ_u/(2|K_u|) and
δ/(2G₀) (G₀ the grid points of the whole tail), M_u is the smallest count with
z_u²(1 − M_u/T)/M_u ≤ z_0²/M, plus 5 % — so at every k ≥ k* the uniform part alone is a little
tighter than the baseline's M binomial draws at level δ over the whole grid.  The strata get
the largest n with Σ_j min(n, size_j) ≤ M − M_u (not offered when n < 2); the pool gets the
rest.  Which of the two (or the uniform sample alone, K_u the whole grid and δ_u = δ) is used is
chosen from the design and the exact head's precision p(h) (:func:`_near_width`; the head is
labelled first and is not random, so the choice costs no δ): the strata's Hoeffding bound wins
near p = ½ at large N, the pool's exact bound at low or high precision.  The draws depend on
(seed, N, parameters, p(h)) only, never on a tail label.

Bounds at the knots
-------------------
*Uniform part.*  For k ∈ K_u let K⁺_k = Σ_{h<i≤k} ⌈v(t_i)⌉ and K⁻_k = Σ_{h<i≤k} ⌊v(t_i)⌋
(the tail yield C(k) − C(h) for 0/1 labels; a merged tie v = ½ counts in K⁺ only).  The number
X⁺_k of uniform draws in (h, k] with ⌈v⌉ = 1 is exactly hypergeometric, H(T, K⁺_k, M_u).  With
F_K its cdf (non-increasing in K), U_k = max{K ≤ k − h : F_K(X⁺_k) > α} satisfies
P(K⁺_k > U_k) ≤ α, because a cdf evaluated at its own random variable is ≤ α with probability
≤ α; likewise L_k = min{K : P_K(X⁻_k ≥ x) > α} has P(K⁻_k < L_k) ≤ α.  With α = δ_u/(2|K_u|)
all 2|K_u| statements hold together with probability ≥ 1 − δ_u (union bound).

*Pool.*  Let u' be the number of uniform draws in (h, k*] (a function of the draw positions
only, not of any label).  Given u', those draws are a uniformly random u'-subset of (h, k*]
(a uniform subset of R conditioned on how many of it fall in a part of R).  The pool takes the
first M_r ranks outside that subset of a uniformly ordered sample of M_r + u' ranks of
(h, k*]; the ranks of a uniform random ordering that avoid a fixed set are in uniform random
order, so the pool is a uniform M_r-subset of the rest of (h, k*], and the union, the *pooled
sample*, is a uniform (u' + M_r)-subset of (h, k*].  Hence, given u', the pooled count of
positives in (h, k] is exactly H(k* − h, K_k, u' + M_r) for every k ≤ k*, the exact bounds
above hold with α = δ_r/(2|K_r|) (δ_r = ``split``·δ) given u', and so unconditionally.

*Strata.*  Ĉ(b_j) = C(h) + Σ_{i≤j} size_i·S_i/n_i (S_i positives among the n_i draws of stratum
i) is unbiased, and by Hoeffding–Serfling and independence across strata Ĉ(b_j) − C(b_j) is
sub-Gaussian with the proxy V_j of :mod:`receval.curves.stratband`; the half-widths of
:func:`~receval.curves.stratband.hoeffding_halfwidths` at δ_s = ``split``·δ make all J
statements hold together with probability ≥ 1 − δ_s.

By a union bound over the two parts (whatever their dependence), the event E that every knot
statement holds has P(E) ≥ 1 − δ_u − δ_s (or δ_r) = 1 − δ.

Every rank, deterministically on E
----------------------------------
Exactly as in StratBand: C is non-decreasing and grows by at most one per rank, and every
labelled rank counts exactly, so the knot bounds (head, strata ends and grid ranks together)
are tightened across knots (C − P and (b − Q) − C non-decreasing) and carried to every rank k
between knots a < k ≤ b:

    max(C⁻(a) + P(a, k], C⁻(b) − (b − k) + Q(k, b]) ≤ C(k) ≤ min(C⁺(b) − P(k, b], C⁺(a) + (k − a) − Q(a, k])

(P, Q: labelled positives and negatives).  On output steps [x, x') (the knots plus sub-knots
every factor 1 + (r − 1)/20) the precision bounds are C⁻(x)/(x' − 1) and C⁺(x' − 1)/x.  Hence,
with probability ≥ 1 − δ, ``lower ≤ precision@k ≤ upper`` at every rank at once, for every
list (kind ``band``).  ``precision`` is the stratified estimate (linear between strata ends) up
to k* and the unbiased C(h) + T·(uniform positives in (h, k])/M_u beyond, clipped to the band.

Against the obvious baseline (H+CP, ``bench/curves_tightness.py``): the same head and M i.i.d.
uniform tail draws *with* replacement, a Clopper–Pearson interval at each point of the same
1.01 grid from h to N with a union bound, monotonicity between grid points.  From k* on the
uniform part is at least as tight by construction (fewer grid points share its δ, its count is
hypergeometric — sharper by the finite-population factor 1 − M_u/T — the 5 % margin, and the
interpolation adds the growth and labelled-rank bounds); up to k* the pooled sample has
u' + M_r ≈ M_u·(k* − h)/T + M_r draws where the baseline has about M·(k* − h)/T (2–10 × as
many) at a slightly larger z, and the strata more still near the head (measured: the README's
curve walkthrough).

Labels are taken as given: the band is about the labels supplied (a wrong label moves the curve
it bounds).  Memory O(M + G); nothing of length N is allocated.

References
----------
Hoeffding, W. (1963). JASA 58, 13–30.  Serfling, R. J. (1974). Ann. Statist. 2, 39–48.
Clopper, C. J. & Pearson, E. S. (1934). Biometrika 26, 404–413 (inverting an exact tail).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from receval.curves.base import (
    CurveEstimate,
    Labels,
    Oracle,
    check_grid_parameters,
    exact_head,
    run_to_completion,
    staged_plan,
)
from receval.curves.precision_function import monotone_from
from receval.curves.stratband import (
    hoeffding_halfwidths,
    noisy_head_bounds,
    noisy_tail_band,
    serfling_proxy,
    stratum_bounds,
    tighten_counts,
    yield_between,
)

__all__ = [
    "TailBand",
    "TailDesign",
    "hypergeometric_bounds",
    "log_hypergeometric_tail",
    "tighten_counts",
    "yield_between",
]

if TYPE_CHECKING:
    from receval.curves.judged import JudgeScores

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


@dataclass(frozen=True)
class TailDesign:
    """What :class:`TailBand` draws for one list size (a function of the parameters and N).

    ``head`` h; ``tail`` T = N − h; ``uniform`` M_u draws over (h, N] bounded at the ``grid``
    ranks with ``delta_uniform``; ``strata`` the stratum ends b_1 < … < b_J = k* just beyond the
    head with ``per_stratum`` draws each, bounded with ``delta_strata`` (J = 0: no strata);
    ``pool`` M_r further draws over (h, ``reach``] among the ranks the uniform sample missed,
    bounded together with the uniform draws there at the ``pool_grid`` ranks with
    ``delta_pool`` (0: no such draws)."""

    head: int
    tail: int
    uniform: int
    grid: np.ndarray
    delta_uniform: float
    strata: np.ndarray
    per_stratum: int
    delta_strata: float
    pool: int = 0
    reach: int = 0
    pool_grid: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    delta_pool: float = 0.0


@dataclass(frozen=True)
class TailBand:
    """Exact head, a stratified sample just beyond it, a uniform tail sample; a band at every
    rank with probability ≥ 1 − δ, for any list (see the module docstring).

    Parameters
    ----------
    epsilon, window, r_tilde
        Fix the head h = g_ℓ (PAULA's grid: r̃ = ⌈(Δ+2)/ε⌉), the strata (its (1+ε)-geometric
        grid) and the default label count (StratBand's: Σ_j min(Δ, size_j) tail labels).
    labels
        M, the tail labels (default: StratBand's count for the same ε, Δ).
    grid
        r − 1 of the geometric grid of ranks bounded from the uniform sample (default 0.01).
    reach
        k* = ⌊reach·N⌋: the strata cover (h, k*] (default 0.1).
    split
        The share of δ spent on the strata (default 0.2; 0: uniform sample only).
    eta
        η < ½, a declared rate of flipped labels (each label wrong with probability η,
        independently): the band is then about the true labels, widened for the noise (the
        head is no longer exact; the uniform sample takes all labels).  0: about the labels
        given.
    delta
        δ: the band holds at every rank together with probability ≥ 1 − δ.
    seed
        Seed of the draws; ``plan`` is a deterministic function of (parameters, size, known).
    judge
        An automatic judge's score per rank (:class:`~receval.curves.judged.JudgeScores`):
        the tail is stratified by the judge's verdict when a small uniform pilot sample says
        that narrows the band (:mod:`receval.curves.judged`); None: rank alone.
    """

    epsilon: float = 0.03
    window: int = 100
    labels: int | None = None
    grid: float = 0.01
    reach: float = 0.1
    split: float = 0.2
    eta: float = 0.0
    r_tilde: int | None = None
    delta: float = 0.05
    seed: int = 0
    judge: JudgeScores | None = None
    name: ClassVar[str] = "tailband"

    def __post_init__(self) -> None:
        check_grid_parameters(self.epsilon, self.window, self.delta)
        if not 0 < self.grid <= 1:
            raise ValueError("grid must lie in (0, 1]")
        if not 0 < self.reach < 1 or not 0 <= self.split < 1:
            raise ValueError("reach must lie in (0, 1) and split in [0, 1)")
        if self.labels is not None and self.labels < 1:
            raise ValueError("labels must be ≥ 1")
        if not 0 <= self.eta < 0.5:
            raise ValueError("eta must lie in [0, 1/2)")
        if self.judge is not None and self.eta > 0:
            raise ValueError("a judge-stratified tailband does not take eta")
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
        """M: tail labels of the plan at most (default StratBand's tail count), at most T."""
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

    def design(self, size: int, head_share: float = 0.5) -> TailDesign:
        """The split of M between the strata and the uniform sample (module docstring);
        ``head_share`` is the precision of the exactly labelled head, p(h)."""
        return tail_design(self, int(size), float(head_share))

    def draws(
        self, size: int, head_share: float = 0.5
    ) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """(uniform draws over (h, N], the draws of each stratum, the pool's draws over (h, k*]
        among the ranks the uniform sample missed), sorted ranks."""
        return self.draws_of(self.design(size, head_share))

    def draws_of(self, d: TailDesign) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """:meth:`draws` of the design ``d``."""
        uniform = np.empty(0, np.int64)
        if d.uniform:
            rng = np.random.default_rng(np.random.SeedSequence([int(self.seed), _STREAM]))
            picked = rng.choice(d.tail, size=d.uniform, replace=False).astype(np.int64)
            uniform = np.sort(picked) + d.head + 1
        strata: list[np.ndarray] = []
        lows = np.concatenate([[d.head], d.strata[:-1]]).astype(np.int64)[: d.strata.size]
        for j, (low, high) in enumerate(zip(lows.tolist(), d.strata.tolist(), strict=True)):
            width = high - low
            if width <= d.per_stratum:
                strata.append(np.arange(low + 1, high + 1, dtype=np.int64))
                continue
            rng = np.random.default_rng(np.random.SeedSequence([int(self.seed), _STREAM, 1, j]))
            picked = rng.choice(width, size=d.per_stratum, replace=False).astype(np.int64)
            strata.append(np.sort(picked) + low + 1)
        return uniform, strata, self._pool_draws(d, uniform)

    def _pool_draws(self, d: TailDesign, uniform: np.ndarray) -> np.ndarray:
        """M_r ranks of (h, k*] drawn uniformly without replacement among those ``uniform``
        missed: the first M_r such ranks of a uniformly ordered sample of M_r + u' ranks of
        (h, k*] (u' uniform draws fall there), so the union with the uniform draws in (h, k*]
        is, given u', a uniform (u' + M_r)-subset of (h, k*] (module docstring)."""
        if d.pool == 0:
            return np.empty(0, np.int64)
        span = d.reach - d.head
        inside = uniform[uniform <= d.reach]
        rng = np.random.default_rng(np.random.SeedSequence([int(self.seed), _STREAM, 2]))
        take = min(span, d.pool + inside.size)
        picked = rng.choice(span, size=take, replace=False).astype(np.int64) + d.head + 1
        return np.sort(picked[~np.isin(picked, inside)][: d.pool])

    def _sampled(self, size: int, head_share: float = 0.5) -> np.ndarray:
        uniform, strata, pool = self.draws(size, head_share)
        return np.unique(np.concatenate([uniform, pool, *strata]))

    def plan(self, size: int, known: Labels) -> np.ndarray:
        """Ranks to label now: first 1..h, then the strata and uniform draws (one batch, whose
        split depends on the head's labels: they are exact, not random)."""
        head_ranks = np.arange(1, self.head(size) + 1, dtype=np.int64)

        if self.judge is not None:
            judge = self.judge
            return staged_plan(known, head_ranks, lambda: judge.plan(self, size, known))

        def rest() -> np.ndarray:
            return self._sampled(size, _share(known, head_ranks))

        return staged_plan(known, head_ranks, rest)

    def budget(self, size: int) -> dict[str, object]:
        """Labels of the plan before any label, for a head of precision ½: h + distinct drawn
        ranks (a rank drawn by both samples is labelled once; h + M when the head's precision
        leaves the uniform sample alone — at most h + M in every case)."""
        d = self.design(size)
        return {
            "method": self.name,
            "size": int(size),
            "queries": int(d.grid.size + d.strata.size + d.pool_grid.size),
            "annotations": int(d.head + self._sampled(size).size),
            "head": int(d.head),
            "strata": int(d.strata.size),
            "labels_per_stratum": int(d.per_stratum),
            "samples": int(d.uniform),
            "reach_samples": int(d.pool),
            "epsilon": self.epsilon,
            "window": self.window,
            "r_tilde": int(self.r_tilde or 0),
            "delta": self.delta,
            "halfwidth": self.designed_halfwidth(size),
            "guarantee": (
                "with probability >= 1 - delta the band holds at every rank at once; "
                "no assumption on the list; about the labels given"
            ),
        }

    def designed_halfwidth(self, size: int) -> float | None:
        """The largest half-width (upper − lower)/2 of the band at any rank, for every list of
        0/1 labels and whatever the head's precision (the design it picks), before any label;
        None with ``eta`` or a judge (their widths depend on the labels' noise or the judge).

        Per knot the width W in counts is label-free for the strata (2 × their Hoeffding
        half-width) and, for the exact hypergeometric bounds, at most their Hoeffding–Serfling
        counterpart's (:func:`_worst_widths`); between knots a < k ≤ b the yield's band is at most
        min(W_a + k − a, W_b + b − k) wide, C⁺ grows by at most one per rank, so on the output
        step [x, l] the precision band is at most 1 − x/l + (w(x) + l − x)/x wide (and 1).
        Merged ties (label ½) count in one bound only and may widen the band beyond this."""
        if self.eta > 0 or self.judge is not None:
            return None
        candidates, *_ = design_candidates(self, int(size))
        return max(self._design_halfwidth(d) for d in candidates)

    def _design_halfwidth(self, d: TailDesign) -> float:
        """:meth:`designed_halfwidth` of one design."""
        if d.grid.size == 0:
            return 0.0  # the whole list is the exact head
        knots = np.unique(np.concatenate([[d.head], d.strata, d.grid, d.pool_grid]))
        knots = knots.astype(np.int64)
        width = np.full(knots.size, np.inf)
        width[0] = 0.0
        at = np.searchsorted(knots, d.grid)
        alpha = d.delta_uniform / (2.0 * d.grid.size)
        worst = _worst_widths(d.grid, d.uniform, d.head, d.tail, alpha)
        width[at] = np.minimum(width[at], worst)
        if d.pool:
            # the pooled sample holds the M_r pool draws and the uniform draws that fall in
            # (h, k*]: M_r draws at least, and the bound only narrows with more draws
            alpha = d.delta_pool / (2.0 * d.pool_grid.size)
            span = d.reach - d.head
            at = np.searchsorted(knots, d.pool_grid)
            worst = _worst_widths(d.pool_grid, d.pool, d.head, span, alpha)
            width[at] = np.minimum(width[at], worst)
        if d.strata.size:
            widths = np.diff(np.concatenate([[d.head], d.strata])).astype(np.float64)
            drawn = np.minimum(widths, d.per_stratum).astype(np.float64)
            half = hoeffding_halfwidths(np.cumsum(serfling_proxy(widths, drawn)), d.strata,
                                        d.delta_strata)  # fmt: skip
            at = np.searchsorted(knots, d.strata)
            width[at] = np.minimum(width[at], 2.0 * half)
        width = np.minimum(width, (knots - d.head).astype(np.float64))  # C(k) − C(h) ≤ k − h
        x = self._steps(d.head, knots)
        last = np.append(x[1:] - 1, x[-1])
        j = np.clip(np.searchsorted(knots, x, side="left"), 1, knots.size - 1)
        a, b = knots[j - 1], knots[j]
        w = np.minimum(width[j - 1] + (x - a), width[j] + (b - x))
        xf, lf = x.astype(np.float64), last.astype(np.float64)
        band = np.minimum(1.0 - xf / lf + (w + lf - xf) / xf, 1.0)
        return float(band.max() / 2.0)

    # -- estimate ----------------------------------------------------------------------

    def estimate(self, size: int, known: Labels) -> CurveEstimate:
        """The band and the unbiased estimate (see the module docstring).

        Raises ``ValueError`` when a planned label is missing.
        """
        size = int(size)
        head_ranks = np.arange(1, self.head(size) + 1, dtype=np.int64)
        if known.missing(head_ranks).size:
            raise ValueError("planned labels of the head are missing; call plan() and label them")
        if self.judge is not None:
            return self.judge.estimate(self, size, known)
        share = _share(known, head_ranks)
        d = self.design(size, share)
        head = d.head
        uniform, strata, pool = self.draws(size, share)
        planned = np.concatenate([head_ranks, uniform, pool, *strata])
        missing = known.missing(planned).size
        if missing:
            raise ValueError(f"{missing} planned labels are missing; call plan() and label them")
        head_cum = np.cumsum(known.lookup(head_ranks))
        head_p = head_cum / head_ranks
        annotations = int(np.unique(planned).size)
        if self.eta > 0:
            return self._noisy_estimate(size, d, head_cum, uniform, known, annotations)
        if d.grid.size == 0:
            return CurveEstimate.exact(self.name, size, head_ranks, head_p, "band", annotations)
        c_head = float(head_cum[-1])
        knots, lo_k, hi_k, estimate = self._knot_bounds(d, c_head, (uniform, pool), strata, known)
        lo_k, hi_k = tighten_counts(lo_k, hi_k, knots, head, known)
        x = self._steps(head, knots)
        nxt = np.append(x[1:] - 1, x[-1])
        c_lo, _ = yield_between(x, knots, lo_k, hi_k, known)
        _, c_hi = yield_between(nxt, knots, lo_k, hi_k, known)
        lower = np.clip(c_lo / nxt, 0.0, 1.0)
        upper = np.clip(c_hi / x, 0.0, 1.0)
        precision = np.clip(estimate(x) / x, lower, upper)
        parts = f"{d.uniform} tail ranks drawn uniformly without replacement"
        if d.pool:
            parts = (
                f"{d.pool} more ranks drawn uniformly up to rank {d.reach} (pooled with the "
                f"uniform draws there: exact hypergeometric bounds at {d.pool_grid.size} ranks, "
                f"delta {d.delta_pool:g}) and " + parts
            )
        if d.strata.size:
            parts = (
                f"{d.per_stratum} ranks per stratum in {d.strata.size} strata up to rank "
                f"{int(d.strata[-1])} (Hoeffding-Serfling, delta {d.delta_strata:g}) and " + parts
            )
        return CurveEstimate(
            method=self.name,
            size=size,
            **exact_head(head_p, x, precision, lower, upper),
            kind="band",
            guarantee=(
                f"with probability >= {1 - self.delta:g}: lower <= precision@k <= upper at every "
                f"rank k at once, for any list (no monotonicity assumed), about the labels "
                f"given; {parts} (exact hypergeometric bounds at {d.grid.size} grid ranks, "
                f"delta {d.delta_uniform:g}), all holding together, deterministic "
                f"interpolation of the yield between them; exact for ranks <= {head}"
            ),
            queried=knots[1:].copy(),
            annotations=annotations,
            exact_prefix=int(head),
        )

    def _noisy_estimate(
        self,
        size: int,
        d: TailDesign,
        head_cum: np.ndarray,
        uniform: np.ndarray,
        known: Labels,
        annotations: int,
    ) -> CurveEstimate:
        """The band on the *true* curve when each label is flipped with probability η.

        δ is split: δ/4 for the head, δ/2 for the sampling, δ/4 for the noise of the tail.
        With ξ_i = ṽ_i − η − (1 − 2η)v_i (independent, centred, in an interval of length 1),
        the noisy head yield C̃(k) = Σ_{i≤k} ṽ_i satisfies |C̃(k) − ηk − (1 − 2η)C(k)| ≤
        t_h = √(h ln(2/δ_h)/2) at every k ≤ h at once (Doob's maximal inequality for the
        martingale Σ ξ_i, Hoeffding's lemma).  In the tail, imagine every item's noisy label
        drawn: the sample is a simple random sample of that noisy population, so the exact
        hypergeometric bounds hold for its count K̃_k at level δ_u, and |K̃_k − η·s_k −
        (1 − 2η)K_k| ≤ √(s_k ln(4G/δ_n)/2) (s_k = k − h; Hoeffding, union over the G grid
        ranks).  Solving for C(h) and K_k gives the knot bounds; labelled ranks are not
        counted as exact (their labels may be wrong); the interpolation is the same.
        """
        eta, head = self.eta, d.head
        scale = 1.0 - 2.0 * eta
        ks, head_lo, head_hi, head_mid = noisy_head_bounds(head_cum, eta, self.delta)
        values = known.lookup(uniform)
        grid = d.grid
        lo_u, hi_u = self._grid_counts(grid, uniform, values, head, d.tail, self.delta / 2.0)
        x = self._steps(head, np.concatenate([[head], grid]).astype(np.int64))
        lower, upper = noisy_tail_band(
            head, grid, (lo_u, hi_u), (head_lo[-1], head_hi[-1]), x, eta, self.delta
        )
        hits = np.concatenate([[0.0], np.cumsum(values)])[np.searchsorted(uniform, x, "right")]
        share = (hits / max(uniform.size, 1) * d.tail - eta * (x - head)) / scale
        middle = np.clip((head_mid[-1] + share) / x, lower, upper)
        # head ranks: a band from the maximal inequality, held over each rank
        h_ranks = np.arange(1, head, dtype=np.int64)
        return CurveEstimate(
            method=self.name,
            size=size,
            ranks=np.concatenate([h_ranks, x]),
            precision=np.concatenate([head_mid[:-1] / ks[:-1], middle]),
            lower=np.concatenate([head_lo[:-1] / ks[:-1], lower]),
            upper=np.concatenate([head_hi[:-1] / ks[:-1], upper]),
            kind="band",
            guarantee=(
                f"with probability >= {1 - self.delta:g}: lower <= precision@k <= upper at every "
                f"rank k at once, for any list, about the TRUE labels when each given label is "
                f"wrong with probability eta = {eta:g} independently (declared, not checked): "
                f"noise removed through E[label] = eta + (1 - 2 eta) v and its spread bounded "
                f"(Hoeffding, Doob) on the head of {head} ranks and on {uniform.size} uniform "
                f"tail draws with exact hypergeometric bounds at {grid.size} grid ranks"
            ),
            queried=grid.copy(),
            annotations=annotations,
            exact_prefix=0,
        )

    def _knot_bounds(self, d: TailDesign, c_head: float, samples, strata, known: Labels):
        """(knots h, …; C⁻; C⁺; the point estimate of C as a function of rank) from every
        sample: the strata's Hoeffding–Serfling bounds at b_j, the uniform sample's exact
        bounds at the grid ranks, the pooled sample's exact bounds at its grid ranks (a rank
        bounded twice keeps the tighter side of each)."""
        uniform, pool = samples
        values = known.lookup(uniform)
        lo_u, hi_u = self._grid_counts(d.grid, uniform, values, d.head, d.tail, d.delta_uniform)
        knots = np.unique(np.concatenate([[d.head], d.strata, d.grid, d.pool_grid]))
        knots = knots.astype(np.int64)
        lo = np.full(knots.size, -np.inf)
        hi = np.full(knots.size, np.inf)
        lo[0] = hi[0] = c_head
        at = np.searchsorted(knots, d.grid)
        lo[at] = np.maximum(lo[at], c_head + lo_u)
        hi[at] = np.minimum(hi[at], c_head + hi_u)
        hits = np.concatenate([[0.0], np.cumsum(values)])

        def uniform_estimate(x: np.ndarray) -> np.ndarray:
            found = hits[np.searchsorted(uniform, x, side="right")]
            return c_head + d.tail * found / max(uniform.size, 1)

        if d.pool:
            pooled = np.sort(np.concatenate([uniform[uniform <= d.reach], pool]))
            p_values = known.lookup(pooled)
            span = d.reach - d.head
            lo_p, hi_p = self._grid_counts(
                d.pool_grid, pooled, p_values, d.head, span, d.delta_pool
            )
            at = np.searchsorted(knots, d.pool_grid)
            lo[at] = np.maximum(lo[at], c_head + lo_p)
            hi[at] = np.minimum(hi[at], c_head + hi_p)
            p_hits = np.concatenate([[0.0], np.cumsum(p_values)])

            def pooled_estimate(x: np.ndarray) -> np.ndarray:
                found = p_hits[np.searchsorted(pooled, x, side="right")]
                near = c_head + span * found / max(pooled.size, 1)
                return np.where(x <= d.reach, near, uniform_estimate(x))

            return knots, lo, hi, pooled_estimate
        if d.strata.size == 0:
            return knots, lo, hi, uniform_estimate
        widths = np.diff(np.concatenate([[d.head], d.strata])).astype(np.float64)
        drawn = np.array([s.size for s in strata], np.float64)
        positives = np.array([known.lookup(s).sum() for s in strata], np.float64)
        c_hat = c_head + np.cumsum(widths * positives / drawn)
        var = np.cumsum(serfling_proxy(widths, drawn))
        half = hoeffding_halfwidths(var, d.strata, d.delta_strata)
        at = np.searchsorted(knots, d.strata)
        lo[at] = np.maximum(lo[at], c_hat - half)
        hi[at] = np.minimum(hi[at], c_hat + half)
        ends = np.concatenate([[d.head], d.strata]).astype(np.float64)
        counts = np.concatenate([[c_head], c_hat])
        reach = float(d.strata[-1])

        def estimate(x: np.ndarray) -> np.ndarray:
            near = np.interp(x.astype(np.float64), ends, counts)
            return np.where(x <= reach, near, uniform_estimate(x))

        return knots, lo, hi, estimate

    def _grid_counts(
        self,
        points: np.ndarray,
        drawn: np.ndarray,
        values: np.ndarray,
        head: int,
        tail: int,
        delta: float,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(L_k, U_k) on the tail yield C(k) − C(h) at the grid points (exact, α = δ_u/(2G))."""
        where = np.searchsorted(drawn, points, side="right")
        up = np.concatenate([[0], np.cumsum(np.ceil(values))])[where].astype(np.int64)
        low = np.concatenate([[0], np.cumsum(np.floor(values))])[where].astype(np.int64)
        cap = (points - head).astype(np.int64)
        alpha = delta / (2.0 * points.size)
        lower, upper = hypergeometric_bounds(up, low, tail, drawn.size, cap, alpha)
        return lower.astype(np.float64), upper.astype(np.float64)

    def _steps(self, head: int, points: np.ndarray) -> np.ndarray:
        """Output knots: h, the knots and sub-knots every factor 1 + (r − 1)/20."""
        ratio = 1.0 + self.grid / 20.0
        count = math.ceil(math.log(points[-1] / head) / math.log(ratio)) + 1
        sub = np.ceil(head * ratio ** np.arange(count, dtype=np.float64)).astype(np.int64)
        x = np.unique(np.concatenate([[head], sub, points]))
        return x[(x >= head) & (x <= points[-1])]

    def run(self, size: int, oracle: Oracle) -> CurveEstimate:
        """Plan → label with ``oracle`` → plan … until done; then :meth:`estimate`."""
        return run_to_completion(self, size, oracle)


def _worst_widths(
    points: np.ndarray, draws: int, head: int, population: int, alpha: float
) -> np.ndarray:
    """Per point k, an upper bound on U_k − L_k of the exact hypergeometric bounds for every
    hit count x (0/1 labels), non-increasing in the draws.  X ~ H(T, K, n) with n = ``draws``, T = ``population`` and
    K ≤ k − h: a K whose tail P_K(X ≤ x) (or P_K(X ≥ x)) is below α fails the exact test, so
    U − L ≤ 2·T·s/n for any s with such tails beyond |X − nK/T| ≥ s, the smaller of

    * Hoeffding–Serfling: s = n·√(ln(1/α)(1 − (n − 1)/T)/(2n));
    * Bernstein for the binomial, which bounds the hypergeometric's Chernoff tails (Hoeffding
      1963, Theorem 4): s = ln(1/α)/3 + √((ln(1/α)/3)² + 2 v ln(1/α)), v = n·p(1 − p) at
      p = min(K/T, ½) ≤ min((k − h)/T, ½);

    at a level a little below α (the exact tails are compared with α(1 − 10⁻⁴)); at most
    k − h."""
    n = max(int(draws), 1)
    log_a = math.log(1.0 / (alpha * (1.0 - 1e-3)))
    fpc = max(1.0 - (n - 1) / population, 0.0)
    serfling = n * math.sqrt(log_a * fpc / (2.0 * n))
    span = (points - head).astype(np.float64)
    p = np.minimum(span / population, 0.5)
    bernstein = log_a / 3.0 + np.sqrt((log_a / 3.0) ** 2 + 2.0 * n * p * (1.0 - p) * log_a)
    return np.minimum(2.0 * population * np.minimum(serfling, bernstein) / n, span)


def _share(known: Labels, head_ranks: np.ndarray) -> float:
    """p(h), the precision of the labelled head (½ while it is not labelled)."""
    if head_ranks.size == 0 or known.missing(head_ranks).size:
        return 0.5
    return float(known.lookup(head_ranks).mean())


@functools.lru_cache(maxsize=64)
def tail_design(
    method: TailBand, size: int, head_share: float = 0.5, pooled: bool = False
) -> TailDesign:
    """Split M between the uniform sample and the part that covers (h, k*] so that the uniform
    part alone is at least as tight at k = N as the baseline's M binomial draws at level δ over
    the whole grid: z_u²(1 − M_u/T)/M_u ≤ z_0²/M with z the normal quantiles at the two
    per-point levels, i.e. M_u ≥ M·ρ/(1 + M·ρ/T), ρ = (z_u/z_0)², taken 5 % larger.  The rest
    goes either to the strata (when they leave at least two labels per stratum) or to the pool
    over (h, k*], whichever :func:`_near_width` finds narrower for the head's precision
    (``pooled``: the pool whenever there is one, as the judge-stratified design uses)."""
    candidates, k, z_0, points = design_candidates(method, size)
    if len(candidates) == 1:
        return candidates[0]
    if pooled:
        return candidates[1] if len(candidates) > 1 and candidates[1].pool else candidates[0]
    return min(candidates, key=lambda d: _near_width(d, k, head_share, z_0, points))


@functools.lru_cache(maxsize=64)
def design_candidates(method: TailBand, size: int) -> tuple[list[TailDesign], int, float, int]:
    """The designs :func:`tail_design` chooses from (uniform sample alone; with a pool; with
    strata, each when it applies), the rank and normal quantile the choice is made at, and the
    number of grid points of the whole tail."""
    from scipy.stats import norm

    assert method.r_tilde is not None
    head, bounds = stratum_bounds(size, method.epsilon, method.r_tilde)
    head = min(int(head), size)
    tail = size - head
    total = method.tail_labels(size)
    full = grid_points(head, size, 1.0 + method.grid)
    plain = TailDesign(head, tail, total, full, method.delta, np.empty(0, np.int64), 0, 0.0)
    reach = int(method.reach * size)
    if total == 0 or method.split == 0 or reach <= head or method.eta > 0:
        return [plain], head + 1, 0.0, full.size
    grid = np.unique(np.append(full[full >= reach], np.int64(reach)))
    delta_u = method.delta * (1.0 - method.split)
    delta_near = method.delta * method.split
    z_u = float(norm.isf(delta_u / (2.0 * grid.size)))
    z_0 = float(norm.isf(method.delta / (2.0 * full.size)))
    rho = (z_u / z_0) ** 2
    uniform = min(total, math.ceil(1.05 * total * rho / (1.0 + total * rho / tail)))
    candidates = [plain]
    near = np.unique(np.append(full[full < reach], np.int64(reach)))
    pool = min(total - uniform, (reach - head) // 2)
    if pool >= 1:
        candidates.append(
            TailDesign(
                head, tail, total - pool, grid, delta_u, np.empty(0, np.int64), 0, 0.0,
                pool=pool, reach=reach, pool_grid=near, delta_pool=delta_near,
            )
        )  # fmt: skip
    strata = np.append(bounds[bounds < reach], np.int64(reach)).astype(np.int64)
    widths = np.diff(np.concatenate([[head], strata]))
    low, high = 0, int(widths.max())  # the largest n with Σ_j min(n, size_j) ≤ M − M_u
    while low < high:
        mid = (low + high + 1) // 2
        if int(np.minimum(widths, mid).sum()) <= total - uniform:
            low = mid
        else:
            high = mid - 1
    if low >= 2:
        left = total - int(np.minimum(widths, low).sum())  # what the strata leave
        candidates.append(TailDesign(head, tail, left, grid, delta_u, strata, low, delta_near))
    k = max(head + 1, reach // 10, math.isqrt(head * reach))
    return candidates, k, z_0, full.size


def _near_width(d: TailDesign, k: int, share: float, z_0: float, points: int) -> float:
    """The approximate half-width of the yield at rank k (h < k ≤ k*) from the design alone:
    an efficiency choice made from the design and the exact head's precision p(h) (never from
    a random label), so it costs no δ.  The uniform sample or the pool: the normal
    approximation of its exact hypergeometric bound; the strata: their Hoeffding half-width;
    each clipped to what a precision in [0, 1] allows.  At low (or very high) precision the
    exact bound is far narrower than Hoeffding's, and the strata lose."""
    from scipy.stats import norm

    p = min(max(share, 0.01), 0.99)
    span = k - d.head

    def clipped(h: float) -> float:
        return (min(h, (1.0 - p) * span) + min(h, p * span)) / 2.0

    def exact(population: int, draws: float, z: float) -> float:
        q = p * span / population
        fpc = max(1.0 - draws / population, 0.0)
        return clipped(z * math.sqrt(draws * q * (1.0 - q) * fpc) * population / draws)

    if d.strata.size:
        ends = np.concatenate([[d.head], d.strata])
        widths = np.diff(ends).astype(np.float64)
        drawn = np.minimum(widths, d.per_stratum).astype(np.float64)
        var = np.cumsum(serfling_proxy(widths, drawn))
        half = hoeffding_halfwidths(var, d.strata, d.delta_strata)
        j = min(int(np.searchsorted(d.strata, k)), d.strata.size - 1)
        return clipped(float(half[j]))
    if d.pool:
        population = d.reach - d.head
        draws = d.pool + d.uniform * population / d.tail
        z = float(norm.isf(d.delta_pool / (2.0 * d.pool_grid.size)))
        return exact(population, draws, z)
    return exact(d.tail, float(d.uniform), z_0)
