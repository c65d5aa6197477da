"""LogStrat: logarithmic stratified sampling (PAULA paper, Algorithm 1, §4.4.1).

Sabharwal & Sedghi (2017).  The head t_1 … t_{g_ℓ} is annotated exhaustively.  Then p is
estimated at the geometric points g_{ℓ+1}, …, g_L from a sample X_k of s uniform draws
(with replacement) from 1..g_k, where

    s = ⌈ ln((L − ℓ)/(δ/2)) / (2 (β − 1)² p_min²) ⌉,

and samples are reused: X_{k+1} keeps each draw of X_k with probability g_k/g_{k+1} and adds
s − |kept| fresh draws from the stratum g_k + 1 … g_{k+1}.  Every X_k is then s i.i.d. uniform
draws from 1..g_k, so q(g_k) = S_k/s is unbiased and, by Hoeffding's inequality with a union
bound over the L − ℓ points, |q(g_k) − p(g_k)| < t = √(ln(2(L−ℓ)/δ)/(2s)) ≤ (β−1)·p_min at
all points simultaneously with probability ≥ 1 − δ (Lemma 1).  Under weak monotonicity A.1
the step function of q is then a β(1+ε)-approximation of p wherever p ≥ p_min (Theorem 2).

What :meth:`LogStrat.estimate` returns
--------------------------------------
* ranks 1..g_ℓ: exact p(r);
* ``precision`` at g_k: q(g_k) = S_k/s held constant to the next point (step^q, Def. 5);
* ``lower``/``upper``: the simultaneous Hoeffding intervals q(g_k) ± t at the points, carried
  over each step with :func:`~receval.curves.precision_function.knot_interval_bounds` using
  only the monotone yield (C(r) = r·p(r) is non-decreasing and grows by at most one per rank),
  not A.1.  Together they hold at every rank with probability ≥ 1 − δ for *every* list — no
  monotonicity assumption; the half-width t needs no assumption on p_min (p_min only sets s);
* ``flags``: an interval above an earlier one (a rise that A.1 forbids, detected at confidence
  1 − δ), and intervals entirely below p_min (the relative guarantee then does not apply).

Randomness: the draws of stratum k come from a Generator seeded with (seed, k), so ``plan``
is a deterministic function of (parameters, size, known) and re-planning reproduces them.
Memory O(s + number of draws) = O(log N · log log N).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from receval.curves.base import (
    CurveEstimate,
    Labels,
    Oracle,
    check_grid_parameters,
    run_to_completion,
    staged_plan,
)
from receval.curves.precision_function import (
    GeometricGrid,
    geometric_grid,
    knot_interval_bounds,
    monotone_from,
)

__all__ = ["LogStrat", "logstrat_sample_size"]

_STREAM = 0x4C53  # "LS": keeps LogStrat's random streams apart from other methods'


def logstrat_sample_size(points: int, delta: float, beta: float, pmin: float) -> int:
    """s = ⌈ln(points/(δ/2)) / (2(β−1)² p_min²)⌉ (PAULA Alg. 1; Hoeffding eq. (2) + union bound)."""
    if points < 1:
        return 0
    return math.ceil(math.log(points / (delta / 2)) / (2 * (beta - 1) ** 2 * pmin**2))


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """Distinct values of an already sorted array."""
    if values.size == 0:
        return values
    return values[np.concatenate([[True], values[1:] != values[:-1]])]


@dataclass(frozen=True)
class LogStrat:
    """LogStrat (PAULA paper, Algorithm 1) with its parameters and a seed.

    Parameters
    ----------
    epsilon
        ε ∈ (0, 1] (default 0.03).
    window
        Δ, used only for the default r̃ = ⌈(Δ+2)/ε⌉, so that LogStrat and PAULA share the
        same grid (as in AdaStrat Tables 1-2).
    r_tilde
        r̃ (default as above).
    delta
        δ: the estimate holds at all points with probability ≥ 1 − δ.
    pmin
        p_min, a lower bound on p assumed when sizing the samples.
    beta
        β > 1, the per-point approximation factor; ``None`` uses PAULA's γ, which is the
        setting that reproduces AdaStrat Table 2 exactly (β = 1.05 gives ~1% fewer).
    seed
        Seed of all random draws.
    """

    epsilon: float = 0.03
    window: int = 100
    r_tilde: int | None = None
    delta: float = 0.05
    pmin: float = 0.5
    beta: float | None = 1.05
    seed: int = 0
    name: ClassVar[str] = "logstrat"

    def __post_init__(self) -> None:
        check_grid_parameters(self.epsilon, delta=self.delta)
        if not 0 < self.pmin <= 1:
            raise ValueError("pmin must lie in (0, 1]")
        if self.beta is not None and self.beta <= 1:
            raise ValueError("beta must be > 1")
        if self.r_tilde is None:
            object.__setattr__(self, "r_tilde", monotone_from(self.window, self.epsilon))
        elif self.r_tilde < 1:
            raise ValueError("r_tilde must be ≥ 1")

    # -- design ------------------------------------------------------------------------

    def grid(self, size: int) -> GeometricGrid:
        assert self.r_tilde is not None
        return geometric_grid(size, self.epsilon, self.r_tilde)

    def beta_for(self, grid: GeometricGrid) -> float:
        """β, or γ of the grid when ``beta`` is None."""
        return grid.gamma if self.beta is None else float(self.beta)

    def sample_size(self, grid: GeometricGrid) -> int:
        """s of Algorithm 1 for this grid."""
        return logstrat_sample_size(grid.queries, self.delta, self.beta_for(grid), self.pmin)

    def halfwidth(self, grid: GeometricGrid) -> float:
        """t = √(ln(2(L−ℓ)/δ)/(2s)): simultaneous Hoeffding half-width at the points."""
        s = self.sample_size(grid)
        if s == 0:
            return 0.0
        return math.sqrt(math.log(2 * grid.queries / self.delta) / (2 * s))

    def _rng(self, k: int) -> np.random.Generator:
        return np.random.default_rng(np.random.SeedSequence([self.seed, _STREAM, k]))

    def _transitions(self, grid: GeometricGrid) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """For k = ℓ..L−1: (kept mask over X_k, fresh draws in g_k+1..g_{k+1}) of Alg. 1."""
        s = self.sample_size(grid)
        points = grid.points
        for i in range(grid.queries):
            g_k, g_next = int(points[i]), int(points[i + 1])
            rng = self._rng(grid.ell + i + 1)
            kept = rng.random(s) < g_k / g_next
            fresh = rng.integers(g_k + 1, g_next + 1, size=s - int(kept.sum()), dtype=np.int64)
            yield kept, fresh

    def _initial(self, grid: GeometricGrid) -> np.ndarray:
        """X_ℓ: s uniform draws from 1..g_ℓ (all inside the exhaustively labelled head)."""
        rng = self._rng(grid.ell)
        return rng.integers(1, grid.head + 1, size=self.sample_size(grid), dtype=np.int64)

    def _fresh_ranks(self, grid: GeometricGrid) -> np.ndarray:
        # Strata are disjoint and increasing, so sorting each one sorts the whole.
        parts = [np.sort(fresh) for _, fresh in self._transitions(grid)]
        if not parts:
            return np.empty(0, np.int64)
        return _sorted_unique(np.concatenate(parts))

    def plan(self, size: int, known: Labels) -> np.ndarray:
        """Ranks to label now: first 1..g_ℓ, then every fresh stratified draw (deduplicated)."""
        grid = self.grid(size)
        head = np.arange(1, grid.head + 1, dtype=np.int64)
        return staged_plan(known, head, lambda: self._fresh_ranks(grid))

    def budget(self, size: int) -> dict[str, object]:
        """Plan size without labels.

        ``annotations`` is PAULA Theorem 2's count, ⌈g_ℓ + ε(L−ℓ)/(2(β−1)²(1+ε)p_min²) ·
        ln((L−ℓ)/(δ/2))⌉ — the number of label *draws* (AdaStrat Table 2 uses β = γ).  Draws are
        with replacement, so the number of distinct items to label is smaller:
        ``expected_distinct`` is its exact expectation, ``expected_draws`` the exact expected
        number of draws of Algorithm 1 (integer s, actual grid).
        """
        grid = self.grid(size)
        beta = self.beta_for(grid)
        k = grid.queries
        s = self.sample_size(grid)
        head = grid.head
        if k > 0:
            theorem = head + self.epsilon * k / (
                2 * (beta - 1) ** 2 * (1 + self.epsilon) * self.pmin**2
            ) * math.log(k / (self.delta / 2))
            g = grid.points.astype(np.float64)
            share = 1.0 - g[:-1] / g[1:]
            width = np.diff(g)
            draws = head + s * float(share.sum())
            distinct = head + float(np.sum(width * (1.0 - np.power(1.0 - share / width, s))))
        else:
            theorem = draws = distinct = float(head)
        return {
            "method": self.name,
            "size": int(size),
            "queries": int(k),
            "annotations": math.ceil(theorem - 1e-9),
            "expected_draws": draws,
            "expected_distinct": distinct,
            "head": int(head),
            "samples_per_point": int(s),
            "halfwidth": self.halfwidth(grid),
            "epsilon": self.epsilon,
            "window": self.window,
            "r_tilde": int(grid.r_tilde),
            "delta": self.delta,
            "beta": beta,
            "pmin": self.pmin,
            "ell": grid.ell,
            "L": grid.last,
            "m": grid.m,
            "gamma": grid.gamma,
            "approximation": beta * (1 + self.epsilon),
            "guarantee": (
                "with probability >= 1 - delta the intervals hold at every rank (no assumption); "
                "the beta(1+eps) approximation factor needs monotonicity assumption A.1"
            ),
        }

    # -- estimate ----------------------------------------------------------------------

    def estimate(self, size: int, known: Labels) -> CurveEstimate:
        """Step estimate with simultaneous (1 − δ) intervals (see the module docstring).

        Raises ``ValueError`` when a planned label is missing.
        """
        grid = self.grid(size)
        head_ranks = np.arange(1, grid.head + 1, dtype=np.int64)
        transitions = list(self._transitions(grid))
        fresh_all = (
            np.concatenate([f for _, f in transitions]) if transitions else np.empty(0, np.int64)
        )
        fresh_unique = _sorted_unique(np.sort(fresh_all))
        missing = known.missing(np.concatenate([head_ranks, fresh_unique])).size
        if missing:
            raise ValueError(f"{missing} planned labels are missing; call plan() and label them")
        head_p = np.cumsum(known.lookup(head_ranks)) / head_ranks
        annotations = int(head_ranks.size + fresh_unique.size)
        if grid.queries == 0:
            return self._head_only(size, grid, head_ranks, head_p, annotations)

        s = self.sample_size(grid)
        fresh_labels = known.lookup(fresh_all)
        current = known.lookup(self._initial(grid))
        q = np.empty(grid.queries, np.float64)
        start = 0
        for i, (kept, fresh) in enumerate(transitions):
            new = fresh_labels[start : start + fresh.size]
            start += fresh.size
            current = np.concatenate([current[kept], new])
            q[i] = current.sum() / s
        t = self.halfwidth(grid)
        points = grid.points
        p_head = head_p[-1]
        low = np.concatenate([[p_head], np.maximum(q - t, 0.0)])
        high = np.concatenate([[p_head], np.minimum(q + t, 1.0)])
        lower_k, upper_k = knot_interval_bounds(
            points, low, high, grid.m, size, weak_monotone=False
        )
        ranks = np.concatenate([head_ranks[:-1], points])
        precision = np.concatenate([head_p, q])
        lower = np.concatenate([head_p[:-1], lower_k])
        upper = np.concatenate([head_p[:-1], upper_k])
        beta = self.beta_for(grid)
        guarantee = (
            f"with probability >= {1 - self.delta:g}: p lies in [lower, upper] at every rank "
            "(no monotonicity assumed: yield interpolation between points); Hoeffding half-width "
            f"{t:.4f} at the queried ranks (union bound); step estimate is a "
            f"{beta * (1 + self.epsilon):.4f}-approximation where p >= pmin "
            "if A.1 holds (PAULA Lemma 1, Theorem 2); exact for ranks <= g_l"
        )
        return CurveEstimate(
            method=self.name,
            size=int(size),
            ranks=ranks,
            precision=precision,
            lower=lower,
            upper=upper,
            kind="interval",
            guarantee=guarantee,
            queried=grid.knots.copy(),
            annotations=annotations,
            flags=_interval_flags(points, low, high, self.pmin),
            exact_prefix=int(grid.head),
        )

    def _head_only(
        self,
        size: int,
        grid: GeometricGrid,
        head_ranks: np.ndarray,
        head_p: np.ndarray,
        annotations: int,
    ) -> CurveEstimate:
        if grid.head < grid.points[0]:
            lower = upper = head_p
            ranks, precision = head_ranks, head_p
            guarantee = "exact: every item labelled"
        else:
            points = grid.points
            lo_k, up_k = knot_interval_bounds(
                points, head_p[-1:], head_p[-1:], grid.m, size, weak_monotone=False
            )
            ranks = head_ranks
            precision = head_p
            lower = np.concatenate([head_p[:-1], lo_k])
            upper = np.concatenate([head_p[:-1], up_k])
            guarantee = "exact for ranks <= g_l; beyond, the yield bounds (no assumption)"
        return CurveEstimate(
            method=self.name,
            size=int(size),
            ranks=ranks,
            precision=precision,
            lower=lower.copy(),
            upper=upper.copy(),
            kind="interval",
            guarantee=guarantee,
            annotations=annotations,
            exact_prefix=int(grid.head),
        )

    def run(self, size: int, oracle: Oracle) -> CurveEstimate:
        """Plan → label with ``oracle`` → plan … until done; then :meth:`estimate`."""
        return run_to_completion(self, size, oracle)


def _interval_flags(
    points: np.ndarray, low: np.ndarray, high: np.ndarray, pmin: float
) -> tuple[str, ...]:
    """Assumption failures visible in simultaneous intervals at increasing points ≥ m apart."""
    flags: list[str] = []
    running_min = np.minimum.accumulate(high)
    bad = np.flatnonzero(low[1:] > running_min[:-1]) + 1
    if bad.size:
        k = int(bad[0])
        j = int(np.argmin(high[:k]))
        flags.append(
            f"assumption A.1 violated (confidence 1 - delta): precision at rank {points[k]} "
            f"is at least {low[k]:.4f}, above its upper bound {high[j]:.4f} at rank "
            f"{points[j]} ({bad.size} queried ranks affected)"
        )
    below = np.flatnonzero(high < pmin)
    if below.size:
        flags.append(
            f"p_min = {pmin:g} is too high: precision is below it (upper bound "
            f"{high[below[0]]:.4f}) from rank {points[below[0]]} on at {below.size} queried "
            "ranks; the relative guarantee does not hold there (intervals remain valid)"
        )
    return tuple(flags)
