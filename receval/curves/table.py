"""A curve as a table: precision, yield and recall with their bounds (``curve estimate``'s CSV).

At each knot rank k the yield C(k) = k·p(k) is the number of correct items in the top k.  Where
``lower ≤ p(k) ≤ upper`` (the curve's kind says whether that is guaranteed, an interval or an
approximation), k·lower ≤ C(k) ≤ k·upper.  Recall at k is C(k)/T
with T the number of correct facts in the universe: when T is known exactly the recall bounds are
the yield bounds over T; when T is estimated with an interval [T⁻, T⁺] they are
[C⁻(k)/T⁺, min(1, C⁺(k)/T⁻)], which holds whenever both the curve's bounds and T's interval do
(a union bound: level ≥ 1 − δ − α for a (1 − α) interval on T).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from receval.curves.base import CurveEstimate

__all__ = ["curve_frame", "outward_rounded"]


def curve_frame(
    est: CurveEstimate,
    true_facts: float | None = None,
    true_facts_interval: tuple[float, float] | None = None,
) -> pd.DataFrame:
    """The curve as one row per knot.

    Parameters
    ----------
    est
        The curve.
    true_facts
        T, the number of correct facts (exact or a point estimate); no recall columns when None.
    true_facts_interval
        (T⁻, T⁺) when T is estimated; None when T is exact.

    Returns
    -------
    DataFrame
        ``rank, precision, lower, upper[, recall], queried, kind`` (the original contract), then
        ``[recall_lower, recall_upper,] yield, yield_lower, yield_upper`` and the method's extra
        columns (e.g. AdaStrat's ``envelope_lower``, ``envelope_upper``).  ``kind`` is ``exact``
        on the exactly labelled prefix.
    """
    ranks = np.asarray(est.ranks, np.int64)
    k = ranks.astype(np.float64)
    frame = pd.DataFrame(
        {"rank": ranks, "precision": est.precision, "lower": est.lower, "upper": est.upper}
    )
    yield_est = np.asarray(est.precision, np.float64) * k
    yield_lo = np.asarray(est.lower, np.float64) * k
    yield_hi = np.asarray(est.upper, np.float64) * k
    if true_facts:
        frame["recall"] = yield_est / true_facts
    frame["queried"] = np.isin(ranks, est.queried).astype(int)
    frame["kind"] = est.row_kinds()
    if true_facts:
        t_lo, t_hi = true_facts_interval or (true_facts, true_facts)
        with np.errstate(divide="ignore", invalid="ignore"):
            frame["recall_lower"] = np.clip(yield_lo / t_hi, 0.0, 1.0)
            frame["recall_upper"] = np.clip(yield_hi / t_lo, 0.0, 1.0) if t_lo > 0 else 1.0
    frame["yield"] = yield_est
    frame["yield_lower"] = yield_lo
    frame["yield_upper"] = yield_hi
    for name, values in est.columns.items():
        frame[name] = values
    return frame


#: Significant digits of the numbers in ``curve.csv`` (``receval.report.writers.write_csv``).
CSV_DIGITS = 6


def outward_rounded(frame: pd.DataFrame, digits: int = CSV_DIGITS) -> pd.DataFrame:
    """A copy of a curve table whose bound columns survive writing with ``digits`` digits.

    Every column ending in ``lower`` is rounded down and every column ending in ``upper`` up, to
    ``digits`` significant digits (a value with no more digits is kept as it is), so the written
    bounds still contain whatever the exact bounds contained; ``precision`` and the other
    columns are untouched (written rounded to nearest).
    """
    out = frame.copy()
    for name in out.columns:
        if name.endswith("lower") or name.endswith("upper"):
            out[name] = _rounded(out[name].to_numpy(np.float64), name.endswith("upper"), digits)
    return out


def _rounded(values: np.ndarray, up: bool, digits: int) -> np.ndarray:
    """``values`` rounded towards +inf (``up``) or -inf at ``digits`` significant digits.

    Exact decimal arithmetic: the decimal q is ≤ v (≥ v for ``up``), so its nearest double —
    what a reader parses — is too."""
    from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

    mode = ROUND_CEILING if up else ROUND_FLOOR
    out = values.copy()
    for i in np.flatnonzero(np.isfinite(values) & (values != 0.0)):
        if float(f"{values[i]:.{digits}g}") == values[i]:
            continue  # written and read back as the same double
        exact = Decimal(float(values[i]))
        step = Decimal(1).scaleb(exact.adjusted() - digits + 1)
        out[i] = float(exact.quantize(step, rounding=mode))
    return out
