"""AdaStrat: adaptive stratified sampling for the precision function (Sabharwal & Xue 2018).

The algorithm (AdaStrat §4, Algorithm 1)
-----------------------------------------
1. Label the first l̃ items exactly (ACCESS), l̃ = max(⌈(1+ε)²m / (2ε+ε²)⌉, r̃) (§4).
2. QUERY p(N); then ``PR(l̃, N)``: if the envelope of all weak-monotone precision functions
   through the points known so far (Definition 2, eqs. (3)-(4)) has height
   max_{l≤i≤r} ub(i)/lb(i) ≤ (1+ε)² on [l, r], or r/l ≤ (1+ε)², stop; otherwise QUERY p at the
   geometric mid-point c = round(√(lr)) (bisection in log-rank), update the envelope (UpdateUL)
   and recurse on (l, c), then (c, r).
3. Output p̃ = √(ub·lb) of the final envelope: a β(1+ε)-approximation of p at every rank when
   p is (r̃, m)-weakly monotone and every queried value is a β-approximation (Theorem 3).

QUERY (§4.3) estimates p(r) from uniform draws of ranks with iterative deepening: with K points
queried so far every point gets the sample size of eq. (5),
s_K = ⌈(1+η)² / (2(β−1−η)² p_min²) · ln(2K/δ)⌉, so that each estimate is a β-approximation
with confidence 1 − δ/K (Hoeffding) and all K hold together with confidence 1 − δ (union bound).
When K grows, the earlier points get more draws and their estimates are refreshed.

How the draws are made (our construction of the paper's strategy S)
--------------------------------------------------------------------
The ranks (l̃, N] are split into strata at the queried points.  Each stratum carries a Poisson
process of "draws" (rank uniform in the stratum, height uniform on [0, ∞), rate = stratum size),
generated lazily and reproducibly from ``seed`` and the stratum's bounds.  The sample of a query
point r of size n is the n draws of lowest height in (l̃, r]: exactly n independent uniform
ranks of (l̃, r] (with repetition, as in §2.1), nested in n (deepening only adds draws) and
shared between points (draws of lower strata serve every point above them).  In expectation a
stratum (r_{i−1}, r_i] ends with density s/r_i — the density of strategy S and Theorem 8 — with
no rounding overhead, and it does not matter in which order the points were queried (the
"adapted stratified sampling" of §4.3).

The estimate at r uses the exact prefix exactly: p̃(r) = (Y(l̃) + (r − l̃)·q̂)/r with q̂ the mean
(noisy) label of the n = ⌈s_K (r − l̃)/r⌉ draws in (l̃, r] — the draws that fall outside the
prefix when s_K draws are taken from [1, r], as in §4.3 — instead of sub-sampling the labelled
prefix (Appendix B.8).  It is unbiased for η = 0 and satisfies eq. (2)'s Hoeffding bound with
room to spare (the prefix part has no variance).

Noisy labels (η > 0).  Every estimate removes the noise: the Hoeffding value is
p̃(r) = (Y(l̃) + (r − l̃)·q̂)/r with q̂ = (ṽ − η)/(1 − 2η) (ṽ the mean noisy label), so the envelope
and the stopping rule see corrected values too; the sample size is the larger of eq. (5) and the
size the corrected estimator needs for |q̂ − q| ≤ (β − 1)p_min (Hoeffding on ṽ, divided by 1 − 2η).
The exactly labelled prefix 1..l̃ is taken as noise-free (adjudicated labels): with noisy prefix
labels its yield is off by about η(1 − 2p)·l̃, which the band's β slack absorbs in the audit's
scenarios but no theorem covers.

The output band.  ``lower``/``upper`` are the band Theorem 3 promises, [lb/β, β·ub] around the
envelope lb, ub of the estimates (for Hoeffding the upper factor is 1/(2 − β) ≥ β, because eq. (2)
gives |p̃ − p| ≤ (β − 1)p, i.e. p ≤ p̃/(2 − β)), carried over each output step by the yield alone.
It holds at every rank with probability ≥ 1 − δ when p is weakly monotone beyond r̃ (and, for
Hoeffding, p ≥ p_min at the queried ranks).  With one to three queries nothing in the labels can
refute that premise, so the kind is earned by a check (:func:`premise_check`): after Algorithm 1,
``check_labels`` (default ⌈s_1/2⌉) distinct ranks drawn uniformly over (l̃, N] give exact
hypergeometric intervals for the yield at ranks 1.1 apart (level δ together).  ``kind = "band"``
only when the check finds no contradiction *and* its intervals are no wider than the band (it
could see a miss of the band's size); otherwise ``kind = "approximation"`` with the reason in the
guarantee (a contradiction also raises the flag ``premise-refuted``).  When the queried
intervals themselves show (at confidence 1 − δ) that no weakly monotone p fits them, the premise
is refuted too.  On a wave list the band missed by up to 0.019 at 6–32 % of ranks: misses a
check of a few thousand labels cannot see, which is why a coarse check never earns ``band``.

Query counts against the paper (8–17 here vs 18–21 in Tables 1-2 on PPDB-36K and its scaled
variants): the stopping rule reacts to the noise of the point estimates, and ours are less
noisy — the exact prefix enters exactly instead of being subsampled, and the draws are shared
(nested) between points.  Measured on the 10× PPDB-like list (3 seeds): K = 12–13 with
β = 1.02 (s_1 = 18,445), 13–15 with β = 1.05, 13–15 with β = 1.1, 14–19 with β = 1.2 (s_1 = 185):
noisier estimates, more queries.  The list also differs (the real PPDB ranking is not available;
ours is a smooth synthetic density), and a local bump adds one or two queries.  The envelope itself is written in
the extra columns ``envelope_lower``/``envelope_upper``.  Weak monotonicity is checked exactly on
the upper half of the prefix (the default l̃ = r̃ leaves no pair at or beyond r̃) and on the
queried intervals; failures are flagged.

Beyond the paper: ``estimator="clopper-pearson"`` or ``"bernstein"`` replaces Hoeffding with
p_min by an exact binomial (Clopper–Pearson) or empirical-Bernstein (Maurer & Pontil 2009,
Thm 4) interval [lo, hi] for p(r), on a fixed schedule of J nested sample sizes around the
paper's size (from about 1/7.6 of it up to 2.25 times it by default); the first size whose
interval satisfies hi ≤ β²·lo is used, with p̃(r) = √(lo·hi) (then p(r)/β ≤ p̃(r) ≤ β·p(r)
whenever p(r) ∈ [lo, hi]).  The schedule is fixed before any label is seen and each interval
has level δ/(K·J), so the union bound over schedule sizes and points keeps the 1 − δ guarantee
(a proper multiplicative β, without assuming p ≥ p_min); a point whose interval is still wider
than β² at the last size is flagged.  Label noise η is removed exactly through
E[ṽ] = η + (1 − 2η)·v.

Points where the paper is silent, and our reading
-------------------------------------------------
* Refreshed estimates (deepening) may reopen an interval that PR closed earlier.  After the
  recursion we run PR again from (l̃, N), reusing every queried point, until a pass queries
  nothing new; the final envelope then meets the stopping rule on every leaf, as Theorem 3
  needs.  When nothing reopens (the usual case) this is exactly one pass of Algorithm 1.
* Algorithm 1 applies UpdateUL to p(1), …, p(l̃); Theorem 2 only holds for points ≥ r̃, so only
  the exact points y ∈ [r̃, l̃] shape the envelope beyond l̃ (ranks ≤ l̃ are exact anyway).
* The union bound treats the adaptively chosen points as if fixed in advance, as the paper does.
* Eq. (5) gives |p̃ − p| ≤ (β−1)p, i.e. p̃ ≥ (2−β)p rather than p/β, and the floors of
  Definition 2 make ũb ≤ β·ub hold only up to O(1/l̃); Theorem 3's factor β(1+ε) inherits both
  (a relative 2·10⁻³ at the defaults).  The schedule estimators give a true multiplicative β.
* Duplicated draws of a rank share one label (one annotation); with η > 0 the paper's model
  would give each draw its own noisy label.

Everything is O(K·s) memory (K queried points, s draws per point); nothing of length N is ever
allocated, ranks are int64.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

import numpy as np

from receval.curves.base import CurveEstimate, Labels, Oracle, check_grid_parameters, exact_head
from receval.curves.precision_function import (
    envelope_lower,
    envelope_upper,
    geometric_grid,
    monotone_from,
)

__all__ = [
    "ESTIMATORS",
    "AdaStrat",
    "AdaStratConstants",
    "AdaStratTrace",
    "Envelope",
    "QueriedPoint",
    "adastrat_constants",
    "geometric_midpoint",
    "hoeffding_sample_size",
]

#: Point estimators offered for QUERY.
ESTIMATORS = ("hoeffding", "clopper-pearson", "bernstein")

_INF = float(2**62)


# ----------------------------------------------------------------------------- constants


@dataclass(frozen=True)
class AdaStratConstants:
    """The rank constants of AdaStrat for given ε and Δ.

    ``r_tilde`` = r̃ (weak monotonicity holds from r̃ on; PAULA §4.2: r̃ = ⌈(Δ+2)/ε⌉),
    ``m`` = ⌊ε(1+ε)^ℓ − 1⌋ with ℓ = ⌈log_{1+ε} r̃⌉ (PAULA §4.2), and ``l_tilde`` =
    l̃ = max(⌈(1+ε)²m/(2ε+ε²)⌉, r̃) (AdaStrat §4): the ranks labelled exhaustively.
    """

    r_tilde: int
    m: int
    l_tilde: int


def _exact(x: float) -> Fraction:
    """The decimal value a user typed (0.03 is 3/100, not the nearest binary fraction)."""
    return Fraction(repr(float(x)))


def adastrat_constants(
    epsilon: float, window: int, r_tilde: int | None = None, m: int | None = None
) -> AdaStratConstants:
    """r̃, m and l̃ of AdaStrat §4 (defaults from PAULA §4.2; ε = 0.03, Δ = 100: 3400, 103, 3400).

    ``r_tilde`` and ``m`` override the defaults r̃ = ⌈(Δ+2)/ε⌉ and m = ⌊ε(1+ε)^ℓ − 1⌋.
    Arithmetic on ε is exact in its decimal value, so ⌈102/0.03⌉ is 3400.
    """
    eps = _exact(epsilon)
    rt = monotone_from(window, epsilon) if r_tilde is None else int(r_tilde)
    if rt < 1:
        raise ValueError("r_tilde must be ≥ 1")
    mm = geometric_grid(rt, float(epsilon), rt).m if m is None else int(m)
    if mm < 1:
        raise ValueError("m must be ≥ 1")
    lt = max(math.ceil((1 + eps) ** 2 * mm / (2 * eps + eps**2)), rt)
    return AdaStratConstants(r_tilde=rt, m=mm, l_tilde=int(lt))


def hoeffding_sample_size(k: int, delta: float, beta: float, pmin: float, eta: float = 0.0) -> int:
    """s of AdaStrat eq. (5): draws for a β-approximation of p(r) with confidence 1 − δ/K.

    s = ⌈(1+η)² / (2(β−1−η)² p_min²) · ln(2K/δ)⌉ (two-sided Hoeffding, valid when
    p(r) ≥ p_min and β > 1 + η).
    """
    if not beta > 1 + eta:
        raise ValueError("eq. (5) needs β > 1 + η")
    value = (1 + eta) ** 2 / (2 * (beta - 1 - eta) ** 2 * pmin**2) * math.log(2 * k / delta)
    return math.ceil(value - 1e-9)


def geometric_midpoint(low: int, high: int) -> int:
    """c = round(√(low·high)), exactly in integers (Algorithm 1, function PR)."""
    product = int(low) * int(high)
    c = math.isqrt(product)
    # round half up: c + 1 when low·high ≥ (c + ½)², i.e. low·high ≥ c² + c + 1.
    return c + 1 if product >= c * c + c + 1 else c


# ----------------------------------------------------------------------------- envelope


class Envelope:
    """The envelope of all (r̃, m)-weakly monotone precision functions through known points.

    AdaStrat Definition 2 (single-point bounds ub(v; y, p(y)) and lb(v; y, p(y))) intersected
    over the points, eqs. (3)-(4): ub(v) = min_j ub(v; y_j, p_j), lb(v) = max_j lb(v; y_j, p_j).
    The points are the exact prefix (ranks r̃..l̃, from ``prefix_yield``) and the queried
    points ``ys`` with values ``ps``.  For ranks ≤ l̃ the precision is known exactly and
    lb = ub = p.  With exact values the envelope is a guaranteed bound under weak monotonicity
    (Theorem 2); with estimated values it is the paper's \\tilde{ub}, \\tilde{lb}.

    Every piece of ub and lb has the form A/v + B, so on a stretch where the active pieces do
    not change, ub/lb is a Möbius function of v and monotone.  :attr:`candidates` collects the
    ranks where the active pieces can change (piece ends, crossings of two pieces, every rank of
    the window (l̃, l̃+m] where the prefix acts); the maximum of ub/lb over any range between
    query points is attained at a candidate, so :meth:`height` is exact without touching N ranks.
    """

    def __init__(
        self,
        size: int,
        constants: AdaStratConstants,
        prefix_yield: np.ndarray,
        ys: np.ndarray,
        ps: np.ndarray,
    ) -> None:
        self.size = int(size)
        self.m = constants.m
        self.r_tilde = constants.r_tilde
        self.l_tilde = min(constants.l_tilde, self.size)
        self.prefix_yield = np.asarray(prefix_yield, np.float64)
        order = np.argsort(np.asarray(ys, np.int64), kind="stable")
        self.ys = np.asarray(ys, np.int64)[order]
        self.ps = np.asarray(ps, np.float64)[order]
        lt, m = self.l_tilde, self.m
        self.yield_l = float(self.prefix_yield[lt - 1]) if lt >= 1 else 0.0
        self.p_l = self.yield_l / lt if lt >= 1 else 1.0
        # Exact prefix points y in [r̃, l̃]: their ub beyond l̃ (window by brute force, constant after).
        first = min(max(self.r_tilde, 1), lt)
        yp = np.arange(first, lt + 1, dtype=np.int64)
        pp = self.prefix_yield[yp - 1] / yp
        self.prefix_const = float(pp.min()) if yp.size else 1.0
        width = max(0, min(m, self.size - lt))
        self.window = np.arange(lt + 1, lt + width + 1, dtype=np.int64)
        self.window_ub = np.ones(width, np.float64)
        for start in range(0, yp.size, 4096):
            y = yp[start : start + 4096]
            p = pp[start : start + 4096]
            self.window_ub = np.minimum(
                self.window_ub, _ub_matrix(self.window, y, p, m).min(axis=1, initial=1.0)
            )
        self.candidates = self._candidates()
        lb, ub = self.bounds(self.candidates)
        with np.errstate(divide="ignore", invalid="ignore"):
            self._ratio = np.where(lb > 0, ub / np.where(lb > 0, lb, 1.0), np.inf)

    # -- evaluation ---------------------------------------------------------------------------

    def bounds(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(lb, ub) at ranks ``v`` (any ranks in 1..N; exact p for ranks ≤ l̃)."""
        v = np.asarray(v, np.int64)
        lb = np.zeros(v.shape, np.float64)
        ub = np.ones(v.shape, np.float64)
        head = v <= self.l_tilde
        if np.any(head):
            exact = self.prefix_yield[v[head] - 1] / v[head]
            lb[head], ub[head] = exact, exact
        tail = ~head
        if np.any(tail):
            w = v[tail]
            wf = w.astype(np.float64)
            prefix_ub = np.full(w.shape, self.prefix_const)
            in_window = w <= self.l_tilde + self.window.size
            prefix_ub[in_window] = self.window_ub[w[in_window] - self.l_tilde - 1]
            lo = self.yield_l / wf
            hi = np.minimum(1.0, prefix_ub)
            for start in range(0, w.size, 8192):
                sl = slice(start, start + 8192)
                if self.ys.size:
                    lo[sl] = np.maximum(lo[sl], _lb_matrix(w[sl], self.ys, self.ps, self.m).max(1))
                    hi[sl] = np.minimum(hi[sl], _ub_matrix(w[sl], self.ys, self.ps, self.m).min(1))
            lb[tail], ub[tail] = np.maximum(lo, 0.0), hi
        return lb, ub

    def geometric_mean(self, v: np.ndarray) -> np.ndarray:
        """p̃(v) = √(ub(v)·lb(v)), the output of Algorithm 1 (exact p for ranks ≤ l̃)."""
        lb, ub = self.bounds(v)
        return np.sqrt(lb * ub)

    def height(self, low: int, high: int) -> float:
        """max_{low ≤ i ≤ high} ub(i)/lb(i) (the stopping test of function PR), exactly.

        ``low`` and ``high`` must be l̃, N or queried points (as in PR).
        """
        a = np.searchsorted(self.candidates, low, side="left")
        b = np.searchsorted(self.candidates, high, side="right")
        return float(self._ratio[a:b].max()) if b > a else 1.0

    # -- where ub/lb can change --------------------------------------------------------------

    def _point_lines(self, y: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pieces (A, B, lo, hi) of ub and of lb for each point: value A/v + B on lo ≤ v ≤ hi."""
        m = self.m
        yf = y.astype(np.float64)
        f = np.floor(m * p)
        py = p * yf
        zero, one = np.zeros_like(p), np.ones_like(p)
        ub = [
            (py, zero, -_INF + 0 * yf, yf),
            (py - yf, one, yf + 1, yf + f),
            (py + f, zero, yf + f + 1, yf + m),
            (zero, p, yf + m + 1, _INF + 0 * yf),
        ]
        lb = [
            (zero, p, -_INF + 0 * yf, yf - m - 1),
            (py - f, zero, yf - m, yf - f - 1),
            (py - yf, one, yf - f, yf - 1),
            (py, zero, yf, _INF + 0 * yf),
        ]
        return (
            np.stack([np.stack(piece, axis=1) for piece in ub], axis=1).reshape(-1, 4),
            np.stack([np.stack(piece, axis=1) for piece in lb], axis=1).reshape(-1, 4),
        )

    def _candidates(self) -> np.ndarray:
        lt, n, m = self.l_tilde, self.size, self.m
        if n <= lt:
            return np.array([n], np.int64)
        found: list[np.ndarray] = [
            np.array([lt, n], np.int64),
            self.ys,
            np.arange(lt, min(lt + self.window.size + 1, n) + 1, dtype=np.int64),
        ]
        ys, ps = self.ys, self.ps
        bounds = np.unique(np.concatenate([[lt], ys]))
        yields = ps * ys
        for a, b in itertools.pairwise(bounds):
            near = (ys >= a - m) & (ys <= b + m)
            left, right = ys < a - m, ys > b + m
            ub_lines, lb_lines = self._point_lines(ys[near], ps[near])
            extra_ub = [(0.0, 1.0, a, b)]
            extra_lb = [(0.0, 0.0, a, b), (self.yield_l, 0.0, a, b)]
            if lt + m + 1 <= b:
                extra_ub.append((0.0, self.prefix_const, max(a, lt + m + 1), b))
            if left.any():
                extra_ub.append((0.0, float(ps[left].min()), a, b))
                extra_lb.append((float(yields[left].max()), 0.0, a, b))
            if right.any():
                extra_ub.append((float(yields[right].min()), 0.0, a, b))
                extra_lb.append((0.0, float(ps[right].max()), a, b))
            for lines, extra in ((ub_lines, extra_ub), (lb_lines, extra_lb)):
                lines = np.concatenate([lines, np.asarray(extra, np.float64)])
                lo = np.maximum(lines[:, 2], a)
                hi = np.minimum(lines[:, 3], b)
                keep = lo <= hi
                lines, lo, hi = lines[keep], lo[keep], hi[keep]
                found.append(lo.astype(np.int64))
                found.append(hi.astype(np.int64))
                i, j = np.triu_indices(lines.shape[0], 1)
                d_b = lines[j, 1] - lines[i, 1]
                ok = d_b != 0
                i, j, d_b = i[ok], j[ok], d_b[ok]
                with np.errstate(divide="ignore", invalid="ignore"):
                    v = (lines[i, 0] - lines[j, 0]) / d_b
                inside = (v >= np.maximum(lo[i], lo[j])) & (v <= np.minimum(hi[i], hi[j]))
                v = v[inside]
                found.append(np.floor(v).astype(np.int64))
                found.append(np.ceil(v).astype(np.int64))
        out = np.unique(np.concatenate(found))
        return out[(out >= lt) & (out <= n)]


def _ub_matrix(v: np.ndarray, y: np.ndarray, p: np.ndarray, m: int) -> np.ndarray:
    """ub(v_i; y_j, p_j) of Definition 2 as a (len(v), len(y)) matrix."""
    return envelope_upper(
        np.asarray(v, np.float64)[:, None], np.asarray(y)[None, :], np.asarray(p)[None, :], m
    )


def _lb_matrix(v: np.ndarray, y: np.ndarray, p: np.ndarray, m: int) -> np.ndarray:
    """lb(v_i; y_j, p_j) of Definition 2 as a (len(v), len(y)) matrix."""
    return envelope_lower(
        np.asarray(v, np.float64)[:, None], np.asarray(y)[None, :], np.asarray(p)[None, :], m
    )


def _relaxed_bounds(
    v: np.ndarray, y: np.ndarray, lo: np.ndarray, hi: np.ndarray, m: int
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on p(v) valid for every p(y_j) ∈ [lo_j, hi_j] (Definition 2 without the floors).

    Dropping ⌊·⌋ (m·p instead of ⌊m·p⌋) loosens Definition 2 slightly and makes both bounds
    non-decreasing in p(y), so the interval ends give bounds for the whole interval.
    """
    vf = np.asarray(v, np.float64)[:, None]
    d = vf - np.asarray(y, np.float64)[None, :]
    yf = np.asarray(y, np.float64)[None, :]
    lo, hi = np.asarray(lo, np.float64)[None, :], np.asarray(hi, np.float64)[None, :]
    ub = np.where(
        d <= 0, hi * yf / vf, np.where(d <= m, (hi * yf + np.minimum(d, m * hi)) / vf, hi)
    )
    lb = np.where(
        d < -m, lo, np.where(d < 0, (lo * yf - np.minimum(-d, m * lo)) / vf, lo * yf / vf)
    )
    return lb.max(axis=1), ub.min(axis=1)


# ----------------------------------------------------------------------------- sampling


class _Stratum:
    __slots__ = ("extensions", "height", "high", "hs", "low", "xs")

    def __init__(self, low: int, high: int, xs: np.ndarray, hs: np.ndarray, height: float):
        self.low, self.high = low, high  # ranks low+1 .. high
        self.xs, self.hs, self.height = xs, hs, height
        self.extensions = 0


class DrawProcess:
    """Uniform draws of ranks in (start, end] as a Poisson process of (rank, height) pairs.

    Stratum (a, b] holds the process restricted to its ranks, generated up to some height;
    extensions come from a generator seeded by (seed, a, b, extension number), so the whole
    process is a fixed function of the seed and of the sequence of splits and requests (which
    plan() replays).  Conditional on their number, the draws of lowest height in (start, r] are
    independent and uniform on (start, r]: the sample of size n of a query point r.
    """

    def __init__(self, seed: int, start: int, end: int) -> None:
        self.seed = int(seed)
        self.start = int(start)
        self.bounds = [int(start), int(end)]
        empty_x, empty_h = np.empty(0, np.int64), np.empty(0, np.float64)
        self.strata = [_Stratum(int(start), int(end), empty_x, empty_h, 0.0)]

    def split(self, c: int) -> None:
        i = bisect.bisect_left(self.bounds, c)
        if i < len(self.bounds) and self.bounds[i] == c:
            return
        old = self.strata[i - 1]
        left = old.xs <= c
        self.strata[i - 1 : i] = [
            _Stratum(old.low, c, old.xs[left], old.hs[left], old.height),
            _Stratum(c, old.high, old.xs[~left], old.hs[~left], old.height),
        ]
        self.bounds.insert(i, c)

    def _extend(self, stratum: _Stratum, height: float) -> None:
        if height <= stratum.height:
            return
        key = [self.seed, 0xADA57, stratum.low, stratum.high, stratum.extensions]
        rng = np.random.default_rng(np.random.SeedSequence(key))
        size = stratum.high - stratum.low
        count = int(rng.poisson(size * (height - stratum.height)))
        xs = rng.integers(stratum.low + 1, stratum.high + 1, size=count, dtype=np.int64)
        hs = np.sort(rng.uniform(stratum.height, height, size=count))
        stratum.xs = np.concatenate([stratum.xs, xs])
        stratum.hs = np.concatenate([stratum.hs, hs])
        stratum.height = height
        stratum.extensions += 1

    def sample(self, r: int, n: int) -> np.ndarray:
        """The n draws of lowest height in (start, r], in height order (ranks, int64)."""
        if n <= 0:
            return np.empty(0, np.int64)
        k = bisect.bisect_left(self.bounds, r)
        if self.bounds[k] != r:
            raise ValueError("r must be a stratum boundary (a queried point)")
        strata = self.strata[:k]
        target = (n + 4.0 * math.sqrt(n) + 8.0) / (r - self.start)
        while True:
            level = min(s.height for s in strata)
            if level > 0:
                hs = np.concatenate([s.hs for s in strata])
                below = hs <= level
                if int(below.sum()) >= n:
                    xs = np.concatenate([s.xs for s in strata])[below]
                    order = np.argsort(hs[below], kind="stable")[:n]
                    return xs[order]
                target = max(target, level * 1.25)
            for s in strata:
                self._extend(s, target)


# ----------------------------------------------------------------------------- interval maths


@functools.lru_cache(maxsize=65536)
def _mean_interval(count: float, n: int, alpha: float, method: str) -> tuple[float, float]:
    """A 1 − α two-sided interval for the mean of n i.i.d. {0,1} labels with ``count`` ones."""
    if n <= 0:
        return 0.0, 1.0
    mean = count / n
    if method == "clopper-pearson":
        from statsmodels.stats.proportion import proportion_confint  # lazy: slow to import

        lo, hi = proportion_confint(round(count), n, alpha=alpha, method="beta")
        return float(np.nan_to_num(lo, nan=0.0)), float(np.nan_to_num(hi, nan=1.0))
    if method == "bernstein":
        if n < 2:
            return 0.0, 1.0
        log_term = math.log(4.0 / alpha)
        var = mean * (1.0 - mean) * n / (n - 1)
        half = math.sqrt(2.0 * var * log_term / n) + 7.0 * log_term / (3.0 * (n - 1))
        return max(0.0, mean - half), min(1.0, mean + half)
    half = math.sqrt(math.log(2.0 / alpha) / (2.0 * n))
    return max(0.0, mean - half), min(1.0, mean + half)


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class QueriedPoint:
    """One QUERY of the precision function.

    ``draws`` uniform draws of ranks in (l̃, rank] (labels ``ones`` of them positive) give the
    estimate ``value``; ``lower``/``upper`` is an interval for p(rank) at level δ/K (δ/(K·J) for
    the schedule estimators); ``resolved`` is False when the schedule estimator ran out of its
    budget before the interval reached ratio β².
    """

    rank: int
    order: int
    draws: int
    ones: float
    value: float
    lower: float
    upper: float
    resolved: bool = True


@dataclass(frozen=True)
class AdaStratTrace:
    """What one AdaStrat run did (for tests, benchmarks and reports).

    ``points`` are the queried points by rank, ``query_order`` their ranks in query order,
    ``leaves`` the final intervals of PR, ``passes`` the PR passes that queried something (1 is
    Algorithm 1's single pass; more means refreshed estimates reopened an interval),
    ``annotations`` the distinct labelled ranks, ``draws`` the draws behind the final estimates.
    """

    size: int
    constants: AdaStratConstants
    points: tuple[QueriedPoint, ...]
    query_order: tuple[int, ...]
    leaves: tuple[tuple[int, int], ...]
    passes: int
    annotations: int
    draws: int
    complete: bool
    envelope: Envelope | None = field(default=None, repr=False, compare=False)

    @property
    def queries(self) -> int:
        """K: the number of points at which p was queried."""
        return len(self.points)


# ----------------------------------------------------------------------------- the method


class _Missing(Exception):
    def __init__(self, ranks: np.ndarray) -> None:
        super().__init__(f"{ranks.size} labels missing")
        self.ranks = ranks


class _KnownSource:
    def __init__(self, known: Labels) -> None:
        self.known = known

    def get(self, ranks: np.ndarray) -> np.ndarray:
        missing = self.known.missing(ranks)
        if missing.size:
            raise _Missing(missing)
        return self.known.lookup(ranks)


class _OracleSource:
    def __init__(self, oracle: Oracle) -> None:
        self.oracle = oracle
        self.known = Labels.empty()

    def get(self, ranks: np.ndarray) -> np.ndarray:
        missing = self.known.missing(ranks)
        if missing.size:
            labels = np.asarray(self.oracle(missing), np.float64)
            if labels.shape != missing.shape or not np.all((labels == 0) | (labels == 1)):
                raise ValueError("the oracle must return one 0/1 label per rank")
            self.known = self.known.merge(missing, labels)
        return self.known.lookup(ranks)


@dataclass
class _PointState:
    rank: int
    order: int
    labels: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))
    n: int = 0
    value: float = math.nan
    lower: float = 0.0
    upper: float = 1.0
    resolved: bool = True


@dataclass(frozen=True)
class AdaStrat:
    """AdaStrat (Sabharwal & Xue, UAI 2018): adaptive stratified sampling of p(r).

    Parameters
    ----------
    epsilon
        ε: the envelope is refined until its height is ≤ (1+ε)² (approximation factor β(1+ε)).
    window
        Δ, which fixes r̃ = ⌈(Δ+2)/ε⌉ and m (PAULA §4.2) unless ``r_tilde``/``m`` are given.
    delta
        δ: all queried estimates hold together with probability ≥ 1 − δ.
    beta
        β: each queried estimate is a β-approximation (eq. (5) needs β > 1 + η).
    pmin
        p_min of eq. (5): a lower bound on p assumed by the Hoeffding sample size.
    eta
        η < 1/2: the probability that an annotation is flipped (noisy labels, §2).
    estimator
        ``"hoeffding"`` (the paper: eq. (5) sample sizes), ``"clopper-pearson"`` or
        ``"bernstein"`` (interval-driven sample sizes, no p_min assumption; see the module
        docstring).
    seed
        Fixes every random draw; plan() is a deterministic function of (parameters, size, known).
    r_tilde, m
        Override the weak-monotonicity constants (r̃, m) of Definition 1.
    schedule_levels, schedule_growth, schedule_beyond
        The schedule estimators try J = ``schedule_levels`` nested sample sizes growing by
        ``schedule_growth``; the paper's eq. (5) size is level J − 1 − ``schedule_beyond``, so
        the last levels go beyond it where p is too low for it (p < p_min).
    knot_ratio
        Consecutive knots of the returned step curve beyond l̃ are at most this ratio apart
        (default 1 + ε/10), so the step values stay within that factor of √(lb·ub).
    check_labels
        Labels spent after Algorithm 1 on checking its premise (default ⌈s_1/2⌉, half of one
        query's sample; 0: no check, and then the curve is an ``approximation``): distinct
        ranks drawn uniformly over (l̃, N], whose exact hypergeometric intervals for the yield
        at ranks 1.1 apart (level δ together) must meet the band; see :func:`premise_check`.

    Notes
    -----
    ``plan``, ``estimate`` and ``run`` follow :class:`~receval.curves.base.CurveMethod`.
    """

    name: ClassVar[str] = "adastrat"

    epsilon: float = 0.03
    window: int = 100
    delta: float = 0.05
    beta: float = 1.05
    pmin: float = 0.5
    eta: float = 0.0
    estimator: str = "hoeffding"
    seed: int = 0
    r_tilde: int | None = None
    m: int | None = None
    schedule_levels: int = 8
    schedule_growth: float = 1.5
    schedule_beyond: int = 2
    knot_ratio: float | None = None
    check_labels: int | None = None

    def __post_init__(self) -> None:
        self._check_paper_parameters()
        self._check_run_parameters()
        adastrat_constants(self.epsilon, self.window, self.r_tilde, self.m)

    def _check_paper_parameters(self) -> None:
        """ε, window, δ, η, β and p_min within the ranges AdaStrat's guarantees need."""
        check_grid_parameters(self.epsilon, self.window, self.delta)
        if not 0 <= self.eta < 0.5:
            raise ValueError("eta must lie in [0, 1/2)")
        if not self.beta > 1 + self.eta:
            raise ValueError("beta must exceed 1 + eta (AdaStrat §4.3)")
        if not 0 < self.pmin <= 1:
            raise ValueError("pmin must lie in (0, 1]")

    def _check_run_parameters(self) -> None:
        """Estimator, seed, query schedule, knot ratio and premise-check size."""
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}")
        if int(self.seed) < 0:
            raise ValueError("seed must be ≥ 0")
        if self.schedule_levels < 1 or self.schedule_growth <= 1:
            raise ValueError("schedule_levels must be ≥ 1 and schedule_growth > 1")
        if not 0 <= self.schedule_beyond < self.schedule_levels:
            raise ValueError("schedule_beyond must lie in 0 .. schedule_levels − 1")
        if self.knot_ratio is not None and self.knot_ratio <= 1:
            raise ValueError("knot_ratio must exceed 1")
        if self.check_labels is not None and self.check_labels < 0:
            raise ValueError("check_labels must be ≥ 0")

    @classmethod
    def from_options(cls, **options: object) -> AdaStrat:
        """Build from CLI-style options: ``None`` means "the paper's default".

        Raises ValueError naming an unknown option or an invalid value.
        """
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown AdaStrat option(s): {', '.join(unknown)}")
        return cls(**{k: v for k, v in options.items() if v is not None})  # type: ignore[arg-type]

    def settings(self) -> dict[str, object]:
        """Parameters and derived constants, JSON-ready (for run records)."""
        c = self.constants
        out: dict[str, object] = {"method": self.name}
        out.update({f: getattr(self, f) for f in self.__dataclass_fields__})
        out.update(
            r_tilde=c.r_tilde, m=c.m, l_tilde=c.l_tilde, factor=self.factor, seed=int(self.seed)
        )
        return out

    # -- derived values -------------------------------------------------------------------

    @property
    def constants(self) -> AdaStratConstants:
        """r̃, m and l̃ for these parameters."""
        return adastrat_constants(self.epsilon, self.window, self.r_tilde, self.m)

    @property
    def factor(self) -> float:
        """β(1+ε): the guaranteed pointwise approximation factor (Theorem 3)."""
        return self.beta * (1 + self.epsilon)

    def sample_size(self, k: int) -> int:
        """s_K for K queried points: eq. (5), and never fewer than the noise-corrected estimator needs.

        The value is estimated by q̂ = (ṽ − η)/(1 − 2η) (ṽ the mean noisy label), whose error is
        that of ṽ divided by 1 − 2η; |q̂ − q| ≤ (β − 1)·p_min needs s = ⌈ln(2K/δ) / (2((β − 1)
        (1 − 2η) p_min)²)⌉ draws (Hoeffding).  For η = 0 both sizes coincide.
        """
        paper = hoeffding_sample_size(k, self.delta, self.beta, self.pmin, self.eta)
        if self.eta == 0:
            return paper
        t = (self.beta - 1) * (1 - 2 * self.eta) * self.pmin
        corrected = math.ceil(math.log(2 * k / self.delta) / (2 * t * t) - 1e-9)
        return max(paper, corrected)

    def check_size(self, size: int) -> int:
        """Labels of the premise check for N = ``size`` (0 when the list is labelled whole)."""
        wanted = self.check_labels
        if wanted is None:
            wanted = math.ceil(self.sample_size(1) / 2)
        return int(max(0, min(wanted, size - self.constants.l_tilde)))

    def budget(self, size: int) -> dict[str, object]:
        """Worst-case plan size before any label is seen (AdaStrat is adaptive).

        ``queries`` ≤ ⌊log_{1+ε}(N/l̃)⌋ + 1 (Theorem 4, plus the query of p(N)) and
        ``annotations`` ≤ l̃ + K·s_K (Theorem 8's bound without reuse).  Upper bounds only:
        the actual counts depend on the shape of p (the paper's PPDB runs used 18–21 queries).
        """
        c = self.constants
        if size <= c.l_tilde:
            return {"method": self.name, "size": int(size), "queries": 0, "annotations": size}
        k = math.floor(math.log(size / c.l_tilde) / math.log1p(self.epsilon)) + 1
        k = min(k, size - c.l_tilde)
        return {
            "method": self.name,
            "size": int(size),
            "queries": k,
            "annotations": int(
                min(size, c.l_tilde + k * self.sample_size(k) + self.check_size(size))
            ),
            "kind": "upper bound",
            "head": int(c.l_tilde),
            "samples_per_point": int(self.sample_size(k)),
            "epsilon": self.epsilon,
            "window": self.window,
            "r_tilde": int(c.r_tilde),
            "m": int(c.m),
            "delta": self.delta,
            "beta": self.beta,
            "pmin": self.pmin,
            "eta": self.eta,
            "approximation": self.factor,
            "guarantee": (
                "adaptive: the count depends on the labels; this is the worst case before any "
                "label (the paper's PPDB runs used far fewer)"
            ),
        }

    # -- the CurveMethod protocol -------------------------------------------------------------

    def plan(self, size: int, known: Labels) -> np.ndarray:
        """Ranks that need a label now (sorted, unique, int64); empty when AdaStrat is done.

        Replays Algorithm 1 from the start on ``known`` up to the first step with a missing
        label and returns that step's batch: the prefix 1..l̃, then for each new query the draws
        of every queried point at the new K (iterative deepening), or a schedule level.
        """
        run = _Run(self, _check_size(size), _KnownSource(known))
        try:
            run.execute()
        except _Missing as missing:
            return missing.ranks
        return np.empty(0, np.int64)

    def estimate(self, size: int, known: Labels) -> CurveEstimate:
        """The curve from the labels known so far (flagged ``incomplete`` before plan is empty)."""
        run = _Run(self, _check_size(size), _KnownSource(known))
        try:
            run.execute()
        except _Missing as missing:
            run.missing = int(missing.ranks.size)
        return run.curve()

    def run(self, size: int, oracle: Oracle) -> CurveEstimate:
        """The whole algorithm with a labelling function (simulations); state kept in memory."""
        return self.run_with_trace(size, oracle)[0]

    # -- diagnostics ------------------------------------------------------------------------

    def run_with_trace(self, size: int, oracle: Oracle) -> tuple[CurveEstimate, AdaStratTrace]:
        """:meth:`run` plus the :class:`AdaStratTrace` of what was queried and drawn."""
        run = _Run(self, _check_size(size), _OracleSource(oracle))
        run.execute()
        return run.curve(), run.trace()

    def trace(self, size: int, known: Labels) -> AdaStratTrace:
        """The :class:`AdaStratTrace` of a replay on ``known`` (up to the first missing label)."""
        run = _Run(self, _check_size(size), _KnownSource(known))
        try:
            run.execute()
        except _Missing as missing:
            run.missing = int(missing.ranks.size)
        return run.trace()


def _check_size(size: int) -> int:
    size = int(size)
    if size < 1:
        raise ValueError("size must be ≥ 1")
    return size


class _Run:
    """One execution of Algorithm 1 against a label source (replayed by plan/estimate)."""

    def __init__(self, method: AdaStrat, size: int, source: _KnownSource | _OracleSource):
        self.method = method
        self.size = size
        self.source = source
        self.constants = method.constants
        self.l_tilde = min(self.constants.l_tilde, size)
        self.points: dict[int, _PointState] = {}
        self.prefix_yield: np.ndarray | None = None
        self.envelope: Envelope | None = None
        self.sampler: DrawProcess | None = None
        self.used: list[np.ndarray] = []
        self.draw_count = 0
        self.leaves: list[tuple[int, int]] = []
        self.passes = 0
        self.complete = False
        self.missing = 0
        self.prefix_rising = False
        self.check: tuple[np.ndarray, np.ndarray] | None = None

    # -- labels ---------------------------------------------------------------------------

    def _fetch(self, ranks: np.ndarray) -> np.ndarray:
        ranks = np.unique(np.asarray(ranks, np.int64))
        labels = self.source.get(ranks)
        self.used.append(ranks)
        return labels

    # -- Algorithm 1 ------------------------------------------------------------------------

    def execute(self) -> None:
        n, lt = self.size, self.l_tilde
        self.prefix_yield = np.cumsum(self._fetch(np.arange(1, lt + 1, dtype=np.int64)))
        if n <= self.constants.l_tilde:
            self.complete = True
            return
        self.sampler = DrawProcess(self.method.seed, lt, n)
        self._query(n)
        while True:
            before = len(self.points)
            self.leaves = []
            self._pr(lt, n)
            if len(self.points) == before:
                break
            self.passes += 1
        count = self.method.check_size(n)
        if count:
            rng = np.random.default_rng(np.random.SeedSequence([int(self.method.seed), 0xC4EC]))
            ranks = np.sort(rng.choice(n - lt, size=count, replace=False).astype(np.int64))
            ranks += lt + 1
            self.check = (ranks, self._fetch(ranks))
        self.complete = True

    def _pr(self, low: int, high: int) -> None:
        tol = (1.0 + self.method.epsilon) ** 2
        assert self.envelope is not None
        if high <= tol * low or self.envelope.height(low, high) <= tol:
            self.leaves.append((low, high))
            return
        c = geometric_midpoint(low, high)
        if c not in self.points:
            self._query(c)
        self._pr(low, c)
        self._pr(c, high)

    def _query(self, c: int) -> None:
        assert self.sampler is not None
        self.sampler.split(c)
        self.points[c] = _PointState(rank=c, order=len(self.points) + 1)
        self._settle()
        self.envelope = self._build_envelope()

    # -- QUERY with iterative deepening -------------------------------------------------------

    def _cap(self, r: int, k: int) -> int:
        """n = ⌈s_K·(r − l̃)/r⌉: the draws beyond the prefix that eq. (5) asks for at r."""
        s = self.method.sample_size(k)
        return max(1, math.ceil(s * (r - self.l_tilde) / r))

    def _draw(self, wanted: dict[int, int]) -> None:
        """Give each point r the labels of its first wanted[r] draws (one label batch)."""
        assert self.sampler is not None
        draws = {r: self.sampler.sample(r, n) for r, n in wanted.items()}
        pool = np.unique(np.concatenate(list(draws.values())))
        labels = self._fetch(pool)
        for r, ranks in draws.items():
            self.points[r].labels = labels[np.searchsorted(pool, ranks)]

    def _interval(self, r: int, ones: float, n: int, alpha: float) -> tuple[float, float]:
        """Interval for p(r) from an interval for the mean noisy label (prefix exact)."""
        lo, hi = _mean_interval(ones, n, alpha, self.method.estimator)
        eta = self.method.eta
        q_lo = min(max((lo - eta) / (1 - 2 * eta), 0.0), 1.0)
        q_hi = min(max((hi - eta) / (1 - 2 * eta), 0.0), 1.0)
        assert self.prefix_yield is not None
        y_l, span = float(self.prefix_yield[self.l_tilde - 1]), r - self.l_tilde
        return (y_l + span * q_lo) / r, (y_l + span * q_hi) / r

    def _settle(self) -> None:
        k = len(self.points)
        assert self.prefix_yield is not None
        y_l = float(self.prefix_yield[self.l_tilde - 1])
        if self.method.estimator == "hoeffding":
            self._settle_fixed(k, y_l)
        else:
            self._settle_scheduled(k)

    def _settle_fixed(self, k: int, y_l: float) -> None:
        """Every point at its eq. (5) size s_K, with a Hoeffding interval at level δ/K."""
        method = self.method
        wanted = {r: self._cap(r, k) for r in self.points}
        self._draw(wanted)
        for r, st in self.points.items():
            n = wanted[r]
            ones = float(st.labels[:n].sum())
            st.n = n
            # Noise removed from the point estimate: E[ṽ] = η + (1 − 2η)·v (§2).
            q = min(max((ones / n - method.eta) / (1 - 2 * method.eta), 0.0), 1.0)
            st.value = (y_l + (r - self.l_tilde) * q) / r
            st.lower, st.upper = self._interval(r, ones, n, method.delta / k)
            st.resolved = True

    def _settle_scheduled(self, k: int) -> None:
        """Each point along its schedule of sizes until its interval is β²-tight or the schedule
        ends, drawing the labels the unsettled points need next, round after round."""
        method = self.method
        alpha = method.delta / (k * method.schedule_levels)
        while True:
            wanted: dict[int, int] = {}
            for r, st in self.points.items():
                need = self._settle_point(r, st, k, alpha)
                if need is not None:
                    wanted[r] = need
            if not wanted:
                return
            self._draw({r: max(n, self.points[r].labels.size) for r, n in wanted.items()})

    def _settle_point(self, r: int, st: _PointState, k: int, alpha: float) -> int | None:
        """Settle point r at the first scheduled size whose interval is β²-tight (or the last
        size); None once settled, else the size it needs labels for next."""
        method = self.method
        levels_count = method.schedule_levels
        tight = method.beta**2
        cap = self._cap(r, k)
        top = levels_count - 1 - method.schedule_beyond
        sizes = [
            max(2, math.ceil(cap * method.schedule_growth ** (j - top)))
            for j in range(levels_count)
        ]
        have = st.labels.size
        cum = np.concatenate([[0.0], np.cumsum(st.labels)])
        for j, n in enumerate(sizes):
            if n > have:
                return n
            lo, hi = self._interval(r, float(cum[n]), n, alpha)
            if (lo > 0 and hi <= tight * lo) or j == levels_count - 1:
                st.n, st.lower, st.upper = n, lo, hi
                st.value = math.sqrt(lo * hi)
                st.resolved = bool(lo > 0 and hi <= tight * lo)
                return None
        return None

    def _build_envelope(self) -> Envelope:
        assert self.prefix_yield is not None
        ranks = np.fromiter(self.points, np.int64, len(self.points))
        values = np.array([self.points[r].value for r in ranks], np.float64)
        return Envelope(self.size, self.constants, self.prefix_yield, ranks, values)

    # -- results ------------------------------------------------------------------------------

    def _annotations(self) -> int:
        if not self.used:
            return 0
        return int(np.unique(np.concatenate(self.used)).size)

    def trace(self) -> AdaStratTrace:
        order = sorted(self.points.values(), key=lambda st: st.order)
        points = tuple(
            QueriedPoint(
                rank=st.rank,
                order=st.order,
                draws=st.n,
                ones=float(st.labels[: st.n].sum()),
                value=st.value,
                lower=st.lower,
                upper=st.upper,
                resolved=st.resolved,
            )
            for st in sorted(self.points.values(), key=lambda st: st.rank)
        )
        return AdaStratTrace(
            size=self.size,
            constants=self.constants,
            points=points,
            query_order=tuple(st.rank for st in order),
            leaves=tuple(self.leaves),
            passes=self.passes,
            annotations=self._annotations(),
            draws=int(sum(st.n for st in self.points.values())),
            complete=self.complete,
            envelope=self.envelope,
        )

    def _knots(self, env: Envelope) -> np.ndarray:
        """Knots beyond l̃: candidates, a geometric grid and dense knots near each point."""
        method = self.method
        lt, n = self.l_tilde, self.size
        ratio = method.knot_ratio or 1.0 + method.epsilon / 10.0
        count = math.ceil(math.log(n / lt) / math.log(ratio)) + 1
        grid = np.unique(np.ceil(lt * ratio ** np.arange(count, dtype=np.float64)))
        parts = [env.candidates, grid.astype(np.int64), np.array([n], np.int64)]
        m = self.constants.m
        for y, p in zip(env.ys, env.ps, strict=True):
            f = math.floor(m * p)
            if f <= 0:
                continue
            step = max(1, math.floor((ratio - 1.0) * p * max(int(y) - m, 1)))
            parts.append(np.arange(int(y) - f, int(y) + f + 1, step, dtype=np.int64))
        knots = np.unique(np.concatenate(parts))
        return knots[(knots > lt) & (knots <= n)]

    def curve(self) -> CurveEstimate:
        method, c = self.method, self.constants
        lt, n = self.l_tilde, self.size
        flags: list[str] = []
        factor = method.factor
        ratio = method.knot_ratio or 1.0 + method.epsilon / 10.0
        if self.prefix_yield is None or self.prefix_yield.size < lt:
            return CurveEstimate(
                method=method.name,
                size=n,
                ranks=np.array([1], np.int64),
                precision=np.array([np.nan]),
                lower=np.array([0.0]),
                upper=np.array([1.0]),
                kind="band",
                guarantee="no estimate yet: the first l̃ ranks are not labelled",
                annotations=self._annotations(),
                flags=(f"incomplete: {self.missing} labels of the first {lt} ranks missing",),
            )
        head = np.arange(1, lt + 1, dtype=np.int64)
        head_p = self.prefix_yield / head
        env = self.envelope
        if env is None:
            env = Envelope(n, c, self.prefix_yield, np.empty(0, np.int64), np.empty(0, np.float64))
        knots = self._knots(env) if n > lt else np.empty(0, np.int64)
        lb, ub = env.bounds(knots)
        env_lo, env_hi = np.minimum(lb, ub), np.maximum(lb, ub)
        band_lo, band_hi = self._promised_band(knots, env_lo, env_hi, env)
        arrays = exact_head(head_p, knots, np.sqrt(lb * ub), band_lo, band_hi, shared=False)
        columns = {
            "envelope_lower": np.concatenate([head_p, env_lo]),
            "envelope_upper": np.concatenate([head_p, env_hi]),
        }
        if not self.complete:
            flags.append(
                f"incomplete: AdaStrat still needs {self.missing} labels; this is an interim "
                "envelope without the final guarantee"
            )
        flags.extend(self._assumption_flags(env))
        if method.estimator == "hoeffding":
            basis = (
                f"each queried p a β-approximation by Hoeffding with s_K of eq. (5), assuming "
                f"p ≥ pmin = {method.pmin:g} at the queried ranks"
            )
        else:
            basis = (
                f"each queried p a β-approximation by {method.estimator} intervals at level "
                f"δ/(K·{method.schedule_levels})"
            )
        guarantee = (
            f"AdaStrat (Sabharwal & Xue 2018, Thm 3): precision = √(lb·ub) is within a factor "
            f"β(1+ε) = {method.beta:g}·{1 + method.epsilon:g} = {factor:.4f} of p(r) at every "
            f"rank, with probability ≥ 1 − δ = {1 - method.delta:g}, if p is (r̃={c.r_tilde}, "
            f"m={c.m})-weakly monotone; {basis}. Ranks ≤ l̃ = {c.l_tilde} are exact (their labels "
            f"are taken as noise-free). lower/upper are the promised band [lb/β, {self._upper_factor_text()}·ub] "
            f"around the envelope lb/ub of the estimates (columns envelope_lower/upper), carried "
            f"between knots by the yield; the step value is within a factor {ratio:.4g} of √(lb·ub)."
        )
        kind, guarantee = self._kind(flags, guarantee, knots, band_lo, band_hi)
        contradiction = self._labels_contradict(knots, band_lo, band_hi)
        if kind == "band" and contradiction:
            flags.append("premise-refuted: " + contradiction)
            kind, guarantee = (
                "approximation",
                (
                    f"approximation, no coverage claim: the labels themselves rule the band out "
                    f"({contradiction}); p is not weakly monotone enough for Theorem 3 here. "
                    + guarantee
                ),
            )
        return CurveEstimate(
            method=method.name,
            size=n,
            **arrays,
            kind=kind,
            guarantee=guarantee,
            queried=np.array(sorted(self.points), np.int64),
            annotations=self._annotations(),
            flags=tuple(flags),
            exact_prefix=int(lt),
            columns=columns,
        )

    def _labels_contradict(
        self, knots: np.ndarray, band_lo: np.ndarray, band_hi: np.ndarray
    ) -> str | None:
        """Where the labels known so far leave no precision inside the band: at a knot k the
        labelled ranks ≤ k fix P(k) ≤ k·p(k) ≤ k − Q(k) (P, Q their positives and negatives)
        with certainty, so a band outside that range misses p whatever the unlabelled ranks
        hold.  None when nothing contradicts it (or with a declared flip rate, whose band is
        about the true labels, not the given ones)."""
        from receval.curves.stratband import known_between

        known = self.source.known
        if self.method.eta or knots.size == 0 or known.ranks.size == 0:
            return None
        pos, neg = known_between(known, np.zeros_like(knots), knots)
        k = knots.astype(np.float64)
        lowest, highest = pos / k, (k - neg) / k
        bad = np.flatnonzero((band_hi < lowest - 1e-12) | (band_lo > highest + 1e-12))
        if not bad.size:
            return None
        j = int(bad[0])
        return (
            f"at rank {int(knots[j])} the band allows {band_lo[j]:.4f}...{band_hi[j]:.4f}, the "
            f"labels already fix {lowest[j]:.4f}...{highest[j]:.4f}; {bad.size} knots disagree"
        )

    def _kind(
        self,
        flags: list[str],
        guarantee: str,
        knots: np.ndarray,
        band_lo: np.ndarray,
        band_hi: np.ndarray,
    ) -> tuple[str, str]:
        """``band`` only when the premise was checked with labels and nothing refuted it."""
        noise = " The band is about the labels given" + (
            f", corrected for a declared flip rate η = {self.method.eta:g}."
            if self.method.eta
            else " (a wrong label moves the curve it bounds; declare a flip rate with eta)."
        )
        if any(f.startswith("weak-monotonicity-violated:") for f in flags):
            # The queried intervals refute the theorem's premise (confidence ≥ 1 − δ): no claim.
            return "approximation", (
                "approximation, no coverage claim: the queried intervals show that p is not "
                "weakly monotone (see flags), so Theorem 3 does not apply. " + guarantee
            )
        if self.prefix_rising and knots.size and not self.method.eta:
            return "approximation", (
                "approximation, no coverage claim: Theorem 3 needs weak monotonicity from r̃ on, "
                "and the exact prefix labels show p still rising at the end of the prefix (see "
                "flags). " + guarantee
            )
        if self.check is None or knots.size == 0:
            reason = "no labels were spent on checking it" if knots.size else ""
            if not reason:
                return "band", guarantee + noise
            return "approximation", (
                "approximation, no coverage claim: Theorem 3 needs weak monotonicity, and "
                f"{reason} (check_labels = 0). " + guarantee
            )
        assert self.prefix_yield is not None
        verdict = premise_check(
            self.check,
            self.l_tilde,
            self.size,
            float(self.prefix_yield[-1]),
            (knots, band_lo, band_hi),
            self.method.delta,
            self.method.eta,
        )
        count = self.check[0].size
        if verdict.refuted is not None:
            flags.append("premise-refuted: " + verdict.refuted)
            return "approximation", (
                f"approximation, no coverage claim: the premise check refutes the band "
                f"({verdict.refuted}); p is not weakly monotone enough for Theorem 3 here. "
                + guarantee
            )
        if verdict.coarseness > 1.0:
            return "approximation", (
                f"approximation, no coverage claim: Theorem 3 needs weak monotonicity, which "
                f"the labels cannot confirm at the band's resolution: the check with {count} "
                f"uniform tail labels found no contradiction, but its intervals are up to "
                f"{verdict.coarseness:.1f} times as wide as the band, so it only sees larger "
                f"misses (about {verdict.labels_for_resolution()} check labels would match the "
                "band). " + guarantee
            )
        return "band", (
            guarantee + f" The premise was checked at the band's resolution: {count} uniform "
            "tail labels found no contradiction (exact test at level δ; a check cannot prove "
            "it)." + noise
        )

    def _upper_factor(self) -> float:
        """β for the interval estimators; 1/(2 − β) for Hoeffding, whose |p̃ − p| ≤ (β − 1)p
        gives p ≤ p̃/(2 − β) (slightly more than β·p̃)."""
        beta = self.method.beta
        if self.method.estimator == "hoeffding":
            return 1.0 / (2.0 - beta) if beta < 2 else math.inf
        return beta

    def _upper_factor_text(self) -> str:
        return "β" if self.method.estimator != "hoeffding" else "ub/(2−β) i.e. 1/(2−β)"

    def _interval_envelope(self, knots: np.ndarray, env: Envelope) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on p(v) from the queried *intervals* (level δ/K each) and the exact prefix.

        Valid under weak monotonicity alone: unlike [lb/β, β·ub] they do not need p ≥ p_min
        (Hoeffding's interval is additive and holds whatever p is).
        """
        points = [self.points[r] for r in sorted(self.points)]
        lt = self.l_tilde
        ys = np.array([st.rank for st in points] + [lt], np.int64)
        lo = np.array([st.lower for st in points] + [env.p_l])
        hi = np.array([st.upper for st in points] + [env.p_l])
        out_lo = np.empty(knots.shape)
        out_hi = np.empty(knots.shape)
        for start in range(0, knots.size, 4096):
            v = knots[start : start + 4096]
            a, b = _relaxed_bounds(v, ys, lo, hi, self.constants.m)
            out_lo[start : start + 4096] = np.maximum(a, env.yield_l / v)
            out_hi[start : start + 4096] = np.minimum(b, _prefix_ub(env, v))
        return out_lo, out_hi

    def _promised_band(
        self, knots: np.ndarray, env_lo: np.ndarray, env_hi: np.ndarray, env: Envelope
    ) -> tuple[np.ndarray, np.ndarray]:
        """[lb/β, β·ub] at the knots (Theorem 3's band), held over each step [x, x') by the yield.

        Where p may lie below p_min (Hoeffding), the promised band is widened to the envelope of
        the queried intervals (:meth:`_interval_envelope`), which needs no p_min: the output is
        the hull of the two, so it contains the promised band and stays valid when p < p_min.
        C(k) = k·p(k) is non-decreasing and grows by at most one per rank, so with bounds
        lo(x) ≤ p(x) ≤ hi(x) at consecutive knots x < x': p(k) ≥ lo(x)·x/(x' − 1) and
        p(k) ≤ min((hi(x)·x + k − x)/k, hi(x')·x'/k) for x ≤ k < x' — no further assumption.
        """
        if knots.size == 0:
            return env_lo, env_hi
        beta = self.method.beta
        lo = env_lo / beta
        hi = np.minimum(env_hi * self._upper_factor(), 1.0)
        if self.points:
            i_lo, i_hi = self._interval_envelope(knots, env)
            lo = np.minimum(lo, i_lo)
            hi = np.maximum(hi, i_hi)
        x = knots.astype(np.float64)
        last = np.append(x[1:] - 1.0, x[-1])
        lower = lo * x / last
        grow = (hi * x + (last - x)) / last
        nxt = np.append(hi[1:] * x[1:], np.inf) / x
        upper = np.minimum(np.minimum(grow, nxt), 1.0)
        return np.minimum(lower, upper), upper

    def _assumption_flags(self, env: Envelope) -> list[str]:
        """Detectable failures of the assumptions (weak monotonicity, p ≥ pmin, budget)."""
        assert self.prefix_yield is not None
        points = [self.points[r] for r in sorted(self.points)]
        return [
            *self._prefix_monotonicity_flags(),
            *self._interval_monotonicity_flags(env, points),
            *self._precision_flags(points),
        ]

    def _prefix_monotonicity_flags(self) -> list[str]:
        """1. Inside the exact prefix weak monotonicity can be checked exactly.  The assumption
        is needed from r̃ on, and the default l̃ = r̃ leaves no pair there, so the check covers
        the upper half of the prefix: failures there are the best evidence the labels can give
        that the assumption fails beyond l̃."""
        c = self.constants
        assert self.prefix_yield is not None
        lt = self.l_tilde
        start = max(1, min(c.r_tilde, lt // 2))
        if not (self.size > lt and lt >= start + c.m):
            return []
        p = self.prefix_yield / np.arange(1, lt + 1)
        suffix_max = np.maximum.accumulate(p[::-1])[::-1]
        r1 = np.arange(start, lt - c.m + 1)
        rise = suffix_max[r1 - 1 + c.m] / np.maximum(p[r1 - 1], 1e-300) - 1.0
        bad = r1[rise > 1e-3]  # below 0.1 % (rounding-level) a violation cannot matter
        if not bad.size:
            return []
        # p still rising at the last rank checked: the premise is contradicted where it must
        # start (a noisy but falling list shows its violations earlier in the prefix)
        self.prefix_rising = bool(bad[-1] == r1[-1])
        return [
            f"weak-monotonicity-violated-in-prefix: p(r1) < p(r2) "
            f"with r2 ≥ r1 + m (m = {c.m}), by up to {rise.max():.2%}, at {bad.size} ranks r1 in "
            f"{int(bad[0])}..{int(bad[-1])} (checked {start}..{lt - c.m}); the band "
            "assumes weak monotonicity beyond r̃ and may miss p there"
        ]

    def _interval_monotonicity_flags(self, env: Envelope, points: list[_PointState]) -> list[str]:
        """2. No weakly monotone p fits all intervals (rigorous, w.p. ≥ 1 − δ)."""
        c = self.constants
        lt = self.l_tilde
        if not (points and env.candidates.size):
            return []
        ys = np.array([st.rank for st in points] + [lt], np.int64)
        lo = np.array([st.lower for st in points] + [env.p_l])
        hi = np.array([st.upper for st in points] + [env.p_l])
        v = env.candidates[env.candidates > lt]
        if not v.size:
            return []
        lb, ub = _relaxed_bounds(v, ys, lo, hi, c.m)
        ub = np.minimum(ub, _prefix_ub(env, v))
        bad = v[lb > ub * (1 + 1e-12)]
        if not bad.size:
            return []
        return [
            f"weak-monotonicity-violated: no (r̃={c.r_tilde}, m={c.m})-weakly "
            f"monotone precision function fits the queried intervals near ranks "
            f"{int(bad[0])}..{int(bad[-1])} (confidence ≥ 1 − δ); the guarantee "
            "fails there"
        ]

    def _precision_flags(self, points: list[_PointState]) -> list[str]:
        """3. p_min (Hoeffding) or unresolved schedule intervals."""
        method = self.method
        if method.estimator == "hoeffding":
            low = [st for st in points if st.value < method.pmin]
            if not low:
                return []
            worst = min(low, key=lambda st: st.value)
            return [
                f"pmin-violated: estimated p < pmin = {method.pmin:g} at {len(low)} queried "
                f"rank(s) (lowest {worst.value:.3f} at rank {worst.rank}); eq. (5) assumes "
                "p ≥ pmin, so β is not guaranteed there (try estimator='clopper-pearson')"
            ]
        loose = [st for st in points if not st.resolved]
        if not loose:
            return []
        worst = max(loose, key=lambda st: st.upper / max(st.lower, 1e-300))
        factor = math.sqrt(worst.upper / max(worst.lower, 1e-300))
        return [
            f"precision-not-resolved: at {len(loose)} queried rank(s) the interval did "
            f"not reach ratio β² within the sample-size schedule (worst: rank {worst.rank}, "
            f"factor {factor:.3f} instead of β = {method.beta:g})"
        ]


def premise_check(
    check: tuple[np.ndarray, np.ndarray],
    l_tilde: int,
    size: int,
    prefix_yield: float,
    band: tuple[np.ndarray, np.ndarray, np.ndarray],
    delta: float,
    eta: float = 0.0,
) -> PremiseCheck:
    """Does a uniform sample of the tail contradict the band, and could it see a miss?

    ``check`` holds M distinct ranks drawn uniformly without replacement from (l̃, N] and their
    labels.  At ranks k = ⌈l̃·1.1^i⌉ and N (G ranks), the number of drawn positives in (l̃, k]
    is hypergeometric given the tail yield C(k) − C(l̃), so the exact interval [L_k, U_k] of
    :func:`receval.curves.tailband.hypergeometric_bounds` at α = δ/(2G) holds at all G ranks
    with probability ≥ 1 − δ.  The band says k·lower(k) ≤ C(k) ≤ k·upper(k); when the two
    intervals are disjoint at some k the band is wrong there (or an event of probability ≤ δ
    happened) and the premise it rests on is refuted.  With a declared flip rate η the noisy
    count is corrected, E[ṽ] = η + (1 − 2η)v, and the noise's own spread is added (Hoeffding,
    √((k − l̃) ln(4G/δ)/2)), so the test stays at level δ.  Passing the test does not prove the
    premise; it has power against the failures that move the curve beyond the band by more
    than the check's own interval width (``coarseness`` compares the two).
    """
    from receval.curves.tailband import hypergeometric_bounds

    ranks, labels = check
    tail = size - l_tilde
    ratio = 1.1
    count = math.ceil(math.log(size / l_tilde) / math.log(ratio)) + 1
    grid = np.ceil(l_tilde * ratio ** np.arange(1, count + 1, dtype=np.float64)).astype(np.int64)
    grid = np.unique(np.append(grid[grid < size], size))
    where = np.searchsorted(ranks, grid, side="right")
    cum = np.concatenate([[0.0], np.cumsum(labels)])[where]
    hits = np.rint(cum).astype(np.int64)
    span = (grid - l_tilde).astype(np.int64)
    alpha = delta / (2.0 * grid.size)
    low, high = hypergeometric_bounds(hits, hits, tail, ranks.size, span, alpha)
    low, high = low.astype(np.float64), high.astype(np.float64)
    if eta:
        slack = np.sqrt(span * math.log(4.0 * grid.size / delta) / 2.0)
        low = (low - slack - eta * span) / (1.0 - 2.0 * eta)
        high = (high + slack - eta * span) / (1.0 - 2.0 * eta)
    knots, band_lo, band_hi = band
    idx = np.clip(np.searchsorted(knots, grid, side="right") - 1, 0, knots.size - 1)
    k = grid.astype(np.float64)
    claim_lo = k * band_lo[idx] - prefix_yield
    claim_hi = k * band_hi[idx] - prefix_yield
    bad = np.flatnonzero((high < claim_lo - 1e-6) | (low > claim_hi + 1e-6))
    coarse = float(np.max((high - low) / np.maximum(claim_hi - claim_lo, 1e-9)))
    if bad.size == 0:
        return PremiseCheck(None, coarse, ranks.size)
    i = int(bad[0])
    return PremiseCheck(
        f"at rank {int(grid[i])} the band allows precision {band_lo[idx[i]]:.4f}..."
        f"{band_hi[idx[i]]:.4f}, a uniform sample of {ranks.size} tail labels allows "
        f"{(prefix_yield + max(low[i], 0.0)) / k[i]:.4f}...{(prefix_yield + high[i]) / k[i]:.4f} "
        f"(exact, level δ over {grid.size} ranks; {bad.size} ranks disagree)",
        coarse,
        ranks.size,
    )


@dataclass(frozen=True)
class PremiseCheck:
    """What :func:`premise_check` found: ``refuted`` (why, or None) and ``coarseness``, the
    largest ratio of the check's interval width to the band's width over the check ranks (the
    check can only see misses of about its own width: ≤ 1 means it works at the band's
    resolution)."""

    refuted: str | None
    coarseness: float
    labels: int

    def labels_for_resolution(self) -> int:
        """About the check labels whose intervals would be as narrow as the band (∝ 1/√M)."""
        return math.ceil(self.labels * max(self.coarseness, 1.0) ** 2)


def _prefix_ub(env: Envelope, v: np.ndarray) -> np.ndarray:
    """The exact prefix's part of ub at ranks v > l̃."""
    out = np.full(v.shape, env.prefix_const)
    in_window = v <= env.l_tilde + env.window.size
    out[in_window] = env.window_ub[v[in_window] - env.l_tilde - 1]
    return np.minimum(out, 1.0)
