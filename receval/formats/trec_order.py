"""A TREC run's bundle order (trec_eval's ranking) without moving its rows, and its lines of
the bundle's ``runs.tsv`` written in that order.

``receval import trec`` writes each run's rows sorted by qid (code-point order), then by
decreasing score, ties by decreasing docno, and numbers them 1, 2, ... within each qid (the
``rank`` column; :mod:`receval.formats.trec` documents the convention).  A run as runs are
written (each qid's lines together, by decreasing score) is in that order already but for the
order of its qid blocks and of tied rows: :func:`ranked_run` finds that order from the blocks
and the ties alone (:func:`ranked_order`), so no column is moved, and sorts only other runs.
:func:`write_tsv_rows` then makes the text columns where the rows are and gives Arrow's CSV
writer the rows in bundle order as slices, block by block: the same bytes as the table taken
in bundle order and written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from receval.formats.buffers import arrow_array, numpy_array

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["IN_ORDER", "RankedRun", "distinct_in_blocks", "ranked_order", "ranked_run"]

#: :func:`ranked_order`'s answer for a run already in bundle order
IN_ORDER = object()


@dataclass(frozen=True)
class RankedRun:
    """A run (the columns of :func:`receval.formats.trec._run_table`) and its bundle order:
    ``order`` lists the rows of ``run`` in bundle order (None: ``run`` is in bundle order);
    ``rank`` is each ``run`` row's trec_eval rank; ``starts`` says where each qid's rows begin
    in ``run`` (each qid's rows are together)."""

    run: pa.Table
    order: np.ndarray | None
    rank: np.ndarray
    starts: np.ndarray

    def table(self, columns: list[str], depth: int | None) -> tuple[pa.Table, np.ndarray]:
        """``columns`` of the run in bundle order and their ranks, the top ``depth`` of each
        qid (None: all)."""
        table, rank = self.run.select(columns), self.rank
        if self.order is not None:
            table, rank = table.take(arrow_array(self.order)), rank[self.order]
        if depth is not None and (rank > depth).any():
            keep = rank <= depth
            table, rank = table.filter(arrow_array(keep)), rank[keep]
        return table, rank


def ranked_run(run: pa.Table) -> RankedRun:
    """The bundle order of ``run`` (module docstring): found from its blocks and ties
    (:func:`ranked_order`), else by one Arrow sort (the run is then taken in that order)."""
    import pyarrow.compute as pc

    found = ranked_order(run)
    if found is None:
        keys = [("qid", "ascending"), ("score", "descending"), ("docno", "descending")]
        run = run.take(pc.sort_indices(run, sort_keys=keys))
        starts = _block_starts(run["qid"])
        return RankedRun(run, None, _ranks(starts, run.num_rows), starts)
    order, starts = found
    if order is IN_ORDER:
        return RankedRun(run, None, _ranks(starts, run.num_rows), starts)
    n = run.num_rows
    block = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))[order]
    rank = np.empty(n, dtype=np.int64)
    rank[order] = _ranks(_block_starts_of_codes(block), n)
    return RankedRun(run, order, rank, starts)


def _ranks(starts: np.ndarray, n: int) -> np.ndarray:
    """1, 2, ... from each of ``starts`` on (``starts[0]`` is 0)."""
    return np.arange(1, n + 1, dtype=np.int64) - np.repeat(starts, np.diff(np.append(starts, n)))


def _block_starts_of_codes(codes: np.ndarray) -> np.ndarray:
    change = np.ones(len(codes), dtype=bool)
    change[1:] = codes[1:] != codes[:-1]
    return np.flatnonzero(change)


def _block_starts(column: Any) -> np.ndarray:
    """Where each block of equal values of a string column begins (the first row included)."""
    import pyarrow.compute as pc

    column = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    n = len(column)
    change = np.ones(n, dtype=bool)
    if n > 1:
        change[1:] = numpy_array(pc.not_equal(column.slice(1), column.slice(0, n - 1)))
    return np.flatnonzero(change)


def ranked_order(run: pa.Table) -> tuple[Any, np.ndarray] | None:
    """The order of the full sort (:func:`ranked_run`) for a run written as runs are: each
    qid's lines together, by decreasing score.  Only the rows of equal scores are sorted (by
    decreasing docno, :func:`_tie_order`), then the qid blocks put in qid order.  Returns
    (the rows in bundle order, or :data:`IN_ORDER` when nothing moves; where each qid's rows
    begin), or None for any other run."""
    import pyarrow.compute as pc

    n = run.num_rows
    starts = _block_starts(run["qid"])
    values = run["qid"].take(arrow_array(starts))
    if pc.count_distinct(values).as_py() < len(starts):  # a qid in two blocks
        return None
    step = np.diff(numpy_array(run["score"].combine_chunks()))
    step[starts[1:] - 1] = -1.0  # a block's first row follows another block: no constraint
    if (step > 0).any():
        return None
    order = _tie_order(run["docno"].combine_chunks(), step == 0)
    block = numpy_array(pc.sort_indices(values))  # distinct values: in qid order
    if (block != np.arange(len(block))).any():
        size = np.diff(np.append(starts, n))[block]
        within = np.arange(n) - np.repeat(np.cumsum(size) - size, size)
        moved = np.repeat(starts[block], size) + within
        order = moved if order is None else order[moved]
    return (IN_ORDER if order is None else order), starts


def _tie_order(docno: Any, tied: np.ndarray) -> np.ndarray | None:
    """The rows with each group of equal adjacent scores (``tied[i]``: rows i and i+1 tie)
    sorted by decreasing docno, the other rows in place; None when no group moves."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(docno)
    member = np.zeros(n, dtype=bool)
    member[:-1] |= tied
    member[1:] |= tied
    rows = np.flatnonzero(member)
    if not len(rows):
        return None
    follows = np.zeros(n, dtype=bool)
    follows[1:] = tied
    group = np.cumsum(~follows[rows])
    table = pa.table({"group": arrow_array(group), "docno": docno.take(arrow_array(rows))})
    within = pc.sort_indices(table, [("group", "ascending"), ("docno", "descending")])
    within = numpy_array(within)
    if (within == np.arange(len(rows))).all():
        return None
    order = np.arange(n)
    order[rows] = rows[within]
    return order


#: Most blocks (queries) per row for which :func:`distinct_in_blocks` checks block by block;
#: a run of shorter blocks is checked whole (:func:`receval.formats.trec._check_unique`).
BLOCKS_PER_ROW = 1 / 64


def distinct_in_blocks(docno: Any, starts: np.ndarray) -> bool | None:
    """Whether every block of rows (``starts``: where each begins) holds distinct documents:
    one small hash table per block (a query's documents, exactly, in C++); None when the
    blocks are too short for that to pay (:data:`BLOCKS_PER_ROW`)."""
    import pyarrow.compute as pc

    n = len(docno)
    if len(starts) > n * BLOCKS_PER_ROW:
        return None
    docno = docno.combine_chunks() if hasattr(docno, "combine_chunks") else docno
    ends = np.append(starts[1:], n)
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        if end - start > 1 and len(pc.unique(docno.slice(start, end - start))) < end - start:
            return False
    return True


#: Bytes that a field of ``runs.tsv`` may not hold (:func:`write_tsv_rows` then declines).
_NOT_IN_TSV = ("\t", "\n", "\r")
#: Most segments (runs of consecutive rows in bundle order) per row written slice by slice;
#: a run cut in more is taken in order first.
SEGMENTS_PER_ROW = 1 / 16


def write_tsv_rows(out: IO[bytes], ranked: RankedRun, source: str, score: str) -> bool:
    """Append the run's rows of ``runs.tsv`` (``system, query_id, answer, score, rank,
    rank_file, source``; ``score``: the run's column written as the score, its text) to the
    open file ``out`` in bundle order with Arrow's CSV writer: the columns are made where the
    rows are, and the writer is given them in bundle order as slices, one per block (nothing
    moved).  ``source`` is the run file's name (``source`` is ``<name>:<line>``).  False, with
    nothing written, when a value holds a character that writer refuses (a quote character;
    a tab or a line end in the name): the caller's writer then writes or names it."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    if any(c in source for c in _NOT_IN_TSV):  # the fields are split at whitespace: none
        return False
    run = ranked.run
    rank_text = pc.cast(arrow_array(ranked.rank), pa.string())
    rank_file = numpy_array(run["rank_file"])
    same = np.array_equal(ranked.rank, rank_file)
    columns = [
        run["tag"].combine_chunks(),
        *(run[c].combine_chunks() for c in ("qid", "docno", score)),
        rank_text,
        rank_text if same else pc.cast(arrow_array(rank_file), pa.string()),
        line_sources(source, run["line"]),
    ]
    rows = pa.RecordBatch.from_arrays(columns, [f"c{i}" for i in range(len(columns))])
    options = pacsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none")
    start = out.tell()
    try:
        pacsv.write_csv(_in_order(rows, ranked.order), out, write_options=options)
    except pa.ArrowInvalid:  # a quote character, which the unquoted writer refuses
        out.seek(start)
        out.truncate()
        return False
    return True


def _in_order(rows: pa.RecordBatch, order: np.ndarray | None) -> pa.Table:
    """``rows`` in ``order`` (None: as they are) as slices of runs of consecutive rows (taken
    in order when there are too many, :data:`SEGMENTS_PER_ROW`)."""
    import pyarrow as pa

    if order is None:
        return pa.Table.from_batches([rows])
    cut = np.flatnonzero(np.diff(order) != 1) + 1
    if len(cut) + 1 > len(order) * SEGMENTS_PER_ROW:
        return pa.Table.from_batches([rows.take(arrow_array(order))])
    begin = np.concatenate([np.zeros(1, np.int64), cut])
    size = np.diff(np.append(begin, len(order)))
    first = order[begin]
    slices = [rows.slice(a, b) for a, b in zip(first.tolist(), size.tolist(), strict=True)]
    return pa.Table.from_batches(slices)


def line_sources(name: str, lines: Any) -> pa.Array:
    """``<name>:<line>`` for every line number of ``lines`` (the ``source`` column)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lines = lines.combine_chunks() if hasattr(lines, "combine_chunks") else lines
    return pc.utf8_replace_slice(pc.cast(lines, pa.string()), 0, 0, f"{name}:")
