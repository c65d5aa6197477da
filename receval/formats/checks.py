"""Checks shared by every bundle table reader (the task loader, the judge table): required
columns, non-empty values, finite numbers, known queries — each a ``BundleError`` naming the
file and line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from receval.errors import BundleError
from receval.formats.tables import LINE

__all__ = [
    "check_queries_known",
    "nonempty",
    "numbers",
    "parse_numbers",
    "raise_first_bad",
    "require_columns",
    "whole_numbers",
]


def raise_first_bad(
    frame: pd.DataFrame, path: Path | str, bad: Any, problem: str | Callable[[int], str]
) -> None:
    """A ``BundleError`` at the line of the first row of ``frame`` where ``bad`` holds (a
    boolean mask over its rows; nothing when none does).  ``problem``: the message, or a
    function of that row's position giving it."""
    flags = np.asarray(bad, dtype=bool)
    if not flags.any():
        return
    i = int(np.flatnonzero(flags)[0])
    text = problem(i) if callable(problem) else problem
    raise BundleError(path, int(frame[LINE].iloc[i]), text)


def unique_values(frame: pd.DataFrame, path: Path | str, column: str) -> None:
    """A ``BundleError`` at the first row whose ``column`` value an earlier row has
    (``duplicate <column> '<value>'``): the key check of queries and exhaustive units."""
    values = frame[column]
    raise_first_bad(
        frame, path, values.duplicated(), lambda i: f"duplicate {column} {values.iloc[i]!r}"
    )


def require_columns(src: Any, columns: tuple[str, ...], reserved: tuple[str, ...] = ()) -> None:
    """Required columns present, reserved (derived) column names absent: ``src`` is a table
    source with ``path``, ``columns`` and ``header`` (the line its header problems name)."""
    path = src.path
    missing = [c for c in columns if c not in src.columns]
    if missing:
        names = src.columns
        have = ", ".join(names) or "none"
        hint = ""
        if len(names) == 1 and any(d in names[0] for d in ";|,\t "):
            hint = "; wrong delimiter? .tsv is tab-separated, .csv comma-separated"
        what = "header has" if src.header else "columns are"
        raise BundleError(
            path,
            src.header,
            f"missing required column(s) {', '.join(missing)} ({what}: {have}){hint}",
        )
    clash = [c for c in reserved if c in src.columns]
    if clash:
        raise BundleError(
            path,
            src.header,
            f"column name(s) {', '.join(clash)} are reserved (receval derives them); rename them",
        )


def nonempty(
    frame: pd.DataFrame,
    path: Path,
    columns: tuple[str, ...],
    *,
    verbatim: tuple[str, ...] = ("answer",),
) -> None:
    """No blank value in ``columns``; values are stripped, except ``verbatim`` columns (answers
    are normalised per ``[matching]``, which may keep surrounding whitespace)."""
    for col in columns:
        values = frame[col].astype(str)
        stripped = values.str.strip()
        raise_first_bad(frame, path, stripped == "", f"empty value in required column {col!r}")
        frame[col] = values if col in verbatim else stripped


def numbers(frame: pd.DataFrame, path: Path, col: str, *, allow_empty: bool) -> pd.Series:
    """``col`` as finite floats (NaN for an empty value where ``allow_empty``)."""
    if pd.api.types.is_numeric_dtype(frame[col].dtype):  # a typed Parquet / Arrow column
        values = frame[col].astype(float)
        bad = np.isinf(values.to_numpy()) | (values.isna().to_numpy() & (not allow_empty))

        def problem(i: int) -> str:
            text = "" if np.isnan(values.iloc[i]) else repr(float(values.iloc[i]))
            return f"column {col!r}: {text!r} is not a finite number"

        raise_first_bad(frame, path, bad, problem)
        return values
    text = frame[col].astype(str).str.strip()
    values, bad = parse_numbers(text, allow_empty)
    raise_first_bad(
        frame, path, bad, lambda i: f"column {col!r}: {text.iloc[i]!r} is not a finite number"
    )
    return values


def parse_numbers(text: pd.Series, allow_empty: bool) -> tuple[pd.Series, np.ndarray]:
    """(float values, flags of the texts that are not finite numbers) of stripped texts; an
    empty text is NaN (flagged unless ``allow_empty``)."""
    values = pd.to_numeric(text.where(text != "", None), errors="coerce")
    bad = values.isna() & (text != "")
    bad |= np.isinf(values.fillna(0.0))
    if not allow_empty:
        bad |= text == ""
    return values.astype(float), bad.to_numpy()


def whole_numbers(text: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values, flags of the texts that are not whole numbers) of texts such as ranks:
    ``+5`` and ``1.0`` are whole; ``1.5``, ``inf``, ``1e400``, blanks and values beyond 2^53
    (where floats skip integers) are flagged (their value is 0)."""
    values, bad = parse_numbers(text.astype(str).str.strip(), allow_empty=False)
    values = values.to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        bad = bad | ~(np.abs(values) < 2.0**53) | (values != np.round(values))
    return np.where(bad, 0.0, values).astype(np.int64), bad


def check_queries_known(frame: pd.DataFrame, path: Path, known: set[str]) -> None:
    """Every ``query_id`` of ``frame`` is one of ``known``."""
    codes, uniques = pd.factorize(frame["query_id"])
    unknown = ~np.append(pd.Index(uniques).isin(known), False)[codes]
    raise_first_bad(
        frame,
        path,
        unknown,
        lambda i: (
            f"query_id {frame['query_id'].iloc[i]!r} is not in queries "
            f"({int(unknown.sum())} such rows)"
        ),
    )
