"""Exact precision functions, the geometric grid, step functions and weak-monotone envelopes.

Notation follows Sabharwal & Sedghi (2017), "How good are my predictions?" (PAULA paper) and
Sabharwal & Xue (2018), "Adaptive stratified sampling for precision-recall estimation"
(AdaStrat paper).  Ranks are 1-based: rank 1 is the most confident item of a ranked list
``T = (t_1, ..., t_N)`` with 0/1 labels ``v(t_i)``.

* :func:`precision_function` — p(r) = (1/r) Σ_{i≤r} v(t_i), PAULA eq. (1).  Exact.
* :func:`local_precision` — the Δ-precision p_Δ(r), PAULA Definition 1, eq. (6).  Exact.
* :func:`precision_at` — both, at chosen ranks of a (possibly huge) ranked list, streaming its
  labels in chunks (O(chunk) memory).  Exact.
* :class:`GeometricGrid` / :func:`geometric_grid` — the points g_j = ⌈(1+ε)^j⌉ (Definition 4) and
  the derived constants r̃, ℓ, m, γ, L of PAULA §4.2.
* :func:`step_function` — step^f_{ε,ℓ} of PAULA Definition 5.
* :func:`envelope_upper`, :func:`envelope_lower`, :func:`envelope` — ub and lb of AdaStrat
  Definition 2 and their intersection over several known points, eqs. (3)-(4).  Guaranteed
  bounds on p under (r̃, m)-weak monotonicity (AdaStrat Theorem 2).
* :func:`weak_monotonicity_violations`, :func:`strong_monotonicity_violations` — exact checks of
  the assumptions A.1 / A.2 on fully labelled lists (for tests and simulations).

Nothing here allocates an array of the size of a ranked list unless the caller passed the labels.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = [
    "GeometricGrid",
    "envelope",
    "envelope_lower",
    "envelope_upper",
    "geometric_grid",
    "knot_interval_bounds",
    "local_precision",
    "precision_at",
    "precision_function",
    "step_function",
    "strong_monotonicity_violations",
    "weak_monotonicity_violations",
]


class _LabelStream(Protocol):
    size: int

    def iter_labels(
        self, chunk_size: int = ..., start: int = ..., stop: int | None = ...
    ) -> Iterator[tuple[int, np.ndarray]]: ...


# ----------------------------------------------------------------------------- exact p, p_Δ


def monotone_from(window: int, epsilon: float) -> int:
    """r̃ = ⌈(Δ+2)/ε⌉, the rank from which PAULA §4.2 (and AdaStrat, LogStrat's α) assume
    monotonicity, with ε taken at the decimal value a user typed (⌈102/0.03⌉ = 3400 exactly, not
    3401 from the binary nearest 0.03)."""
    from fractions import Fraction

    return math.ceil((window + 2) / Fraction(repr(float(epsilon))))


def _as_labels(labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels, dtype=np.float64)
    if labels.ndim != 1:
        raise ValueError("labels must be a 1-d array (label of rank 1 first)")
    return labels


def _as_ranks(ranks: np.ndarray | None, size: int) -> np.ndarray:
    if ranks is None:
        return np.arange(1, size + 1, dtype=np.int64)
    ranks = np.asarray(ranks, dtype=np.int64)
    if ranks.size and (ranks.min() < 1 or ranks.max() > size):
        raise ValueError(f"ranks must lie in 1..{size}")
    return ranks


def precision_function(labels: np.ndarray, ranks: np.ndarray | None = None) -> np.ndarray:
    """Exact precision function p(r) of a fully labelled ranked list (PAULA eq. (1)).

    Parameters
    ----------
    labels
        0/1 labels in rank order (``labels[0]`` is rank 1).
    ranks
        1-based ranks at which to evaluate p (any order); all ranks when omitted.

    Returns
    -------
    numpy.ndarray
        p(r) = (1/r) Σ_{i≤r} v(t_i) at ``ranks``.  Exact (no estimation involved).
    """
    labels = _as_labels(labels)
    ranks = _as_ranks(ranks, labels.size)
    yield_ = np.cumsum(labels)
    return yield_[ranks - 1] / ranks


def local_precision(labels: np.ndarray, window: int, ranks: np.ndarray | None = None) -> np.ndarray:
    """Exact Δ-precision p_Δ(r) (PAULA Definition 1, eq. (6)).

    p_Δ(r) = p(r) when r ≤ Δ, else the mean label of ranks r−Δ+1..r (a trailing window).

    Parameters
    ----------
    labels
        0/1 labels in rank order.
    window
        Δ ≥ 1.
    ranks
        1-based ranks (all ranks when omitted).
    """
    if window < 1:
        raise ValueError("window must be ≥ 1")
    labels = _as_labels(labels)
    ranks = _as_ranks(ranks, labels.size)
    yield_ = np.concatenate([[0.0], np.cumsum(labels)])
    lo = np.maximum(ranks - window, 0)
    return (yield_[ranks] - yield_[lo]) / (ranks - lo)


def precision_at(
    ranked: _LabelStream,
    ranks: np.ndarray,
    window: int | None = None,
    chunk_size: int = 1 << 20,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Exact p(r) (and p_Δ(r) if ``window``) at chosen ranks of a ranked list, streamed.

    The labels are read in chunks of ``chunk_size`` through ``ranked.iter_labels`` up to the
    largest requested rank, so memory is O(chunk_size + len(ranks)) whatever the list size.
    Time is linear in the largest requested rank.  Exact (PAULA eqs. (1) and (6)).

    Returns
    -------
    (p, p_window)
        Arrays aligned with ``ranks``; ``p_window`` is None when ``window`` is None.
    """
    ranks = np.asarray(ranks, dtype=np.int64)
    if ranks.size == 0:
        empty = np.empty(0, np.float64)
        return empty, (None if window is None else empty.copy())
    if ranks.min() < 1 or ranks.max() > ranked.size:
        raise ValueError(f"ranks must lie in 1..{ranked.size}")
    if window is not None and window < 1:
        raise ValueError("window must be ≥ 1")
    # Cumulative yields Y(x) are needed at x = r and, for p_Δ, at x = max(r − Δ, 0).
    wanted = [ranks]
    if window is not None:
        wanted.append(np.maximum(ranks - window, 0))
    points, inverse = np.unique(np.concatenate(wanted), return_inverse=True)
    yields = np.zeros(points.size, np.float64)
    stop = int(points[-1])
    total = 0.0
    pos = int(np.searchsorted(points, 1))  # points equal to 0 keep yield 0
    if stop >= 1:
        for first, chunk in ranked.iter_labels(chunk_size=chunk_size, start=1, stop=stop):
            last = first + chunk.size - 1
            end = int(np.searchsorted(points, last, side="right"))
            if end > pos:
                cum = np.cumsum(chunk)
                yields[pos:end] = total + cum[points[pos:end] - first]
                pos = end
            total += float(chunk.sum())
            if pos >= points.size:
                break
    at = yields[inverse]
    p = at[: ranks.size] / ranks
    if window is None:
        return p, None
    lo = np.maximum(ranks - window, 0)
    p_window = (at[: ranks.size] - at[ranks.size :]) / (ranks - lo)
    return p, p_window


# ----------------------------------------------------------------------------- the grid


def _powers(base: float, exponents: np.ndarray) -> np.ndarray:
    """(1+ε)^j for integer j, always through the same floating-point routine."""
    return np.power(np.float64(base), np.asarray(exponents, dtype=np.float64))


def _ceil_log(base: float, value: float) -> int:
    """Smallest integer j ≥ 0 with base**j ≥ value (exact w.r.t. :func:`_powers`)."""
    if value <= 1:
        return 0
    j = max(math.ceil(math.log(value) / math.log(base)), 0)
    while j > 0 and _powers(base, np.array([j - 1]))[0] >= value:
        j -= 1
    while _powers(base, np.array([j]))[0] < value:
        j += 1
    return j


def _floor_log(base: float, value: float) -> int:
    """Largest integer j ≥ 0 with base**j ≤ value (value ≥ 1)."""
    if value < 1:
        raise ValueError("value must be ≥ 1")
    j = max(math.floor(math.log(value) / math.log(base)), 0)
    while _powers(base, np.array([j]))[0] > value:
        j -= 1
    while _powers(base, np.array([j + 1]))[0] <= value:
        j += 1
    return j


@dataclass(frozen=True)
class GeometricGrid:
    """The geometric points and constants of PAULA §4.2 for one list size.

    Attributes
    ----------
    size
        N, the number of ranked items.
    epsilon
        ε ∈ (0, 1].
    r_tilde
        r̃: ranks ≤ r̃ are annotated exhaustively (r̃ ≥ ⌈(Δ+2)/ε⌉ for PAULA).
    ell
        ℓ = ⌈log_{1+ε} r̃⌉.
    last
        L = ⌊log_{1+ε} N⌋ (may be < ℓ for tiny lists).
    m
        m = ⌊ε(1+ε)^ℓ − 1⌋, the weak-monotonicity distance.
    gamma
        γ = 1 + ε + (2+ε)/m (PAULA Lemma 4); ``inf`` when m ≤ 0.
    points
        g_ℓ, g_{ℓ+1}, …, g_L with g_j = ⌈(1+ε)^j⌉ (Definition 4), restricted to j ≤ L
        (only g_ℓ when L < ℓ).  O(L − ℓ) memory.
    """

    size: int
    epsilon: float
    r_tilde: int
    ell: int
    last: int
    m: int
    gamma: float
    points: np.ndarray

    @property
    def head(self) -> int:
        """g_ℓ capped at N: the ranks annotated exhaustively (1..head)."""
        return int(min(self.points[0], self.size))

    @property
    def knots(self) -> np.ndarray:
        """g_{ℓ+1}, …, g_L: the points queried after the head (L − ℓ of them)."""
        return self.points[1:]

    @property
    def queries(self) -> int:
        """L − ℓ (0 when the list ends before g_{ℓ+1})."""
        return int(self.points.size - 1)

    def knot_index(self, ranks: np.ndarray) -> np.ndarray:
        """Index into ``points`` of j = ⌊log_{1+ε} r⌋ for ranks r ≥ g_ℓ (Definition 5).

        For integer r, (1+ε)^j ≤ r ⇔ g_j ≤ r, so this is a search in ``points``.
        Ranks below g_ℓ give −1.
        """
        ranks = np.asarray(ranks, dtype=np.int64)
        return np.searchsorted(self.points, ranks, side="right") - 1


def geometric_grid(size: int, epsilon: float, r_tilde: int) -> GeometricGrid:
    """Build the :class:`GeometricGrid` for N = ``size`` (PAULA §4.2, Definition 4).

    ``r_tilde`` is typically ⌈(Δ+2)/ε⌉ (the PAULA paper's minimum).  Memory O(L − ℓ).
    """
    if not 0 < epsilon <= 1:
        raise ValueError("epsilon must lie in (0, 1]")
    if size < 1:
        raise ValueError("size must be ≥ 1")
    if r_tilde < 1:
        raise ValueError("r_tilde must be ≥ 1")
    base = 1.0 + float(epsilon)
    ell = _ceil_log(base, float(r_tilde))
    last = _floor_log(base, float(size))
    power_ell = float(_powers(base, np.array([ell]))[0])
    m = math.floor(epsilon * power_ell - 1.0)
    gamma = 1.0 + epsilon + (2.0 + epsilon) / m if m > 0 else math.inf
    exps = np.arange(ell, max(last, ell) + 1)
    points = np.ceil(_powers(base, exps)).astype(np.int64)
    return GeometricGrid(
        size=int(size),
        epsilon=float(epsilon),
        r_tilde=int(r_tilde),
        ell=ell,
        last=last,
        m=m,
        gamma=gamma,
        points=points,
    )


def step_function(
    grid: GeometricGrid,
    head_values: np.ndarray,
    knot_values: np.ndarray,
    ranks: np.ndarray,
) -> np.ndarray:
    """step^f_{ε,ℓ}(r) of PAULA Definition 5 at ``ranks``.

    f(r) for r ≤ g_ℓ and f(g_j) with j = ⌊log_{1+ε} r⌋ beyond.  ``head_values`` are f(1..g_ℓ)
    (length ``grid.head``) and ``knot_values`` are f(g_ℓ), …, f(g_L) (length
    ``grid.points.size``).  Evaluated only at the requested ranks.
    """
    head_values = np.asarray(head_values, np.float64)
    knot_values = np.asarray(knot_values, np.float64)
    ranks = np.asarray(ranks, np.int64)
    if head_values.size != grid.head or knot_values.size != grid.points.size:
        raise ValueError("head_values must cover 1..g_ℓ and knot_values g_ℓ..g_L")
    out = np.empty(ranks.shape, np.float64)
    in_head = ranks <= grid.head
    out[in_head] = head_values[ranks[in_head] - 1]
    idx = grid.knot_index(ranks[~in_head])
    out[~in_head] = knot_values[idx]
    return out


# ----------------------------------------------------------------------------- envelopes


def envelope_upper(v: np.ndarray, y, p_y, m: int) -> np.ndarray:
    """ub(v; y, p(y)) of AdaStrat Definition 2: the largest p(v) consistent with p(y).

    Cases (k = ⌊m·p(y)⌋):  p(y)y/v for v ≤ y;  (p(y)y + v − y)/v for y < v ≤ y + k;
    (p(y)y + k)/v for y + k < v ≤ y + m;  p(y) for v > y + m.
    A guaranteed upper bound on p(v) for v, y > r̃ when p is (r̃, m)-weak monotone
    (AdaStrat Theorem 2), and tight.  Broadcasts ``v`` against ``y``/``p_y`` (a matrix for
    ``v[:, None]`` and rows of points), the one implementation of the formula.
    """
    v = np.asarray(v, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    p_y = np.asarray(p_y, dtype=np.float64)
    k = np.floor(m * p_y)
    yield_y = p_y * y
    d = v - y
    out = np.where(
        d <= 0,
        yield_y / v,
        np.where(d <= k, (yield_y + d) / v, np.where(d <= m, (yield_y + k) / v, p_y)),
    )
    return np.minimum(out, 1.0)


def envelope_lower(v: np.ndarray, y, p_y, m: int) -> np.ndarray:
    """lb(v; y, p(y)) of AdaStrat Definition 2: the smallest p(v) consistent with p(y).

    Cases (k = ⌊m·p(y)⌋):  p(y) for v < y − m;  (p(y)y − k)/v for y − m ≤ v < y − k;
    (p(y)y + v − y)/v for y − k ≤ v < y;  p(y)y/v for v ≥ y.
    A guaranteed lower bound on p(v) for v, y > r̃ under (r̃, m)-weak monotonicity
    (AdaStrat Theorem 2), and tight.  Broadcasts like :func:`envelope_upper`.
    """
    v = np.asarray(v, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    p_y = np.asarray(p_y, dtype=np.float64)
    k = np.floor(m * p_y)
    yield_y = p_y * y
    d = v - y
    out = np.where(
        d < -m,
        p_y,
        np.where(d < -k, (yield_y - k) / v, np.where(d < 0, (yield_y + d) / v, yield_y / v)),
    )
    return np.maximum(out, 0.0)


def envelope(
    v: np.ndarray, ys: Iterable[float], p_ys: Iterable[float], m: int
) -> tuple[np.ndarray, np.ndarray]:
    """Envelope of all weak-monotone precision functions through known points.

    lb(v) = max_j lb(v; y_j, p(y_j)) and ub(v) = min_j ub(v; y_j, p(y_j)) (AdaStrat
    eqs. (3)-(4)), evaluated only at the ranks ``v`` (memory O(len(v))).  Guaranteed bounds
    on p(v) when p is (r̃, m)-weak monotone and v, y_j > r̃ (AdaStrat Theorem 2).  With
    estimated p(y_j) the envelope is only as good as the estimates.

    Returns
    -------
    (lb, ub)
        Arrays aligned with ``v`` (lb = 0, ub = 1 when no point is given).
    """
    v = np.asarray(v, dtype=np.float64)
    lb = np.zeros(v.shape, np.float64)
    ub = np.ones(v.shape, np.float64)
    for y, p_y in zip(ys, p_ys, strict=True):
        lb = np.maximum(lb, envelope_lower(v, float(y), float(p_y), m))
        ub = np.minimum(ub, envelope_upper(v, float(y), float(p_y), m))
    return lb, ub


def knot_interval_bounds(
    points: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    m: int,
    size: int,
    weak_monotone: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on p over each step [g_j, g_{j+1}) from intervals known at the grid points.

    Given p(g_j) ∈ [low_j, high_j] at increasing points g_j (the last step runs to N =
    ``size``), returns constants (lower_j, upper_j) with lower_j ≤ p(r) ≤ upper_j for every r
    in the step.  Two facts are combined:

    * the yield r·p(r) is non-decreasing and grows by at most 1 per rank (no assumption):
      p(r) ≥ low_j·g_j / r_max and p(r) ≤ min(high_{j+1}·g_{j+1}, high_j·g_j + r − g_j) / r;
    * (r̃, m)-weak monotonicity (PAULA A.1, assumed for g_j ≥ r̃): the single-point envelope of
      AdaStrat Definition 2 maximised over the step gives
      p(r) ≤ high_j·(g_j + m)/(g_j + m·high_j) and, from the next point,
      p(r) ≥ low_{j+1}·(g_{j+1} − m)/(g_{j+1} − m·low_{j+1}).

    These are the bounds behind PAULA Theorem 1 / Corollary 1 (which state them as a (1+ε)
    factor); they are guaranteed whenever the knot intervals are and A.1 holds.  With
    ``weak_monotone=False`` only the first fact is used: the bounds then hold whenever the knot
    intervals do, with no assumption on p (at most a factor g_{j+1}/g_j wider).
    """
    g = np.asarray(points, dtype=np.float64)
    low = np.clip(np.asarray(low, dtype=np.float64), 0.0, 1.0)
    high = np.clip(np.asarray(high, dtype=np.float64), 0.0, 1.0)
    if not (g.size == low.size == high.size) or g.size == 0:
        raise ValueError("points, low and high must be non-empty and of equal length")
    r_max = np.append(g[1:] - 1.0, float(size))
    r_max = np.maximum(r_max, g)
    # Lower: yield monotonicity from this point.
    lower = low * g / r_max
    # Upper: growth by at most one positive per rank, and A.1 (envelope of this point).
    upper = np.minimum((high * g + r_max - g) / r_max, 1.0)
    if weak_monotone:
        upper = np.minimum(upper, high * (g + m) / (g + m * high))
    if g.size > 1:
        g_next, low_next, high_next = g[1:], low[1:], high[1:]
        upper[:-1] = np.minimum(upper[:-1], high_next * g_next / g[:-1])
        # Yield monotone backwards: C(r) ≥ C(g_{j+1}) − (g_{j+1} − r) for r in the step.
        lower[:-1] = np.maximum(lower[:-1], (low_next * g_next - (g_next - g[:-1])) / g[:-1])
        if not weak_monotone:
            return np.clip(lower, 0.0, 1.0), np.clip(upper, 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            from_next = low_next * (g_next - m) / (g_next - m * low_next)
        from_next = np.where(g_next - m * low_next > 0, from_next, 0.0)
        lower[:-1] = np.maximum(lower[:-1], from_next)
    return np.clip(lower, 0.0, 1.0), np.clip(upper, 0.0, 1.0)


# ----------------------------------------------------------------------------- assumption checks


def weak_monotonicity_violations(labels: np.ndarray, m: int, r_tilde: int) -> np.ndarray:
    """Ranks r₁ ≥ r̃ at which (r̃, m)-weak monotonicity fails (PAULA A.1, AdaStrat Def. 1).

    p is (r̃, m)-weakly monotone when p(r₁) ≥ p(r₂) for all r₁ ≥ r̃ and r₂ ≥ r₁ + m.  For each
    r₁ this is p(r₁) ≥ max_{r₂ ≥ r₁+m} p(r₂), a suffix maximum, so the check is exact and
    O(N) on a fully labelled list.  Returns the violating r₁ (empty when the assumption holds).
    """
    labels = _as_labels(labels)
    n = labels.size
    p = precision_function(labels)
    if n < r_tilde + m:
        return np.empty(0, np.int64)
    suffix_max = np.maximum.accumulate(p[::-1])[::-1]  # suffix_max[i] = max p[i:]
    r1 = np.arange(r_tilde, n - m + 1, dtype=np.int64)
    bad = p[r1 - 1] < suffix_max[r1 - 1 + m]
    return r1[bad]


def strong_monotonicity_violations(
    labels: np.ndarray, window: int, points: np.ndarray
) -> np.ndarray:
    """Consecutive point pairs where the local-density sandwich used by PAULA fails.

    PAULA's proof of Lemma 3 uses (Δ, m)-monotonicity (A.2) only in the form
    p_Δ(g_{j+1}) ≤ (Σ_{g_j < i ≤ g_{j+1}} v(t_i)) / (g_{j+1} − g_j) ≤ p_Δ(g_j) for consecutive
    grid points.  (Definition 3 prints the middle term as an average of p(r); the proof needs
    the average label, which we check.)  Returns the indices j (into ``points``) whose pair
    (points[j], points[j+1]) violates it; empty when Lemma 3's premise holds.  Exact.
    """
    labels = _as_labels(labels)
    points = np.asarray(points, dtype=np.int64)
    if points.size < 2:
        return np.empty(0, np.int64)
    yield_ = np.concatenate([[0.0], np.cumsum(labels)])
    p_window = local_precision(labels, window, points)
    stratum = (yield_[points[1:]] - yield_[points[:-1]]) / np.diff(points)
    tol = 1e-12
    bad = (p_window[1:] > stratum + tol) | (stratum > p_window[:-1] + tol)
    return np.flatnonzero(bad)
