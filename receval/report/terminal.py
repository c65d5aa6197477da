"""The leaderboard as an aligned plain-text table for a terminal (``receval score`` prints it).

Each metric shows its estimate and, compactly, its interval: ``0.439 [.41,.48]`` (two decimals,
leading zero dropped inside the brackets).  Marks after a value say what the HTML report says
with colour and words:

* ``*`` precision at R_T is a model extrapolation (Dimm), not an estimate from the curve;
* ``!`` the value is flagged: the row's ``note`` in ``leaderboard.csv`` says something about this
  metric (no interval, extrapolated far, refused, ...), or, for precision at R_T, its back-test
  deviation exceeds the limit (Dimm's curve does not fit the system's own curve).

A legend under the table explains the marks that occur.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

__all__ = ["format_leaderboard", "format_value"]

#: (column, header) of the metrics shown, in order.
METRICS = (("precision", "P"), ("recall", "R"), ("f1", "F1"))


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return str(value).strip() == ""


def _bound(value: float) -> str:
    """An interval end in two decimals, without the leading zero of a value in (−1, 1)."""
    text = f"{value:.2f}"
    if text.startswith("0."):
        return text[1:]
    if text.startswith("-0."):
        return "-" + text[2:]
    return text


def format_value(estimate: Any, lower: Any = None, upper: Any = None, marks: str = "") -> str:
    """``0.439 [.41,.48]`` plus ``marks``; ``—`` when the estimate is missing.

    >>> format_value(0.4391, 0.411, 0.478, "*")
    '0.439 [.41,.48] *'
    """
    if _missing(estimate):
        text = "—"
    else:
        text = f"{float(estimate):.3f}"
        if not _missing(lower) and not _missing(upper):
            text += f" [{_bound(float(lower))},{_bound(float(upper))}]"
    return f"{text} {marks}" if marks else text


def _noted(note: Any, metric: str) -> bool:
    """Whether the row's note has a part about ``metric`` ("<metric>: ...")."""
    if _missing(note):
        return False
    return any(part.strip().startswith(f"{metric}:") for part in str(note).split(";"))


def _target_marks(row: pd.Series, limit: float) -> str:
    marks = "*" if str(row.get("precision_at_target_method", "")) == "dimm" else ""
    backtest = row.get("precision_at_target_backtest")
    poor = not _missing(backtest) and float(backtest) > limit
    if poor or _noted(row.get("note"), "precision_at_target"):
        marks += "!"
    return marks


def format_leaderboard(
    board: pd.DataFrame, *, backtest_limit: float | None = None, legend: bool = True
) -> str:
    """The leaderboard ``board`` (columns as in ``leaderboard.csv``) as an aligned text table.

    Columns: rank, rank interval, tier, system, team, P, R, F1 and, when present, precision at
    the target recall, each metric with its interval and marks (see the module docstring).
    ``backtest_limit`` defaults to :data:`receval.estimators.target.BACKTEST_LIMIT`.
    """
    if backtest_limit is None:
        from receval.estimators.target import BACKTEST_LIMIT

        backtest_limit = BACKTEST_LIMIT
    has_target = "precision_at_target" in board.columns
    heads = ["rank", "rank CI", "tier", "system", "team", *(h for _, h in METRICS)]
    right = [True, True, True, False, False, False, False, False]
    if has_target:
        heads.append("P@R_T")
        right.append(False)
    rows: list[list[str]] = []
    used: set[str] = set()
    for _, row in board.iterrows():
        lo, hi = row.get("rank_lo"), row.get("rank_hi")
        cells = [
            "—" if _missing(row.get("rank")) else f"{float(row['rank']):.0f}",
            "—" if _missing(lo) or _missing(hi) else f"{float(lo):.0f}–{float(hi):.0f}",
            "—" if _missing(row.get("tier")) else str(row.get("tier")),
            str(row.get("system", "")),
            "—" if _missing(row.get("team")) else str(row.get("team")),
        ]
        for column, _ in METRICS:
            marks = "!" if _noted(row.get("note"), column) else ""
            used.update(marks)
            cells.append(
                format_value(
                    row.get(column), row.get(f"{column}_lo"), row.get(f"{column}_hi"), marks
                )
            )
        if has_target:
            marks = _target_marks(row, backtest_limit)
            used.update(marks)
            cells.append(
                format_value(
                    row.get("precision_at_target"),
                    row.get("precision_at_target_lo"),
                    row.get("precision_at_target_hi"),
                    marks,
                )
            )
        rows.append(cells)
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(heads)]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        ).rstrip()

    out = [line(heads), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]
    if legend and rows:
        out.append("")
        out.append("values: estimate [interval]")
        if "*" in used:
            out.append("*  precision at R_T is a model extrapolation (Dimm), not read off a curve")
        if "!" in used:
            out.append("!  flagged: see the note column of leaderboard.csv")
            if has_target:
                out.append(
                    f"   (P@R_T: also a back-test deviation > {backtest_limit:.2f}, where Dimm's "
                    "curve does not fit the system's own curve)"
                )
    return "\n".join(out)
