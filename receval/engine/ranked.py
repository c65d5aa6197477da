"""Ranked-list access for curves: the items at requested ranks of an unsorted list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from receval.engine.base import Engine
from receval.engine.queries import (
    AT_RANKS,
    ITEMS_AT_RANKS,
    LABELLED_RANKS,
    RANKED_ITEMS,
    RANKED_LIST,
    RANKED_RUN,
)


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


# ----------------------------------------------------------------------------- a system's run

#: Bump when the cache layout or the ranking rule changes: older caches are then re-ranked.
CACHE_VERSION = 1

#: Run columns a file must not have (the loader derives them).
_RESERVED_RUN = ("answer_raw", "fact", "copies", "_file", "_order")


def _fingerprint(run: Path, matching) -> dict:
    """What identifies a run file's content for the cache: path, size, modification time,
    inode and a digest of the Parquet footer (row-group statistics), plus the answer matching
    rules and the cache version."""
    import hashlib

    stat = run.stat()
    with run.open("rb") as fh:
        fh.seek(max(stat.st_size - (1 << 16), 0))
        tail = fh.read()
    return {
        "version": CACHE_VERSION,
        "run": str(run.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "inode": stat.st_ino,
        "tail_sha256": hashlib.sha256(tail).hexdigest(),
        "matching": repr(matching),
    }


def _fresh(cache: Path, stamp: Path, fingerprint: dict) -> bool:
    import json

    if not (cache.is_file() and stamp.is_file()):
        return False
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    return (
        recorded.get("run_fingerprint") == fingerprint
        and recorded.get("cache_size") == cache.stat().st_size
    )


def rank_run_file(
    run: Path | str,
    cache: Path | str,
    engine: Engine,
    *,
    queries: set[str],
    matching,
    batch_rows: int = 1 << 20,
) -> Path:
    """The ranked list of one system's Parquet run file, written once to ``cache``.

    The run is read in batches of ``batch_rows`` rows (never whole): each batch is checked as
    :func:`receval.task.load_task` checks a ``runs/`` file (same messages and row numbers, the
    first problem in the loader's order), its answers are normalised
    (:func:`receval.task.normalize_answers`), and it is appended to a staging file.  The engine
    then keeps one row per fact and sorts out of core (``RANKED_RUN``), writing ``cache``
    (``query_id, answer, answer_raw, score, row``; rank = position).  A JSON stamp beside it
    records the run's fingerprint: a cache whose run changed (or whose stamp is missing) is
    never used, it is re-ranked.

    Returns
    -------
    Path
        ``cache``.
    """
    import json

    run, cache = Path(run), Path(cache)
    stamp = cache.with_suffix(".json")
    fingerprint = _fingerprint(run, matching)
    if _fresh(cache, stamp, fingerprint):
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    staged = cache.with_name(f".{cache.stem}.staged.parquet")
    try:
        _stage_run(run, staged, queries=queries, matching=matching, batch_rows=batch_rows)
        engine.register("staged", staged)
        partial = cache.with_name(f".{cache.name}.partial")
        engine.write_parquet(RANKED_RUN, partial)
        partial.replace(cache)
    finally:
        staged.unlink(missing_ok=True)
    record = {"run_fingerprint": fingerprint, "cache_size": cache.stat().st_size}
    partial_stamp = stamp.with_name(f".{stamp.name}.partial")
    partial_stamp.write_text(json.dumps(record, indent=1))
    partial_stamp.replace(stamp)
    return cache


class _RunChecks:
    """The first problem of each kind over the batches of a run file, reported in the loader's
    order once the whole file has been read (so the error is the one load_task would give)."""

    ORDER = ("system", "query_id", "answer", "unknown", "score", "team")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.first: dict[str, tuple[int, str]] = {}
        self.unknown = 0
        self.team: str | None = None

    def note(self, kind: str, lines: np.ndarray, bad: np.ndarray, message) -> None:
        if kind in self.first or not bad.any():
            return
        i = int(np.flatnonzero(bad)[0])
        self.first[kind] = (int(lines[i]), message(i))

    def raise_first(self, system: str) -> None:
        from receval.errors import BundleError

        for kind in self.ORDER:
            if kind in self.first:
                line, message = self.first[kind]
                if kind == "unknown":
                    message = f"{message} ({self.unknown} such rows)"
                raise BundleError(self.path, line, message)


def _stage_run(run: Path, staged: Path, *, queries: set[str], matching, batch_rows: int) -> None:
    """Check and normalise ``run`` batch by batch into the Parquet file ``staged``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from receval.errors import BundleError
    from receval.formats.tables import LINE, arrow_to_strings

    try:
        source = pq.ParquetFile(run)
        names = source.schema_arrow.names
    except Exception as exc:  # pyarrow raises many types for corrupt files
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BundleError(run, None, f"not a readable Parquet file ({first})") from None
    missing = [c for c in ("query_id", "answer") if c not in names]
    if missing:
        raise BundleError(
            run,
            1,
            f"missing required column(s) {', '.join(missing)} (header has: {', '.join(names)})",
        )
    clash = [c for c in _RESERVED_RUN if c in names]
    if clash:
        raise BundleError(
            run,
            1,
            f"column name(s) {', '.join(clash)} are reserved (receval derives them); rename them",
        )
    columns = [c for c in ("system", "query_id", "answer", "score", "team") if c in names]
    known = pa.array(sorted(queries), type=pa.string())
    checks = _RunChecks(run)
    schema = pa.schema(
        [
            ("query_id", pa.string()),
            ("answer", pa.string()),
            ("answer_raw", pa.string()),
            ("score", pa.float64()),
            ("row", pa.int64()),
        ]
    )
    offset = 0
    with pq.ParquetWriter(staged, schema) as writer:
        for batch in source.iter_batches(batch_size=batch_rows, columns=columns):
            frame = arrow_to_strings(pa.Table.from_batches([batch]), run, ("score",))
            frame[LINE] += offset
            offset += len(frame)
            table = _stage_batch(frame, run, known, checks, matching)
            if table is not None:
                writer.write_table(table.cast(schema))
    checks.raise_first(run.stem)


def _stage_batch(frame: pd.DataFrame, run: Path, known, checks: _RunChecks, matching):
    """One batch: note its problems in ``checks``; the staged rows (None once a problem is seen)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from receval.formats.tables import LINE
    from receval.task import normalize_answers

    lines = frame[LINE].to_numpy()
    system = run.stem
    if "system" in frame.columns:
        values = frame["system"].astype(str).str.strip()
        checks.note(
            "system",
            lines,
            (values != system).to_numpy(),
            lambda i: f"system {frame['system'].iloc[i]!r} differs from the file name {system!r}",
        )
    for col in ("query_id", "answer"):
        values = frame[col].astype(str)
        stripped = values.str.strip()
        checks.note(
            col,
            lines,
            (stripped == "").to_numpy(),
            lambda i, col=col: f"empty value in required column {col!r}",
        )
        if col == "query_id":
            frame[col] = stripped
    unknown = ~pc.is_in(pa.array(frame["query_id"].to_numpy(), type=pa.string()), known).to_numpy(
        zero_copy_only=False
    )
    checks.unknown += int(unknown.sum())
    checks.note(
        "unknown",
        lines,
        unknown,
        lambda i: f"query_id {frame['query_id'].iloc[i]!r} is not in queries",
    )
    score = _scores(frame, checks, lines)
    if "team" in frame.columns:
        _note_teams(frame, checks, lines, system)
    if checks.first:
        return None
    answer_raw = frame["answer"].astype(str)
    answer = normalize_answers(answer_raw, matching)
    raw = pa.array(answer_raw.to_numpy(), type=pa.string())
    norm = pa.array(answer.to_numpy(), type=pa.string())
    same = pc.equal(raw, norm)
    return pa.table(
        {
            "query_id": pa.array(frame["query_id"].to_numpy(), type=pa.string()),
            "answer": norm,
            "answer_raw": pc.if_else(same, pa.scalar(None, pa.string()), raw),
            "score": pa.array(score + 0.0, type=pa.float64(), from_pandas=True),  # -0.0 -> 0.0
            "row": pa.array(lines, type=pa.int64()),
        }
    )


def _scores(frame: pd.DataFrame, checks: _RunChecks, lines: np.ndarray) -> np.ndarray:
    """The batch's scores (NaN when missing), noting a value that is not a finite number."""
    if "score" not in frame.columns:
        return np.full(len(frame), np.nan)
    col = frame["score"]
    if pd.api.types.is_numeric_dtype(col.dtype):
        values = col.to_numpy(np.float64)
        checks.note(
            "score",
            lines,
            np.isinf(values),
            lambda i: f"column 'score': {repr(float(values[i]))!r} is not a finite number",
        )
        return values
    text = col.astype(str).str.strip()
    parsed = pd.to_numeric(text.where(text != "", None), errors="coerce")
    bad = (parsed.isna() & (text != "")) | np.isinf(parsed.fillna(0.0))
    checks.note(
        "score",
        lines,
        bad.to_numpy(),
        lambda i: f"column 'score': {text.iloc[i]!r} is not a finite number",
    )
    return parsed.to_numpy(np.float64)


def _note_teams(frame: pd.DataFrame, checks: _RunChecks, lines: np.ndarray, system: str) -> None:
    """A system names one team (blank cells take it): note the first row naming another."""
    team = frame["team"].astype(str).str.strip()
    named = (team != "").to_numpy()
    if not named.any():
        return
    if checks.team is None:
        checks.team = str(team.iloc[int(np.flatnonzero(named)[0])])
    first = checks.team
    checks.note(
        "team",
        lines,
        named & (team != first).to_numpy(),
        lambda i: f"system {system!r} is given two teams ({first!r} and {team.iloc[i]!r})",
    )


def labelled_ranks(
    cache: Path | str, labels: pd.DataFrame, engine: Engine
) -> tuple[int, np.ndarray, np.ndarray]:
    """(N, ranks, label values) of the facts of ``labels(query_id, answer, value)`` (answers
    normalised) in the ranked list ``cache`` written by :func:`rank_run_file`.  Only the ranks of
    labelled facts come back."""
    import pyarrow.parquet as pq

    cache = Path(cache)
    size = int(pq.ParquetFile(cache).metadata.num_rows)
    if not len(labels) or not size:
        return size, np.empty(0, np.int64), np.empty(0, np.float64)
    engine.register("labels", labels[["query_id", "answer", "value"]])
    out = engine.query(LABELLED_RANKS.format(ranked=_sql_path(cache)))
    return size, out["rank"].to_numpy(np.int64), out["value"].to_numpy(np.float64)


def cached_items(cache: Path | str, ranks: np.ndarray, engine: Engine) -> pd.DataFrame:
    """The items (``rank, query_id, answer`` as the run spells it) at the 1-based ``ranks`` of
    the ranked list ``cache`` (:func:`rank_run_file`), in rank order."""
    ranks = np.unique(np.asarray(ranks, dtype=np.int64))
    if not ranks.size:
        return pd.DataFrame(
            {"rank": np.empty(0, np.int64), "query_id": pd.Series([], dtype=str), "answer": []}
        )
    engine.register("wanted", pd.DataFrame({"rank": ranks}))
    out = engine.query(RANKED_ITEMS.format(ranked=_sql_path(Path(cache))))
    out["rank"] = out["rank"].astype(np.int64)
    return out.reset_index(drop=True)


def _sql_path(path: Path) -> str:
    return path.as_posix().replace("'", "''")
