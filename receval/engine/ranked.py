"""Ranked-list access for curves: the items at requested ranks of an unsorted list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from receval.engine.base import Engine
from receval.engine.queries import ITEMS_AT_RANKS


def items_at_ranks(
    items: pd.DataFrame | Path | str,
    ranks: np.ndarray | list[int],
    engine: Engine,
    *,
    score: str = "score",
    tiebreak: tuple[str, ...] = (),
) -> pd.DataFrame:
    """The rows at the 1-based ``ranks`` of ``items`` ordered by decreasing ``score``.

    ``items`` is a pandas frame or an unsorted Parquet file / folder (read by the engine, never
    loaded whole into Python; DuckDB sorts out of core, spilling to its ``temp_directory``).  Ties
    in ``score`` are broken by ``tiebreak`` columns ascending (give a unique key, e.g. the item
    id, for a reproducible order; without one the order of tied items is the engine's).
    Returns the requested rows with a ``rank`` column, in rank order; ranks beyond the list are
    absent.  Only the requested rows come back to Python.
    """
    wanted = np.unique(np.asarray(ranks, dtype=np.int64))
    if len(wanted) and wanted[0] < 1:
        raise ValueError("ranks are 1-based")
    engine.register("items", items if isinstance(items, pd.DataFrame) else Path(items))
    engine.register("wanted", pd.DataFrame({"rank": wanted}))
    order = ", ".join(f"{c} ASC" for c in tiebreak) or f"{score} DESC"
    sql = ITEMS_AT_RANKS.format(score=score, tiebreak=order)
    out = engine.query(sql)
    out["rank"] = out["rank"].astype(np.int64)
    return out.reset_index(drop=True)
