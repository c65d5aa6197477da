"""Ranked-list access for curves: the items at requested ranks of an unsorted list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from receval.engine.base import Engine
from receval.engine.queries import (
    AT_RANKS,
    FACT_HASHES,
    ITEMS_AT_RANKS,
    LABEL_HASHES,
    RANKED_KEYS,
    RANKED_LIST,
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
CACHE_VERSION = 4

#: Run columns a file must not have (the loader derives them).
_RESERVED_RUN = ("answer_raw", "fact", "copies", "_file", "_order")

#: ASCII characters :meth:`str.isspace` accepts (the whitespace of an ASCII answer).
_ASCII_SPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "


def _fingerprint(run: Path, matching) -> dict:
    """What identifies a run file's content for the cache: path, size, modification time, inode
    and a digest of the file's last 64 KiB (the Parquet footer: row-group statistics), plus the
    answer matching rules, the cache version and the DuckDB version (its ``hash`` keys the
    cache)."""
    import hashlib

    import duckdb

    stat = run.stat()
    with run.open("rb") as fh:
        fh.seek(max(stat.st_size - (1 << 16), 0))
        tail = fh.read()
    return {
        "version": CACHE_VERSION,
        "duckdb": duckdb.__version__,
        "run": str(run.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "inode": stat.st_ino,
        "tail_sha256": hashlib.sha256(tail).hexdigest(),
        "matching": repr(matching),
    }


def _fresh(cache: Path, stamp: Path, fingerprint: dict) -> bool:
    import json

    if not (cache.is_dir() and stamp.is_file()):
        return False
    try:
        recorded = json.loads(stamp.read_text())
        return recorded.get("run_fingerprint") == fingerprint and recorded.get(
            "cache_size"
        ) == _cache_size(cache)
    except (OSError, ValueError):
        return False


def rank_run_file(
    run: Path | str,
    cache: Path | str,
    engine: Engine,
    *,
    queries: set[str],
    matching,
    batch_rows: int = 1 << 20,
) -> Path:
    """The ranked list of one system's Parquet run file, written once to the folder ``cache``.

    The run is read in batches of ``batch_rows`` rows (never whole): each batch is checked as
    :func:`receval.task.load_task` checks a ``runs/`` file (same messages and row numbers, the
    first problem in the loader's order), its answers are normalised as
    :func:`receval.task.normalize_answers` does, and it is appended to ``texts.arrow`` (an
    uncompressed Arrow file in file order: ``query_id, answer, answer_raw, h, score``, ``h`` the
    engine's hash of the fact) and to integer sort keys.  Duplicate facts are found among the
    rows whose hash repeats and checked as the loader checks them
    (:func:`receval.task.check_conflicting_duplicates`: one answer with two scores is a
    ``BundleError`` naming both lines; the count of copies dropped is kept in the stamp,
    :func:`cached_duplicates`); the engine sorts the integer keys out of core (``RANKED_KEYS``);
    ties of the keys are put in the order of the full answer; the result is ``order.npy``, the
    file row at each rank.  Later commands memory-map both files and read only the rows they
    ask for.  A JSON stamp beside the folder records the run's fingerprint: a cache whose run
    changed (or whose stamp is missing) is never used, it is re-ranked.

    Returns
    -------
    Path
        ``cache``.
    """
    import os
    import shutil

    run, cache = Path(run), Path(cache)
    stamp = cache.with_name(cache.name + ".json")
    fingerprint = _fingerprint(run, matching)
    if _fresh(cache, stamp, fingerprint):
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    work = cache.with_name(f".{cache.name}.work-{os.getpid()}")  # one per process
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    from receval.progress import progress

    label = f"ranking {run.name} (check, duplicates, sort)"
    try:
        with progress(3, label) as bar:  # a terminal bar over the three passes
            candidates = _stage_run(
                run, work, engine, queries=queries, matching=matching, batch_rows=batch_rows
            )
            bar.update()
            texts = _Mapped(work / "texts.arrow")
            dropped, copies = _duplicate_rows(texts, work / "h.npy", candidates)
            _check_copies(run, work, copies)
            bar.update()
            _write_order(work, engine, texts, dropped, batch_rows)
            bar.update()
        del texts
        engine.register("keys", pd.DataFrame({"row": []}))  # release the file
        (work / "keys.parquet").unlink()
        (work / "keys.bin").unlink()
        shutil.rmtree(cache, ignore_errors=True)
        work.replace(cache)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record = {
        "run_fingerprint": fingerprint,
        "cache_size": _cache_size(cache),
        "duplicate_rows": int(dropped.size),
    }
    write_stamp(stamp, record)
    return cache


def write_stamp(stamp: Path, record: dict) -> None:
    """Write a ranked cache's stamp ``record`` at ``stamp`` atomically (a partial file swapped
    in): a cache without its stamp is never taken for a finished one."""
    import json

    partial = stamp.with_name(f".{stamp.name}.partial")
    partial.write_text(json.dumps(record, indent=1))
    partial.replace(stamp)


def _write_order(work: Path, engine: Engine, texts, dropped: np.ndarray, batch_rows: int) -> None:
    """Sort the integer keys in the engine (out of core) and write ``order.npy``: the file row
    at each rank, real ties put in the order of the full answer."""
    engine.register("keys", work / "keys.parquet")
    reader = engine.con.sql(RANKED_KEYS).to_arrow_reader(batch_rows)
    dtype = np.uint32 if texts.num_rows < 2**32 else np.int64
    size = texts.num_rows - dropped.size
    keys = np.memmap(work / "keys.bin", dtype=_KEY, mode="r") if size else np.empty(0, _KEY)
    with _NpyWriter(work / "order.npy", dtype, size) as order:
        for rows in _in_rank_order(reader, keys, texts, dropped):
            order.write(rows)
    del reader, keys


def _cache_size(cache: Path) -> list[int]:
    return [(cache / name).stat().st_size for name in ("texts.arrow", "h.npy", "order.npy")]


class _NpyWriter:
    """Writes a 1-d ``.npy`` file of known length piece by piece with plain file writes (no
    memory map: written pages do not stay in the process's memory)."""

    def __init__(self, path: Path, dtype, size: int) -> None:
        self.path, self.dtype, self.size, self.done = path, np.dtype(dtype), int(size), 0

    def __enter__(self) -> _NpyWriter:
        self.fh = open(self.path, "wb")
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False}
        np.lib.format.write_array_header_2_0(self.fh, {**header, "shape": (self.size,)})
        return self

    def write(self, values: np.ndarray) -> None:
        self.fh.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        self.done += len(values)

    def __exit__(self, *exc) -> None:
        self.fh.close()
        if exc[0] is None and self.done != self.size:
            raise RuntimeError(f"{self.path}: wrote {self.done} values, expected {self.size}")


def _npy_header(path: Path) -> tuple[int, np.dtype, int]:
    """(length, dtype, data offset) of a 1-d ``.npy`` file."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read = {(1, 0): np.lib.format.read_array_header_1_0}.get(
            version, np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read(fh)
        return int(shape[0]), dtype, fh.tell()


def _npy_chunks(path: Path, chunk: int = 1 << 23):
    """(first index, values) of a 1-d ``.npy`` file, read a chunk at a time (plain reads)."""
    size, dtype, offset = _npy_header(path)
    with open(path, "rb") as fh:
        for start in range(0, size, chunk):
            fh.seek(offset + start * dtype.itemsize)
            yield start, np.fromfile(fh, dtype=dtype, count=min(chunk, size - start))


class _Mapped:
    """A memory-mapped Arrow IPC file: rows are read only when taken (by 0-based index)."""

    def __init__(self, path: Path) -> None:
        import pyarrow as pa

        reader = pa.ipc.open_file(pa.memory_map(str(path), "r"))
        self.schema = reader.schema
        self.batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        sizes = [b.num_rows for b in self.batches]
        self.offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.num_rows = int(self.offsets[-1])

    def take(self, index: np.ndarray, columns: list[str] | None = None):
        """The rows at ``index`` (0-based, any order) as a pyarrow Table, in that order."""
        import pyarrow as pa

        index = np.asarray(index, dtype=np.int64)
        order = np.argsort(index, kind="stable")
        ordered = index[order]
        bounds = np.searchsorted(ordered, self.offsets)
        parts = []
        for k, batch in enumerate(self.batches):  # one take per record batch touched
            lo, hi = bounds[k], bounds[k + 1]
            if hi > lo:
                part = batch if columns is None else batch.select(columns)
                parts.append(part.take(pa.array(ordered[lo:hi] - self.offsets[k])))
        schema = (
            self.schema if columns is None else pa.schema([self.schema.field(c) for c in columns])
        )
        table = pa.Table.from_batches(parts, schema=schema) if parts else schema.empty_table()
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        return table.take(pa.array(inverse))


class _RunChecks:
    """The first problem of each kind over the batches of a run file, reported in the loader's
    order once the whole file has been read (so the error is the one load_task would give)."""

    ORDER = ("system", "query_id", "answer", "unknown", "score", "team")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.first: dict[str, tuple[int, str]] = {}
        self.unknown = 0
        self.team: str | None = None

    def note(self, kind: str, lines: np.ndarray, bad, message) -> None:
        """Record the first row where ``bad`` (a boolean Arrow or numpy array) holds."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if kind in self.first:
            return
        if isinstance(bad, (pa.Array, pa.ChunkedArray)):
            if not pc.any(bad).as_py():
                return
            bad = bad.to_numpy(zero_copy_only=False)
        elif not bad.any():
            return
        i = int(np.flatnonzero(bad)[0])
        self.first[kind] = (int(lines[i]), message(i))

    def raise_first(self) -> None:
        from receval.errors import BundleError

        for kind in self.ORDER:
            if kind in self.first:
                line, message = self.first[kind]
                if kind == "unknown":
                    message = f"{message} ({self.unknown} such rows)"
                raise BundleError(self.path, line, message)


def _open_run(run: Path, named: Path | None = None):
    """The run as a ``pyarrow.parquet.ParquetFile`` whose header the loader would accept
    (errors name ``named``, default ``run``)."""
    import pyarrow.parquet as pq

    from receval.errors import BundleError

    try:
        source = pq.ParquetFile(run)
        names = source.schema_arrow.names
    except Exception as exc:  # pyarrow raises many types for corrupt files
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BundleError(run, None, f"not a readable Parquet file ({first})") from None
    missing = [c for c in ("query_id", "answer") if c not in names]
    if missing:
        have = ", ".join(n for n in names if not n.startswith("__index_level_"))
        raise BundleError(
            named or run, 1, f"missing required column(s) {', '.join(missing)} (header has: {have})"
        )
    clash = [c for c in _RESERVED_RUN if c in names]
    if clash:
        raise BundleError(
            named or run,
            1,
            f"column name(s) {', '.join(clash)} are reserved (receval derives them); rename them",
        )
    return source


def _text_run(run: Path, work: Path):
    """A TSV/CSV run (read whole: text runs are small) as a Parquet file of its strings with
    the file's line numbers (``_line``), for :func:`_stage_run`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from receval.errors import BundleError
    from receval.formats.tables import LINE, read_table

    frame = read_table(run)
    names = [c for c in frame.columns if c != LINE]
    missing = [c for c in ("query_id", "answer") if c not in names]
    if missing:
        hint = ""
        if len(names) == 1 and any(d in names[0] for d in ";|,\t "):
            hint = "; wrong delimiter? .tsv is tab-separated, .csv comma-separated"
        raise BundleError(
            run,
            1,
            f"missing required column(s) {', '.join(missing)} (header has: {', '.join(names)}){hint}",
        )
    path = work / "text-run.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return _open_run(path, run)


def _stage_run(
    run: Path, work: Path, engine: Engine, *, queries: set[str], matching, batch_rows: int
) -> np.ndarray:
    """Check and normalise ``run`` batch by batch into ``work/texts.arrow`` (``query_id,
    answer, answer_raw, h, score`` in file order, memory-mappable) and ``work/keys.parquet``
    (the integer sort keys); returns the fact hashes that may be shared by two rows (a
    superset of the duplicated facts: a bitmap of hash bits, about 3% false positives)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from receval.formats.tables import LINE

    source = _open_run(run) if run.suffix.lower() == ".parquet" else _text_run(run, work)
    names = source.schema_arrow.names
    columns = [c for c in ("system", "query_id", "answer", "score", "team") if c in names]
    if LINE in names:  # a text file's line numbers
        columns.append(LINE)
    known = pa.array(sorted(queries), type=pa.string())
    checks = _RunChecks(run)
    seen = _SeenHashes(source.metadata.num_rows)
    text_schema = pa.schema(
        [
            ("query_id", pa.string()),
            ("answer", pa.string()),
            ("answer_raw", pa.string()),
            ("score", pa.float64()),
        ]
    )
    key_schema = pa.schema(
        [
            ("row", pa.int64()),
            ("score", pa.float64()),
            ("qcode", pa.int32()),
            ("prefix", pa.uint64()),
            ("prefix2", pa.uint64()),
            ("tie", pa.uint64()),
        ]
    )
    offset = 0
    with (
        open(work / "keys.bin", "wb") as packed,
        _NpyWriter(work / "h.npy", np.uint64, source.metadata.num_rows) as hashes,
        pa.OSFile(str(work / "texts.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, text_schema) as texts,
        pq.ParquetWriter(
            work / "keys.parquet", key_schema, compression="none", use_dictionary=False
        ) as keys,
    ):
        for batch in source.iter_batches(batch_size=batch_rows, columns=columns):
            positions = np.arange(offset + 1, offset + batch.num_rows + 1, dtype=np.int64)
            lines = positions  # what errors name: the row, or a text file's line
            if LINE in names:
                lines = batch.column(LINE).to_numpy().astype(np.int64)
            offset += batch.num_rows
            staged = _stage_batch(batch, run, lines, known, checks, matching)
            if staged is None:
                continue
            engine.register("batch_facts", staged.select(["query_id", "answer"]))
            h = engine.con.sql(FACT_HASHES).to_arrow_table().column("h").combine_chunks()
            seen.add(h.to_numpy())
            answer = staged.column("answer")
            hashes.write(h.to_numpy())
            texts.write_table(staged.select(text_schema.names))
            key = np.empty(len(lines), dtype=_KEY)
            key["score"] = staged.column("score").to_numpy(zero_copy_only=False)
            key["qcode"] = _index_in(staged.column("query_id"), known)
            key["prefix"] = _prefix_key(answer, 0)
            key["prefix2"] = _prefix_key(answer, 8)
            packed.write(key.tobytes())
            unscored = np.isnan(key["score"])
            keys.write_table(
                pa.table(
                    {
                        "row": pa.array(positions),
                        "score": pa.array(key["score"], from_pandas=True),
                        "qcode": pa.array(key["qcode"], mask=unscored),
                        "prefix": pa.array(key["prefix"], mask=unscored),
                        "prefix2": pa.array(key["prefix2"], mask=unscored),
                        "tie": pa.array(_tie_mix(key, positions)),
                    },
                    schema=key_schema,
                )
            )
        checks.raise_first()  # before the writers check their lengths
    return seen.shared()


def _index_in(values, known) -> np.ndarray:
    """Position of each value in the sorted array ``known``."""
    import pyarrow.compute as pc

    return pc.index_in(values, value_set=known).to_numpy(zero_copy_only=False)


class _SeenHashes:
    """Which 64-bit hashes may occur twice: a bitmap of their top bits (≥ 32 bits per item, at
    most 2³² bits = 512 MiB), plus repeats inside one batch."""

    def __init__(self, items: int) -> None:
        bits = int(min(32, max(10, np.ceil(np.log2(max(items, 1) * 32)))))
        self.shift = np.uint64(64 - bits)
        self.bitmap = np.zeros(1 << (bits - 3), dtype=np.uint8)
        self.found: list[np.ndarray] = []

    def add(self, h: np.ndarray) -> None:
        top = (h >> self.shift).astype(np.uint32)
        byte = top >> np.uint32(3)
        bit = np.left_shift(np.uint8(1), (top & np.uint32(7)).astype(np.uint8))
        again = (self.bitmap[byte] & bit) != 0
        ordered = np.sort(top)
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
        if repeated.size:  # few: birthday repeats of the top bits
            repeated = np.unique(repeated)
            pos = np.minimum(np.searchsorted(repeated, top), repeated.size - 1)
            again |= repeated[pos] == top
        distinct = ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])]
        for low in range(8):  # distinct values with one low-bit pattern hit distinct bytes
            sel = distinct[(distinct & np.uint32(7)) == low]
            self.bitmap[sel >> np.uint32(3)] |= np.uint8(1 << low)
        if again.any():
            self.found.append(h[again])

    def shared(self) -> np.ndarray:
        return np.unique(np.concatenate(self.found)) if self.found else np.empty(0, np.uint64)


def _duplicate_rows(
    texts: _Mapped, hashes: Path, candidates: np.ndarray
) -> tuple[np.ndarray, pd.DataFrame]:
    """(the rows (1-based) of facts output twice that are not the kept copy (the highest
    score, first in file order among equal ones), every copy of those facts: ``row, query_id,
    answer_raw, score``): the rows whose hash is a candidate are read and grouped by their
    text."""
    if not candidates.size:
        return np.empty(0, np.int64), pd.DataFrame(columns=["row", "query_id", "answer_raw"])
    bits = np.uint64((1 << 24) - 1)
    bitmap = np.zeros(1 << 24, dtype=bool)
    bitmap[candidates & bits] = True
    index = []
    for first, h in _npy_chunks(hashes):
        cand = np.flatnonzero(bitmap[h & bits])
        pos = np.minimum(np.searchsorted(candidates, h[cand]), candidates.size - 1)
        index.append(cand[candidates[pos] == h[cand]] + first)
    index = np.concatenate(index)
    rows = texts.take(index, ["query_id", "answer", "answer_raw", "score"]).to_pandas()
    rows["row"] = index + 1
    rows["unscored"] = rows["score"].isna()
    rows = rows.sort_values(
        ["query_id", "answer", "unscored", "score", "row"],
        ascending=[True, True, True, False, True],
        kind="mergesort",
    )
    dropped = rows.duplicated(["query_id", "answer"]).to_numpy()
    copies = rows[rows.duplicated(["query_id", "answer"], keep=False).to_numpy()]
    copies = copies.assign(answer_raw=copies["answer_raw"].fillna(copies["answer"]))
    return np.sort(rows["row"].to_numpy()[dropped]), copies[
        ["row", "query_id", "answer_raw", "score"]
    ]


def _check_copies(run: Path, work: Path, copies: pd.DataFrame) -> None:
    """The loader's check of a fact output twice (:func:`receval.task.check_conflicting_duplicates`)
    on the copies found: a ``BundleError`` naming both lines when one answer (same text and
    provenance) has two scores."""
    if not len(copies):
        return
    from receval.formats.tables import LINE
    from receval.task import check_conflicting_duplicates

    rows = np.sort(copies["row"].to_numpy(np.int64))
    copies = copies.set_index("row").loc[rows].reset_index()
    source = work / "text-run.parquet" if run.suffix.lower() != ".parquet" else run
    provenance, lines = _rows_of(source, rows, run)
    frame = pd.DataFrame(
        {
            "system": run.stem,
            "query_id": copies["query_id"].to_numpy(),
            "answer_raw": copies["answer_raw"].to_numpy(),
            "provenance": provenance,
            "score": copies["score"].to_numpy(float),
            "_file": pd.Series([run] * len(rows), dtype=object),
            LINE: lines,
        }
    )
    check_conflicting_duplicates(frame, np.arange(len(frame)))


def _rows_of(source: Path, rows: np.ndarray, run: Path) -> tuple[np.ndarray, np.ndarray]:
    """(provenance as the loader reads it, "" without the column; the line each error names) of
    the 1-based sorted ``rows`` of the Parquet file ``source``: only the row groups holding
    them are read, and only those two columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from receval.formats.tables import LINE

    file = pq.ParquetFile(source)
    names = file.schema_arrow.names
    columns = [c for c in ("provenance", LINE) if c in names]
    provenance = np.full(rows.size, "", dtype=object)
    lines = rows.copy()
    if not columns:
        return provenance, lines
    sizes = [file.metadata.row_group(i).num_rows for i in range(file.num_row_groups)]
    starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    bounds = np.searchsorted(rows, starts + 1)
    for group in range(file.num_row_groups):
        lo, hi = bounds[group], bounds[group + 1]
        if hi == lo:
            continue
        at = pa.array(rows[lo:hi] - starts[group] - 1)
        part = file.read_row_group(group, columns=columns).take(at)
        if "provenance" in columns:
            text = _text(part, "provenance", run, rows[lo:hi])
            provenance[lo:hi] = np.asarray(text.to_pylist(), dtype=object)
        if LINE in columns:
            lines[lo:hi] = part.column(LINE).to_numpy()
    return provenance, lines


#: The integer sort keys of a row, packed (``keys.bin`` in file order).
_KEY = np.dtype([("score", "<f8"), ("qcode", "<i4"), ("prefix", "<u8"), ("prefix2", "<u8")])


def _in_rank_order(reader, keys: np.ndarray, texts: _Mapped, dropped: np.ndarray):
    """The engine's order (``RANKED_KEYS``: rows sorted on integer keys, with ``tie``, a 64-bit
    mix of the keys) without the dropped copies, with ties of the keys put in the order of the
    full answer: batches of 1-based rows in rank order.  Neighbours with equal ``tie`` are
    checked on their keys (``keys``: :data:`_KEY` per file row; read only for those rows).  A
    run of tied keys at the end of a batch waits for the next batch (it may continue there)."""
    carry = np.empty(0, np.int64)
    carry_tie = np.empty(0, np.uint64)
    for batch in reader:
        rows = batch.column(0).to_numpy().astype(np.int64)
        tie = batch.column(1).to_numpy()
        if dropped.size:
            pos = np.minimum(np.searchsorted(dropped, rows), dropped.size - 1)
            keep = dropped[pos] != rows
            rows, tie = rows[keep], tie[keep]
        rows = np.concatenate([carry, rows])
        tie = np.concatenate([carry_tie, tie])
        tied = _tied_rows(rows, tie, keys)
        starts = np.flatnonzero(~tied)
        last = int(starts[-1]) if starts.size else 0
        carry, carry_tie = rows[last:], tie[last:]
        if last:
            yield _answer_ties(rows[:last], tied[:last], texts)
    if carry.size:
        yield _answer_ties(carry, _tied_rows(carry, carry_tie, keys), texts)


def _tied_rows(rows: np.ndarray, tie: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``tied[i]``: row i has the same keys as row i − 1 (equal mixes, confirmed on the keys)."""
    tied = np.concatenate([[False], tie[1:] == tie[:-1]])
    at = np.flatnonzero(tied)
    if at.size:
        now, before = keys[rows[at] - 1], keys[rows[at - 1] - 1]
        same = now["score"] == before["score"]  # NaN (unscored) never ties: file order
        for name in ("qcode", "prefix", "prefix2"):
            same &= now[name] == before[name]
        tied[at] = same
    return tied


def _tie_mix(key: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """A 64-bit mix of each row's keys (equal keys, equal mix); unscored rows get their row
    number's mix, so they tie with nothing."""
    with np.errstate(over="ignore"):
        z = key["score"].view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z ^= key["qcode"].astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(29))) * np.uint64(0x94D049BB133111EB)
        z ^= key["prefix"] * np.uint64(0xD6E8FEB86659FD93)
        z = (z ^ (z >> np.uint64(31))) * np.uint64(0x9E3779B97F4A7C15)
        z ^= key["prefix2"] * np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(32)
    return np.where(np.isnan(key["score"]), rows.astype(np.uint64), z)


def _answer_ties(rows: np.ndarray, tied: np.ndarray, texts: _Mapped) -> np.ndarray:
    """``rows`` (engine order) with each run of tied keys ordered by answer."""
    if not tied.any():
        return rows
    run = np.cumsum(~tied)
    member = tied | np.concatenate([tied[1:], [False]])  # both ends of every tie
    where = np.flatnonzero(member)
    answers = texts.take(rows[where] - 1, ["answer"]).column("answer").to_pandas()
    frame = pd.DataFrame({"run": run[where], "answer": answers.to_numpy(), "row": rows[where]})
    frame = frame.sort_values(["run", "answer"], kind="mergesort")
    rows = rows.copy()
    rows[where] = frame["row"].to_numpy()
    return rows


def _text(batch, name: str, run: Path, lines: np.ndarray):
    """Column ``name`` of ``batch`` as Arrow strings, converted as the loader converts it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from receval.errors import BundleError
    from receval.formats.tables import LINE, arrow_to_strings

    col = batch.column(batch.schema.get_field_index(name))
    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, col.type.value_type)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return pc.fill_null(col.cast(pa.string()), "")
    try:  # other types: the loader's conversion (row numbers shifted to the file's)
        frame = arrow_to_strings(pa.table({name: col}), run)
    except BundleError as exc:
        line = None if exc.line is None else int(lines[exc.line - 1])
        raise BundleError(exc.path, line, exc.message) from None
    del frame[LINE]
    return pa.array(frame[name].to_numpy(dtype=object), type=pa.string())


def _stage_batch(batch, run: Path, lines: np.ndarray, known, checks: _RunChecks, matching):
    """One batch: note its problems in ``checks``; the staged rows (None once a problem is seen)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    system = run.stem
    names = batch.schema.names
    if "system" in names:
        values = _text(batch, "system", run, lines)
        checks.note(
            "system",
            lines,
            pc.not_equal(pc.utf8_trim_whitespace(values), system),
            lambda i: f"system {values[i].as_py()!r} differs from the file name {system!r}",
        )
    query = pc.utf8_trim_whitespace(_text(batch, "query_id", run, lines))
    answer_raw = _text(batch, "answer", run, lines)
    checks.note("query_id", lines, pc.equal(query, ""), lambda i: _EMPTY.format("query_id"))
    checks.note(
        "answer",
        lines,
        pc.equal(pc.utf8_trim_whitespace(answer_raw), ""),
        lambda i: _EMPTY.format("answer"),
    )
    unknown = pc.invert(pc.is_in(query, value_set=known))
    checks.unknown += int(pc.sum(unknown).as_py() or 0)
    checks.note(
        "unknown",
        lines,
        unknown,
        lambda i: f"query_id {query[i].as_py()!r} is not in queries",
    )
    score = _scores(batch, checks, lines)
    if "team" in names:
        _note_teams(_text(batch, "team", run, lines), checks, lines, system)
    if checks.first:
        return None
    answer = _normalised(answer_raw, matching)
    return pa.table(
        {
            "query_id": query,
            "answer": answer,
            "answer_raw": pc.if_else(pc.equal(answer_raw, answer), None, answer_raw),
            "score": pa.array(score + 0.0, type=pa.float64(), from_pandas=True),  # -0.0 -> 0.0
        }
    )


def _prefix_key(texts, skip: int = 0) -> np.ndarray:
    """UTF-8 bytes ``skip .. skip+8`` of each string as a big-endian integer (zero-padded):
    integer order = byte order of the strings there, which is their code-point order."""
    import pyarrow as pa

    texts = pa.concat_arrays(texts.chunks) if isinstance(texts, pa.ChunkedArray) else texts
    texts = texts.cast(pa.string())
    _, offsets, data = texts.buffers()
    n = len(texts)
    starts = np.frombuffer(offsets, dtype=np.int32, count=n + 1, offset=texts.offset * 4)
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    padded = np.zeros(raw.size + 16, dtype=np.uint8)
    padded[: raw.size] = raw
    # an 8-byte big-endian word starting at every byte (an overlapping, unaligned view)
    words = np.ndarray((padded.size - 7,), dtype=">u8", buffer=padded, strides=(1,))
    first = starts[:-1].astype(np.int64) + skip
    length = np.clip(np.diff(starts).astype(np.int64) - skip, 0, 8)
    value = words[np.minimum(first, padded.size - 8)].astype(np.uint64)
    drop = (8 - length) * 8  # bytes past the string's end are cleared
    mask = np.where(
        drop >= 64, np.uint64(0), ~np.uint64(0) << np.minimum(drop, 63).astype(np.uint64)
    )
    return value & mask


_EMPTY = "empty value in required column {!r}"


def _normalised(answers, matching):
    """The answers normalised per ``[matching]``: Arrow kernels for an all-ASCII batch (the same
    steps as :func:`receval.task.normalize_answers`, which is called for any other batch)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from receval.task import normalize_answers

    if pc.all(pc.string_is_ascii(answers)).as_py() in (True, None):
        out = answers  # NFC/NFKC leave ASCII unchanged
        if matching.collapse_whitespace:
            out = pc.replace_substring_regex(out, "[\t\n\x0b\x0c\r\x1c-\x1f ]+", " ")
        if matching.strip:
            out = pc.ascii_trim(out, characters=_ASCII_SPACE)
        if matching.casefold:
            out = pc.ascii_lower(out)
        return out
    series = pd.Series(answers.to_numpy(zero_copy_only=False), dtype=object)
    return pa.array(normalize_answers(series, matching).to_numpy(dtype=object), type=pa.string())


def _scores(batch, checks: _RunChecks, lines: np.ndarray) -> np.ndarray:
    """The batch's scores (NaN when missing), noting a value that is not a finite number."""
    import pyarrow as pa

    if "score" not in batch.schema.names:
        return np.full(batch.num_rows, np.nan)
    col = batch.column(batch.schema.get_field_index("score"))
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        values = col.cast(pa.float64()).to_numpy(zero_copy_only=False)
        checks.note(
            "score",
            lines,
            np.isinf(values),
            lambda i: f"column 'score': {repr(float(values[i]))!r} is not a finite number",
        )
        return values
    text = pd.Series(_text(batch, "score", Path(""), lines).to_pandas()).astype(str).str.strip()
    parsed = pd.to_numeric(text.where(text != "", None), errors="coerce")
    bad = (parsed.isna() & (text != "")) | np.isinf(parsed.fillna(0.0))
    checks.note(
        "score",
        lines,
        bad.to_numpy(),
        lambda i: f"column 'score': {text.iloc[i]!r} is not a finite number",
    )
    return parsed.to_numpy(np.float64)


def _note_teams(team, checks: _RunChecks, lines: np.ndarray, system: str) -> None:
    """A system names one team (blank cells take it): note the first row naming another."""
    import pyarrow.compute as pc

    team = pc.utf8_trim_whitespace(team)
    named = pc.not_equal(team, "").to_numpy(zero_copy_only=False)
    if not named.any():
        return
    if checks.team is None:
        checks.team = team[int(np.flatnonzero(named)[0])].as_py()
    first = checks.team
    checks.note(
        "team",
        lines,
        named & pc.not_equal(team, first).to_numpy(zero_copy_only=False),
        lambda i: f"system {system!r} is given two teams ({first!r} and {team[i].as_py()!r})",
    )


def labelled_ranks(
    cache: Path | str, labels: pd.DataFrame, engine: Engine
) -> tuple[int, np.ndarray, np.ndarray]:
    """(N, ranks, label values) of the facts of ``labels(query_id, answer, value)`` (answers
    normalised) in the ranked list ``cache`` written by :func:`rank_run_file`.

    The labels' fact hashes (the engine's ``hash``, as in the cache) are looked up in the
    memory-mapped ``h`` column a record batch at a time (a bitmap of hash bits, then an exact
    search among the labels' hashes); every match is checked on the text of the fact, so a
    hash collision never labels a wrong item; the ranks of the matched rows come from one pass
    over ``order.npy`` with a bitmap of those rows.  Only the ranks of labelled facts come
    back."""
    cache = Path(cache)
    texts = _Mapped(cache / "texts.arrow")
    size = cached_size(cache)
    none = (size, np.empty(0, np.int64), np.empty(0, np.float64))
    if not len(labels) or not size:
        return none
    frame = labels[["query_id", "answer"]].reset_index(drop=True)
    engine.register("labels", frame.assign(label=np.arange(len(frame), dtype=np.int64)))
    hashed = engine.query(LABEL_HASHES)
    wanted = np.empty(len(frame), dtype=np.uint64)
    wanted[hashed["label"].to_numpy()] = hashed["h"].to_numpy(np.uint64)
    index, which = _hash_matches(cache / "h.npy", wanted)
    if not index.size:
        return none
    rows = texts.take(index, ["query_id", "answer"])
    want = labels.iloc[which]
    same = (
        rows.column("query_id").to_numpy(zero_copy_only=False) == want["query_id"].to_numpy()
    ) & (rows.column("answer").to_numpy(zero_copy_only=False) == want["answer"].to_numpy())
    index, values = index[same], want["value"].to_numpy(np.float64)[same]
    rank = _ranks_of_rows(cache / "order.npy", index + 1)
    kept = rank > 0  # a dropped copy of a duplicated fact has no rank
    return size, rank[kept], values[kept]


def _hash_matches(hashes: Path, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(0-based file rows, positions in ``wanted``) of the rows whose hash is in ``wanted``."""
    order = np.argsort(wanted, kind="stable")
    keys = wanted[order]
    bits = np.uint64((1 << 24) - 1)
    bitmap = np.zeros(1 << 24, dtype=bool)
    bitmap[keys & bits] = True
    index, which = [], []
    for start, h in _npy_chunks(hashes):
        cand = np.flatnonzero(bitmap[h & bits])
        lo = np.searchsorted(keys, h[cand], side="left")
        hi = np.searchsorted(keys, h[cand], side="right")
        hit = hi > lo
        for row, a, b in zip(cand[hit] + start, lo[hit], hi[hit], strict=True):  # the hits
            index.extend([row] * int(b - a))
            which.extend(order[a:b])
    return np.asarray(index, dtype=np.int64), np.asarray(which, dtype=np.int64)


def _ranks_of_rows(order: Path, rows: np.ndarray) -> np.ndarray:
    """The rank of each 1-based file row in ``rows`` (0 when it has none): one pass over
    ``order`` (a bitmap of the rows' low bits, then an exact search among the candidates)."""
    keys = np.unique(rows)
    bits = (1 << 24) - 1
    bitmap = np.zeros(1 << 24, dtype=bool)
    bitmap[keys & bits] = True
    found_rows, found_ranks = [], []
    for start, part in _npy_chunks(order):
        part = part.astype(np.int64)
        cand = np.flatnonzero(bitmap[part & bits])
        pos = np.minimum(np.searchsorted(keys, part[cand]), keys.size - 1)
        hit = cand[keys[pos] == part[cand]]
        found_rows.append(part[hit])
        found_ranks.append(hit + start + 1)
    found_rows = np.concatenate(found_rows)
    found_ranks = np.concatenate(found_ranks)
    rank = np.zeros(keys.size, dtype=np.int64)
    rank[np.searchsorted(keys, found_rows)] = found_ranks
    return rank[np.searchsorted(keys, rows)]


def cached_items(
    cache: Path | str, ranks: np.ndarray, engine: Engine | None = None
) -> pd.DataFrame:
    """The items (``rank, query_id, answer`` as the run spells it) at the 1-based ``ranks`` of
    the ranked list ``cache`` (:func:`rank_run_file`), in rank order: only those rows are read."""
    import pyarrow.compute as pc

    cache = Path(cache)
    ranks = np.unique(np.asarray(ranks, dtype=np.int64))
    size, dtype, offset = _npy_header(cache / "order.npy")
    order = np.memmap(cache / "order.npy", dtype=dtype, mode="r", offset=offset, shape=(size,))
    rows = np.asarray(order[ranks - 1], dtype=np.int64) - 1
    items = _Mapped(cache / "texts.arrow").take(rows, ["query_id", "answer", "answer_raw"])
    answer = pc.coalesce(items.column("answer_raw"), items.column("answer"))
    return pd.DataFrame(
        {
            "rank": ranks,
            "query_id": items.column("query_id").to_numpy(zero_copy_only=False),
            "answer": answer.to_numpy(zero_copy_only=False),
        }
    )


def cached_size(cache: Path | str) -> int:
    """N, the length of the ranked list ``cache`` (:func:`rank_run_file`)."""
    return _npy_header(Path(cache) / "order.npy")[0]


def cached_duplicates(cache: Path | str) -> int:
    """Rows of the run behind ``cache`` dropped as copies of a fact the system output again
    (identical rows, or other spellings of one answer; :func:`rank_run_file` refuses a run
    that gives one answer two scores)."""
    import json

    cache = Path(cache)
    stamp = cache.with_name(cache.name + ".json")
    try:
        return int(json.loads(stamp.read_text()).get("duplicate_rows", 0))
    except (OSError, ValueError):
        return 0
