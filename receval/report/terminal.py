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
from dataclasses import dataclass
from typing import Any

import pandas as pd

from receval.run_record import RunRecord

__all__ = ["fit_text", "format_leaderboard", "format_value", "metric_heads", "terminal_width"]

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


def terminal_width(default: int = 100) -> int:
    """The terminal's width in columns (``COLUMNS``, else the terminal of stdout), or
    ``default`` when it is unknown (output to a file or a pipe)."""
    import shutil

    return shutil.get_terminal_size((default, 24)).columns


@dataclass
class _Column:
    head: str
    cells: list[str]
    right: bool = False

    @property
    def width(self) -> int:
        return max([len(self.head)] + [len(c) for c in self.cells])


def _metric_cells(board: pd.DataFrame, column: str, marks: list[str], intervals: bool) -> list[str]:
    lo = board.get(f"{column}_lo") if intervals else None
    hi = board.get(f"{column}_hi") if intervals else None
    return [
        format_value(
            board[column].iloc[i],
            None if lo is None else lo.iloc[i],
            None if hi is None else hi.iloc[i],
            marks[i],
        )
        for i in range(len(board))
    ]


def _abbreviate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


#: System names longer than this are cut in a narrow terminal.
SYSTEM_WIDTH = 14

#: What a narrow terminal gives up, in order, until the table fits: (what, step).
_NARROWING = (
    "team",
    "tier",
    "system names",
    "intervals of P and R",
    "rank interval",
    "R",
    "P",
    "remaining intervals",
)


def format_leaderboard(
    board: pd.DataFrame,
    *,
    backtest_limit: float | None = None,
    legend: bool = True,
    width: int | None = None,
    heads: dict[str, str] | None = None,
) -> str:
    """The leaderboard ``board`` (columns as in ``leaderboard.csv``) as an aligned text table.

    Columns: rank, rank interval, tier, system, team, P, R, F1 and, when present, precision at
    the target recall, each metric with its interval and marks (see the module docstring).
    ``backtest_limit`` defaults to :data:`receval.estimators.target.BACKTEST_LIMIT`.

    ``width`` (columns; None: no limit) makes the table fit: it gives up, in this order and only
    as far as needed, the team column, the tier, the end of long system names, the intervals of
    P and R, the rank interval, the R and P columns and the remaining intervals; the legend names
    what was left out (``leaderboard.csv`` has everything).  A column with nothing in it (no
    rank interval or tier in a census, a team column that repeats the system) is left out.

    ``heads`` renames metric columns (``{"precision": "P@10"}``; :func:`metric_heads`).
    """
    if backtest_limit is None:
        from receval.estimators.target import BACKTEST_LIMIT

        backtest_limit = BACKTEST_LIMIT
    has_target = "precision_at_target" in board.columns
    board = board.reset_index(drop=True)
    marks = _board_marks(board, has_target, backtest_limit)
    used = {m for column in marks.values() for cell in column for m in cell}
    columns, dropped = _fit_columns(board, marks, has_target, width, heads or {})
    out = _table(columns)
    if legend and len(board):
        out += _fitted_legend(board, used, has_target, backtest_limit, dropped, width)
    return "\n".join(out)


def _board_marks(
    board: pd.DataFrame, has_target: bool, backtest_limit: float
) -> dict[str, list[str]]:
    """Per metric column, the marks of each row ("!" flagged, "*" extrapolated)."""
    note = board["note"] if "note" in board.columns else pd.Series([None] * len(board))
    marks = {c: ["!" if _noted(n, c) else "" for n in note] for c, _ in METRICS}
    if has_target:
        marks["precision_at_target"] = [
            _target_marks(row, backtest_limit) for _, row in board.iterrows()
        ]
    return marks


def _fit_columns(
    board: pd.DataFrame,
    marks: dict[str, list[str]],
    has_target: bool,
    width: int | None,
    heads: dict[str, str],
) -> tuple[list[_Column], list[str]]:
    """The columns after the fewest narrowing steps that fit ``width``, and those steps."""
    dropped: list[str] = []
    for step in (None, *_NARROWING):
        if step is not None:
            if step in _empty_parts(board):
                continue
            dropped.append(step)
        columns = _columns(board, marks, has_target, dropped, heads)
        total = sum(c.width for c in columns) + 2 * (len(columns) - 1)
        if width is None or total <= width:
            break
    return columns, dropped


def _fitted_legend(
    board: pd.DataFrame,
    used: set[str],
    has_target: bool,
    backtest_limit: float,
    dropped: list[str],
    width: int | None,
) -> list[str]:
    """The legend lines, each wrapped to ``width``."""
    cut = "system names" in dropped and any(len(str(n)) > SYSTEM_WIDTH for n in board["system"])
    intervals = any(
        not _missing(v) for c, _ in METRICS for v in _board_values(board, f"{c}_lo")
    ) or (
        has_target and any(not _missing(v) for v in _board_values(board, "precision_at_target_lo"))
    )
    notes = _legend(used, has_target, backtest_limit, dropped, cut)
    if not intervals:
        notes[1] = "values: estimates (no intervals in this run)"
    if width is not None:
        notes = [line if len(line) <= width else _wrap(line, width) for line in notes]
    return notes


def _board_values(board: pd.DataFrame, name: str) -> list[Any]:
    """Column ``name`` of ``board`` as a list (all None when the column is absent)."""
    return list(board[name]) if name in board.columns else [None] * len(board)


def _empty_parts(board: pd.DataFrame) -> set[str]:
    """The narrowing steps whose column says nothing here: no rank interval or no tier in any
    row (a census), a team that is the system in every row (one run per team)."""
    empty = set()
    if all(_missing(v) for v in _board_values(board, "rank_lo")):
        empty.add("rank interval")
    if all(_missing(v) for v in _board_values(board, "tier")):
        empty.add("tier")
    teams = _board_values(board, "team")
    if all(str(t) == str(s) for t, s in zip(teams, _board_values(board, "system"), strict=True)):
        empty.add("team")
    return empty


def _columns(
    board: pd.DataFrame,
    marks: dict[str, list[str]],
    has_target: bool,
    dropped: list[str],
    heads: dict[str, str] | None = None,
) -> list[_Column]:
    """The table's columns once the narrowing steps ``dropped`` (and the empty columns) are
    left out."""
    gone = [*dropped, *_empty_parts(board)]
    return [
        *_rank_columns(board, gone),
        *_name_columns(board, gone),
        *_metric_columns(board, marks, has_target, gone, heads or {}),
    ]


def _rank_columns(board: pd.DataFrame, dropped: list[str]) -> list[_Column]:
    """rank, rank CI and tier (the last two unless dropped)."""
    columns = [
        _Column(
            "rank",
            ["—" if _missing(v) else f"{float(v):.0f}" for v in _board_values(board, "rank")],
            True,
        )
    ]
    if "rank interval" not in dropped:
        cells = [
            "—" if _missing(lo) or _missing(hi) else f"{float(lo):.0f}–{float(hi):.0f}"
            for lo, hi in zip(
                _board_values(board, "rank_lo"), _board_values(board, "rank_hi"), strict=True
            )
        ]
        columns.append(_Column("rank CI", cells, True))
    if "tier" not in dropped:
        tiers = ["—" if _missing(v) else str(v) for v in _board_values(board, "tier")]
        columns.append(_Column("tier", tiers, True))
    return columns


def _name_columns(board: pd.DataFrame, dropped: list[str]) -> list[_Column]:
    """system (cut when "system names" is dropped) and team (unless dropped)."""
    names = ["" if v is None else str(v) for v in _board_values(board, "system")]
    if "system names" in dropped:
        names = [_abbreviate(n, SYSTEM_WIDTH) for n in names]
    columns = [_Column("system", names)]
    if "team" not in dropped:
        teams = ["—" if _missing(v) else str(v) for v in _board_values(board, "team")]
        columns.append(_Column("team", teams))
    return columns


def _metric_columns(
    board: pd.DataFrame,
    marks: dict[str, list[str]],
    has_target: bool,
    dropped: list[str],
    heads: dict[str, str],
) -> list[_Column]:
    """P, R, F1 (unless dropped) and P@R_T, with their intervals unless dropped; ``heads``
    renames them."""
    shown = [(c, h) for c, h in METRICS if h not in dropped]
    if has_target:
        shown.append(("precision_at_target", "P@R_T"))
    columns = []
    for column, head in shown:
        narrowed = "remaining intervals" if head in ("F1", "P@R_T") else "intervals of P and R"
        cells = _metric_cells(board, column, marks[column], narrowed not in dropped)
        columns.append(_Column(heads.get(column, head), cells))
    return columns


def _table(columns: list[_Column]) -> list[str]:
    widths = [c.width for c in columns]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if c.right else v.ljust(w)
            for v, w, c in zip(values, widths, columns, strict=True)
        ).rstrip()

    rows = zip(*(c.cells for c in columns), strict=True)
    heads = [c.head for c in columns]
    return [line(heads), "  ".join("-" * w for w in widths), *(line(list(r)) for r in rows)]


def _legend(
    used: set[str], has_target: bool, limit: float, dropped: list[str], cut: bool
) -> list[str]:
    out = ["", "values: estimate [interval]"]
    if "*" in used:
        out.append("*  precision at R_T is a model extrapolation (Dimm), not read off a curve")
    if "!" in used:
        out.append("!  flagged: see the note column of leaderboard.csv")
        if has_target:
            out.append(
                f"   (P@R_T: also a back-test deviation > {limit:.2f}, where Dimm's "
                "curve does not fit the system's own curve)"
            )
    left = ", ".join(d for d in dropped if d != "system names")
    parts = [f"not shown to fit the terminal: {left}"] if left else []
    if cut:
        parts.append(f"system names cut to {SYSTEM_WIDTH} characters (…)")
    if parts:
        out.append("; ".join(parts) + " (all in leaderboard.csv)")
    return out


def _wrap(line: str, width: int) -> str:
    """A legend line wrapped to ``width`` (continuation lines indented by three spaces)."""
    import textwrap

    return "\n".join(textwrap.wrap(line, width, subsequent_indent="   ", break_on_hyphens=False))


def metric_heads(run: RunRecord | None) -> dict[str, str]:
    """The metric heads a run's record asks for: ``P@K`` and ``R@K`` when each system's top K
    responses per query were scored (``run.json`` ``official.cutoff``), else none (P, R)."""
    cutoff = None if run is None or run.official is None else run.official.cutoff
    if cutoff is None:
        return {}
    return {"precision": f"P@{int(cutoff)}", "recall": f"R@{int(cutoff)}"}


def fit_text(text: str, width: int | None, prefix: str = "", indent: str = "  ") -> str:
    """``prefix + text`` wrapped to ``width`` columns (continuation lines indented by
    ``indent``); one line when ``width`` is None.  Paths and other long words are not cut."""
    import textwrap

    line = prefix + text
    if width is None or len(line) <= width:
        return line
    return "\n".join(
        textwrap.wrap(
            line,
            width,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
    )
