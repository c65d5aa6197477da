"""The random-sampling baseline for the precision function (PAULA paper §3, eqs. (3)-(5)).

Sabharwal & Sedghi (2017), §3.  Draw s uniform random items T' from the whole list and use
the precision of the sample as a surrogate for p; add the top n items, annotated
exhaustively, where the surrogate is not yet accurate.  With a union bound over the N ranks
(δ' = δ/N), the surrogate is a (1+α)-approximation of p(r) for every r ≥ n_{α,s} where

    n_{α,s} = N / (2 s α² p_min²) · ln(2N/δ)                                      (eq. 4)

and s + n_{α,s} is smallest for s = n_{α,s}, giving the total

    √( 2N / (α² p_min²) · ln(2N/δ) )  annotations                                 (eq. 5)

(counted, as in the paper, without removing the overlap of the sample with the head).  The
default α = γ(1+ε) − 1 matches the guarantee of PAULA and LogStrat (PAULA §4.4.3).

Estimator.  For r ≤ n, p(r) is exact.  For r > n we use the precision of the c(r) sample
draws at ranks ≤ r (c(r) has expectation rs/N: this is the paper's p'(rs/N) with the
realised count in place of its expectation).  Draws are i.i.d. uniform on 1..N with
replacement, so given c(r) they are i.i.d. uniform on 1..r and the estimate is unbiased for
p(r); Hoeffding (eq. 3) with δ/N per rank gives the interval ±√(ln(2N/δ)/(2c(r))), valid at
every rank simultaneously with probability ≥ 1 − δ.  No monotonicity is assumed; p_min only
sizes the design (and decides where the relative (1+α) guarantee applies).

Randomness: the draws come from a Generator seeded with ``seed``; ``plan`` is a
deterministic function of (parameters, size, known).  Memory O(s + n), which is
Θ(√(N log N)) — the method's cost, not an artefact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from receval.curves.base import (
    CurveEstimate,
    Labels,
    Oracle,
    exact_head,
    run_to_completion,
    staged_plan,
)
from receval.curves.precision_function import geometric_grid, monotone_from

__all__ = ["RandomSampling", "random_sampling_total"]

_STREAM = 0x5253  # "RS"


def random_sampling_total(size: int, alpha: float, delta: float, pmin: float) -> float:
    """Eq. (5) of the PAULA paper: √(2N/(α² p_min²) · ln(2N/δ)), the total annotations."""
    return math.sqrt(2 * size / (alpha**2 * pmin**2) * math.log(2 * size / delta))


@dataclass(frozen=True)
class RandomSampling:
    """Random-sampling baseline (PAULA §3) with its parameters and a seed.

    Parameters
    ----------
    epsilon, window, r_tilde
        Used only for the default α = γ(1+ε) − 1, with γ from PAULA's grid
        (r̃ defaults to ⌈(Δ+2)/ε⌉).
    delta
        δ: the intervals hold at all ranks simultaneously with probability ≥ 1 − δ.
    pmin
        p_min used to size the design (eqs. 4-5).
    alpha
        α, the target relative error; default γ(1+ε) − 1.
    samples
        s, the number of random draws; default ⌈total/2⌉ with the total of eq. (5).  The head
        is then n = ⌈n_{α,s}⌉ (eq. 4).
    seed
        Seed of the random draws.
    """

    epsilon: float = 0.03
    window: int = 100
    r_tilde: int | None = None
    delta: float = 0.05
    pmin: float = 0.5
    alpha: float | None = None
    samples: int | None = None
    seed: int = 0
    name: ClassVar[str] = "random"

    def __post_init__(self) -> None:
        if not 0 < self.delta < 1:
            raise ValueError("delta must lie in (0, 1)")
        if not 0 < self.pmin <= 1:
            raise ValueError("pmin must lie in (0, 1]")
        if self.alpha is not None and self.alpha <= 0:
            raise ValueError("alpha must be > 0")
        if self.samples is not None and self.samples < 1:
            raise ValueError("samples must be ≥ 1")

    # -- design ------------------------------------------------------------------------

    def alpha_value(self) -> float:
        """α, by default γ(1+ε) − 1 (PAULA §4.4.3)."""
        if self.alpha is not None:
            return float(self.alpha)
        r_tilde = self.r_tilde or monotone_from(self.window, self.epsilon)
        gamma = geometric_grid(r_tilde, self.epsilon, r_tilde).gamma
        return gamma * (1 + self.epsilon) - 1

    def design(self, size: int) -> tuple[int, int]:
        """(n, s): the exhaustively labelled head 1..n and the number of random draws.

        When n + s would reach N, the whole list is labelled instead (n = N, s = 0).
        """
        alpha = self.alpha_value()
        log_term = math.log(2 * size / self.delta)
        if self.samples is None:
            s = math.ceil(random_sampling_total(size, alpha, self.delta, self.pmin) / 2 - 1e-9)
        else:
            s = int(self.samples)
        n = math.ceil(size / (2 * s * alpha**2 * self.pmin**2) * log_term - 1e-9)
        if n + s >= size:
            return int(size), 0
        return int(n), int(s)

    def _draws(self, size: int, s: int) -> np.ndarray:
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, _STREAM]))
        return rng.integers(1, size + 1, size=s, dtype=np.int64)

    def plan(self, size: int, known: Labels) -> np.ndarray:
        """Ranks to label now: first 1..n, then the distinct random draws beyond n."""
        n, s = self.design(size)
        head = np.arange(1, n + 1, dtype=np.int64)

        def beyond_head() -> np.ndarray:
            draws = np.unique(self._draws(size, s))
            return draws[draws > n]

        return staged_plan(known, head, beyond_head)

    def budget(self, size: int) -> dict[str, object]:
        """Plan size without labels: ``annotations`` = ⌈eq. (5)⌉ (PAULA §3).

        ``head`` + ``samples`` is the realised design (they add up to ``annotations`` or one
        more, from rounding); ``expected_distinct`` is the expected number of distinct items
        to label (draws repeat and may fall in the head).
        """
        alpha = self.alpha_value()
        total = random_sampling_total(size, alpha, self.delta, self.pmin)
        n, s = self.design(size)
        outside = size - n
        distinct = n + (outside * (1.0 - (1.0 - 1.0 / size) ** s) if s else 0.0)
        return {
            "method": self.name,
            "size": int(size),
            "queries": 0,
            "annotations": int(size if s == 0 else math.ceil(total - 1e-9)),
            "head": n,
            "samples": s,
            "expected_distinct": distinct,
            "alpha": alpha,
            "delta": self.delta,
            "pmin": self.pmin,
            "approximation": 1 + alpha,
            "guarantee": (
                "with probability >= 1 - delta, (1+alpha)-approximation at every rank >= head "
                "where p >= pmin; no monotonicity assumed"
            ),
        }

    # -- estimate ----------------------------------------------------------------------

    def estimate(self, size: int, known: Labels) -> CurveEstimate:
        """Exact head, then the sample precision with simultaneous Hoeffding intervals.

        Knots: ranks 1..n, then n+1 and every distinct draw rank beyond n (values are
        constant between draws because the count c(r) is).  Raises ``ValueError`` when a
        planned label is missing.
        """
        n, s = self.design(size)
        head_ranks = np.arange(1, n + 1, dtype=np.int64)
        draws = np.sort(self._draws(size, s))
        missing = known.missing(np.concatenate([head_ranks, draws])).size
        if missing:
            raise ValueError(f"{missing} planned labels are missing; call plan() and label them")
        head_p = np.cumsum(known.lookup(head_ranks)) / np.maximum(head_ranks, 1)
        annotations = int(np.union1d(head_ranks, draws).size)
        if s == 0:
            return CurveEstimate.exact(self.name, size, head_ranks, head_p, "interval", annotations)
        labels = known.lookup(draws)
        count = np.arange(1, s + 1, dtype=np.float64)
        positives = np.cumsum(labels)
        # Knots beyond the head: n+1, then each distinct draw rank > n+1.
        beyond = np.unique(draws[draws > n + 1])
        knots = np.concatenate([[n + 1], beyond]) if n + 1 <= size else beyond
        idx = np.searchsorted(draws, knots, side="right") - 1  # last draw at rank ≤ knot
        c = np.where(idx >= 0, count[np.maximum(idx, 0)], 0.0)
        k = np.where(idx >= 0, positives[np.maximum(idx, 0)], 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            p_hat = np.where(c > 0, k / c, np.nan)
            half = np.where(c > 0, np.sqrt(math.log(2 * size / self.delta) / (2 * c)), np.inf)
        low = np.where(c > 0, np.clip(p_hat - half, 0.0, 1.0), 0.0)
        high = np.where(c > 0, np.clip(p_hat + half, 0.0, 1.0), 1.0)
        alpha = self.alpha_value()
        guarantee = (
            f"with probability >= {1 - self.delta:g}: p lies in [lower, upper] at every rank "
            "(Hoeffding eq. 3, union bound over the N ranks; no monotonicity assumed); "
            f"a (1+{alpha:.4f})-approximation at ranks >= {n} where p >= pmin (eq. 4); "
            "exact for ranks <= n"
        )
        flags: list[str] = []
        below = np.flatnonzero(high < self.pmin)
        if below.size:
            flags.append(
                f"p_min = {self.pmin:g} is too high: precision is below it (upper bound "
                f"{high[below[0]]:.4f}) from rank {knots[below[0]]} on; the relative guarantee "
                "does not hold there (intervals remain valid)"
            )
        return CurveEstimate(
            method=self.name,
            size=int(size),
            **exact_head(head_p, knots, p_hat, low, high, shared=False),
            kind="interval",
            guarantee=guarantee,
            queried=np.empty(0, np.int64),
            annotations=annotations,
            flags=tuple(flags),
            exact_prefix=int(n),
        )

    def run(self, size: int, oracle: Oracle) -> CurveEstimate:
        """Plan → label with ``oracle`` → plan … until done; then :meth:`estimate`."""
        return run_to_completion(self, size, oracle)
