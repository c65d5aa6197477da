"""Ranked lists: random access to "the item (and its label) at rank r".

A ranked list ``T = (t_1, ..., t_N)`` is a system's output sorted by confidence, rank 1 first
(PAULA / AdaStrat papers, §2).  Every ranked list here offers

* ``size`` — N;
* ``labels(ranks)`` — the 0/1 labels at 1-based ranks (an :data:`~receval.curves.base.Oracle`),
  when the list knows its labels (a label column, or a simulation);
* ``iter_labels(chunk_size, start, stop)`` — the labels of ranks start..stop in consecutive
  chunks ``(first_rank, labels)``, for exact curves without holding N labels in memory.

Implementations
---------------
:class:`ArrayRankedList`
    Labels given as an array (the caller's data), e.g. a fully annotated sample.
:class:`FrameRankedList`
    A system's output as a DataFrame ``query_id, answer, score[, label]``.  **Order:** score
    descending; ties broken by ``query_id`` then ``answer`` ascending; rows with a missing
    score come last, in input order; if there is no ``score`` column, or no row has a score,
    the input order is the ranking.  The sort is stable.
:class:`ParquetRankedList`
    A Parquet file whose row order *is* the rank order, read one row group at a time (only
    the row-group offsets are kept in memory).
:class:`SimulatedRankedList`
    N items whose labels are drawn lazily from a smooth precision shape, reproducibly from a
    seed, with O(1) memory in N (O(len(base)) for a shape built from a base sequence):
    :class:`ScaledSequenceShape` (the scaled PPDB variants of AdaStrat §5),
    :class:`LogisticShape`, :class:`PowerShape`, :class:`PiecewiseLinearShape`, and
    :class:`BumpShape` (adds a local rise, i.e. a monotonicity violation).

Nothing here allocates an array of length N unless the caller supplied N items.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd

from receval.curves.precision_function import precision_at

__all__ = [
    "ArrayRankedList",
    "BumpShape",
    "FrameRankedList",
    "LogisticShape",
    "ParquetRankedList",
    "PiecewiseLinearShape",
    "PowerShape",
    "PrecisionShape",
    "RankedList",
    "ScaledSequenceShape",
    "SimulatedRankedList",
    "sliding_average",
]

DEFAULT_CHUNK = 1 << 20


@runtime_checkable
class RankedList(Protocol):
    """What every ranked list offers (see the module docstring)."""

    size: int

    def labels(self, ranks: np.ndarray) -> np.ndarray: ...

    def iter_labels(
        self, chunk_size: int = DEFAULT_CHUNK, start: int = 1, stop: int | None = None
    ) -> Iterator[tuple[int, np.ndarray]]: ...


def _check_ranks(ranks: np.ndarray, size: int) -> np.ndarray:
    ranks = np.asarray(ranks, dtype=np.int64)
    if ranks.ndim != 1:
        ranks = ranks.reshape(-1)
    if ranks.size and (ranks.min() < 1 or ranks.max() > size):
        raise ValueError(f"ranks must lie in 1..{size}")
    return ranks


def _chunk_bounds(
    size: int, chunk_size: int, start: int, stop: int | None
) -> Iterator[tuple[int, int]]:
    stop = size if stop is None else int(stop)
    if chunk_size < 1:
        raise ValueError("chunk_size must be ≥ 1")
    if start < 1 or stop > size:
        raise ValueError(f"start/stop must lie in 1..{size}")
    first = int(start)
    while first <= stop:
        last = min(first + chunk_size - 1, stop)
        yield first, last
        first = last + 1


class _ExactPrecisionMixin:
    size: int

    def true_precision(self, ranks: np.ndarray, chunk_size: int = DEFAULT_CHUNK) -> np.ndarray:
        """Exact p(r) of this list at ``ranks`` (PAULA eq. (1)), streaming the labels."""
        p, _ = precision_at(self, _check_ranks(ranks, self.size), chunk_size=chunk_size)
        return p

    def true_local_precision(
        self, ranks: np.ndarray, window: int, chunk_size: int = DEFAULT_CHUNK
    ) -> np.ndarray:
        """Exact p_Δ(r) at ``ranks`` (PAULA eq. (6)), streaming the labels."""
        _, pw = precision_at(
            self, _check_ranks(ranks, self.size), window=window, chunk_size=chunk_size
        )
        assert pw is not None
        return pw


# ----------------------------------------------------------------------------- in memory


@dataclass(frozen=True)
class ArrayRankedList(_ExactPrecisionMixin):
    """A fully labelled list given as 0/1 labels in rank order (the caller's array)."""

    values: np.ndarray

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=np.float64).reshape(-1)
        if values.size and not np.all((values == 0) | (values == 1)):
            raise ValueError("labels must be 0 or 1")
        object.__setattr__(self, "values", values)

    @property
    def size(self) -> int:
        return int(self.values.size)

    def labels(self, ranks: np.ndarray) -> np.ndarray:
        return self.values[_check_ranks(ranks, self.size) - 1]

    def iter_labels(
        self, chunk_size: int = DEFAULT_CHUNK, start: int = 1, stop: int | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        for first, last in _chunk_bounds(self.size, chunk_size, start, stop):
            yield first, self.values[first - 1 : last]


@dataclass(frozen=True)
class FrameRankedList(_ExactPrecisionMixin):
    """A system's output (one row per answer) ranked by score.

    Build it with :meth:`from_frame`.  ``frame`` holds the rows in rank order with a 1-based
    ``rank`` column added.  Order: ``score`` descending, ties broken by ``query_id`` then
    ``answer`` ascending (stable); rows with a missing score follow all scored rows in input
    order; without a ``score`` column (or with no score at all) the input order is kept.
    """

    frame: pd.DataFrame
    label_column: str | None = None

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        score_column: str = "score",
        label_column: str | None = None,
        tie_columns: Sequence[str] = ("query_id", "answer"),
    ) -> FrameRankedList:
        """Rank ``frame`` (see the class docstring).  The input frame is not modified."""
        df = frame.reset_index(drop=True)
        if label_column is not None and label_column not in df.columns:
            raise ValueError(f"no column {label_column!r} in the frame")
        has_score = score_column in df.columns and bool(df[score_column].notna().any())
        if has_score:
            keys = [score_column] + [c for c in tie_columns if c in df.columns]
            ascending = [False] + [True] * (len(keys) - 1)
            scored = df[score_column].notna()
            ranked = df[scored].sort_values(keys, ascending=ascending, kind="mergesort")
            df = pd.concat([ranked, df[~scored]]).reset_index(drop=True)
        df = df.copy()
        df["rank"] = np.arange(1, len(df) + 1, dtype=np.int64)
        if label_column is not None:
            values = pd.to_numeric(df[label_column], errors="raise").to_numpy(np.float64)
            if not np.all((values == 0) | (values == 1)):
                raise ValueError(f"column {label_column!r} must hold 0/1 labels")
        return cls(df, label_column)

    @property
    def size(self) -> int:
        return len(self.frame)

    def items(self, ranks: np.ndarray) -> pd.DataFrame:
        """The rows at 1-based ``ranks`` (with their ``rank`` column), in the order given."""
        ranks = _check_ranks(ranks, self.size)
        return self.frame.iloc[ranks - 1].reset_index(drop=True)

    def labels(self, ranks: np.ndarray) -> np.ndarray:
        if self.label_column is None:
            raise LookupError("this ranked list has no label column")
        ranks = _check_ranks(ranks, self.size)
        return self.frame[self.label_column].to_numpy(np.float64)[ranks - 1]

    def iter_labels(
        self, chunk_size: int = DEFAULT_CHUNK, start: int = 1, stop: int | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        if self.label_column is None:
            raise LookupError("this ranked list has no label column")
        values = self.frame[self.label_column].to_numpy(np.float64)
        for first, last in _chunk_bounds(self.size, chunk_size, start, stop):
            yield first, values[first - 1 : last]


# ----------------------------------------------------------------------------- parquet


@dataclass(frozen=True)
class ParquetRankedList(_ExactPrecisionMixin):
    """A Parquet file whose row order is the rank order (row 1 = rank 1).

    Only row-group offsets are held in memory; :meth:`items` and :meth:`labels` read just the
    row groups that contain the requested ranks, :meth:`iter_labels` streams row groups.
    The file must already be sorted (e.g. written from :attr:`FrameRankedList.frame`).
    Requires ``pyarrow``.
    """

    path: Path
    label_column: str | None = "label"
    offsets: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        import pyarrow.parquet as pq

        object.__setattr__(self, "path", Path(self.path))
        meta = pq.ParquetFile(self.path).metadata
        counts = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
        object.__setattr__(self, "offsets", offsets)
        if self.label_column is not None:
            names = meta.schema.to_arrow_schema().names
            if self.label_column not in names:
                object.__setattr__(self, "label_column", None)

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def _read(self, ranks: np.ndarray, columns: list[str] | None) -> pd.DataFrame:
        import pyarrow.parquet as pq

        ranks = _check_ranks(ranks, self.size)
        rows = ranks - 1
        group = np.searchsorted(self.offsets, rows, side="right") - 1
        pf = pq.ParquetFile(self.path)
        parts: list[pd.DataFrame] = []
        order: list[np.ndarray] = []
        for g in np.unique(group):
            sel = np.flatnonzero(group == g)
            table = pf.read_row_group(int(g), columns=columns)
            local = rows[sel] - self.offsets[g]
            parts.append(table.take(local).to_pandas())
            order.append(sel)
        if not parts:
            return pd.DataFrame(columns=columns or [])
        out = pd.concat(parts, ignore_index=True)
        row_of = np.empty(ranks.size, np.int64)  # row of `out` holding the i-th requested rank
        row_of[np.concatenate(order)] = np.arange(ranks.size)
        out = out.iloc[row_of].reset_index(drop=True)
        out.insert(0, "rank", ranks)
        return out

    def items(self, ranks: np.ndarray, columns: list[str] | None = None) -> pd.DataFrame:
        """Rows at 1-based ``ranks`` (in the order given), with a ``rank`` column."""
        return self._read(ranks, columns)

    def labels(self, ranks: np.ndarray) -> np.ndarray:
        if self.label_column is None:
            raise LookupError("this Parquet file has no label column")
        frame = self._read(ranks, [self.label_column])
        return frame[self.label_column].to_numpy(np.float64)

    def iter_labels(
        self, chunk_size: int = DEFAULT_CHUNK, start: int = 1, stop: int | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Labels of ranks start..stop, one row group (clipped to the range) at a time."""
        import pyarrow.parquet as pq

        if self.label_column is None:
            raise LookupError("this Parquet file has no label column")
        stop = self.size if stop is None else int(stop)
        if start < 1 or stop > self.size:
            raise ValueError(f"start/stop must lie in 1..{self.size}")
        pf = pq.ParquetFile(self.path)
        g = int(np.searchsorted(self.offsets, start - 1, side="right") - 1)
        while g < self.offsets.size - 1 and self.offsets[g] < stop:
            lo, hi = int(self.offsets[g]), int(self.offsets[g + 1])
            col = pf.read_row_group(g, columns=[self.label_column]).column(0)
            values = col.to_numpy().astype(np.float64)
            a, b = max(start - 1, lo), min(stop, hi)
            yield a + 1, values[a - lo : b - lo]
            g += 1


# ----------------------------------------------------------------------------- simulation shapes


class PrecisionShape(Protocol):
    """A label density q(x) ≥ 0 on (0, ∞), given through its integral D(x) = ∫₀ˣ q.

    Rank r has label probability D(r) − D(r−1) (the mean density on (r−1, r]), so the
    expected yield of the top r items is exactly D(r) and the expected precision D(r)/r.
    ``cumulative`` must be vectorised, increasing, with increments in [0, 1].
    """

    def cumulative(self, x: np.ndarray) -> np.ndarray: ...


def sliding_average(values: np.ndarray, window: int) -> np.ndarray:
    """Centred running mean of width ``window``, with narrower windows at both ends.

    q(i) = mean of values over positions max(1, i − ⌊Δ/2⌋) .. min(n, i + ⌈Δ/2⌉ − 1): our
    reading of AdaStrat §5 ("running average … using smaller sliding windows as appropriate
    when i < Δ or i > N − Δ").  Works on the caller's array (O(len(values))).
    """
    values = np.asarray(values, dtype=np.float64)
    if window < 1:
        raise ValueError("window must be ≥ 1")
    n = values.size
    cum = np.concatenate([[0.0], np.cumsum(values)])
    i = np.arange(n)
    lo = np.maximum(i - window // 2, 0)
    hi = np.minimum(i + (window - window // 2), n)
    return (cum[hi] - cum[lo]) / (hi - lo)


@dataclass(frozen=True)
class ScaledSequenceShape:
    """Piecewise-constant density from a base sequence, each position repeated ``scale`` times.

    The scaled PPDB variants of AdaStrat §5: ``probabilities[i]`` (e.g. a
    :func:`sliding_average` of real labels) is the label probability of the ``scale``
    consecutive ranks i·scale + 1 … (i+1)·scale.  Size = len(probabilities) · scale.
    """

    probabilities: np.ndarray
    scale: int = 1
    _cum: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        probs = np.asarray(self.probabilities, dtype=np.float64).reshape(-1)
        if probs.size == 0 or np.any((probs < 0) | (probs > 1)):
            raise ValueError("probabilities must be a non-empty array in [0, 1]")
        if self.scale < 1:
            raise ValueError("scale must be ≥ 1")
        object.__setattr__(self, "probabilities", probs)
        object.__setattr__(self, "_cum", np.concatenate([[0.0], np.cumsum(probs)]))

    @classmethod
    def from_labels(
        cls, labels: np.ndarray, window: int = 100, scale: int = 1
    ) -> ScaledSequenceShape:
        """AdaStrat §5: sliding average of a real 0/1 label sequence, then ``scale`` copies."""
        return cls(sliding_average(labels, window), scale)

    @property
    def size(self) -> int:
        return int(self.probabilities.size * self.scale)

    def cumulative(self, x: np.ndarray) -> np.ndarray:
        x = np.clip(np.asarray(x, dtype=np.float64), 0.0, float(self.size))
        pos = x / self.scale
        whole = np.minimum(np.floor(pos).astype(np.int64), self.probabilities.size - 1)
        frac = pos - whole
        return self.scale * (self._cum[whole] + frac * self.probabilities[whole])


@dataclass(frozen=True)
class LogisticShape:
    """q(x) = low + (high − low) / (1 + exp((x − midpoint)/width)): a smooth decreasing density."""

    high: float = 0.95
    low: float = 0.3
    midpoint: float = 1e4
    width: float = 3e3

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high <= 1 or self.width <= 0:
            raise ValueError("need 0 ≤ low ≤ high ≤ 1 and width > 0")

    def cumulative(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        w, a = self.width, self.midpoint

        def antiderivative(t: np.ndarray) -> np.ndarray:
            return t - w * np.logaddexp(0.0, (t - a) / w)

        return self.low * x + (self.high - self.low) * (
            antiderivative(x) - antiderivative(np.zeros_like(x))
        )


@dataclass(frozen=True)
class PowerShape:
    """q(x) = low + (high − low)·(1 + x/scale)^(−exponent): a heavy-tailed decreasing density."""

    high: float = 0.95
    low: float = 0.3
    scale: float = 1e3
    exponent: float = 0.5

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high <= 1 or self.scale <= 0 or self.exponent <= 0:
            raise ValueError("need 0 ≤ low ≤ high ≤ 1, scale > 0, exponent > 0")

    def cumulative(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        a, s = self.exponent, self.scale
        if math.isclose(a, 1.0):
            tail = s * np.log1p(x / s)
        else:
            tail = s / (1.0 - a) * (np.power(1.0 + x / s, 1.0 - a) - 1.0)
        return self.low * x + (self.high - self.low) * tail


@dataclass(frozen=True)
class PiecewiseLinearShape:
    """Density linear between knots (x_k, q_k), constant before the first / after the last.

    Any smooth shape can be approximated this way with O(#knots) memory; the integral is
    exact (piecewise quadratic).
    """

    x: np.ndarray
    q: np.ndarray
    _cum: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        x = np.asarray(self.x, dtype=np.float64).reshape(-1)
        q = np.asarray(self.q, dtype=np.float64).reshape(-1)
        if x.size < 1 or x.size != q.size or np.any(np.diff(x) <= 0) or x[0] < 0:
            raise ValueError("x must be increasing, ≥ 0, and as long as q")
        if np.any((q < 0) | (q > 1)):
            raise ValueError("q must lie in [0, 1]")
        seg = np.diff(x) * (q[:-1] + q[1:]) / 2
        cum = np.concatenate([[x[0] * q[0]], x[0] * q[0] + np.cumsum(seg)])
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "_cum", cum)

    @classmethod
    def log_linear(
        cls,
        size: int,
        top: float,
        slope: float,
        floor: float = 0.0,
        knots: int = 400,
    ) -> PiecewiseLinearShape:
        """q(x) ≈ clip(top − slope·ln x, floor, 1), linear between ``knots`` geometric points.

        A density falling by ``slope`` per e-fold of rank: steep enough (with the balanced
        arrangement) it satisfies the monotonicity assumptions of PAULA exactly.
        """
        x = np.unique(np.round(np.geomspace(1.0, float(size), knots)))
        q = np.clip(top - slope * np.log(x), floor, 1.0)
        return cls(np.concatenate([[0.0], x]), np.concatenate([[q[0]], q]))

    def cumulative(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        x, q, cum = self.x, self.q, self._cum
        k = np.clip(np.searchsorted(x, t, side="right") - 1, 0, x.size - 1)
        before = t < x[0]
        after = k == x.size - 1
        dx = np.where(after, 0.0, np.diff(x, append=x[-1] + 1.0)[k])
        slope = np.where(after, 0.0, (np.diff(q, append=q[-1])[k]) / np.where(dx > 0, dx, 1.0))
        u = t - x[k]
        inside = cum[k] + q[k] * u + 0.5 * slope * u * u
        return np.where(before, q[0] * t, inside)


@dataclass(frozen=True)
class BumpShape:
    """``base`` plus ``height`` on the rank range (start, stop]: a local rise in precision.

    Used to simulate lists that violate monotonicity (as PPDB does near rank 15K in PAULA
    Fig. 2).  The caller keeps base density + height ≤ 1 on the range (label probabilities are
    clipped to [0, 1] otherwise, and the expected precision is then slightly off).
    """

    base: PrecisionShape
    start: float
    stop: float
    height: float

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.stop or not -1 <= self.height <= 1:
            raise ValueError("need 0 ≤ start < stop and |height| ≤ 1")

    def cumulative(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        extra = self.height * (np.clip(x, self.start, self.stop) - self.start)
        return self.base.cumulative(x) + extra


# ----------------------------------------------------------------------------- simulated list

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _uniform_at(key: np.uint64, ranks: np.ndarray) -> np.ndarray:
    """Uniform [0, 1) numbers that are a fixed function of (key, rank): a counter-based stream.

    A 64-bit mixing finaliser applied to key + rank·φ (φ = 2⁶⁴/golden ratio); gives random
    access by rank with no state, so labels can be drawn lazily for any N.
    """
    with np.errstate(over="ignore"):
        z = key + ranks.astype(np.uint64) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def _key_from(seed: int | np.random.Generator) -> np.uint64:
    if isinstance(seed, np.random.Generator):
        return np.uint64(seed.integers(0, 2**63, dtype=np.int64))
    return np.uint64(np.random.SeedSequence(int(seed)).generate_state(1, np.uint64)[0])


@dataclass(frozen=True)
class SimulatedRankedList(_ExactPrecisionMixin):
    """N items with labels drawn lazily from a :class:`PrecisionShape`, reproducibly.

    Parameters
    ----------
    size
        N (any size: memory does not grow with N).
    shape
        The label density (see :class:`PrecisionShape`).
    seed
        An int or a :class:`numpy.random.Generator`; it fixes a 64-bit key, and the label at
        rank r is a fixed function of (key, r), so ``labels`` gives the same answer for a rank
        however and whenever it is asked.
    arrangement
        ``"bernoulli"`` (default): independent labels, P(v(t_r) = 1) = D(r) − D(r−1).
        ``"balanced"``: the deterministic low-discrepancy sequence v(t_r) = ⌊D(r)⌋ − ⌊D(r−1)⌋,
        whose yield is exactly ⌊D(r)⌋ (every window of w ranks holds w·(mean density) ± 1
        positives); it satisfies the monotonicity assumptions whenever the density decreases
        fast enough, which makes the papers' theorems testable exactly.

    ``labels(ranks)`` is the oracle; ``true_precision(ranks)`` the realised p(r) (exact;
    O(1) for ``"balanced"``, a chunked pass over ranks ≤ max(ranks) for ``"bernoulli"``);
    ``expected_precision(ranks)`` = D(r)/r.
    """

    size: int
    shape: PrecisionShape
    seed: int | np.random.Generator = 0
    arrangement: str = "bernoulli"
    key: np.uint64 = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError("size must be ≥ 1")
        if self.arrangement not in ("bernoulli", "balanced"):
            raise ValueError("arrangement must be 'bernoulli' or 'balanced'")
        object.__setattr__(self, "size", int(self.size))
        object.__setattr__(self, "key", _key_from(self.seed))

    @classmethod
    def scaled(
        cls,
        base_labels: np.ndarray,
        scale: int = 10,
        window: int = 100,
        seed: int | np.random.Generator = 0,
        arrangement: str = "bernoulli",
    ) -> SimulatedRankedList:
        """The scaled variants of AdaStrat §5 (e.g. PPDB-36K-10x): size = len(base) · scale."""
        shape = ScaledSequenceShape.from_labels(base_labels, window=window, scale=scale)
        return cls(shape.size, shape, seed, arrangement)

    def probabilities(self, ranks: np.ndarray) -> np.ndarray:
        """P(v(t_r) = 1) = D(r) − D(r−1) at ``ranks``."""
        r = _check_ranks(ranks, self.size).astype(np.float64)
        return np.clip(self.shape.cumulative(r) - self.shape.cumulative(r - 1.0), 0.0, 1.0)

    def labels(self, ranks: np.ndarray) -> np.ndarray:
        ranks = _check_ranks(ranks, self.size)
        if self.arrangement == "balanced":
            r = ranks.astype(np.float64)
            step = np.floor(self.shape.cumulative(r)) - np.floor(self.shape.cumulative(r - 1.0))
            return np.clip(step, 0.0, 1.0)
        return (_uniform_at(self.key, ranks) < self.probabilities(ranks)).astype(np.float64)

    def iter_labels(
        self, chunk_size: int = DEFAULT_CHUNK, start: int = 1, stop: int | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        for first, last in _chunk_bounds(self.size, chunk_size, start, stop):
            yield first, self.labels(np.arange(first, last + 1, dtype=np.int64))

    def expected_precision(self, ranks: np.ndarray) -> np.ndarray:
        """E[p(r)] = D(r)/r: the smooth shape's precision function."""
        r = _check_ranks(ranks, self.size).astype(np.float64)
        return self.shape.cumulative(r) / r

    def true_precision(self, ranks: np.ndarray, chunk_size: int = DEFAULT_CHUNK) -> np.ndarray:
        """Realised p(r) of the drawn labels at ``ranks`` (exact)."""
        ranks = _check_ranks(ranks, self.size)
        if self.arrangement == "balanced" and not isinstance(self.shape, BumpShape):
            # Yield of the balanced sequence telescopes to ⌊D(r)⌋ − ⌊D(0)⌋ (when no step clips).
            r = ranks.astype(np.float64)
            return (np.floor(self.shape.cumulative(r)) - np.floor(self.shape.cumulative(0.0))) / r
        return super().true_precision(ranks, chunk_size)


def system_ranked_list(outputs: pd.DataFrame, system: str) -> pd.DataFrame:
    """One system's outputs of a task in its confidence order, with ``rank`` (1-based).

    The one definition of a system's ranked list: score descending, ties by ``query_id`` then
    ``answer``, outputs without a score last in input order (:class:`FrameRankedList`).  Keeps
    ``query_id, answer, answer_raw (when present), score, fact``.
    """
    columns = [c for c in ("query_id", "answer", "answer_raw", "score", "fact") if c in outputs]
    rows = outputs.loc[outputs["system"] == system, columns]
    return FrameRankedList.from_frame(rows).frame
