"""Writing score results as CSV and JSON (atomically) and as an aligned terminal table."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from receval.formats.tables import write_text_atomic


def curve_file_stem(system: str) -> str:
    """The file stem of a system's curve in ``DIR/curves/`` (unsafe characters become ``_``)."""
    return "".join(c if c.isalnum() or c in "-_.+=@" else "_" for c in system) or "_"


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    """Write ``frame`` as CSV atomically; NaN becomes an empty field."""
    write_text_atomic(path, frame.to_csv(index=False, lineterminator="\n", float_format="%.6g"))


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        v = float(value)
        return None if math.isnan(v) or math.isinf(v) else v
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as indented JSON atomically (NaN/inf become null)."""
    write_text_atomic(path, json.dumps(_jsonable(data), indent=2, sort_keys=False) + "\n")


def format_table(frame: pd.DataFrame, columns: list[tuple[str, str]]) -> str:
    """An aligned plain-text table of ``columns`` ((column, header) pairs)."""

    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "—"
        if isinstance(v, float | np.floating):
            return f"{v:.3f}" if abs(v) < 100 else f"{v:.0f}"
        return str(v)

    rows = [[cell(r[c]) for c, _ in columns] for _, r in frame.iterrows()]
    heads = [h for _, h in columns]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(heads)]
    numeric = [frame[c].dtype.kind in "fiu" for c, _ in columns]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        )

    out = [line(heads), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(x.rstrip() for x in out)


#: Columns read as text (never numbers, never NaN: a system called "NA" stays "NA").
TEXT_COLUMNS = (
    "system",
    "team",
    "query_id",
    "answer",
    "fact",
    "note",
    "interval",
    "estimator",
    "precision_at_target_method",
    "quantity",
    "kind",
    "description",
    "decision",
    "votes",
    "metric",
    "tier",
)


def read_output_csv(path: Path) -> pd.DataFrame:
    """A CSV written by receval: empty fields are NaN, :data:`TEXT_COLUMNS` stay text; a file
    that is not such a table (edited by hand, truncated) is a :class:`BundleError` naming it."""
    import re

    from receval.errors import BundleError

    try:
        head = pd.read_csv(path, nrows=0)
        dtypes = {c: str for c in head.columns if c in TEXT_COLUMNS}
        return pd.read_csv(path, keep_default_na=False, na_values=[""], dtype=dtypes)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        line = re.search(r"line (\d+)", str(exc))
        text = str(exc).replace("Error tokenizing data. C error: ", "").strip()
        raise BundleError(
            path, int(line.group(1)) if line else None, f"cannot read the table: {text}"
        ) from None


def read_leaderboard(path: Path) -> pd.DataFrame:
    """Read a ``leaderboard.csv`` written by ``receval score`` (missing or unreadable file:
    BundleError)."""
    from receval.errors import BundleError

    if not Path(path).is_file():
        raise BundleError(
            path, None, "no leaderboard here: run `receval score TASK --out DIR` first"
        )
    board = read_output_csv(path)
    if "system" not in board.columns:
        raise BundleError(path, 1, "missing required column system")
    if "best_of_team" in board:
        board["best_of_team"] = board["best_of_team"].astype(str).str.lower() == "true"
    return board


def leaderboard_records(board: pd.DataFrame, best_per_team: bool = False) -> list[dict[str, Any]]:
    """The leaderboard as JSON-ready records (NaN becomes null), optionally best run per team."""
    if best_per_team and "best_of_team" in board:
        board = board[board["best_of_team"]]
    return [_jsonable(row) for row in board.to_dict(orient="records")]
