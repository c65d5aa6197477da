"""Where a bundle's tables are and how they are read: the small tables as string tables with
their line numbers (:class:`_Source`), the runs as coded tables one file, Parquet row group or
dataset part at a time (:func:`_run_sources`), and in-memory frames read the same way
(:func:`_frame_source`, :func:`_frame_runs`).

Also the column contract every table is checked against (:data:`_RESERVED`, :func:`_require`).
Reading only: the checks are :mod:`receval.bundle.checks` (small tables) and
:mod:`receval.bundle.runs` (runs); :mod:`receval.task` assembles the :class:`~receval.task.Task`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.bundle.answers import _strip
from receval.config import TaskConfig, load_config
from receval.errors import BundleError
from receval.formats.checks import require_columns
from receval.formats.coded import HeaderRows
from receval.formats.tables import LINE, TABLE_SUFFIXES, arrow_to_strings, find_table, read_table
from receval.judge import JUDGE_RESERVED

if TYPE_CHECKING:
    from receval.formats.coded import CodedTable


#: Columns the loader derives, per table: an input column of the same name would be overwritten,
#: so it is an error (rename it) rather than silently replaced.
_RESERVED: dict[str, tuple[str, ...]] = {
    "queries": (),
    "runs": ("answer_raw", "fact", "copies", "_file", "_order", "judge_score"),
    "judgments": ("answer_raw", "fact", "label_raw", "category", "value", "_file"),
    "samples": ("answer_raw", "fact"),
    "exhaustive_units": (),
    "exhaustive": ("answer_raw", "fact"),
    "truth": ("answer_raw", "fact", "value"),
    "judge": JUDGE_RESERVED,
}


#: Columns a Parquet file or an in-memory table may hold as numbers (they are parsed as numbers).
NUMERIC = ("score", "prob", "weight", "judge_score")


@dataclass(frozen=True)
class _Source(HeaderRows):
    """One input table as strings with its ``_line`` column, the path its errors name (a file,
    or the table's name for an in-memory frame) and the line header problems are reported on
    (1 for a file's header row, None for a frame)."""

    frame: pd.DataFrame
    path: Path
    header: int | None = 1

    @property
    def columns(self) -> list[str]:
        return [c for c in self.frame.columns if c != LINE]


def _require(src: _Source | CodedTable, columns: tuple[str, ...], table: str) -> None:
    """Required columns present, reserved (derived) column names absent."""
    require_columns(src, columns, _RESERVED[table])


def _table_source(root: Path, stem: str, files: dict[str, Path]) -> _Source | None:
    """The bundle table ``stem`` read from ``root`` (None when absent)."""
    path = find_table(root, stem)
    if path is None:
        return None
    files[stem] = path
    return _Source(read_table(path, NUMERIC), path)


#: Run columns every task has; ``load_task(run_columns=...)`` reads these plus the ones named.
_RUN_REQUIRED = ("system", "query_id", "answer")
#: Run columns scoring uses besides the required ones (``score`` reads only these: a Parquet
#: run's other columns, such as ``import trec``'s per-row ``source``, are not read at all).
SCORING_RUN_COLUMNS = ("score", "team", "provenance", "relation_provenance", "hop")
#: Run columns always held as codes; any other text column whose values are mostly distinct
#: (a per-row note) is held as plain Arrow text (:mod:`receval.formats.coded`).
_RUN_CODED = (*_RUN_REQUIRED, "team", "provenance", "relation_provenance", "hop")


def _read_run_table(path: Path, run_columns: tuple[str, ...] | None) -> CodedTable:
    """One run table as codes; with ``run_columns``, only the required and those columns (a
    Parquet file reads nothing else from disk)."""
    from receval.formats.coded import read_coded

    if run_columns is None:
        return read_coded(path, NUMERIC, coded=_RUN_CODED)
    wanted = (*_RUN_REQUIRED, *run_columns)
    table = read_coded(path, NUMERIC, columns=wanted, coded=_RUN_CODED)
    table.select(wanted)
    return table


def _run_sources(
    root: Path, files: dict[str, Path], run_columns: tuple[str, ...] | None = None
) -> list:
    """``runs.{tsv,csv,parquet}``, or one table per system in ``runs/`` (system = file stem;
    other files and hidden files such as ``._A.tsv`` are ignored), or a Parquet dataset: a
    ``runs.parquet/`` folder of part files, or ``runs/`` partitioned by system
    (``runs/system=<name>/*.parquet``, as Spark's ``partitionBy("system")`` writes it).

    Parquet is read one row group at a time: a source is a callable reading one part."""
    single = find_table(root, "runs")
    folder = root / "runs"
    dataset = root / "runs.parquet"
    if (single is not None or dataset.is_dir()) and folder.is_dir():
        raise BundleError(
            single or dataset,
            None,
            "ambiguous: both a runs table and a runs/ folder exist; keep one",
        )
    if single is not None:
        files["runs"] = single
        if single.suffix.lower() == ".parquet":
            return _row_group_sources(single, run_columns, {})
        # read when the loader reaches it: listing the run files (Bundle.run_files) parses nothing
        return [functools.partial(_read_run_table, single, run_columns)]
    if dataset.is_dir():
        return _dataset_sources(dataset, files, run_columns)
    if not folder.is_dir():
        raise BundleError(
            root / "runs.tsv", None, "missing file: a bundle needs runs.tsv or a runs/ folder"
        )
    if any(_partition(p.name) for p in folder.iterdir() if p.is_dir()):
        return _dataset_sources(folder, files, run_columns)
    paths = list(run_folder_files(folder).values())
    if not paths:
        raise BundleError(folder, None, "runs/ holds no .tsv, .csv or .parquet file")
    for path in paths:
        files[f"runs/{path.name}"] = path
    # read one file at a time while checking (see _encode_runs): the runs are never all strings
    return [functools.partial(_read_run_file, path, run_columns) for path in paths]


def _partition(name: str) -> tuple[str, str] | None:
    """``(key, value)`` of a Hive partition folder name ``key=value`` (value URL-decoded, as
    Spark writes it), else None."""
    from urllib.parse import unquote

    key, sep, value = name.partition("=")
    if not sep or not key or name.startswith((".", "_")):
        return None
    return key, unquote(value)


def _dataset_sources(
    folder: Path, files: dict[str, Path], run_columns: tuple[str, ...] | None
) -> list:
    """The row groups of every Parquet part file under ``folder`` (hidden files and Spark's
    ``_SUCCESS``-style markers ignored); each ``key=value`` folder on the way sets that column
    (``system=A`` names the system) on the rows of the files under it."""
    parts = sorted(
        p
        for p in folder.rglob("*.parquet")
        if p.is_file() and not any(q.startswith((".", "_")) for q in p.relative_to(folder).parts)
    )
    if not parts:
        raise BundleError(folder, None, "the runs dataset holds no .parquet file")
    sources = []
    for part in parts:
        relative = part.relative_to(folder)
        files[f"{folder.name}/{relative.as_posix()}"] = part
        keys = dict(filter(None, (_partition(d) for d in relative.parts[:-1])))
        sources += _row_group_sources(part, run_columns, keys)
    return sources


#: A Parquet run file of at most this many rows is read whole (one part: cheaper than several);
#: a larger one row group by row group (bounded memory).
WHOLE_FILE_ROWS = 4_000_000


def _row_group_sources(
    path: Path, run_columns: tuple[str, ...] | None, keys: dict[str, str]
) -> list:
    """One source per row group of a Parquet file (rows numbered through the whole file)."""
    from receval.formats.tables import parquet_row_groups

    sizes = parquet_row_groups(path)
    if len(sizes) <= 1 or sum(sizes) <= WHOLE_FILE_ROWS:
        return [functools.partial(_read_run_part, path, run_columns, keys, None, 0)]
    offsets = np.cumsum([0, *sizes[:-1]]).tolist()
    return [
        functools.partial(_read_run_part, path, run_columns, keys, g, offset)
        for g, offset in enumerate(offsets)
    ]


def _read_run_part(
    path: Path,
    run_columns: tuple[str, ...] | None,
    keys: dict[str, str],
    group: int | None,
    offset: int,
) -> CodedTable:
    """One row group (``None``: the whole file) of a Parquet run file as codes, with the
    partition ``keys`` as columns (a file column of the same name must agree)."""
    from receval.formats.coded import coded_from_arrow
    from receval.formats.tables import read_parquet_arrow

    wanted = None if run_columns is None else (*_RUN_REQUIRED, *run_columns)
    arrow = read_parquet_arrow(path, wanted, row_group=group)
    table = coded_from_arrow(arrow, path, NUMERIC, coded=_RUN_CODED, row_offset=offset)
    for key, value in keys.items():
        if wanted is None or key in wanted:
            _set_constant(table, key, value, f"partition folder {key}={value}")
    return table


def _set_constant(table: CodedTable, key: str, value: str, where: str) -> None:
    """Set column ``key`` to ``value`` on every row; a value the table already holds there must
    be the same once stripped (else an error naming the row and ``where`` the value is from)."""
    if key in table.text:
        other = np.asarray(_strip(table.text[key][0]).to_numpy(zero_copy_only=False))
        row, _ = table.first_row_where(key, other != value)
        if row >= 0:
            raise BundleError(
                table.path,
                table.line(row),
                f"{key} {table.value_at(key, row)!r} differs from the {where}",
            )
    table.constant(key, value)


def parquet_sources(files: dict[str, Path]) -> list[tuple[Path, dict[str, str]]] | None:
    """The run ``files`` (bundle-relative name -> path) as Parquet files with what each file's
    location says about its rows (``{"system": "A"}`` for ``runs/A.parquet`` or
    ``runs/system=A/``), or None when some run table is not Parquet."""
    out = []
    for name, path in files.items():
        if path.suffix.lower() != ".parquet":
            return None
        keys: dict[str, str] = {}
        parts = Path(name).parts
        if parts[0] == "runs" and len(parts) == 2:  # runs/<system>.parquet
            keys["system"] = path.stem
        keys.update(dict(filter(None, (_partition(d) for d in parts[1:-1]))))
        out.append((path, keys))
    return out


def run_folder_files(folder: Path) -> dict[str, Path]:
    """system -> its table in a ``runs/`` folder (system = file stem; other files and hidden
    files such as ``._A.tsv`` are ignored), in file-name order; two files of one system are an
    error."""
    paths = sorted(
        p
        for p in folder.iterdir()
        if p.suffix.lower() in TABLE_SUFFIXES and p.is_file() and not p.name.startswith(".")
    )
    stems: dict[str, Path] = {}
    for path in paths:
        if path.stem in stems:
            raise BundleError(
                path,
                None,
                f"system {path.stem!r} has two run files ({stems[path.stem].name} and {path.name}); keep one",
            )
        stems[path.stem] = path
    return stems


def _read_run_file(path: Path, run_columns: tuple[str, ...] | None) -> CodedTable:
    """One ``runs/<system>`` table; its ``system`` column (optional) must be the file stem.
    A header-only file is an empty submission (see :func:`_encode_runs`)."""
    table = _read_run_table(path, run_columns)
    _require(table, ("query_id", "answer"), "runs")
    _set_constant(table, "system", path.stem, f"file name {path.stem!r}")
    table.submission = path.stem
    return table


def _frame_source(data: object, table: str) -> _Source | None:
    """An in-memory table (pandas DataFrame or pyarrow Table) as a string source named ``table``;
    rows are numbered from 1, as in a Parquet file."""
    if data is None:
        return None
    return _Source(
        arrow_to_strings(_as_arrow(data, table), Path(table), NUMERIC), Path(table), None
    )


def _frame_runs(data: object) -> CodedTable | None:
    """In-memory runs (pandas DataFrame or pyarrow Table) as codes; rows numbered from 1."""
    from receval.formats.coded import coded_from_arrow

    if data is None:
        return None
    arrow = _as_arrow(data, "runs")
    return coded_from_arrow(arrow, Path("runs"), NUMERIC, header=None, coded=_RUN_CODED)


def _as_arrow(data: object, table: str):
    import pyarrow as pa

    if isinstance(data, pd.DataFrame):
        try:
            arrow = pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            arrow = pa.Table.from_pandas(data.astype(str), preserve_index=False)
    elif isinstance(data, pa.Table):
        arrow = data
    else:
        raise TypeError(
            f"{table}: expected a pandas DataFrame or a pyarrow Table, got {type(data).__name__}"
        )
    return arrow


_OPTIONAL_TABLES = ("judgments", "samples", "exhaustive_units", "exhaustive", "truth", "judge")


def _mentioned_queries(runs: CodedTable, sources: dict[str, _Source | None]) -> _Source:
    """The query universe of in-memory tables given without queries: every query they name."""
    mentioned = [
        src.frame["query_id"].astype(str).str.strip().unique()
        for src in sources.values()
        if src is not None and "query_id" in src.frame.columns
    ]
    if "query_id" in runs.text:
        mentioned.append(_strip(runs.text["query_id"][0]).to_numpy(zero_copy_only=False))
    ids = pd.unique(np.concatenate(mentioned).astype(object)) if mentioned else []
    frame = pd.DataFrame({"query_id": sorted(q for q in ids if q != "")}, dtype=object)
    frame[LINE] = np.arange(1, len(frame) + 1, dtype=np.int64)
    return _Source(frame, Path("queries"), header=None)


def read_folder(
    root: Path, tables: tuple[str, ...] | None = None, run_columns: tuple[str, ...] | None = None
) -> tuple[TaskConfig, dict[str, Path], _Source, list, dict[str, _Source | None]]:
    """Every table of the bundle folder ``root``, read and not yet checked: ``(config, files,
    queries, runs, optional)`` — ``task.toml``'s settings, the files read by table name, the
    queries, the run sources (:func:`_run_sources`) and each optional table by name (None when
    absent or not in ``tables``).  :func:`receval.task.load_task` checks and assembles them."""
    if not root.exists():
        raise BundleError(root, None, "no such task bundle (directory not found)")
    if not root.is_dir():
        raise BundleError(root, None, "a task bundle is a directory")
    files: dict[str, Path] = {}
    toml = root / "task.toml"
    if toml.is_file():
        files["task.toml"] = toml
    config = load_config(toml, default_name=root.resolve().name)
    queries = _table_source(root, "queries", files)
    if queries is None:
        raise BundleError(
            root / "queries.tsv",
            None,
            "missing file: a bundle needs queries.tsv (the query universe)",
        )
    runs = _run_sources(root, files, run_columns)
    wanted = _OPTIONAL_TABLES if tables is None else tables
    unknown = sorted(set(wanted) - set(_OPTIONAL_TABLES))
    if unknown:
        raise ValueError(f"unknown table(s) {', '.join(unknown)}")
    sources = {
        name: _table_source(root, name, files) if name in wanted else None
        for name in _OPTIONAL_TABLES
    }
    return config, files, queries, runs, sources
