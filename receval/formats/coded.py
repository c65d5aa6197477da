"""Run tables as dictionary codes: every text column is its distinct values plus one integer
code per row, read straight from Arrow (a Parquet file or an in-memory Arrow table) or from a
text table's strings.

A run table of N rows repeats a few systems, queries and teams and a few hundred thousand
answers; the loader checks and converts the distinct values once (blank cells, unknown queries,
numbers) and keeps N small integers per column, never N Python strings.  A column whose values
are mostly distinct (a per-row note such as ``source = run.txt:17``) is kept as an Arrow string
array instead (hashing it would cost time and save nothing), unless the caller needs it coded.
Text conversions are those of :func:`receval.formats.tables.arrow_text` (integers as written,
floats in their shortest round-trip form, nulls as empty strings), applied to the distinct
values only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from receval.formats.tables import (
    LINE,
    PANDAS_INDEX,
    arrow_text,
    check_arrow_type,
    check_header,
    read_parquet_arrow,
    read_plain_tsv,
    read_table,
)


class HeaderRows:
    """Where a table's problems are reported: ``header`` is the line of a file's header row
    (1), or None for an in-memory table."""

    header: int | None

    @property
    def first_row(self) -> int | None:
        return None if self.header is None else self.header + 1

    @property
    def no_rows(self) -> str:
        return "the file has a header but no rows" if self.header else "the table has no rows"


@dataclass
class CodedTable(HeaderRows):
    """One table as codes: ``text[name] = (values, codes)`` with ``values`` a pyarrow string
    array of distinct values and ``codes`` an int32 array indexing it per row; ``numbers[name]``
    a float64 array (NaN = empty) for numeric columns stored as numbers.

    ``plain[name]`` is a mostly-distinct text column as an Arrow ``large_string`` array
    (:meth:`coded` and :meth:`plain_text` convert between the two forms).

    ``lines`` holds each row's line in its file (text tables) or is None: row ``i`` is then row
    number ``row_offset + i + 1`` (Parquet, in-memory tables).  ``header`` is the line header problems are
    reported on (1 for a file, None for an in-memory table).
    """

    path: Path
    rows: int
    columns: list[str]
    text: dict[str, tuple[object, np.ndarray]] = field(default_factory=dict)
    numbers: dict[str, np.ndarray] = field(default_factory=dict)
    plain: dict[str, object] = field(default_factory=dict)
    lines: np.ndarray | None = None
    header: int | None = 1
    row_offset: int = 0  # rows of the same file before this part (a Parquet row group)
    submission: str | None = None  # the system of a runs/<system> file (empty = no outputs)

    @property
    def empty(self) -> bool:
        return self.rows == 0

    def line(self, row: int) -> int:
        """The line (or row number) that errors about row ``row`` (0-based) name."""
        return int(self.lines[row]) if self.lines is not None else self.row_offset + int(row) + 1

    def line_numbers(self) -> np.ndarray:
        """Every row's line, int32 when it fits."""
        if self.lines is None:
            last = self.row_offset + self.rows
            kind = np.int32 if last < 2**31 else np.int64
            return np.arange(self.row_offset + 1, last + 1, dtype=kind)
        lines = np.asarray(self.lines, dtype=np.int64)
        return lines.astype(np.int32) if lines.max(initial=0) < 2**31 - 1 else lines

    def coded(self, name: str) -> tuple[object, np.ndarray]:
        """(distinct values, codes) of a text column, encoding a plain one now."""
        if name in self.plain:
            return _dictionary(self.plain[name], self, name)
        return self.text[name]

    def plain_text(self, name: str):
        """A text column as an Arrow string array (decoding a coded one now)."""
        if name in self.plain:
            return self.plain[name]
        import pyarrow as pa

        values, codes = self.text[name]
        return values.take(pa.array(codes))

    def first_row_where(self, name: str, bad_values: np.ndarray) -> tuple[int, int]:
        """(first row whose value is flagged in ``bad_values`` (one flag per distinct value),
        number of such rows), or (-1, 0)."""
        codes = self.text[name][1]
        bad = bad_values[codes]
        rows = np.flatnonzero(bad)
        return (int(rows[0]), len(rows)) if len(rows) else (-1, 0)

    def value_at(self, name: str, row: int) -> str:
        values, codes = self.text[name]
        return values[int(codes[row])].as_py()

    def replace_values(self, name: str, values) -> None:
        """New distinct values for a text column (same length: e.g. stripped)."""
        self.text[name] = (values, self.text[name][1])

    def constant(self, name: str, value: str) -> None:
        """Set text column ``name`` to ``value`` on every row."""
        import pyarrow as pa

        self.text[name] = (pa.array([value], pa.large_string()), np.zeros(self.rows, np.int32))
        if name not in self.columns:
            self.columns.insert(0, name)

    def select(self, names: tuple[str, ...]) -> None:
        """Keep only the columns ``names`` (and forget the others)."""
        self.columns = [c for c in self.columns if c in names]
        for store in (self.text, self.numbers, self.plain):
            for name in [n for n in store if n not in names]:
                del store[name]


def read_coded(
    path: Path,
    numeric: tuple[str, ...] = (),
    columns: tuple[str, ...] | None = None,
    *,
    coded: tuple[str, ...] | None = None,
) -> CodedTable:
    """One bundle table as a :class:`CodedTable` (see :func:`receval.formats.tables.read_table`
    for the formats and ``numeric``/``columns``); columns named in ``coded`` (default: all) are
    always coded, the others may stay plain (mostly distinct values)."""
    if path.suffix.lower() == ".parquet":
        return coded_from_arrow(read_parquet_arrow(path, columns), path, numeric, coded=coded)
    if path.suffix.lower() == ".tsv":
        arrow = read_plain_tsv(path, columns)
        if arrow is not None:  # data line i + 2 is row i: the header is line 1, none skipped
            return coded_from_arrow(arrow, path, (), coded=coded, row_offset=1)
    frame = read_table(path, numeric)
    return coded_from_frame(frame, path, coded=coded)


def coded_from_frame(
    frame: pd.DataFrame, path: Path, header: int | None = 1, coded: tuple[str, ...] | None = None
) -> CodedTable:
    """A frame of strings with its ``_line`` column (:func:`read_table`'s output)."""
    import pyarrow as pa

    names = [c for c in frame.columns if c != LINE]
    arrays = {c: pa.array(frame[c].to_numpy(dtype=object), pa.large_string()) for c in names}
    table = pa.table(arrays) if names else pa.table({"_": pa.nulls(len(frame))}).select([])
    lines = frame[LINE].to_numpy(np.int64) if LINE in frame.columns else None
    return coded_from_arrow(table, path, (), lines=lines, header=header, checked=True, coded=coded)


def coded_from_arrow(
    arrow,
    path: Path,
    numeric: tuple[str, ...] = (),
    *,
    lines: np.ndarray | None = None,
    header: int | None = 1,
    checked: bool = False,
    coded: tuple[str, ...] | None = None,
    row_offset: int = 0,
) -> CodedTable:
    """An Arrow table: numeric columns named in ``numeric`` stay numbers, every other column
    is dictionary-encoded and its distinct values turned into text, or (a column not named in
    ``coded`` whose values are mostly distinct) kept as plain text."""
    import pyarrow as pa

    keep = [i for i, n in enumerate(arrow.column_names) if not PANDAS_INDEX.fullmatch(str(n))]
    raw_names = [str(arrow.column_names[i]) for i in keep]
    names = raw_names if checked else check_header(path, raw_names)
    table = CodedTable(
        path, arrow.num_rows, list(names), lines=lines, header=header, row_offset=row_offset
    )
    for name, i in zip(names, keep, strict=True):
        col = arrow.column(i)
        check_arrow_type(path, name, col.type)
        kind = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
        if name in numeric and (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            table.numbers[name] = _floats(col)
        elif coded is not None and name not in coded and _mostly_distinct(col):
            table.plain[name] = _plain(col, table, name)
        else:
            table.text[name] = _dictionary(col, table, name)
    return table


#: Rows looked at to tell a mostly-distinct column (a per-row note) from a coded one.
SNIFF_ROWS = 65_536


def _mostly_distinct(col) -> bool:
    """Whether a column of at least :data:`SNIFF_ROWS` values has over half of its first
    :data:`SNIFF_ROWS` values distinct (smaller tables are always coded: cheap either way)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(col.type) or len(col) < SNIFF_ROWS:
        return False
    head = col.slice(0, SNIFF_ROWS)
    return pc.count_distinct(head).as_py() > len(head) // 2


def _plain(col, table: CodedTable, name: str):
    """A text column as one Arrow ``large_string`` array (the conversions of ``arrow_text``)."""
    import pyarrow as pa

    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return arrow_text(col, table.path, name)


def _floats(col) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(col.type):
        col = pc.cast(col, col.type.value_type)
    return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)


def _dictionary(col, coded: CodedTable, name: str) -> tuple[object, np.ndarray]:
    """(distinct values as text, int32 code per row) of one Arrow column; nulls read as ""."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.Array):
        col = pa.chunked_array([col])
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    chunks = [c for c in col.chunks if len(c)]
    if not chunks:
        return pa.array([], pa.large_string()), np.zeros(coded.rows, np.int32)
    last = chunks[-1].dictionary
    if not all(c.dictionary is last or _prefix_of(c.dictionary, last) for c in chunks):
        col = pa.chunked_array(chunks).unify_dictionaries()
        chunks, last = list(col.chunks), col.chunks[-1].dictionary
    n = len(last)
    codes = np.concatenate(
        [
            (c.indices.fill_null(n) if c.indices.null_count else c.indices).to_numpy(
                zero_copy_only=False
            )
            for c in chunks
        ]
    ).astype(np.int32, copy=False)

    def first_row(value: int) -> int:
        return coded.line(int(np.flatnonzero(codes == value)[0]))

    values = arrow_text(last, coded.path, name, first_row)
    if (codes == n).any():
        values = pa.concat_arrays([values, pa.array([""], pa.large_string())])
    return values, codes


def _prefix_of(short, long) -> bool:
    """Whether dictionary ``short`` is the start of ``long`` (chunks encoded one after the
    other share one growing dictionary, so their codes index the last one).  Arrow's chunked
    ``dictionary_encode`` gives every chunk a view of one dictionary's buffers: that is told by
    the buffers' addresses, free, instead of comparing values (which costs the dictionary's
    size per chunk, quadratic in the rows: 0.37 s of CPU on 6·10⁶ run rows, 314 chunks)."""
    if len(short) > len(long):
        return False
    return _same_buffers(short, long) or short.equals(long.slice(0, len(short)))


def _same_buffers(short, long) -> bool:
    """Whether two arrays of one type start at the same offset of the very same buffers (so the
    first ``len(short)`` values of ``long`` are ``short``'s)."""
    if short.type != long.type or short.offset != long.offset:
        return False
    ours, theirs = short.buffers(), long.buffers()
    return len(ours) == len(theirs) and all(
        (a is None and b is None) or (a is not None and b is not None and a.address == b.address)
        for a, b in zip(ours, theirs, strict=True)
    )


def system_codes(column: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """(integer code of every row, the values they index) of a text column such as
    ``outputs["system"]``: a Categorical's own codes, else a factorisation (sorted)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(), pd.Index(column.cat.categories)
    codes, uniques = pd.factorize(column, sort=True)
    return codes, pd.Index(uniques)


def codes_in(column: pd.Series, index: pd.Index) -> np.ndarray:
    """The position in ``index`` of every value of ``column`` (-1 when absent), through a
    Categorical's codes when it is one (no string per row)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        where = np.append(index.get_indexer(column.cat.categories), -1)
        kind = np.int32 if len(index) < np.iinfo(np.int32).max else np.int64
        return where.astype(kind)[column.cat.codes.to_numpy()]  # 4 bytes per row
    return index.get_indexer(column)
