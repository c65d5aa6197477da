"""Ranked-list access for curves: the items at requested ranks of an unsorted list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from receval.engine.base import Engine
from receval.engine.queries import AT_RANKS, ITEMS_AT_RANKS, RANKED_LIST


def items_at_ranks(
    items: pd.DataFrame | Path | str,
    ranks: np.ndarray | list[int],
    engine: Engine,
    *,
    score: str = "score",
    tiebreak: tuple[str, ...] = (),
    ranked: bool = False,
) -> pd.DataFrame:
    """The rows at the 1-based ``ranks`` of ``items`` ordered by decreasing ``score``.

    ``items`` is a pandas frame or an unsorted Parquet file / folder (read by the engine, never
    loaded whole into Python; DuckDB sorts out of core, spilling to its ``temp_directory``).  Ties
    in ``score`` are broken by ``tiebreak`` columns ascending (give a unique key, e.g. the item
    id, for a reproducible order; without one the order of tied items is the engine's).
    Returns the requested rows with a ``rank`` column, in rank order; ranks beyond the list are
    absent.  Only the requested rows come back to Python.

    Each call sorts the whole list.  For repeated batches, write the ranked list once with
    :func:`write_ranked_list` and pass it with ``ranked=True``: a batch then only filters on
    ``rank`` (Parquet row groups whose rank range misses every requested rank are skipped).
    """
    wanted = np.unique(np.asarray(ranks, dtype=np.int64))
    if len(wanted) and wanted[0] < 1:
        raise ValueError("ranks are 1-based")
    engine.register("items", items if isinstance(items, pd.DataFrame) else Path(items))
    if ranked:
        if not len(wanted):
            return engine.query("SELECT * FROM items WHERE 1 = 0")
        out = engine.query(AT_RANKS.format(ranks=", ".join(map(str, wanted.tolist()))))
        out["rank"] = out["rank"].astype(np.int64)
        return out.reset_index(drop=True)
    engine.register("wanted", pd.DataFrame({"rank": wanted}))
    sql = ITEMS_AT_RANKS.format(score=score, tiebreak=_order(score, tiebreak))
    out = engine.query(sql)
    out["rank"] = out["rank"].astype(np.int64)
    return out.reset_index(drop=True)


def _order(score: str, tiebreak: tuple[str, ...]) -> str:
    return ", ".join(f"{c} ASC" for c in tiebreak) or f"{score} DESC"


def write_ranked_list(
    items: pd.DataFrame | Path | str,
    out: Path | str,
    engine: Engine,
    *,
    score: str = "score",
    tiebreak: tuple[str, ...] = (),
) -> Path:
    """Sort ``items`` once (decreasing ``score``, ties by ``tiebreak``) and write it to ``out``
    as Parquet with a 1-based ``rank`` column, in rank order, for
    ``items_at_ranks(out, ranks, engine, ranked=True)``.  The sort runs in the engine (DuckDB:
    out of core, spilling to its ``temp_directory``)."""
    engine.register("items", items if isinstance(items, pd.DataFrame) else Path(items))
    engine.write_parquet(RANKED_LIST.format(score=score, tiebreak=_order(score, tiebreak)), out)
    return Path(out)
