"""TREC run and qrels files -> a task bundle.

* **Run** (one per file, whitespace-separated): ``qid Q0 docno rank score tag``.  The second
  column is ignored (conventionally ``Q0``); ``rank`` must be an integer and ``score`` a finite
  number; ``tag`` names the system.  One run per file (a single tag), and no two files may share a
  tag.  A document retrieved twice for the same query is an error.
* **Qrels** (whitespace-separated): ``qid iteration docno relevance``; ``relevance`` is an integer
  grade.  A (qid, docno) pair judged twice is an error.

Blank lines and lines starting with ``#`` are skipped; every malformed line raises
:class:`~receval.errors.BundleError` naming the file and the line.

Ranking convention
------------------
As trec_eval does, the rank column of the file is **not** used for ordering: within each
(system, query) the documents are ranked by decreasing ``score``, ties broken by decreasing
``docno`` (plain code-point string order), so the ordering is deterministic and independent of the
line order.  The recomputed 1-based rank is the bundle's ``rank`` column; the file's own value is
kept as ``rank_file``.  ``depth=K`` keeps the top K documents of each (system, query) in that order.

Bundle encoding
---------------
* ``queries.tsv``: every qid of the qrels and of the runs, with ``in_qrels`` (``true``/``false``;
  trec_eval scores only queries with qrels) and ``relevant`` (number of documents with
  relevance > 0).
* ``runs.tsv``: ``system`` = tag, ``query_id`` = qid, ``answer`` = docno, ``score``, ``rank``,
  ``rank_file``, ``source`` (``<file name>:<line>``).
* ``judgments.tsv``: one row per qrels line; ``label`` is ``1`` when relevance > 0 and ``0``
  otherwise (zero and negative grades are "wrong"); ``relevance`` keeps the grade, ``iteration``
  the second column.
* ``task.toml``: default labels (``1`` correct, ``0`` wrong); answers are matched without case
  folding (``[matching] casefold = false``): document ids are case-sensitive; ``[official]
  unjudged = "wrong"``: the official census counts an unjudged document not relevant, as
  trec_eval does; ``[official] average = "macro"``: it averages over the judged queries a
  system answered, as trec_eval does (``receval score --estimator official`` then prints
  trec_eval's ``set_P``, ``set_recall`` and ``set_F``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from receval.config import Matching, TaskConfig
from receval.errors import BundleError
from receval.formats.buffers import arrow_array, numpy_array, scalar
from receval.formats.tables import THREADED_PARSE_BYTES, decode_text, read_input_bytes
from receval.formats.trec_order import RankedRun, distinct_in_blocks, line_sources, ranked_run

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = [
    "import_trec",
    "import_trec_tables",
    "read_qrels",
    "read_trec_run",
    "write_trec_bundle",
]

RUN_FIELDS = ("qid", "q0", "docno", "rank", "score", "tag")
QRELS_FIELDS = ("qid", "iteration", "docno", "relevance")

#: Bytes that ``str.split`` takes as whitespace but Arrow's reader does not split at (and NUL,
#: which the line-by-line reader reports).
_OTHER_WHITESPACE = (b"\t", b"\x0b", b"\x0c", b"\r", b"\x00", b"\x1c", b"\x1d", b"\x1e", b"\x1f")
#: The same for a tab-separated file: a space is then whitespace inside a field.
_OTHER_THAN_TAB = (b" ", *_OTHER_WHITESPACE[1:])


def _read_plain(raw: bytes, names: tuple[str, ...], delimiter: str = " ") -> pa.Table | None:
    """A plain file parsed by Arrow's CSV reader in C++, every field a string, or None when the
    file is not plain: ASCII lines of fields separated by single ``delimiter`` characters (a
    space, or a tab as NIST distributes runs), no other whitespace, no blank or comment lines
    (a run of delimiters, a leading or a trailing one shows as an empty field), or when a line
    has the wrong number of fields.  The line-by-line reader then gives the same fields, or the
    exact error."""
    other = _OTHER_WHITESPACE if delimiter == " " else _OTHER_THAN_TAB
    if not raw or not raw.isascii() or any(byte in raw for byte in other):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    try:
        table = pacsv.read_csv(
            pa.py_buffer(raw),
            read_options=pacsv.ReadOptions(
                column_names=list(names), use_threads=len(raw) > THREADED_PARSE_BYTES
            ),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter,
                quote_char=False,
                double_quote=False,
                ignore_empty_lines=False,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False
            ),
        )
    except pa.ArrowInvalid:
        return None
    if table.num_rows == 0 or pc.any(pc.starts_with(table.column(0), "#")).as_py():
        return None
    for column in table.columns:
        if pc.min(pc.binary_length(column)).as_py() == 0:
            return None
    return table


def _split(path: Path, text: str, ncols: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Any file: the whitespace-separated fields of every data line as an (n, ncols) object
    array, and the lines' numbers.  One ``str.split`` per line, then whole-array checks."""
    split = [line.split() for line in text.split("\n")]
    counts = np.fromiter(map(len, split), dtype=np.int64, count=len(split))
    data = counts > 0
    if "#" in "".join(s[0][:1] for s in split if s):  # comment lines (first field starts with #)
        data &= np.fromiter((not s or s[0][0] != "#" for s in split), dtype=bool, count=len(split))
    keep = np.flatnonzero(data)
    if not len(keep):
        raise BundleError(path, None, "no data lines (the file is empty or only comments)")
    bad = keep[counts[keep] != ncols]
    if len(bad):
        i = int(bad[0])
        raise BundleError(
            path,
            i + 1,
            f"expected {ncols} whitespace-separated columns ({layout}), found {counts[i]}",
        )
    kept = split if len(keep) == len(split) else [split[i] for i in keep]
    fields = np.array([f for fields in kept for f in fields], dtype=object)
    return fields.reshape(len(keep), ncols), keep + 1


#: Tabs, vertical tabs, form feeds and carriage returns as spaces: a tab-separated file is then
#: plain (single spaces) unless it has runs of whitespace, which the plain reader refuses.
_TO_SPACE = bytes.maketrans(b"\t\x0b\x0c\r", b"    ")

#: Bytes that ``str.split`` takes as whitespace but Arrow's ASCII splitter does not (and NUL,
#: which the line-by-line reader reports).
_SPLIT_UNSAFE = (b"\x00", b"\x1c", b"\x1d", b"\x1e", b"\x1f")


def _ascii_lines(raw: bytes):
    """The lines of ASCII ``raw`` as one Arrow string array over ``raw``'s own buffer, each line
    with its newline (whitespace to the splitter): offsets from the newline positions, no Python
    object per line."""
    import pyarrow as pa

    ends = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) == 10) + 1
    if not raw.endswith(b"\n"):
        ends = np.append(ends, len(raw))
    offsets = np.concatenate([np.zeros(1, np.int64), ends.astype(np.int64)])
    return pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(raw))


def _split_ascii(
    path: Path, raw: bytes, names: tuple[str, ...], layout: str
) -> tuple[pa.Table, np.ndarray] | None:
    """Any ASCII file (tabs, runs of spaces, ``\\r\\n``, blank and comment lines): the fields of
    every data line split at whitespace runs by Arrow's kernels, as :func:`_split` gives them
    (the same fields, line numbers and first error), or None for a file that is not ASCII or
    holds a byte ``str.split`` treats differently; :func:`_split` then reads it."""
    if not raw or not raw.isascii() or any(byte in raw for byte in _SPLIT_UNSAFE):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    lines = pc.ascii_trim_whitespace(_ascii_lines(raw))
    split = pc.ascii_split_whitespace(lines)
    data = pc.binary_length(lines).to_numpy(zero_copy_only=False) > 0
    counts = np.where(data, pc.list_value_length(split).to_numpy(zero_copy_only=False), 0)
    # a comment line: its first field (its trimmed text) starts with #
    data &= ~pc.starts_with(lines, "#").to_numpy(zero_copy_only=False)
    keep = np.flatnonzero(data)
    if not len(keep):
        raise BundleError(path, None, "no data lines (the file is empty or only comments)")
    bad = keep[counts[keep] != len(names)]
    if len(bad):
        i = int(bad[0])
        raise BundleError(
            path,
            i + 1,
            f"expected {len(names)} whitespace-separated columns ({layout}), found {counts[i]}",
        )
    # field j of data line i is value offsets[i] + j of the flat field list (no list copied)
    start = numpy_array(split.offsets)[keep].astype(np.int64)
    values = split.values
    columns = {
        name: values.take(arrow_array(start + j)).cast(pa.string()) for j, name in enumerate(names)
    }
    return pa.table(columns), keep + 1


def _fields(path: Path, names: tuple[str, ...], layout: str) -> tuple[pa.Table, np.ndarray]:
    """The fields of every data line of ``path`` as string columns ``names``, and the lines'
    1-based numbers, as one ``str.split`` per line gives them.  Plain files (single spaces,
    or single tabs as NIST distributes runs) go through Arrow's CSV reader; other ASCII files
    (runs of whitespace, ``\\r\\n``, blank and comment lines) through Arrow's whitespace
    splitter; non-ASCII text through the line-by-line reader.  The fields and the first error
    line are the same whichever reader runs."""
    import pyarrow as pa

    path = Path(path)
    if not path.exists():
        raise BundleError(path, None, "no such file")
    if path.is_dir():
        raise BundleError(path, None, "is a directory, not a file")
    raw = read_input_bytes(path)  # a gzipped run or qrels file is read as it is
    tabs = b"\t" in raw
    table = _read_plain(raw, names, "\t" if tabs else " ")  # tabs: as NIST distributes runs
    if table is None and tabs and raw.isascii():  # tabs and spaces: both separate fields
        table = _read_plain(raw.translate(_TO_SPACE), names)
    if table is not None:
        return table, np.arange(1, table.num_rows + 1, dtype=np.int64)
    split = _split_ascii(path, raw, names, layout)
    if split is not None:
        return split
    rows, numbers = _split(path, decode_text(path, raw), len(names), layout)
    columns = {name: pa.array(rows[:, j], pa.string()) for j, name in enumerate(names)}
    return pa.table(columns), numbers


def _first_bad(mask: np.ndarray) -> int | None:
    idx = mask.nonzero()[0]
    return int(idx[0]) if len(idx) else None


def _as_text(column: Any) -> pd.Series:
    """An Arrow string column as a pandas Series of Python strings (only on the rare path)."""
    import pandas as pd

    return pd.Series(column.to_pylist(), dtype=object)


def _integers(column: Any, path: Path, lines: np.ndarray, what: str) -> np.ndarray:
    """The column as int64: Arrow's strict integer parse, else pandas' (which also accepts
    ``+5`` or ``1.0``) with the first bad value reported."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return numpy_array(pc.cast(column, pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass

    from receval.formats.checks import whole_numbers

    text = _as_text(column)
    values, flags = whole_numbers(text)
    bad = _first_bad(flags)
    if bad is not None:
        raise BundleError(path, int(lines[bad]), f"{what} {text.iat[bad]!r} is not an integer")
    return values


def _finite(column: Any, path: Path, lines: np.ndarray, what: str) -> np.ndarray:
    """The column as finite float64 (Arrow's parse; pandas' when that fails, naming the first
    value that is not a finite number)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        values = numpy_array(pc.cast(column, pa.float64()))
        if np.isfinite(values).all():
            return values
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    import pandas as pd

    text = _as_text(column)
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
    bad = _first_bad(~np.isfinite(values))
    if bad is not None:
        raise BundleError(path, int(lines[bad]), f"{what} {text.iat[bad]!r} is not a finite number")
    return values


#: Most (qid, docno) code pairs checked with a table of one byte per pair (else one sort).
PAIR_TABLE_BYTES = 1 << 26


def _repeats(key: np.ndarray, pairs: int) -> bool:
    """Whether a value of ``key`` (integers in [0, pairs)) occurs twice: a byte per possible
    value marked and counted when they fit in :data:`PAIR_TABLE_BYTES` (no sort), else one
    sort."""
    if pairs <= PAIR_TABLE_BYTES:
        seen = np.zeros(pairs, dtype=bool)
        seen[key] = True
        return int(np.count_nonzero(seen)) < len(key)
    key = np.sort(key)
    return bool((key[1:] == key[:-1]).any())


#: Longest text hashed by :func:`_text_hashes` (one pass over the values per byte position).
HASHED_BYTES = 32
_FNV_PRIME = np.uint64(1099511628211)
_QID_MIX = np.uint64(0x9E3779B97F4A7C15)


def _text_hashes(column: Any) -> np.ndarray | None:
    """A 64-bit FNV-1a hash of every value of a string column (equal texts, equal hashes),
    one vectorised step per byte position; None when a value is longer than
    :data:`HASHED_BYTES` bytes or the column has nulls."""
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count or not len(array):
        return None
    wide = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    kind = np.int64 if wide else np.int32
    _, offset_buffer, data_buffer = array.buffers()
    offsets = np.frombuffer(offset_buffer, kind)[array.offset : array.offset + len(array) + 1]
    starts = offsets[:-1].astype(np.int64)
    lengths = np.diff(offsets).astype(np.int64)
    longest = int(lengths.max())
    if longest > HASHED_BYTES:
        return None
    data = np.zeros(8, np.uint8) if data_buffer is None else np.frombuffer(data_buffer, np.uint8)
    padded = np.concatenate([data[: int(offsets[-1])], np.zeros(8, np.uint8)])
    # the 8 bytes from every byte position as one little-endian word (an unaligned view)
    words = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    hashes = np.full(len(array), np.uint64(14695981039346656037), dtype=np.uint64)
    for k in range(0, longest, 8):
        word = words[np.minimum(starts + k, len(words) - 1)]  # masked beyond the value
        rest = np.clip(lengths - k, 0, 8).astype(np.uint64)  # this word's bytes of the value
        keep = np.where(rest == 8, np.uint64(2**64 - 1), (np.uint64(1) << (rest * 8)) - 1)
        hashes ^= word & keep
        hashes *= _FNV_PRIME
        hashes ^= hashes >> np.uint64(29)
    hashes ^= lengths.astype(np.uint64)
    for shift, factor in ((33, 0xFF51AFD7ED558CCD), (33, 0xC4CEB9FE1A85EC53)):  # final mix
        hashes ^= hashes >> np.uint64(shift)
        hashes *= np.uint64(factor)
    hashes ^= hashes >> np.uint64(33)
    return hashes


def _check_unique(fields: pa.Table, path: Path, lines: np.ndarray, verb: str) -> None:
    """No (qid, docno) twice: a 64-bit hash of each docno (:func:`_text_hashes`, no string
    hashed in a table) mixed with its qid's dictionary code (a few qids: a small table),
    sorted, and only when two keys are equal the exact check (:func:`_check_unique_exact`),
    which finds the first repeat."""
    import pyarrow.compute as pc

    docno = _text_hashes(fields["docno"])
    if docno is not None:
        qid = numpy_array(pc.dictionary_encode(fields["qid"]).combine_chunks().indices)
        key = np.sort(docno ^ (qid.astype(np.uint64) * _QID_MIX))
        if not (key[1:] == key[:-1]).any():
            return
    _check_unique_exact(fields, path, lines, verb)


def _check_unique_exact(fields: pa.Table, path: Path, lines: np.ndarray, verb: str) -> None:
    """No (qid, docno) twice: both dictionary-encoded (hashing in C++), the integer pairs
    checked by :func:`_repeats`; the first repeat is found only on error."""
    import pyarrow.compute as pc

    qid = pc.dictionary_encode(fields["qid"]).combine_chunks()
    docno = pc.dictionary_encode(fields["docno"]).combine_chunks()
    key = numpy_array(qid.indices).astype(np.int64) * len(docno.dictionary)
    key += numpy_array(docno.indices)
    if not _repeats(key, len(qid.dictionary) * len(docno.dictionary)):
        return
    frame = fields.select(["qid", "docno"]).to_pandas()
    i = _first_bad(frame.duplicated(["qid", "docno"]).to_numpy())
    assert i is not None
    raise BundleError(
        path,
        int(lines[i]),
        f"document {frame['docno'].iat[i]!r} {verb} twice for query {frame['qid'].iat[i]!r}",
    )


def _run_table(path: Path | str, *, unique: bool = True) -> pa.Table:
    """One TREC run as an Arrow table ``qid, docno, rank_file, score, score_text, tag, line``
    (checked; ``score_text`` is the score as written).  ``unique=False`` leaves the check that
    no document is retrieved twice for a query to the caller (:func:`_run_part` checks it once
    the run is ranked)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    path = Path(path)
    fields, lines = _fields(path, RUN_FIELDS, "qid Q0 docno rank score tag")
    rank = _integers(fields["rank"], path, lines, "rank")
    score = _finite(fields["score"], path, lines, "score")
    tag = fields["tag"]
    if pc.count_distinct(tag).as_py() > 1:
        tags = pc.unique(tag)
        i = _first_bad(pc.not_equal(tag, tags[0]).to_numpy())
        assert i is not None
        raise BundleError(
            path,
            int(lines[i]),
            f"run tag {tags[1].as_py()!r} differs from {tags[0].as_py()!r} on the first line "
            "(one run per file)",
        )
    if unique:
        _check_unique(fields, path, lines, "retrieved")
    return pa.table(
        {
            "qid": fields["qid"],
            "docno": fields["docno"],
            "rank_file": arrow_array(rank),
            "score": arrow_array(score),
            "score_text": fields["score"],
            "tag": tag,
            "line": arrow_array(lines),
        }
    )


def _qrels_table(path: Path | str) -> pa.Table:
    """TREC qrels as an Arrow table ``qid, iteration, docno, relevance, line`` (checked)."""
    import pyarrow as pa

    path = Path(path)
    fields, lines = _fields(path, QRELS_FIELDS, "qid iteration docno relevance")
    relevance = _integers(fields["relevance"], path, lines, "relevance")
    _check_unique(fields, path, lines, "judged")
    return pa.table(
        {
            "qid": fields["qid"],
            "iteration": fields["iteration"],
            "docno": fields["docno"],
            "relevance": arrow_array(relevance),
            "line": arrow_array(lines),
        }
    )


def read_trec_run(path: Path | str) -> pd.DataFrame:
    """Read one TREC run: ``qid, docno, rank_file`` (int), ``score`` (float), ``tag, line``."""
    return _run_table(path).drop_columns(["score_text"]).to_pandas()


def read_qrels(path: Path | str) -> pd.DataFrame:
    """Read TREC qrels: ``qid, iteration, docno, relevance`` (int), ``line``."""
    return _qrels_table(path).to_pandas()


def _queries_table(run_qids: Any, qrels: pa.Table | None) -> pa.Table:
    """``query_id`` (qrels first, then runs, in order of appearance), ``in_qrels``,
    ``relevant``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if qrels is None:
        qids = pc.unique(run_qids)
        judged = np.zeros(len(qids), dtype=bool)
        relevant = np.zeros(len(qids), dtype=np.int64)
    else:
        qids, judged, relevant = _judged_queries(run_qids, qrels)
    return pa.table(
        {
            "query_id": qids,
            "in_qrels": pc.if_else(arrow_array(judged), scalar("true"), scalar("false")),
            "relevant": arrow_array(relevant),
        }
    )


def _judged_queries(run_qids: Any, qrels: pa.Table) -> tuple[Any, np.ndarray, np.ndarray]:
    """(every qid, qrels first; whether the qrels have it; its documents with relevance > 0)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    qids = pc.unique(pa.chunked_array(qrels["qid"].chunks + run_qids.chunks, pa.string()))
    judged_qid = numpy_array(pc.index_in(qrels["qid"], value_set=qids))
    judged = np.zeros(len(qids), dtype=bool)
    judged[judged_qid] = True
    positive = numpy_array(qrels["relevance"]) > 0
    relevant = np.bincount(judged_qid[positive], minlength=len(qids)).astype(np.int64)
    return qids, judged, relevant


def import_trec_tables(
    qrels: Path | str | None,
    runs: list[Path] | list[str],
    depth: int | None = None,
    *,
    name: str | None = None,
    on_file: Callable[[Path], None] | None = None,
    score_as_written: bool = False,
) -> tuple[dict[str, pa.Table], TaskConfig]:
    """:func:`import_trec` with Arrow tables (what ``receval import trec`` writes).

    Every step is columnar (Arrow's CSV reader, casts, one sort per run): no Python object per
    line.  ``on_file`` is called with each file's path once it is read (progress reporting).
    With ``score_as_written`` the runs' ``score`` column is the text of the run file (a text
    bundle then copies it instead of formatting every float again; the values are the same),
    else float64.
    """
    import pyarrow as pa

    _check_depth(runs, depth)
    parts = []
    owner: dict[str, Path] = {}
    for run_path in map(Path, runs):
        parts.append(_run_part(run_path, owner, depth, score_as_written))
        if on_file is not None:
            on_file(run_path)
    runs_table = pa.concat_tables(parts)
    tables, config = _other_tables(qrels, runs_table["query_id"], name, on_file)
    return {"queries": tables.pop("queries"), "runs": runs_table, **tables}, config


def _check_depth(runs: list, depth: int | None) -> None:
    if not runs:
        raise ValueError("at least one run file is needed")
    if depth is not None and (isinstance(depth, bool) or int(depth) != depth or depth < 1):
        raise ValueError(f"depth must be a positive integer, not {depth!r}")


def _ranked_run(run_path: Path, owner: dict[str, Path]) -> RankedRun:
    """One run file read, checked and put in bundle order (:func:`receval.formats.trec_order.
    ranked_run`); ``owner`` (tag -> file, updated) refuses a tag that another file already
    used.  The documents are checked for repeats once each query's rows are together
    (:func:`~receval.formats.trec_order.distinct_in_blocks`); the errors are
    :func:`_run_table`'s and in the same order."""
    run = _run_table(run_path, unique=False)
    ranked = ranked_run(run)
    if not distinct_in_blocks(ranked.run["docno"], ranked.starts):
        _check_unique(run, run_path, numpy_array(run["line"]), "retrieved")
    tag = run["tag"][0].as_py()  # one tag (checked)
    if tag in owner and owner[tag] != run_path:
        raise BundleError(
            run_path,
            int(run["line"][0].as_py()),
            f"run tag {tag!r} also names {owner[tag]}; give each run its own tag",
        )
    owner[tag] = run_path
    return ranked


def _run_part(
    run_path: Path, owner: dict[str, Path], depth: int | None, score_as_written: bool
) -> pa.Table:
    """One run file's rows of the bundle's runs table, ranked (:func:`_ranked_run`)."""
    return _bundle_rows(_ranked_run(run_path, owner), run_path.name, depth, score_as_written)


def _bundle_rows(
    ranked: RankedRun, name: str, depth: int | None, score_as_written: bool
) -> pa.Table:
    """The rows of the bundle's runs table of a ranked run read from file ``name``."""
    import pyarrow as pa

    score = "score_text" if score_as_written else "score"
    run, rank = ranked.table(["qid", "docno", score, "rank_file", "line"], depth)
    return pa.table(
        {
            "system": ranked.run["tag"].slice(0, len(rank)),  # one value: in any order
            "query_id": run["qid"],
            "answer": run["docno"],
            "score": run[score],
            "rank": arrow_array(rank),
            "rank_file": run["rank_file"],
            "source": line_sources(name, run["line"]),
        }
    )


def _other_tables(
    qrels: Path | str | None,
    run_qids: Any,
    name: str | None,
    on_file: Callable[[Path], None] | None,
) -> tuple[dict[str, pa.Table], TaskConfig]:
    """The ``queries`` and (with qrels) ``judgments`` tables, and the task config, given the
    runs' query ids (``run_qids``: a chunked string array)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    tables: dict[str, pa.Table] = {}
    judged = None
    if qrels is not None:
        qpath = Path(qrels)
        judged = _qrels_table(qpath)
        tables["judgments"] = pa.table(
            {
                "query_id": judged["qid"],
                "answer": judged["docno"],
                "label": pc.if_else(
                    pc.greater(judged["relevance"], scalar(0)), scalar("1"), scalar("0")
                ),
                "relevance": judged["relevance"],
                "iteration": judged["iteration"],
                "source": line_sources(qpath.name, judged["line"]),
            }
        )
        if on_file is not None:
            on_file(qpath)
    tables = {"queries": _queries_table(run_qids, judged), **tables}
    config = TaskConfig(
        name=name or "trec", matching=Matching(casefold=False), unjudged="wrong", average="macro"
    )
    return tables, config


def write_trec_bundle(
    folder: Path,
    qrels: Path | str | None,
    runs: list[Path] | list[str],
    depth: int | None = None,
    *,
    name: str | None = None,
    on_file: Callable[[Path], None] | None = None,
    suffix: str = ".tsv",
) -> tuple[dict[str, pa.Table], TaskConfig, int]:
    """:func:`import_trec_tables` streaming the runs table: each run file is read, checked,
    ranked and appended to ``folder/runs<suffix>`` (TSV, or Parquet row groups) before the
    next is read, so memory holds one run, not all of them.  Returns the other tables
    (``queries``, ``judgments``) and the config, for the caller to write into ``folder``, and
    the number of systems.  The runs file is the one :func:`import_trec_tables` gives
    :func:`receval.formats.bundle.write_bundle` (TSV: the same bytes; Parquet: the same rows,
    in one row group per run or per 2**20 rows of a run).  ``folder`` is a bundle being
    written (:func:`receval.formats.bundle.staged_bundle`): a failure leaves a partial file
    there, for the caller to remove.  Beside the runs file it writes the sidecar of its
    ``system, query_id, answer`` columns (:mod:`receval.formats.runs_sidecar`) that
    ``score --estimator official`` reads instead of parsing the runs file again."""
    import pyarrow as pa

    from receval.formats.runs_sidecar import RunsColumnsWriter

    _check_depth(runs, depth)
    owner: dict[str, Path] = {}
    qids = []
    path = Path(folder) / f"runs{suffix}"
    sidecar = RunsColumnsWriter(folder)
    try:
        with _RunsFile(path, score_as_written=suffix == ".tsv") as out:
            for run_path in map(Path, runs):
                ranked = _ranked_run(run_path, owner)
                qids.append(_qids_in_order(ranked))
                if out.write_ranked(ranked, run_path.name, depth):
                    run = ranked.run
                    sidecar.add(run["tag"], run["qid"], run["docno"], ranked.starts)
                else:
                    part = _bundle_rows(ranked, run_path.name, depth, out.score_as_written)
                    out.write(part)
                    starts = np.flatnonzero(numpy_array(part["rank"]) == 1)
                    sidecar.add(part["system"], part["query_id"], part["answer"], starts)
                    del part
                del ranked
                if on_file is not None:
                    on_file(run_path)
        sidecar.finish(path)
    finally:
        sidecar.close()
    run_qids = pa.chunked_array(qids, pa.string())
    tables, config = _other_tables(qrels, run_qids, name, on_file)
    return tables, config, len(owner)


def _qids_in_order(ranked: RankedRun) -> Any:
    """The run's distinct qids in bundle order (sorted: each qid's rows are one block)."""
    import pyarrow.compute as pc

    values = ranked.run["qid"].take(arrow_array(ranked.starts)).combine_chunks()
    return values.take(pc.sort_indices(values))


#: The bundle's runs table as ``import trec`` writes it.
_RUN_COLUMNS = ("system", "query_id", "answer", "score", "rank", "rank_file", "source")


class _RunsFile:
    """The runs table written one part at a time: TSV (header first) or Parquet."""

    def __init__(self, path: Path, *, score_as_written: bool) -> None:
        self.path = path
        self.parquet = path.suffix.lower() == ".parquet"
        self.score_as_written = score_as_written and not self.parquet
        self._out: Any = None

    def __enter__(self) -> _RunsFile:
        return self

    def write_ranked(self, ranked: RankedRun, name: str, depth: int | None) -> bool:
        """Append a ranked run read from file ``name`` to a TSV table (its lines joined where
        its rows are, :func:`receval.formats.trec_order.write_tsv_rows`); False, with
        nothing written, for a Parquet table, a ``depth`` that cuts rows, or lines that
        writer declines (:meth:`write` then writes the run's rows)."""
        from receval.formats.trec_order import write_tsv_rows

        if self.parquet or (depth is not None and (ranked.rank > depth).any()):
            return False
        if self._out is None:
            self._out = open(self.path, "wb")  # closed in __exit__
            self._out.write(("\t".join(_RUN_COLUMNS) + "\n").encode("utf-8"))
        return write_tsv_rows(self._out, ranked, name, "score_text")

    def write(self, part: pa.Table) -> None:
        if self.parquet:
            import pyarrow.parquet as pq

            if self._out is None:
                self._out = pq.ParquetWriter(self.path, part.schema)
            self._out.write_table(part)
            return
        from receval.formats.tables import _tsv_columns_arrow, append_tsv

        columns = _tsv_columns_arrow(part)
        if columns is None:  # not text, integers or floats: not from a TREC file
            raise TypeError(f"runs part of unexpected types: {part.schema}")
        if self._out is None:
            self._out = open(self.path, "wb")  # closed in __exit__
            self._out.write(("\t".join(columns) + "\n").encode("utf-8"))
        append_tsv(self._out, self.path, columns)

    def __exit__(self, *exc: object) -> None:
        if self._out is not None:
            self._out.close()


def import_trec(
    qrels: Path | str | None,
    runs: list[Path] | list[str],
    depth: int | None = None,
    *,
    name: str | None = None,
) -> tuple[dict[str, pd.DataFrame], TaskConfig]:
    """Convert TREC runs (and qrels) into bundle tables and a config (see the module docstring).

    Parameters
    ----------
    qrels : the qrels file, or None for an unjudged task.
    runs : one or more run files, one run (tag) each.
    depth : keep only the top ``depth`` documents per query and run (trec_eval order); None keeps
        all.
    name : the task name in ``task.toml`` (default ``"trec"``).

    Returns
    -------
    (tables, config) : ``queries``, ``runs`` and (with qrels) ``judgments`` frames for
        :func:`receval.formats.bundle.write_bundle`, and the task config.
    """
    tables, config = import_trec_tables(qrels, runs, depth, name=name)
    return {key: table.to_pandas() for key, table in tables.items()}, config
