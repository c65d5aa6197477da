"""Shared vocabulary of the precision-curve methods.

Every curve method (random baseline, LogStrat, PAULA, AdaStrat) works on a ranked list of
``size`` items (ranks are 1-based, rank 1 is the most confident item) and exposes three operations:

* ``plan(size, known)`` -> ranks (sorted, unique, int64) that need a label now, given the labels
  already known.  An empty array means the method has all it needs.
* ``estimate(size, known)`` -> :class:`CurveEstimate` from the labels known so far.
* ``run(ranked, oracle)`` -> :class:`CurveEstimate` after looping plan -> oracle -> plan until the
  plan is empty (for simulations).

``known`` is a :class:`Labels` object: parallel arrays of ranks and 0/1 labels.  Methods never
allocate an array of length ``size``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

#: A labelling function: 1-based ranks (int64 array) -> labels in {0, 1} (same length).
Oracle = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Labels:
    """Labels known for some ranks of one ranked list (sorted by rank, unique)."""

    ranks: np.ndarray
    labels: np.ndarray

    def __post_init__(self) -> None:
        ranks = np.asarray(self.ranks, dtype=np.int64)
        labels = np.asarray(self.labels, dtype=np.float64)
        if ranks.shape != labels.shape or ranks.ndim != 1:
            raise ValueError("ranks and labels must be 1-d arrays of the same length")
        order = np.argsort(ranks, kind="stable")
        ranks, labels = ranks[order], labels[order]
        if ranks.size and np.any(np.diff(ranks) == 0):
            raise ValueError("a rank is labelled twice")
        if ranks.size and ranks[0] < 1:
            raise ValueError("ranks are 1-based")
        outside = ~((labels >= 0.0) & (labels <= 1.0))  # NaN included
        if np.any(outside):
            i = int(np.flatnonzero(outside)[0])
            raise ValueError(
                f"label {labels[i]:g} at rank {int(ranks[i])} is outside [0, 1]: a curve needs "
                "correct (1) / wrong (0) labels or a merged share; graded judgments need an "
                "explicit mapping to [0, 1]"
            )
        object.__setattr__(self, "ranks", ranks)
        object.__setattr__(self, "labels", labels)

    @classmethod
    def empty(cls) -> Labels:
        return cls(np.empty(0, np.int64), np.empty(0, np.float64))

    def __len__(self) -> int:
        return int(self.ranks.size)

    def merge(self, ranks: np.ndarray, labels: np.ndarray) -> Labels:
        """These labels plus new ones (new ranks must not be labelled already)."""
        return Labels(
            np.concatenate([self.ranks, np.asarray(ranks, np.int64)]),
            np.concatenate([self.labels, np.asarray(labels, np.float64)]),
        )

    def missing(self, ranks: np.ndarray) -> np.ndarray:
        """The subset of ``ranks`` (unique, sorted) that has no label yet."""
        ranks = np.unique(np.asarray(ranks, np.int64))
        return ranks[~np.isin(ranks, self.ranks)]

    def lookup(self, ranks: np.ndarray) -> np.ndarray:
        """Labels at ``ranks``; raises KeyError when one is missing."""
        ranks = np.asarray(ranks, np.int64)
        pos = np.searchsorted(self.ranks, ranks)
        pos = np.minimum(pos, max(self.ranks.size - 1, 0))
        if self.ranks.size == 0 or np.any(self.ranks[pos] != ranks):
            raise KeyError("some ranks have no label")
        return self.labels[pos]


@dataclass(frozen=True)
class CurveEstimate:
    """A precision curve p(r) known at knot ranks, as step values between knots.

    ``precision[k]`` is the estimate at ``ranks[k]``; ``lower``/``upper`` are the bounds or
    interval ends at the same ranks (``nan`` where the method gives none), held constant up to
    the next knot.  ``kind`` says what they are, beyond the exactly labelled prefix:

    * ``"band"`` — lower ≤ p ≤ upper at every rank at once with probability ≥ 1 − δ (the method's
      guarantee says under which assumption, if any);
    * ``"interval"`` — simultaneous (1 − δ) intervals, carried between knots;
    * ``"bound"`` — deterministic bounds that hold whenever the stated assumption does;
    * ``"approximation"`` — no coverage claim: lower/upper are the method's approximation limits
      (its docstring documents the error behaviour);
    * ``"exact"`` — every item labelled.

    ``exact_prefix`` is the number of top ranks labelled exhaustively (there lower = upper =
    precision, and the CSV's ``kind`` column says ``exact``).  ``queried`` are the ranks at which
    the method evaluated p (marked in plots and CSVs); ``annotations`` is the number of distinct
    labels used; ``flags`` are human-readable warnings (e.g. a detected monotonicity violation);
    ``columns`` are extra per-knot columns for the CSV (e.g. AdaStrat's envelope of estimates).
    """

    method: str
    size: int
    ranks: np.ndarray
    precision: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    kind: str
    guarantee: str
    queried: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    annotations: int = 0
    flags: tuple[str, ...] = ()
    exact_prefix: int = 0
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Never lower > upper: a crossing can only come from a failed assumption; widen to the hull.
        lower = np.asarray(self.lower, np.float64)
        upper = np.asarray(self.upper, np.float64)
        crossed = lower > upper
        if np.any(crossed):
            lower, upper = np.fmin(lower, upper), np.fmax(lower, upper)
            object.__setattr__(self, "lower", lower)
            object.__setattr__(self, "upper", upper)

    def row_kinds(self) -> np.ndarray:
        """Per-knot kind: ``exact`` within the exactly labelled prefix, else :attr:`kind`."""
        ranks = np.asarray(self.ranks, np.int64)
        exact = (ranks <= self.exact_prefix) | (self.kind == "exact")
        return np.where(exact, "exact", self.kind)

    @classmethod
    def exact(
        cls,
        method: str,
        size: int,
        ranks: np.ndarray,
        precision: np.ndarray,
        kind: str,
        annotations: int,
    ) -> CurveEstimate:
        """The exact curve of a list whose every item is labelled (lower = upper = precision)."""
        precision = np.asarray(precision, float)
        return cls(
            method=method,
            size=int(size),
            ranks=np.asarray(ranks, np.int64),
            precision=precision,
            lower=precision.copy(),
            upper=precision.copy(),
            kind=kind,
            guarantee="exact: every item labelled",
            annotations=int(annotations),
            exact_prefix=int(np.max(ranks)) if np.size(ranks) else 0,
        )

    def at(self, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(precision, lower, upper) at arbitrary ranks by the step rule of the method.

        Values are held constant from one knot up to the next knot (right-continuous steps);
        ranks below the first knot take the first knot's values.
        """
        ranks = np.asarray(ranks, np.int64)
        idx = np.searchsorted(self.ranks, ranks, side="right") - 1
        idx = np.clip(idx, 0, self.ranks.size - 1)
        return self.precision[idx], self.lower[idx], self.upper[idx]


def exact_head(
    head_p: np.ndarray,
    ranks: np.ndarray,
    precision: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    shared: bool = True,
) -> dict[str, np.ndarray]:
    """``ranks``, ``precision``, ``lower`` and ``upper`` of a :class:`CurveEstimate` whose top
    h = ``head_p.size`` ranks are labelled: exact there (lower = upper = precision =
    ``head_p``), then the method's knots ``ranks`` with their values.  ``shared``: the knots
    start at rank h itself (the head's last rank is the method's first knot and keeps the
    method's values), so the head contributes ranks 1..h − 1; else ranks 1..h."""
    head = head_p[:-1] if shared else head_p
    head_ranks = np.arange(1, head.size + 1, dtype=np.int64)
    return {
        "ranks": np.concatenate([head_ranks, ranks]),
        "precision": np.concatenate([head, precision]),
        "lower": np.concatenate([head, lower]),
        "upper": np.concatenate([head, upper]),
    }


class CurveMethod(Protocol):
    """What every curve method offers (see the module docstring)."""

    name: str

    def plan(self, size: int, known: Labels) -> np.ndarray: ...

    def estimate(self, size: int, known: Labels) -> CurveEstimate: ...

    def run(self, size: int, oracle: Oracle) -> CurveEstimate: ...


def staged_plan(known: Labels, head: np.ndarray, rest: Callable[[], np.ndarray]) -> np.ndarray:
    """Missing ``head`` ranks first; once the head is complete, the missing ``rest()`` ranks.

    The non-adaptive methods label the first items exactly before planning the rest.
    """
    need = known.missing(head)
    if need.size:
        return need
    return known.missing(rest())


def run_to_completion(
    method: CurveMethod, size: int, oracle: Oracle, max_rounds: int = 10_000
) -> CurveEstimate:
    """Loop plan -> oracle -> plan until the plan is empty; then estimate."""
    known = Labels.empty()
    for _ in range(max_rounds):
        need = known.missing(method.plan(size, known))
        if need.size == 0:
            return method.estimate(size, known)
        known = known.merge(need, np.asarray(oracle(need), np.float64))
    raise RuntimeError(f"{method.name} did not finish planning in {max_rounds} rounds")


def check_grid_parameters(
    epsilon: float | None = None, window: int | None = None, delta: float | None = None
) -> None:
    """``ValueError`` for a grid step ε outside (0, 1], a window Δ below 1 or a failure
    probability δ outside (0, 1) — the parameters the curve methods share (None: not checked)."""
    if epsilon is not None and not 0 < epsilon <= 1:
        raise ValueError("epsilon must lie in (0, 1]")
    if window is not None and window < 1:
        raise ValueError("window must be ≥ 1")
    if delta is not None and not 0 < delta < 1:
        raise ValueError("delta must lie in (0, 1)")
