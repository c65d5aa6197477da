"""Reading and writing the tables of a task bundle (TSV, CSV, Parquet) with line numbers.

Every reader returns a frame of *strings* (no type guessing: an answer ``"1"`` stays ``"1"``) with
an extra integer column ``_line``: the 1-based line of the row in the file (header = line 1), or
the 1-based row number for Parquet.  Type checks happen in :mod:`receval.task`, which turns every
problem into a :class:`~receval.errors.BundleError` naming the file and the line.

Writers are atomic: the file is written under a temporary name in the same folder and renamed
over the target, so a failed run never leaves a half-written file.
"""

from __future__ import annotations

import csv
import io
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from receval.errors import BundleError

if TYPE_CHECKING:
    import mmap

    import pandas as pd
    import pyarrow as pa

TABLE_SUFFIXES = (".tsv", ".csv", ".parquet")
LINE = "_line"


def __getattr__(name: str):
    """``STRING``, the dtype of text columns: pandas' Arrow-backed ``str`` (pandas >= 3;
    vectorised string kernels, no Python object per value), else ``object``.  Computed on first
    use, so that writing a bundle from Arrow tables (``receval import trec``) never imports
    pandas."""
    if name == "STRING":
        return _string_dtype()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _string_dtype():
    import pandas as pd

    return "str" if int(pd.__version__.split(".")[0]) >= 3 else object


def text_column(values) -> pd.Series:
    """A text column (numpy object array, list or Arrow array) as a :data:`STRING` Series."""
    import pandas as pd

    string = _string_dtype()
    return pd.Series(pd.array(values, dtype=string) if string == "str" else values, dtype=string)


def arrow_series(values) -> pd.Series:
    """An Arrow string array as a text Series without copying: :data:`STRING` on pandas >= 3,
    the Arrow-backed ``string`` dtype before (never a Python object per value)."""
    import pandas as pd

    string = _string_dtype()
    dtype = string if string == "str" else pd.StringDtype("pyarrow")
    return pd.Series(pd.array(values, dtype=dtype))


def find_table(folder: Path, stem: str) -> Path | None:
    """The one file ``stem.{tsv,csv,parquet}`` in ``folder``, or None; two of them is an error."""
    found = [folder / f"{stem}{s}" for s in TABLE_SUFFIXES if (folder / f"{stem}{s}").is_file()]
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise BundleError(found[1], None, f"ambiguous: both {names} exist; keep one")
    return found[0] if found else None


def read_table(
    path: Path, numeric: tuple[str, ...] = (), columns: tuple[str, ...] | None = None
) -> pd.DataFrame:
    """Read one bundle table as strings, with the ``_line`` column (see module docstring).

    ``numeric`` names columns that a Parquet file may store as numbers: those stay ``float64``
    (null = NaN) instead of becoming text; text files always give text.  ``columns`` (optional)
    limits a Parquet file to those of its columns (the others are not read); text files are
    read whole.
    """
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return _read_parquet(path, numeric, columns)
    if suffix not in (".tsv", ".csv"):
        raise BundleError(
            path, None, f"unsupported table format {suffix!r} (use .tsv, .csv or .parquet)"
        )
    if suffix == ".tsv":
        fast = _read_plain_tsv_frame(path)
        if fast is not None:
            return fast
    text = read_text(path, "text table")
    if not text.strip():
        raise BundleError(path, 1, "file is empty (a header row is required)")
    if suffix == ".tsv":
        return _read_delimited(path, text, sep="\t")
    return _read_delimited(path, text, sep=",")


def _read_plain_tsv_frame(path: Path) -> pd.DataFrame | None:
    """A plain TSV file (:func:`read_plain_tsv`: parsed by Arrow in C++)
    as :func:`read_table` gives it — the same strings, data line ``i + 2`` as row ``i`` — or None
    when the file is not plain and the line-by-line reader must read it."""
    import pandas as pd

    table = read_plain_tsv(path)
    if table is None:
        return None
    names = table.column_names
    frame = pd.DataFrame(
        {name: text_column(table.column(name).combine_chunks()) for name in names},
        columns=names,
    )
    frame[LINE] = np.arange(2, table.num_rows + 2, dtype=np.int64)
    return frame


def read_bytes(path: Path) -> bytes:
    """The bytes of ``path``; an unreadable file is a :class:`BundleError`, not an ``OSError``."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise BundleError(path, None, f"cannot read the file ({exc.strerror or exc})") from None


#: Files at least this large are mapped into memory instead of read: no copy of the file in
#: fresh pages of the process (on a 78 MB ``runs.tsv``, 0.06-0.1 s less system time).
MAP_BYTES = 1 << 20


@contextmanager
def mapped_bytes(path: Path) -> Iterator[bytes | mmap.mmap]:
    """The bytes of ``path`` for the duration of the ``with`` block: :func:`read_bytes` for a
    small (or empty, or unreadable) file, else the file mapped read-only (``mmap``: ``find``,
    slicing and the buffer protocol, no ``in`` or ``count``), unmapped at the end.  An
    unreadable file is a :class:`BundleError`."""
    import mmap

    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0  # read_bytes names the problem
    if size < max(MAP_BYTES, 1):  # an empty file cannot be mapped
        yield read_bytes(path)
        return
    try:
        with open(path, "rb") as fh:
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise BundleError(path, None, f"cannot read the file ({exc.strerror or exc})") from None
    try:
        yield data
    finally:
        data.close()


#: (magic bytes, module) of the compressed files the importers read: official run and qrels
#: files are often distributed gzipped (NIST's ``input.<run>.gz``).
_COMPRESSED = ((b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "lzma"), (b"BZh", "bz2"))


def read_input_bytes(path: Path) -> bytes:
    """:func:`read_bytes`, decompressed when the file is gzip, xz or bzip2 (told by its first
    bytes, not its name); a damaged archive is a :class:`BundleError`.  For the importers'
    inputs (TREC, TAC-KBP, judge files); bundle tables are read as they are."""
    import importlib

    raw = read_bytes(path)
    for magic, name in _COMPRESSED:
        if raw.startswith(magic) and (name != "bz2" or raw[4:10] == b"1AY&SY"):
            module = importlib.import_module(name)
            try:
                return module.decompress(raw)
            except (OSError, EOFError, ValueError, getattr(module, "LZMAError", OSError)) as exc:
                raise BundleError(path, None, f"a damaged {name} file ({exc})") from None
    return raw


def read_input_text(path: Path, what: str = "text file") -> str:
    """:func:`read_text` of a possibly compressed input (:func:`read_input_bytes`)."""
    return decode_text(path, read_input_bytes(path), what)


def read_text(path: Path, what: str = "text file") -> str:
    """The UTF-8 text of ``path`` (a byte-order mark removed).

    A NUL byte or invalid UTF-8 is a :class:`BundleError` naming the line it is on.
    """
    return decode_text(path, read_bytes(path), what)


def decode_text(path: Path, raw: bytes, what: str = "text file") -> str:
    """``raw`` (the bytes of ``path``) as UTF-8 text, as :func:`read_text` says."""
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        raise BundleError(path, line, f"binary data (NUL byte): not a {what}")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise BundleError(path, line, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})") from None


def _split_lines(text: str) -> list[str]:
    """Physical lines: split at ``\\n`` only (``\\r\\n`` accepted), never at U+2028, form feeds
    or the other separators :meth:`str.splitlines` knows, which may occur inside an answer."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _read_delimited(path: Path, text: str, sep: str) -> pd.DataFrame:
    import pandas as pd

    lines = _split_lines(text)
    header = lines[0]
    if not header.strip():
        raise BundleError(path, 1, "the first line is blank; it must be the header row")
    other = "," if sep == "\t" else "\t"
    if sep not in header and other in header:
        kind = "comma" if other == "," else "tab"
        want = "tab" if sep == "\t" else "comma"
        raise BundleError(
            path,
            1,
            f"header looks {kind}-separated but a {path.suffix} file must be {want}-separated",
        )
    if sep == "\t":
        names, rows, line_numbers = _tsv_records(path, lines)
    else:
        names, rows, line_numbers = _csv_records(path, text)
    rows = np.asarray(rows, dtype=object).reshape(len(line_numbers), len(names))
    frame = pd.DataFrame(
        {name: text_column(rows[:, j]) for j, name in enumerate(names)}, columns=names
    )
    frame[LINE] = np.asarray(line_numbers, dtype=np.int64)
    return frame


def check_header(path: Path, names: list[str]) -> list[str]:
    names = [n.strip() for n in names]
    if any(not n for n in names):
        raise BundleError(path, 1, "empty column name in the header")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise BundleError(path, 1, f"duplicate column name(s) in the header: {', '.join(dup)}")
    if LINE in names:
        raise BundleError(path, 1, f"column name {LINE!r} is reserved (line numbers); rename it")
    return names


def _tsv_records(path: Path, lines: list[str]) -> tuple[list[str], np.ndarray, list[int]]:
    """TSV: no quoting at all (answers may contain quote characters), exact field counts.

    Vectorised over lines: one pass counts the tabs, then the kept lines are joined and split
    once (a million-row table parses in about a second).
    """
    names = check_header(path, lines[0].split("\t"))
    body = lines[1:]
    n = len(body)
    blank = np.fromiter((not line.strip() for line in body), dtype=bool, count=n)
    tabs = np.fromiter((line.count("\t") for line in body), dtype=np.int64, count=n)
    bad = ~blank & (tabs != len(names) - 1)
    if bad.any():
        i = int(bad.nonzero()[0][0])
        raise BundleError(
            path, i + 2, f"expected {len(names)} tab-separated fields, found {tabs[i] + 1}"
        )
    keep = np.flatnonzero(~blank)
    kept = body if len(keep) == n else [body[i] for i in keep]
    if kept:
        flat = "\t".join(kept).split("\t")
        rows = np.array(flat, dtype=object).reshape(len(kept), len(names))
    else:
        rows = np.empty((0, len(names)), dtype=object)
    return names, rows, (keep + 2).tolist()


def _csv_records(path: Path, text: str) -> tuple[list[str], list[list[str]], list[int]]:
    """CSV (RFC 4180 quoting); a record's line is the physical line where it starts."""
    # strict: a stray or unterminated quote is an error, not a silently merged record
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        names = check_header(path, next(reader))
    except csv.Error as exc:
        raise BundleError(path, 1, f"malformed CSV header: {exc}") from None
    rows = []
    line_numbers = []
    number = reader.line_num + 1  # first physical line of the next record
    try:
        for fields in reader:
            if any(f.strip() for f in fields):
                if len(fields) != len(names):
                    raise BundleError(
                        path,
                        number,
                        f"expected {len(names)} comma-separated fields, found {len(fields)}",
                    )
                rows.append(fields)
                line_numbers.append(number)
            number = reader.line_num + 1
    except csv.Error as exc:
        raise BundleError(path, number, f"malformed CSV (record starting here): {exc}") from None
    return names, rows, line_numbers


PANDAS_INDEX = re.compile(r"__index_level_\d+__")


def read_parquet_arrow(
    path: Path, columns: tuple[str, ...] | None = None, row_group: int | None = None
) -> pa.Table:
    """A Parquet file (or only its row group ``row_group``) as an Arrow table, only ``columns``
    of it when given; an unreadable file is a :class:`BundleError`."""
    pq = _parquet_module(path)
    with _parquet_errors(path):
        reader = pq.ParquetFile(path)
        wanted = None
        if columns is not None:
            present = set(reader.schema_arrow.names)
            wanted = [c for c in columns if c in present]
        if row_group is None:
            return reader.read(columns=wanted)
        return reader.read_row_group(row_group, columns=wanted)


def parquet_row_groups(path: Path) -> list[int]:
    """The number of rows of every row group of a Parquet file (a :class:`BundleError` when it
    is unreadable)."""
    pq = _parquet_module(path)
    with _parquet_errors(path):
        meta = pq.ParquetFile(path).metadata
        return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]


def _parquet_module(path: Path):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise BundleError(
            path, None, "reading Parquet needs pyarrow: pip install 'receval[parquet]'"
        ) from None
    return pq


@contextmanager
def _parquet_errors(path: Path) -> Iterator[None]:
    try:
        yield
    except Exception as exc:  # pyarrow raises many types for corrupt files
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BundleError(path, None, f"not a readable Parquet file ({first})") from None


def _read_parquet(
    path: Path, numeric: tuple[str, ...] = (), columns: tuple[str, ...] | None = None
) -> pd.DataFrame:
    """Parquet as strings: integers stay integers (``1``, not ``1.0``, even with nulls), floats
    are written with :func:`repr` (shortest round-trip form), nulls become empty strings."""
    return arrow_to_strings(read_parquet_arrow(path, columns), path, numeric)


def check_arrow_type(path: Path, name: str, kind) -> None:
    """BundleError naming file and column when an Arrow column holds values the loader cannot
    read as one text or number per cell (lists, structs, maps, unions: nested values)."""
    import pyarrow as pa

    value = kind.value_type if pa.types.is_dictionary(kind) else kind
    if pa.types.is_nested(value) or pa.types.is_union(value) or isinstance(value, pa.ExtensionType):
        raise BundleError(
            path,
            None,
            f"column {name!r} holds nested values ({value}): receval reads one text or number "
            "per cell; write this column as plain text or numbers",
        )


def arrow_to_strings(table, path: Path, numeric: tuple[str, ...] = ()) -> pd.DataFrame:
    """A pyarrow Table as a frame of strings with ``_line`` = the 1-based row number (the
    conversions of :func:`read_table` for Parquet; ``path`` names errors).  Numeric columns named
    in ``numeric`` stay numbers (``float64``, null = NaN)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    keep = [i for i, n in enumerate(table.column_names) if not PANDAS_INDEX.fullmatch(str(n))]
    names = check_header(path, [str(table.column_names[i]) for i in keep])
    out = {}
    for name, i in zip(names, keep, strict=True):
        col = table.column(i)
        check_arrow_type(path, name, col.type)
        if pa.types.is_dictionary(col.type):
            col = pc.cast(col, col.type.value_type)
        kind = col.type
        if name in numeric and (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            out[name] = pd.Series(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False))
            continue
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        out[name] = text_column(arrow_text(col, path, name))
    frame = pd.DataFrame(out, index=pd.RangeIndex(table.num_rows), columns=names)
    frame[LINE] = np.arange(1, table.num_rows + 1, dtype=np.int64)
    return frame


def arrow_text(values, path: Path, name: str, first_row=None) -> pa.Array:
    """An Arrow array as text (a ``large_string`` array, nulls as ""): strings as they are,
    integers as written, floats in their shortest round-trip form (numpy's ``str``), binary
    decoded as UTF-8 (else an error naming ``first_row(i)``, the row of value ``i``; default
    ``i + 1``), anything else with :func:`str`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pc.fill_null(values, "").cast(pa.large_string())
    if pa.types.is_integer(kind):
        return pc.fill_null(pc.cast(values, pa.large_string()), "")
    if pa.types.is_floating(kind):
        # numpy's str() of a float64 is its shortest round-trip form, as repr() is
        floats = pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
        text = floats.astype(str).astype(object)
        text[np.isnan(floats)] = ""
        return pa.array(text, pa.large_string())
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        out = []
        for i, v in enumerate(values.to_pylist()):
            try:
                out.append("" if v is None else v.decode("utf-8"))
            except UnicodeDecodeError:
                row = first_row(i) if first_row is not None else i + 1
                raise BundleError(
                    path, row, f"column {name!r}: binary value is not valid UTF-8"
                ) from None
        return pa.array(out, pa.large_string())
    return pa.array(["" if v is None else str(v) for v in values.to_pylist()], pa.large_string())


# ---------------------------------------------------------------------------------------------
# atomic writing


def current_umask() -> int:
    """The process umask (read without changing it for more than an instant)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes 0600; outputs are meant to be shared
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


_NEEDS_QUOTE = re.compile(r"[\t\n\r]")


def write_table(path: Path, frame: pd.DataFrame | pa.Table) -> None:
    """Write ``frame`` (a pandas DataFrame or a pyarrow Table) atomically as TSV, CSV or Parquet
    according to the suffix of ``path``.

    TSV fields may not contain tabs or newlines (there is no quoting in bundle TSV); such a value
    is an error rather than a silently corrupted file.  Text, integer and float64 columns are
    written to TSV by Arrow (bytes identical to pandas' ``to_csv``: floats in their shortest
    round-trip form, missing values empty); other columns go through ``to_csv``.  A pyarrow Table
    is written to Parquet as it is.
    """
    import pyarrow as pa

    path = Path(path)
    suffix = path.suffix.lower()
    if isinstance(frame, pa.Table):  # pandas is not imported for Arrow tables
        if LINE in frame.column_names:
            frame = frame.drop_columns([LINE])
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            with atomic_path(path) as tmp:
                pq.write_table(frame, tmp)
            return
        columns = _tsv_columns_arrow(frame) if suffix == ".tsv" else None
        if columns is not None:
            write_tsv(path, columns)
            return
        frame = frame.to_pandas()
    frame = frame.drop(columns=[LINE], errors="ignore")
    if suffix == ".tsv":
        columns = tsv_columns(frame)
        if columns is not None:
            write_tsv(path, columns)
            return
    with atomic_path(path) as tmp:
        if suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        elif suffix == ".csv":
            frame.to_csv(tmp, index=False, lineterminator="\n")
        elif suffix == ".tsv":
            for name in frame.columns:
                _check_tsv_text(path, name, frame[name])
            frame.to_csv(
                tmp,
                sep="\t",
                index=False,
                quoting=csv.QUOTE_NONE,
                lineterminator="\n",
                escapechar=None,
            )
        else:
            raise ValueError(f"unsupported table format {suffix!r}")


def _check_tsv_text(path: Path, name: str, col: pd.Series) -> None:
    import pandas as pd

    if col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
        bad = col.astype(str).str.contains(_NEEDS_QUOTE, regex=True)
        if bad.any():
            _tab_error(path, name, int(bad.to_numpy().nonzero()[0][0]))


def _tab_error(path: Path, name: str, row: int) -> None:
    raise ValueError(
        f"{path.name}: value in column {name!r} (row {row + 1}) contains a tab or newline"
    )


def _plain_names(names: list) -> bool:
    return bool(names) and all(
        isinstance(n, str) and not _NEEDS_QUOTE.search(n) and '"' not in n for n in names
    )


def tsv_columns(frame: pd.DataFrame) -> dict[str, object] | None:
    """The frame's columns as Arrow arrays of TSV text, or None when a column is of a kind only
    ``to_csv`` formats (booleans, categories, dates, mixed objects, float32...)."""
    import pandas as pd

    if not _plain_names(list(frame.columns)) or frame.columns.has_duplicates:
        return None
    import pyarrow as pa

    out = {}
    for name in frame.columns:
        col = frame[name]
        dtype = col.dtype
        if isinstance(dtype, pd.StringDtype):
            values = pa.array(col.array, from_pandas=True)
        elif dtype == np.dtype(object):
            if pd.api.types.infer_dtype(col, skipna=True) not in ("string", "empty"):
                return None
            values = pa.array(col.to_numpy(), type=pa.large_string(), from_pandas=True)
        elif dtype.kind in "iu" and isinstance(dtype, np.dtype):
            values = pa.array(col.to_numpy())
        elif dtype == np.float64:
            values = pa.array(col.to_numpy(), from_pandas=True)
        else:
            return None
        out[name] = values
    return _tsv_columns_arrow(pa.table(out))


def _tsv_columns_arrow(table: pa.Table) -> dict[str, object] | None:
    """A pyarrow Table's columns as TSV text (nulls empty, floats as Python's ``repr``), or
    None when a column is of another type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not _plain_names(table.column_names) or len(set(table.column_names)) < table.num_columns:
        return None
    out = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        kind = col.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            text = col
        elif pa.types.is_integer(kind):
            text = pc.cast(col, pa.string())
        elif pa.types.is_float64(kind):
            # numpy's str() of a float64 is its shortest round-trip form, as repr() is
            floats = col.to_numpy()
            text = pa.array(floats.astype(str), pa.string(), mask=np.isnan(floats))
        else:
            return None
        # a Python fill value makes pyarrow import pandas: filled only when there are nulls,
        # else one chunk, as fill_null returns it (the CSV writer garbles some chunk layouts)
        out[name] = pc.fill_null(text, "") if text.null_count else text
    return _aligned(out)


def _aligned(columns: dict[str, object]) -> dict[str, object]:
    """The columns as they are when they are chunked alike with no empty chunk (an imported
    table: one chunk per input file), else each as one array: Arrow's CSV writer garbles some
    other layouts (empty chunks), and combining copies every value (0.47 s of CPU for the
    6·10⁶ rows of an imported TREC task)."""
    lengths = {
        tuple(len(c) for c in col.chunks) if hasattr(col, "chunks") else (len(col),)
        for col in columns.values()
    }
    if len(lengths) == 1 and all(next(iter(lengths))):
        return columns
    return {name: _one_chunk(col) for name, col in columns.items()}


def _one_chunk(column):
    """A chunked array as one array (an array as it is)."""
    return column.combine_chunks() if hasattr(column, "combine_chunks") else column


def write_tsv(path: Path, columns: dict[str, object], rows_per_block: int = 1 << 20) -> None:
    """Write text columns as TSV: the header, then each block of rows joined by Arrow in C++
    (fields and a final empty one joined by tabs; that last tab becomes the newline).  A value
    holding a tab or a newline shows in the block's byte counts, and is then named by
    :func:`_check_tsv_values` (the temporary file is removed)."""
    import pyarrow as pa

    names = list(columns)
    table = pa.table(columns)
    if _write_tsv_arrow(path, names, table):
        return
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        out.write(("\t".join(names) + "\n").encode("utf-8"))
        _write_tsv_joined(out, path, names, table, rows_per_block)


def append_tsv(out, path: Path, columns: dict[str, object]) -> None:
    """Append text columns as TSV rows (no header) to the open binary file ``out`` (the file
    ``path``, named in errors): Arrow's CSV writer, or, when a value holds a character it
    refuses, :func:`write_tsv`'s joins from where the rows began.  A writer that streams a
    table in parts (``receval import trec``, one run at a time) calls it once per part."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = list(columns)
    table = pa.table(columns)
    start = out.tell()
    options = pacsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none")
    try:
        pacsv.write_csv(table, out, write_options=options)
        return
    except pa.ArrowInvalid:
        out.seek(start)
        out.truncate()
    _write_tsv_joined(out, path, names, table)


def _write_tsv_joined(out, path: Path, names: list[str], table, rows_per_block: int = 1 << 20):
    """Write ``table``'s text columns to ``out`` block by block, fields joined in C++ (the rows
    of :func:`write_tsv` when Arrow's CSV writer refuses a value)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    empty, tab = pa.scalar("", pa.large_string()), pa.scalar("\t", pa.large_string())
    for start in range(0, table.num_rows, rows_per_block):
        block = table.slice(start, rows_per_block)
        cols = [pc.cast(block[n], pa.large_string()).combine_chunks() for n in names]
        lines = pc.binary_join_element_wise(*cols, empty, tab)
        _, offsets, data = lines.buffers()
        offsets = np.frombuffer(offsets, np.int64)[lines.offset : lines.offset + len(lines) + 1]
        data = np.frombuffer(data, dtype=np.uint8)[offsets[0] : offsets[-1]].copy()
        tabs = np.count_nonzero(data == ord("\t"))
        if (
            tabs != len(lines) * len(names)
            or (data == ord("\n")).any()
            or (data == ord("\r")).any()
        ):
            _check_tsv_values(path, table)
        data[offsets[1:] - offsets[0] - 1] = ord("\n")
        out.write(memoryview(data))


def _write_tsv_arrow(path: Path, names: list[str], table: pa.Table) -> bool:
    """Write the text columns with Arrow's CSV writer (C++, no quoting: tab-separated, ``\n``
    line ends, the same bytes as :func:`_write_tsv`'s joins).  False, with nothing written,
    when a value holds a character the unquoted writer refuses (a tab, a line end or a quote
    character, which bundle TSV allows): :func:`_write_tsv` then writes or names it."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    options = pacsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none")
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as out:
            out.write(("\t".join(names) + "\n").encode("utf-8"))
            pacsv.write_csv(table, out, write_options=options)
    except pa.ArrowInvalid:
        return False
    return True


def _check_tsv_values(path: Path, table: pa.Table) -> None:
    """Raise for the first value (column by column) holding a tab or a newline."""
    import pyarrow.compute as pc

    for name in table.column_names:
        bad = pc.match_substring_regex(table[name], r"[\t\n\r]")
        if pc.any(bad).as_py():
            _tab_error(path, name, int(np.flatnonzero(bad.to_numpy(zero_copy_only=False))[0]))


def read_run_files(paths, read, id_column: str, message: str) -> list[tuple[Path, pd.DataFrame]]:
    """Read run files with ``read(path)`` (a frame with ``id_column`` and ``line``); a run id in
    two files is a :class:`BundleError` at its first line in the second file.

    ``message`` is formatted with ``id`` and ``owner`` (the file that has it first), e.g.
    ``"run id {id!r} also appears in {owner}; give each run its own id"``.  The one check the TAC
    and TREC importers share.
    """
    out = []
    owner: dict[str, Path] = {}
    for path in map(Path, paths):
        frame = read(path)
        for run_id, line in (
            frame.groupby(id_column, sort=False, observed=True)["line"].first().items()
        ):
            if run_id in owner and owner[run_id] != path:
                raise BundleError(path, int(line), message.format(id=run_id, owner=owner[run_id]))
            owner[run_id] = path
        out.append((path, frame))
    return out


#: Every character :meth:`str.isspace` accepts (what Python's ``\\s`` and :meth:`str.strip`
#: mean), spelled out so the Arrow kernels (RE2, whose ``\\s`` is ASCII only) agree with Python.
WHITESPACE = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())


def read_plain_tsv(path: Path, columns: tuple[str, ...] | None = None):
    """A plain TSV file parsed by Arrow's CSV reader in C++ (every field a string, no Python
    object per field), or None when the file is not plain and :func:`read_table`'s reader must
    give its fields or its exact error: a byte-order mark, NUL bytes, a carriage return not
    ending a line, an empty or blank line (so no data line is skipped and row ``i`` is line
    ``i + 2``), no tab in the header, a malformed line, invalid UTF-8 or no data row.

    ``columns`` (optional) converts only those of the file's columns (the others are split off
    but never become strings); a row blank in all of them is then also "not plain"."""
    with mapped_bytes(path) as raw:
        end = raw.find(b"\n")
        header = raw[:] if end < 0 else raw[:end]  # not partition: that copies the whole file
        if not _looks_plain(raw, header):
            return None
        parsed = _arrow_parse(raw, header, columns)  # Arrow's columns are copies: unmap after
    if parsed is None:
        return None
    names, table = parsed
    if table.num_rows == 0:
        return None
    if _has_blank_row(table):
        return None
    checked = dict(zip(names, check_header(path, names), strict=True))
    return table.rename_columns([checked[n] for n in table.column_names])


def _looks_plain(raw: bytes | mmap.mmap, header: bytes) -> bool:
    """The byte-level tests of :func:`read_plain_tsv` (no BOM, NUL or lone CR; a tab in the
    header), on bytes or a mapped file.  An empty line needs no scan of its own: Arrow reads it
    as a row of empty fields, which :func:`_has_blank_row` finds."""
    if not len(raw) or raw[:3] == b"\xef\xbb\xbf" or raw.find(b"\x00") >= 0:
        return False
    if b"\t" not in header:
        return False
    if raw.find(b"\r") < 0:
        return True
    data = raw if isinstance(raw, bytes) else raw[:]  # a file with CRs: counted on a copy
    return data.count(b"\r") == data.count(b"\r\n")


#: Text files at most this large are parsed by Arrow on one thread: a file of tens of MB
#: parses in a fraction of a second, and the worker threads' hand-offs cost more CPU time than
#: they save wall time (measured on 78 MB: 0.14 s CPU on one thread, 0.16-0.25 s on several).
THREADED_PARSE_BYTES = 256 << 20


def _arrow_parse(raw: bytes, header: bytes, columns: tuple[str, ...] | None):
    """(header names, Arrow table of string columns) of a plain TSV, or None when the header
    repeats a name, is not UTF-8, or Arrow finds the file malformed."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        names = header.rstrip(b"\r").decode("utf-8").split("\t")
        if len(set(names)) < len(names):
            return None
        table = pacsv.read_csv(
            pa.py_buffer(raw),
            read_options=pacsv.ReadOptions(
                column_names=names, skip_rows=1, use_threads=len(raw) > THREADED_PARSE_BYTES
            ),
            parse_options=pacsv.ParseOptions(
                delimiter="\t",
                quote_char=False,
                double_quote=False,
                escape_char=False,
                newlines_in_values=False,
                ignore_empty_lines=False,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                include_columns=None
                if columns is None
                else [n for n in names if n.strip() in columns],
            ),
        )
    except (UnicodeDecodeError, pa.ArrowInvalid):
        return None
    return names, table


def _has_blank_row(table) -> bool:
    """True when some row is whitespace and tabs only in every column (the text reader skips
    such a line)."""
    import pyarrow.compute as pc

    blank = None
    for column in table.columns:
        empty = pc.equal(pc.utf8_trim(column, characters=WHITESPACE), "")
        blank = empty if blank is None else pc.and_(blank, empty)
        if not pc.any(blank).as_py():
            break  # no row is blank in every column so far: none is blank
    return blank is not None and pc.any(blank).as_py()
