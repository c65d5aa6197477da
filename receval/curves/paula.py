"""PAULA: deterministic lower and upper bounds on the precision function (PAULA Alg. 2).

Sabharwal & Sedghi (2017), §4.4.2.  PAULA annotates the head t_1 … t_{g_ℓ} exhaustively and
then the Δ items ending at each geometric point g_{ℓ+1}, …, g_L (PAULA Theorem 3:
g_ℓ + Δ(L − ℓ) annotations, L − ℓ queries).  From the local precisions p_Δ(g_k) it forms the
telescoping yields (Definition 6)

    Y₋^k = g_ℓ p(g_ℓ) + Σ_{j=ℓ}^{k−1} (g_{j+1} − g_j) p_Δ(g_{j+1})
    Y₊^k = g_ℓ p(g_ℓ) + Σ_{j=ℓ}^{k−1} (g_{j+1} − g_j) p_Δ(g_j)

with Y₋^k ≤ g_k p(g_k) ≤ Y₊^k under (Δ, m)-monotonicity A.2 (Lemma 3), and
γ·Y₋^k ≥ Y₊^k when also p(g_ℓ) ≥ p_Δ(g_ℓ) (Lemma 4).

What :meth:`Paula.estimate` returns
-----------------------------------
* ranks 1..g_ℓ: the exact p(r) (lower = upper = precision; CSV kind ``exact``);
* at each knot g_k (k > ℓ): ``precision`` = √(q⁻(g_k) q⁺(g_k)) with q^± = Y_±^k / g_k, held
  constant up to the next knot (the step rule of Definition 5);
* ``lower``/``upper``: by default (``bounds="guaranteed"``) the knot values [q⁻, q⁺] of Lemma 3
  carried across each step with :func:`~receval.curves.precision_function.knot_interval_bounds`
  (monotone yield and weak monotonicity A.1, as in the proof of Theorem 1); with
  ``bounds="paper"`` Algorithm 2's step^{q⁻}, step^{q⁺} exactly.

Why the kind is ``approximation`` (not ``bound``)
--------------------------------------------------
Both bound constructions are deterministic bounds *only if* assumption A.2 holds: the local
precision p_Δ (a window of Δ = 100 labels) must be non-increasing from one grid point to the
next.  With Bernoulli labels that essentially never holds — p_Δ fluctuates by ±√(p(1−p)/Δ) ≈
±0.05 from window to window — and the labels cannot show that it holds.  In an audit the truth
fell outside [lower, upper] at 7–95 % of ranks on simulated lists (N = 35,615 … 10⁸) and at 44 %
of ranks on a real classifier's list.  So ``kind = "approximation"`` beyond g_ℓ: the band is
PAULA's approximation interval, not a coverage claim.

Error behaviour (measured, ``bench/curves.py``): the centre √(q⁻q⁺) is accurate — the
telescoping sums average the window noise over many windows — with worst absolute error
0.010–0.017 on PPDB-like lists of 3.6·10⁴ … 3.6·10⁷ items, 0.027 on the PPDB 2.0 labels and
0.033 on ParaBank (ε = 0.1, Δ = 20).  lower/upper are much narrower than that error (median
width 0.012–0.014 on the PPDB-like lists), which is why they miss the truth at 20–50 % of ranks
there and at up to 90 % on flat noisy lists: they are not error bars.  Where the two carried
bounds cross (lower > upper, impossible under the assumptions), both are widened to include the
centre and a flag reports it.  For a band with a
coverage guarantee at the same label count use :class:`~receval.curves.stratband.StratBand`.

``flags``: assumption failures that the labels show beyond window noise (a rise of p_Δ between
consecutive knots larger than a Bonferroni-corrected two-sample z-test at level 0.05 allows;
p(g_ℓ) < p_Δ(g_ℓ), the precondition of Lemma 4 / Theorem 3; crossed bounds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

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
from receval.curves.precision_function import (
    GeometricGrid,
    geometric_grid,
    knot_interval_bounds,
    monotone_from,
)

__all__ = ["Paula", "paula_yields"]


def paula_yields(
    head_yield: float,
    points: np.ndarray,
    local: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The telescoping yields Y₋^k, Y₊^k of PAULA Definition 6 (Algorithm 2's loop).

    Parameters
    ----------
    head_yield
        g_ℓ · p(g_ℓ), the number of positives among ranks 1..g_ℓ.
    points
        g_ℓ, …, g_L.
    local
        p_Δ(g_ℓ), …, p_Δ(g_L).

    Returns
    -------
    (Y₋, Y₊)
        Arrays aligned with ``points``; both equal ``head_yield`` at g_ℓ.  Under A.2 they
        bound the yield g_k p(g_k) from below and above (Lemma 3): guaranteed bounds.
    """
    points = np.asarray(points, dtype=np.float64)
    local = np.asarray(local, dtype=np.float64)
    gaps = np.diff(points)
    y_minus = head_yield + np.concatenate([[0.0], np.cumsum(gaps * local[1:])])
    y_plus = head_yield + np.concatenate([[0.0], np.cumsum(gaps * local[:-1])])
    return y_minus, y_plus


@dataclass(frozen=True)
class Paula:
    """PAULA (Sabharwal & Sedghi 2017, Algorithm 2) with parameters ε, Δ, r̃.

    Parameters
    ----------
    epsilon
        ε ∈ (0, 1]; the geometric ratio of the grid is 1 + ε (paper default 0.03).
    window
        Δ, the width of the local-precision window (paper default 100).
    r_tilde
        r̃ ≥ ⌈(Δ+2)/ε⌉; defaults to that minimum (3400 for the defaults).
    bounds
        ``"guaranteed"`` (bounds at every rank) or ``"paper"`` (Algorithm 2's step functions);
        see the module docstring.

    Notes
    -----
    ``plan``, ``estimate`` and ``budget`` are deterministic functions of (parameters, size,
    known labels); no randomness is involved.
    """

    epsilon: float = 0.03
    window: int = 100
    r_tilde: int | None = None
    bounds: str = "guaranteed"
    name: ClassVar[str] = "paula"

    def __post_init__(self) -> None:
        check_grid_parameters(self.epsilon, self.window)
        if self.bounds not in ("guaranteed", "paper"):
            raise ValueError("bounds must be 'guaranteed' or 'paper'")
        minimum = monotone_from(self.window, self.epsilon)
        if self.r_tilde is None:
            object.__setattr__(self, "r_tilde", minimum)
        elif self.r_tilde < minimum:
            raise ValueError(f"r_tilde must be ≥ ⌈(Δ+2)/ε⌉ = {minimum}")

    # -- design ------------------------------------------------------------------------

    def grid(self, size: int) -> GeometricGrid:
        """The geometric grid g_ℓ..g_L and constants ℓ, L, m, γ for N = ``size``."""
        assert self.r_tilde is not None
        return geometric_grid(size, self.epsilon, self.r_tilde)

    def _windows(self, grid: GeometricGrid) -> np.ndarray:
        """Ranks g_k − Δ + 1 .. g_k for k = ℓ+1..L (disjoint: g_{k+1} − g_k ≥ m ≥ Δ)."""
        knots = grid.knots
        if knots.size == 0:
            return np.empty(0, np.int64)
        offsets = np.arange(-self.window + 1, 1, dtype=np.int64)
        return (knots[:, None] + offsets[None, :]).reshape(-1)

    def plan(self, size: int, known: Labels) -> np.ndarray:
        """Ranks to label now: first 1..g_ℓ, then the Δ-windows ending at g_{ℓ+1}..g_L.

        Deterministic; O(g_ℓ + Δ(L − ℓ)) memory.  Empty when everything is labelled.
        """
        grid = self.grid(size)
        head = np.arange(1, grid.head + 1, dtype=np.int64)
        return staged_plan(known, head, lambda: self._windows(grid))

    def budget(self, size: int) -> dict[str, object]:
        """Queries and annotations without labels (PAULA Theorem 3: g_ℓ + Δ(L − ℓ))."""
        grid = self.grid(size)
        queries = grid.queries
        return {
            "method": self.name,
            "size": int(size),
            "queries": int(queries),
            "annotations": int(grid.head + self.window * queries),
            "head": int(grid.head),
            "epsilon": self.epsilon,
            "window": self.window,
            "r_tilde": int(grid.r_tilde),
            "ell": grid.ell,
            "L": grid.last,
            "m": grid.m,
            "gamma": grid.gamma,
            "approximation": grid.gamma * (1 + self.epsilon),
            "guarantee": (
                "approximation: gamma(1+eps) under monotonicity assumptions A.1 and A.2, "
                "which noisy labels rarely satisfy; no coverage claim"
            ),
        }

    # -- estimate ----------------------------------------------------------------------

    def estimate(self, size: int, known: Labels) -> CurveEstimate:
        """Lower/upper bounds on p from the planned labels (PAULA Algorithm 2; see module doc).

        Raises ``ValueError`` when a planned label is missing.
        """
        grid = self.grid(size)
        g_head = grid.head
        head_ranks = np.arange(1, g_head + 1, dtype=np.int64)
        missing = known.missing(np.concatenate([head_ranks, self._windows(grid)])).size
        if missing:
            raise ValueError(f"{missing} planned labels are missing; call plan() and label them")
        head_labels = known.lookup(head_ranks)
        head_cum = np.cumsum(head_labels)
        head_p = head_cum / head_ranks
        annotations = int(g_head + self.window * grid.queries)
        if grid.queries == 0 and g_head < grid.points[0]:
            # N < g_ℓ: the whole list is labelled; p is exact everywhere.
            return CurveEstimate.exact(self.name, size, head_ranks, head_p, "exact", annotations)

        points = grid.points
        knots = grid.knots
        window_labels = known.lookup(self._windows(grid)).reshape(knots.size, self.window)
        lo = max(g_head - self.window, 0)
        local_head = (head_cum[-1] - (head_cum[lo - 1] if lo > 0 else 0.0)) / (g_head - lo)
        local = np.concatenate([[local_head], window_labels.mean(axis=1)])
        head_yield = float(head_cum[-1])
        y_minus, y_plus = paula_yields(head_yield, points, local)
        q_minus = y_minus / points
        q_plus = y_plus / points

        if self.bounds == "paper":
            lower_k, upper_k = q_minus, q_plus
            guarantee = (
                "approximation, no coverage claim: PAULA Algorithm 2 output (step functions of "
                "q- and q+), which would bound p at the queried ranks only if the local "
                "precision were monotone at the scale of Delta (A.2, Lemma 3) - with noisy "
                "labels it rarely is; precision = sqrt(q- q+) is the accurate part "
                f"(exact for ranks <= {g_head})"
            )
        else:
            lower_k, upper_k = knot_interval_bounds(points, q_minus, q_plus, grid.m, size)
            guarantee = (
                "approximation, no coverage claim: lower/upper are PAULA's bounds carried "
                "between knots, which hold only if monotonicity assumptions A.1 and A.2 hold "
                "beyond r_tilde (PAULA Lemma 3 + Theorem 1) - with noisy labels A.2 rarely "
                "does; precision = sqrt(q- q+) is the accurate part; for a guaranteed band at "
                f"the same label count use method stratband (exact for ranks <= {g_head})"
            )
        kind = "approximation"
        centre = np.sqrt(q_minus * q_plus)
        crossed = int(np.sum(lower_k > upper_k))
        lower_k = np.minimum(np.minimum(lower_k, upper_k), centre)
        upper_k = np.maximum(np.maximum(lower_k, upper_k), centre)
        flags = self._flags(grid, head_p[-1], local, q_minus, q_plus)
        if crossed:
            flags += (
                f"crossed-bounds: the carried lower bound exceeded the upper one at {crossed} "
                "knots (A.1/A.2 fail there); both widened to include the centre",
            )
        return CurveEstimate(
            method=self.name,
            size=int(size),
            **exact_head(head_p, points, centre, lower_k, upper_k),
            kind=kind,
            guarantee=guarantee,
            queried=knots.copy(),
            annotations=annotations,
            flags=flags,
            exact_prefix=int(g_head),
        )

    def _flags(
        self,
        grid: GeometricGrid,
        p_head: float,
        local: np.ndarray,
        q_minus: np.ndarray,
        q_plus: np.ndarray,
    ) -> tuple[str, ...]:
        flags: list[str] = []
        points = grid.points
        if p_head < local[0]:
            flags.append(
                f"precondition p(g_l) >= p_Delta(g_l) fails at rank {points[0]} "
                f"({p_head:.4f} < {local[0]:.4f}): the gamma factor of PAULA Theorem 3 "
                "is not guaranteed"
            )
        # A.2 forbids any rise of p_Δ; rises within window noise say nothing (they happen on
        # every noisy list), so flag only rises a Bonferroni two-sample z-test finds at 0.05.
        from statistics import NormalDist

        rise = np.diff(local)
        pooled = np.clip((local[1:] + local[:-1]) / 2.0, 1e-3, 1 - 1e-3)
        noise = np.sqrt(2.0 * pooled * (1.0 - pooled) / self.window)
        z = NormalDist().inv_cdf(1.0 - 0.05 / max(rise.size, 1))
        rises = np.flatnonzero(rise > z * noise)
        if rises.size:
            j = int(rises[np.argmax(rise[rises])])
            flags.append(
                f"assumption A.2 violated beyond label noise: local precision p_Delta rises at "
                f"{rises.size} of {local.size - 1} consecutive queried ranks (largest: "
                f"{local[j]:.3f} at rank {points[j]} -> {local[j + 1]:.3f} at rank "
                f"{points[j + 1]}); PAULA's lower/upper miss p around there"
            )
        # A.1 + A.2: p(g_k) ≤ p(g_j) for k > j, so q⁻(g_k) > q⁺(g_j) cannot happen.
        running_min = np.minimum.accumulate(q_plus)
        bad = np.flatnonzero(q_minus[1:] > running_min[:-1] + 1e-12) + 1
        if bad.size:
            k = int(bad[0])
            j = int(np.argmin(q_plus[:k]))
            flags.append(
                f"precision rises: the yield-based lower value {q_minus[k]:.4f} at rank "
                f"{points[k]} exceeds "
                f"the upper bound {q_plus[j]:.4f} at rank {points[j]} (A.1/A.2 violated at "
                f"{bad.size} queried ranks)"
            )
        return tuple(flags)

    def run(self, size: int, oracle: Oracle) -> CurveEstimate:
        """Plan → label with ``oracle`` → plan … until done; then :meth:`estimate`."""
        return run_to_completion(self, size, oracle)
