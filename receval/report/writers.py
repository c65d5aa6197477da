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


def read_leaderboard(path: Path) -> pd.DataFrame:
    """Read a ``leaderboard.csv`` written by ``receval score`` (missing file: BundleError)."""
    from receval.errors import BundleError

    if not Path(path).is_file():
        raise BundleError(
            path, None, "no leaderboard here: run `receval score TASK --out DIR` first"
        )
    board = pd.read_csv(path, keep_default_na=False, na_values=[""])
    if "best_of_team" in board:
        board["best_of_team"] = board["best_of_team"].astype(str).str.lower() == "true"
    return board


def leaderboard_records(board: pd.DataFrame, best_per_team: bool = False) -> list[dict[str, Any]]:
    """The leaderboard as JSON-ready records (NaN becomes null), optionally best run per team."""
    if best_per_team and "best_of_team" in board:
        board = board[board["best_of_team"]]
    return [_jsonable(row) for row in board.to_dict(orient="records")]
