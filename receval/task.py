"""A task bundle, loaded and validated: :class:`Task` and :func:`load_task`.

Data flow: the small tables are read as string tables (:mod:`receval.formats.tables`), the runs
one file (or Parquet row group) at a time as distinct values plus integer codes
(:mod:`receval.formats.coded`); both are checked column by column here, answers are normalised into **facts** (``query_id`` + normalised answer,
numbered ``fact`` 0..F-1 over everything the bundle mentions), labels are mapped through the
``[labels]`` vocabulary, and annotator votes are merged into one label per fact
(:mod:`receval.merge`).  Every problem raises :class:`~receval.errors.BundleError` naming the file
and line.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.config import (
    Matching,
    TaskConfig,
    config_from_mapping,
    load_config,
    unknown_label_text,
)
from receval.errors import BundleError
from receval.formats.checks import (
    check_queries_known,
    nonempty,
    numbers,
    parse_numbers,
    raise_first_bad,
    require_columns,
)
from receval.formats.coded import HeaderRows, system_codes
from receval.formats.tables import (
    LINE,
    STRING,
    TABLE_SUFFIXES,
    WHITESPACE,
    arrow_series,
    arrow_to_strings,
    find_table,
    read_table,
    text_column,
)
from receval.judge import JUDGE_RESERVED, attach_judge_scores, check_judge_table, dedupe_judge

if TYPE_CHECKING:
    from receval.formats.coded import CodedTable

__all__ = ["BundleError", "Task", "load_task", "normalize_answers"]


_WHITESPACE = WHITESPACE  # every character str.isspace accepts
_WHITESPACE_CLASS = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in _WHITESPACE) + "]+"


def normalize_answers(answers: pd.Series, matching: Matching) -> pd.Series:
    """Normalise answer strings per ``[matching]``: Unicode normal form, whitespace runs collapsed
    to one space, surrounding whitespace stripped, case folded (:meth:`str.casefold`).

    Vectorised with Arrow compute kernels (no per-row Python); only non-ASCII answers are
    case-folded in Python, because Arrow's lower-casing is not full case folding (``ß`` → ``ss``).
    The result equals the row-by-row Python definition, whitespace being :meth:`str.isspace`.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    index = answers.index
    answers = answers.astype(str)
    original = _arrow_strings(answers)
    out = original
    if matching.unicode:
        out = pc.utf8_normalize(out, form=matching.unicode)
    if matching.collapse_whitespace:
        out = pc.replace_substring_regex(out, _WHITESPACE_CLASS, " ")
    if matching.strip:
        out = pc.utf8_trim(out, characters=_WHITESPACE)
    if matching.casefold:
        ascii_only = pc.string_is_ascii(out).to_numpy(zero_copy_only=False)
        lowered = pc.utf8_lower(out)
        if not ascii_only.all():
            values = lowered.to_numpy(zero_copy_only=False).astype(object)
            rest = np.flatnonzero(~ascii_only)
            values[rest] = [v.casefold() for v in out.take(pa.array(rest)).to_pylist()]
            return pd.Series(values, index=index).astype(str)
        out = lowered
    if out is original or pc.all(pc.equal(out, original)).as_py() in (True, None):
        return answers  # nothing changed: share the input's buffers (answer_raw is the same)
    # set_axis, not Series(series, index=...): the latter aligns on the labels, and a frame
    # whose index is not 0..n-1 (filtered, deduplicated) would get other rows' answers
    return out.to_pandas().set_axis(index).astype(str)


def _arrow_strings(texts: pd.Series):
    """A text Series as an Arrow ``large_string`` array: its own buffers when Arrow-backed,
    else converted from its Python strings."""
    import pyarrow as pa

    if isinstance(texts.dtype, pd.StringDtype) and texts.dtype.storage == "pyarrow":
        values = pa.array(texts.array)
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        return values.cast(pa.large_string())
    return pa.array(texts.to_numpy(), type=pa.large_string())


@dataclass(frozen=True, eq=False)
class Task:
    """A validated task bundle as pandas frames (see docs/contracts.md, "The task bundle").

    Attributes
    ----------
    queries : pandas.DataFrame
        ``query_id, weight`` (+ extra columns), one row per query.
    outputs : pandas.DataFrame
        One row per (system, fact): ``system, team, query_id, answer`` (normalised),
        ``answer_raw``, ``score`` (NaN when absent), ``provenance``, ``fact``, ``copies``
        (how many input rows were collapsed into this one).
    raw_outputs : pandas.DataFrame
        Every input row of the runs, before collapsing duplicates (official scoring needs
        them): ``system, team, query_id, answer, answer_raw, score, provenance, fact``, extra
        columns, ``_file, _line``.
    facts : pandas.DataFrame
        One row per fact id: ``query_id, answer, in_pool`` (output by some system),
        ``systems`` (how many systems output it).
    judgments : pandas.DataFrame
        One row per annotation: ``query_id, answer, fact, label_raw, category, value``
        (1, 0, NaN = ignored), ``annotator``, ``sample``, ``equivalence_class``, ``_file``,
        ``_line``.
    samples : pandas.DataFrame
        The recorded sampling design (may be empty): ``sample, system, query_id, answer,
        fact, prob, draw, stratum, _line`` (+ extra columns such as ``design``).
    exhaustive_units : pandas.DataFrame
        ``unit, prob`` (may be empty; + extra columns).
    exhaustive : pandas.DataFrame
        ``unit, query_id, answer, fact`` (may be empty; + extra columns).
    truth : pandas.DataFrame or None
        ``query_id, answer, fact, value``.
    judge : pandas.DataFrame or None
        The automatic judges' scores, one row per (judge, fact): ``query_id, answer,
        answer_raw, fact, judge_score`` (in [0, 1], or on the scale task.toml ``[judge]``
        declares), ``judge`` (name, may be empty); see :mod:`receval.judge`.

    Notes
    -----
    ``answer`` is always the normalised answer and ``answer_raw`` the text as given (surrounding
    whitespace included).  In ``outputs`` and ``raw_outputs`` the text columns (``system, team,
    query_id, answer, answer_raw, provenance``, extra columns) are pandas Categoricals with sorted
    categories: each row holds integer codes, each distinct string is stored once.  Extra input columns are kept; a column whose name the loader derives
    (``fact``, ``answer_raw``, ``copies``, ...) is an error.
    """

    root: Path
    config: TaskConfig
    queries: pd.DataFrame
    outputs: pd.DataFrame
    raw_outputs: pd.DataFrame
    facts: pd.DataFrame
    judgments: pd.DataFrame
    samples: pd.DataFrame
    exhaustive_units: pd.DataFrame
    exhaustive: pd.DataFrame
    truth: pd.DataFrame | None
    files: dict[str, Path] = field(default_factory=dict)
    #: systems whose run file has no rows (an empty submission: scored, precision undefined)
    empty_systems: tuple[str, ...] = ()
    #: what errors about samples name (the file, or ``samples`` for an in-memory table)
    samples_source: Path | None = None
    judge: pd.DataFrame | None = None

    @property
    def name(self) -> str:
        return self.config.name

    @classmethod
    def from_frames(
        cls,
        runs,
        judgments=None,
        samples=None,
        exhaustive_units=None,
        exhaustive=None,
        queries=None,
        truth=None,
        config: TaskConfig | Mapping[str, object] | str | os.PathLike | None = None,
        name: str | None = None,
        judge=None,
    ) -> Task:
        """Build and validate a task from in-memory tables (no files).

        Parameters
        ----------
        runs, judgments, samples, exhaustive_units, exhaustive, queries, truth, judge :
            pandas.DataFrame or pyarrow.Table, optional (``runs`` required)
            The bundle tables with the columns of a bundle's files (docs/contracts.md,
            "The task bundle"); ``runs`` must have a ``system`` column.  Values are read as strings, as from a
            Parquet file (integers stay integers, floats in their shortest round-trip form).
            Without ``queries`` the query universe is every ``query_id`` the tables mention.
        config : TaskConfig, mapping, str or path-like, optional
            The ``task.toml`` settings (defaults when omitted): a :class:`TaskConfig`, the mapping
            :func:`tomllib.load` reads from a ``task.toml``, or the path of a ``task.toml``.
            Anything else raises :class:`TypeError`.
        name : str, optional
            The task's name (overrides ``config.name``).

        Returns
        -------
        Task
            The same object :func:`load_task` returns for a bundle with these tables.

        Raises
        ------
        BundleError
            On bad input, naming the table and the 1-based row (``"runs:3: ..."``).
        """
        return _frames_to_task(
            {
                "runs": runs,
                "judgments": judgments,
                "samples": samples,
                "exhaustive_units": exhaustive_units,
                "exhaustive": exhaustive,
                "queries": queries,
                "truth": truth,
                "judge": judge,
            },
            config,
            name,
        )

    @cached_property
    def samplers(self) -> list:
        """The recorded samplers with their designs (:func:`receval.design.infer_designs`)."""
        from receval.design import infer_designs

        path = self.samples_source or self.files.get("samples", self.root / "samples.tsv")
        return infer_designs(self.samples, self.outputs, self.queries, path)

    @cached_property
    def systems(self) -> list[str]:
        return sorted({*self.outputs["system"].unique().tolist(), *self.empty_systems})

    @cached_property
    def teams(self) -> dict[str, str]:
        """system -> team (an empty submission's team is its system)."""
        pairs = self.outputs.drop_duplicates("system")[["system", "team"]]
        teams = {s: s for s in self.empty_systems}
        teams.update(zip(pairs["system"], pairs["team"], strict=True))
        return teams

    @cached_property
    def merged(self):  # -> receval.merge.MergeResult
        """One label per judged fact (:func:`receval.merge.merge_labels`)."""
        from receval.merge import merge_labels

        return merge_labels(self.judgments, self.config.merge_rule, self.config.tie_policy)

    @property
    def labels(self) -> pd.Series:
        """Merged label value (0..1) per judged fact id (facts with only ignored votes absent)."""
        return self.merged.labels

    def __repr__(self) -> str:
        """A few lines of counts (never the frames: ``task.outputs`` etc. hold them)."""
        systems = len(self.systems)
        teams = len(set(self.teams.values()))
        units = len(self.exhaustive_units)
        return (
            f"Task({self.name!r}, root={str(self.root)!r})\n"
            f"  {systems:,} systems ({teams:,} teams), {len(self.queries):,} queries, "
            f"{len(self.outputs):,} outputs of {int(self.facts['in_pool'].sum()):,} facts\n"
            f"  {len(self.judgments):,} judgments, {len(self.samples):,} sample draws, "
            f"{units:,} exhaustive units, truth: {'yes' if self.truth is not None else 'no'}"
        )

    @cached_property
    def duplicate_rows(self) -> int:
        """Input run rows collapsed because the system output the same fact again."""
        return int(len(self.raw_outputs) - len(self.outputs))

    def checksums(self) -> dict[str, str]:
        """SHA-256 of every input file (for the run card)."""
        out = {}
        buffer = bytearray(1 << 20)  # read in blocks: no copy of a whole (large) file in memory
        view = memoryview(buffer)
        for _, path in sorted(self.files.items()):
            digest = hashlib.sha256()
            with open(path, "rb") as fh:
                while size := fh.readinto(buffer):
                    digest.update(view[:size])
            out[str(path.relative_to(self.root))] = digest.hexdigest()
        return out

    def summary(self) -> dict[str, int | str]:
        """The counts ``receval validate`` prints."""
        merged = self.merged
        return {
            "task": self.name,
            "systems": len(self.systems),
            "teams": len(set(self.teams.values())),
            "queries": len(self.queries),
            "outputs": len(self.outputs),
            "duplicate output rows collapsed": self.duplicate_rows,
            "distinct facts output": int(self.facts["in_pool"].sum()),
            "judgments": len(self.judgments),
            "judged facts": len(merged.labels),
            "judged facts output by a system": int(
                self.facts["in_pool"].reindex(merged.labels.index).sum()
            ),
            "annotators": int(self.judgments["annotator"].replace("", np.nan).nunique()),
            "conflicts": len(merged.conflicts),
            "sample draws": len(self.samples),
            "samples": int(self.samples["sample"].nunique()),
            "exhaustive units": len(self.exhaustive_units),
            "exhaustive facts": int(self.exhaustive["fact"].nunique()),
            **({"empty submissions": len(self.empty_systems)} if self.empty_systems else {}),
            "truth": "yes" if self.truth is not None else "no",
        }


# ---------------------------------------------------------------------------------------------
# loading: files or in-memory frames -> one builder (_build_task) -> Task


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
        return [_read_run_table(single, run_columns)]
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


def _strip(values):
    """Arrow strings stripped of :data:`_WHITESPACE` at both ends (:meth:`str.strip`)."""
    import pyarrow.compute as pc

    return pc.utf8_trim(values, characters=_WHITESPACE)


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


def load_task(
    root: Path | str,
    *,
    tables: tuple[str, ...] | None = None,
    run_columns: tuple[str, ...] | None = None,
) -> Task:
    """Load and validate the bundle directory ``root`` (raises BundleError on bad input).

    The files are read as string tables and go through the same checks as
    :meth:`Task.from_frames`, sample designs included (:func:`receval.design.infer_designs`),
    so a bundle that loads is one every command can use.

    Parameters
    ----------
    root
        The bundle directory.
    tables
        Optional tables to read (default: all of judgments, samples, exhaustive_units,
        exhaustive, truth, judge); the others are treated as absent and not read at all.  For commands
        that need only part of a bundle (``receval sample``); ``validate`` reads everything.
    run_columns
        Run columns to read besides ``system, query_id, answer`` (default: all);
        Parquet runs then read only those columns from disk.
    """
    root = Path(root)
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
    return _build_task(root, config, files, queries=queries, runs=runs, **sources)


def _as_config(config: object, name: str | None) -> TaskConfig:
    """:meth:`Task.from_frames`' ``config``: a TaskConfig, a ``task.toml`` mapping or path."""
    if config is None:
        return TaskConfig(name=name or "task")
    if isinstance(config, TaskConfig):
        return config
    if isinstance(config, Mapping):
        return config_from_mapping(config, name or "task")
    if isinstance(config, str | os.PathLike):
        path = Path(config)
        if not path.is_file():
            raise BundleError(path, None, "no such task.toml file")
        return load_config(path, name or path.parent.name or "task")
    raise TypeError(
        "config must be a TaskConfig, the mapping tomllib reads from a task.toml, or the path "
        f"of a task.toml, not {type(config).__name__}"
    )


def _frames_to_task(tables: dict[str, object], config: TaskConfig | None, name: str | None) -> Task:
    """:meth:`Task.from_frames`: in-memory tables through :func:`_build_task`."""
    config = _as_config(config, name)
    if name is not None:
        config = dataclasses.replace(config, name=name)
    if tables["runs"] is None:
        raise BundleError("runs", None, "a task needs runs (the systems' outputs)")
    small = ("runs", "queries")
    sources = {k: _frame_source(v, k) for k, v in tables.items() if k not in small}
    runs = _frame_runs(tables["runs"])
    queries = _frame_source(tables["queries"], "queries")
    if queries is None:  # the query universe: every query the tables mention
        queries = _mentioned_queries(runs, sources)
    if "system" not in runs.columns:
        _require(runs, ("system", "query_id", "answer"), "runs")
    root = Path(config.name)
    return _build_task(root, config, {}, queries=queries, runs=[runs], **sources)


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


def _check_universe(config: TaskConfig, files: dict[str, Path], pooled: int) -> None:
    """``[universe] size`` counts the candidate items, and every fact a system output is one:
    a smaller size is a mistake (Dimm's prevalence would exceed 1 in every row)."""
    size = config.universe_size
    if size is None or size >= pooled:
        return
    from receval.config import universe_line

    path = files.get("task.toml", Path("task.toml"))
    raise BundleError(
        path,
        universe_line(path),
        f"[universe] size {size:,} is smaller than the {pooled:,} distinct facts the runs "
        "output (each output is a candidate item): give the number of candidates",
    )


def _build_task(
    root: Path,
    config: TaskConfig,
    files: dict[str, Path],
    *,
    queries: _Source,
    runs: list,
    judgments: _Source | None,
    samples: _Source | None,
    exhaustive_units: _Source | None,
    exhaustive: _Source | None,
    truth: _Source | None,
    judge: _Source | None = None,
) -> Task:
    """Check every table, number the facts, collapse duplicate outputs, check the sample
    designs: the one path from string tables (files or frames) to a :class:`Task`."""
    query_frame = _check_queries(queries)
    known = set(query_frame["query_id"])
    encoded = _encode_runs(runs, pd.Index(sorted(known), dtype=object), known, config.matching)
    judgment_frame = _check_judgments(judgments, config, known)
    sample_frame = _check_samples(samples, known)
    units, exhaustive_frame = _check_exhaustive(exhaustive_units, exhaustive, known)
    truth_frame = _check_truth(truth, config, known)
    judge_frame = check_judge_table(judge, known, config)
    frames = [judgment_frame, sample_frame, exhaustive_frame]
    if truth_frame is not None:
        frames.append(truth_frame)
    if judge_frame is not None:
        frames.append(judge_frame)
    facts, run_frame = _attach_facts(frames, config.matching, encoded)
    del encoded
    if truth_frame is not None:
        truth_frame = _dedupe_truth(truth_frame, truth.path)
    judge_frame = dedupe_judge(judge_frame, judge.path if judge is not None else "judge")
    empty_systems = tuple(run_frame.attrs.get("empty_systems", ()))
    outputs, raw_outputs = _collapse_outputs(run_frame)
    del run_frame
    # outputs hold each (system, fact) once: a fact's systems are its rows
    systems = np.bincount(outputs["fact"].to_numpy(np.int64), minlength=len(facts))
    facts["in_pool"] = systems > 0
    facts["systems"] = systems.astype(np.int64)
    _check_universe(config, files, int(facts["in_pool"].sum()))
    if judge_frame is not None:
        attach_judge_scores(outputs, SimpleNamespace(facts=facts, judge=judge_frame, config=config))
    sample_path = samples.path if samples is not None else None
    _check_samples_against_outputs(sample_frame, outputs, sample_path)
    task = Task(
        root=root,
        config=config,
        queries=query_frame,
        outputs=outputs,
        raw_outputs=raw_outputs,
        facts=facts,
        judgments=judgment_frame.reset_index(drop=True),
        samples=sample_frame.reset_index(drop=True),
        exhaustive_units=units,
        exhaustive=exhaustive_frame.reset_index(drop=True),
        truth=truth_frame,
        files=files,
        empty_systems=empty_systems,
        samples_source=sample_path,
        judge=judge_frame,
    )
    # a probability no design reproduces fails here, before `validate` prints anything
    task.samplers  # noqa: B018  (computed and cached now: the error names samples.tsv's line)
    return task


def _check_queries(src: _Source) -> pd.DataFrame:
    frame, path = src.frame, src.path
    _require(src, ("query_id",), "queries")
    if frame.empty:
        raise BundleError(path, src.first_row, f"no queries: {src.no_rows}")
    nonempty(frame, path, ("query_id",))
    raise_first_bad(
        frame,
        path,
        frame["query_id"].duplicated(),
        lambda i: f"duplicate query_id {frame['query_id'].iloc[i]!r}",
    )
    if "weight" in frame.columns:
        w = numbers(frame, path, "weight", allow_empty=False)
        raise_first_bad(frame, path, w <= 0, "column 'weight' must be > 0")
        frame["weight"] = w
    else:
        frame["weight"] = 1.0
    return frame.drop(columns=[LINE]).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# runs: read one file at a time, checked as strings, kept as integer codes (Categorical columns)


def _code_dtype(n: int) -> type:
    """The smallest signed integer type pandas uses for the codes of ``n`` categories."""
    for kind in (np.int8, np.int16, np.int32):
        if n < np.iinfo(kind).max:
            return kind
    return np.int64


class Vocabulary:
    """Strings numbered in first-seen order, grown one column at a time (:meth:`encode`);
    :meth:`categorical` turns codes into a Categorical with sorted categories.

    Hashing and lookups run in Arrow kernels (no Python object per value).  Two levels, so that
    a lookup hashes the large part rarely rebuilt (``_old``) and the values added since
    (``_new``), merged when ``_new`` grows large.
    """

    def __init__(self) -> None:
        import pyarrow as pa

        self._old = pa.array([], type=pa.large_string())
        self._new: list = []
        self._new_len = 0

    def __len__(self) -> int:
        return len(self._old) + self._new_len

    #: From this many values on, lookups in ``_old`` run as a DuckDB join (faster than
    #: hashing the whole value set again in Arrow for every column).
    LARGE = 1_000_000

    def _merge(self) -> None:
        import pyarrow as pa

        if self._new:
            self._old = pa.concat_arrays([self._old, *self._new])
            self._new, self._new_len = [], 0
            self._table = None

    def _lookup_old(self, uniques) -> np.ndarray:
        """The ``_old`` code of every value of ``uniques`` (-1 when absent)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if len(self._old) < self.LARGE:
            found = pc.index_in(uniques, value_set=self._old).to_numpy(zero_copy_only=False)
            if found.dtype.kind != "f":
                return found.astype(np.int64)
            return np.where(np.isnan(found), -1, np.nan_to_num(found, nan=-1)).astype(np.int64)
        if getattr(self, "_table", None) is None:
            import duckdb

            if getattr(self, "_con", None) is None:
                import tempfile

                self._con = duckdb.connect()
                self._con.execute("SET memory_limit = '2GB'")  # spills beyond that
                spill = Path(tempfile.gettempdir()) / "receval-duckdb"
                self._con.execute(f"SET temp_directory = '{spill.as_posix()}'")
            codes = pa.array(np.arange(len(self._old), dtype=np.int64))
            self._con.register("known_values", pa.table({"a": self._old, "code": codes}))
            self._con.execute("CREATE OR REPLACE TABLE known AS SELECT a, code FROM known_values")
            self._con.unregister("known_values")
            self._table = "known"
        index = pa.array(np.arange(len(uniques), dtype=np.int64))
        self._con.register("wanted", pa.table({"a": uniques, "i": index}))
        hits = self._con.execute(
            "SELECT w.i, k.code FROM wanted w JOIN known k ON w.a = k.a"
        ).fetchnumpy()
        self._con.unregister("wanted")
        out = np.full(len(uniques), -1, dtype=np.int64)
        out[np.asarray(hits["i"], dtype=np.int64)] = np.asarray(hits["code"], dtype=np.int64)
        return out

    @property
    def values(self):
        """Every value, in code order (a pyarrow array)."""
        self._merge()
        return self._old

    def encode(self, column) -> tuple[np.ndarray, object]:
        """(codes of ``column``, the values this call added, in code order, as an Arrow
        array)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        values = pa.array(np.asarray(column, dtype=object) if isinstance(column, list) else column)
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        values = values.cast(pa.large_string())
        encoded = pc.dictionary_encode(values)
        uniques = encoded.dictionary
        where = np.full(len(uniques), -1, dtype=np.int64)
        if len(self._old) and len(uniques):
            where = self._lookup_old(uniques)
        miss = np.flatnonzero(where < 0)
        if len(miss) and self._new_len:
            found = pc.index_in(uniques.take(pa.array(miss)), value_set=pa.concat_arrays(self._new))
            found = found.to_numpy(zero_copy_only=False)
            hit = ~np.isnan(found) if found.dtype.kind == "f" else np.ones(len(found), bool)
            where[miss[hit]] = np.nan_to_num(found[hit]).astype(np.int64) + len(self._old)
            miss = miss[~hit]
        added = uniques.take(pa.array(miss)) if len(miss) else uniques.slice(0, 0)
        if len(miss):
            where[miss] = np.arange(len(self), len(self) + len(miss))
            self._new.append(added)
            self._new_len += len(added)
            if self._new_len > max(len(self._old) // 4, 4096):
                self._merge()
        codes = where[encoded.indices.to_numpy(zero_copy_only=False)]
        return codes, added

    def code_of(self, value: str) -> int:
        """The code of ``value`` (added when new)."""
        return int(self.encode(np.array([value], dtype=object))[0][0])

    def ranks(self) -> tuple[np.ndarray, pd.Index]:
        """(rank of every code in sorted order, the sorted values)."""
        import pyarrow.compute as pc

        values = self.values
        order = pc.sort_indices(values)
        rank = np.empty(len(values), dtype=np.int64)
        rank[order.to_numpy()] = np.arange(len(values))
        return rank, pd.Index(text_column(values.take(order)))

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        rank, categories = self.ranks()
        kind = _code_dtype(len(categories))
        return pd.Categorical.from_codes(
            rank.astype(kind)[codes], dtype=pd.CategoricalDtype(categories), validate=False
        )


@dataclass
class _EncodedRuns:
    """Every run row as integer codes, in input order (files in order, rows in file order)."""

    queries: pd.Index  # sorted query ids: query codes index it
    systems: Vocabulary = field(default_factory=Vocabulary)
    teams: Vocabulary = field(default_factory=Vocabulary)
    raw: Vocabulary = field(default_factory=Vocabulary)  # answers as given
    normalized: Vocabulary = field(default_factory=Vocabulary)
    raw_to_normalized: list[np.ndarray] = field(default_factory=list)
    # provenance and extra columns: a vocabulary, or None for a plain (mostly distinct) column
    text: dict[str, Vocabulary | None] = field(default_factory=dict)
    parts: list[dict[str, np.ndarray]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    path_codes: dict[str, int] = field(default_factory=dict)
    empty_systems: tuple[str, ...] = ()

    def add(self, table: CodedTable, scores: np.ndarray | None, matching: Matching) -> None:
        """Encode one checked run table (its text columns stripped where they should be) and
        forget its strings."""
        values, codes = table.text["answer"]
        # several parts (Parquet row groups) of one file share its code
        file_code = self.path_codes.setdefault(str(table.path), len(self.paths))
        raw_codes, new = self.raw.encode(values)
        if len(new):
            fresh = text_column(new)
            self.raw_to_normalized.append(
                self.normalized.encode(normalize_answers(fresh, matching))[0]
            )
        queries = self.queries.get_indexer(table.text["query_id"][0].to_numpy(zero_copy_only=False))
        part = {
            "system": _encode_values(self.systems, table, "system", strip=False),
            "query_id": _narrow_codes(queries)[table.text["query_id"][1]],
            "answer_raw": raw_codes.astype(np.int32)[codes],
            "score": scores,
            "_file": np.full(table.rows, file_code, dtype=_code_dtype(file_code + 1)),
            LINE: None if table.lines is None and not table.row_offset else table.line_numbers(),
            "_rows": table.rows,
            "_path": str(table.path),
        }
        part["team"] = (
            _encode_values(self.teams, table, "team", strip=True) if "team" in table.text else None
        )
        for col in table.columns:
            if col in ("system", "query_id", "answer", "score", "team"):
                continue
            if col not in self.text:
                self.text[col] = None if col in table.plain else Vocabulary()
            vocab = self.text[col]
            if vocab is None:
                part[col] = table.plain_text(col)
            else:
                part[col] = _encode_values(vocab, table, col, strip=col == "provenance")
        self.parts.append(part)
        if file_code == len(self.paths):
            self.paths.append(str(table.path))

    def column(self, name: str, blank: int | float = -1, *, pop: bool = False) -> np.ndarray:
        """One code column over every row (``blank`` for files without the column; row numbers
        for a file without line numbers); ``pop`` forgets the per-file pieces (so a column is
        held once)."""

        def piece(p: dict) -> np.ndarray:
            got = p.pop(name, None) if pop else p.get(name)
            return got if got is not None else self._blank(p, name, blank)

        if len(self.parts) == 1:
            return np.asarray(piece(self.parts[0]))
        kinds = [
            p[name].dtype if p.get(name) is not None else self._blank_dtype(name, blank)
            for p in self.parts
        ]
        out = np.empty(sum(p["_rows"] for p in self.parts), dtype=np.result_type(*kinds))
        start = 0
        for p in self.parts:  # filled file by file: each piece freed once copied when popping
            out[start : start + p["_rows"]] = piece(p)
            start += p["_rows"]
        return out

    def drop(self, name: str) -> None:
        """Forget a column's per-file pieces."""
        for p in self.parts:
            p.pop(name, None)

    def plain_column(self, name: str) -> pd.Series:
        """A plain text column over every row ("" for files without it), forgotten per file."""
        import pyarrow as pa

        pieces = []
        for p in self.parts:
            piece = p.pop(name, None)
            if piece is None:
                piece = pa.nulls(p["_rows"], pa.large_string()).fill_null("")
            pieces.append(piece)
        return arrow_series(pa.chunked_array(pieces, pa.large_string()))

    @staticmethod
    def _blank(part: dict, name: str, blank: int | float) -> np.ndarray:
        kind = _EncodedRuns._blank_dtype(name, blank)
        if name == LINE:
            return np.arange(1, part["_rows"] + 1, dtype=kind)
        return np.full(part["_rows"], blank, dtype=kind)

    @staticmethod
    def _blank_dtype(name: str, blank: int | float) -> np.dtype:
        if name == LINE:
            return np.dtype(np.int32)
        if isinstance(blank, int) and blank >= 0:  # a code: as narrow as it can be
            return np.dtype(_code_dtype(blank + 1))
        return np.asarray(blank).dtype

    def normalized_codes(self) -> np.ndarray:
        """Normalised-answer code of every raw-answer code."""
        return np.concatenate(self.raw_to_normalized) if self.raw_to_normalized else np.zeros(0)


def _encode_values(vocab: Vocabulary, table: CodedTable, name: str, *, strip: bool) -> np.ndarray:
    """``vocab`` codes (int32) of a text column of ``table``: each distinct value is stripped
    (when ``strip``) and looked up once."""
    values, codes = table.coded(name)
    return _narrow_codes(vocab.encode(_strip(values) if strip else values)[0])[codes]


def _narrow_codes(codes: np.ndarray) -> np.ndarray:
    """Codes in the smallest integer type that holds them (columns are concatenated over the
    files later, in the widest type any file needed)."""
    return codes.astype(_code_dtype(int(codes.max(initial=0)) + 1))


def _read_run_source(src) -> CodedTable:
    return src() if callable(src) else src


def _encode_runs(
    sources: list, queries: pd.Index, known: set[str], matching: Matching
) -> _EncodedRuns:
    """Read and check the run tables one at a time (``_file`` = the path errors name) and
    encode them (:class:`_EncodedRuns`).

    In a ``runs/`` folder a file with a header and no rows is an empty submission: it is left
    out here and listed in ``empty_systems`` (scored: precision undefined, recall 0).  A bundle
    with no outputs at all is an error.
    """
    from receval.progress import progress

    runs = _EncodedRuns(queries=queries)
    empty = []
    first = None
    with progress(sources, "reading runs") as items:
        for item in items:
            table = _read_run_source(item)
            first = first or table
            _require(table, ("system", "query_id", "answer"), "runs")
            if table.empty:  # a header-only runs/<system> file: an empty submission
                if table.submission is not None:
                    empty.append(table.submission)
                continue
            _check_run_values(table, known)
            runs.add(table, _run_scores(table), matching)
    if not runs.parts:
        raise BundleError(first.path, first.first_row, f"no outputs: {first.no_rows}")
    runs.empty_systems = tuple(empty) if len(sources) > 1 else ()
    return runs


def _check_run_values(table: CodedTable, known: set[str]) -> None:
    """No blank system, query or answer (system and query stripped, answers kept verbatim for
    normalisation); every query in ``queries``."""
    import pyarrow.compute as pc

    for col in ("system", "query_id", "answer"):
        values = table.text[col][0]
        stripped = _strip(values)
        row, _ = table.first_row_where(col, _flags(pc.equal(stripped, "")))
        if row >= 0:
            raise BundleError(
                table.path, table.line(row), f"empty value in required column {col!r}"
            )
        if col != "answer":
            table.replace_values(col, stripped)
    ids = table.text["query_id"][0].to_numpy(zero_copy_only=False)
    unknown = ~pd.Index(ids, dtype=object).isin(known)
    row, count = table.first_row_where("query_id", unknown)
    if row >= 0:
        raise BundleError(
            table.path,
            table.line(row),
            f"query_id {table.value_at('query_id', row)!r} is not in queries ({count} such rows)",
        )


def _flags(mask) -> np.ndarray:
    """An Arrow boolean array as a numpy bool array (null = False)."""
    return np.asarray(mask.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def _run_scores(table: CodedTable) -> np.ndarray | None:
    """The ``score`` column as floats (NaN = empty); a text that is not a finite number is an
    error naming its first row."""
    if "score" in table.numbers:
        values = table.numbers["score"]
        bad = np.flatnonzero(np.isinf(values))
        if len(bad):
            text = repr(float(values[bad[0]]))
            raise BundleError(
                table.path, table.line(bad[0]), f"column 'score': {text!r} is not a finite number"
            )
        return values
    if "score" in table.plain:  # one text per row
        values, codes = table.plain["score"], np.arange(table.rows)
    elif "score" in table.text:  # distinct texts, parsed once each
        values, codes = table.text["score"]
    else:
        return None
    # every text a finite number: Arrow's parse, no Python object per text (it refuses
    # surrounding whitespace, so texts it reads as they are need no stripping)
    fast = _arrow_floats(values)
    if fast is not None:
        return fast[codes]
    stripped = _strip(values)
    fast = _arrow_floats(stripped)
    if fast is not None:
        return fast[codes]
    text = pd.Series(stripped.to_numpy(zero_copy_only=False), dtype=object)
    numbers, bad = parse_numbers(text, allow_empty=True)
    rows = np.flatnonzero(bad[codes])
    if len(rows):
        raise BundleError(
            table.path,
            table.line(rows[0]),
            f"column 'score': {text.iloc[int(codes[rows[0]])]!r} is not a finite number",
        )
    return numbers.to_numpy(float)[codes]


def _arrow_floats(texts) -> np.ndarray | None:
    """Stripped number texts as float64 by Arrow's parser (correctly rounded, as pandas'), or
    None when one is empty or not a finite number (the caller's parse then names it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        values = pc.cast(texts, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return values if np.isfinite(values).all() else None


def _run_teams(runs: _EncodedRuns) -> np.ndarray:
    """One team per system: a blank team cell takes the system's team (or its name when no row
    names a team).  Returns the team name of every system code (object array).

    File by file (a system's rows are in one file), so no array spans every row.
    """
    systems = runs.systems.values.to_numpy(zero_copy_only=False)
    first_team = np.full(len(systems), -1, dtype=np.int64)
    if not len(runs.teams):
        return systems.copy()
    blank = runs.teams.code_of("")
    teams = runs.teams.values.to_numpy(zero_copy_only=False)
    for p in runs.parts:
        path = p["_path"]
        team_codes = p.pop("team", None)
        if team_codes is None:
            continue
        sys_codes = p["system"]
        named = team_codes != blank
        rows = np.flatnonzero(named)[::-1]
        first_row = np.full(len(systems), -1, dtype=np.int64)
        first_row[sys_codes[rows]] = rows  # reversed, so the earliest row of each system wins
        found = (first_row >= 0) & (first_team < 0)
        first_team[found] = team_codes[first_row[found]]
        differs = named & (team_codes != first_team[sys_codes])
        if differs.any():
            i = int(differs.nonzero()[0][0])
            raise BundleError(
                Path(path),
                int(p[LINE][i]) if p[LINE] is not None else i + 1,
                f"system {systems[sys_codes[i]]!r} is given two teams "
                f"({teams[first_team[sys_codes[i]]]!r} and {teams[team_codes[i]]!r})",
            )
    return np.where(first_team >= 0, teams[np.maximum(first_team, 0)], systems)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique``: pandas' hash table finds the distinct values (numpy 2's hash-based
    ``unique`` is much slower on int64 keys, and sorting every value costs more), then only
    those are sorted."""
    return np.sort(pd.unique(values))


def output_repeats(system: np.ndarray, fact: np.ndarray, n_systems: int, n_facts: int) -> bool:
    """Whether some (system, fact) pair occurs twice.  When the pairs number at most 8 per row
    (or 2**22), each row writes its position into its pair's slot and a row that does not read
    its own position back shares the slot: no sort; else one sort of the pairs."""
    pair = system.astype(np.int64) * n_facts + fact
    if n_systems * n_facts <= max(8 * len(pair), 1 << 22):
        kind = np.int32 if len(pair) < 2**31 else np.int64
        slot = np.empty(n_systems * n_facts, dtype=kind)
        rows = np.arange(len(pair), dtype=kind)
        slot[pair] = rows
        return bool((slot[pair] != rows).any())
    return len(_sorted_unique(pair)) < len(pair)


def _attach_facts(
    frames: list[pd.DataFrame], matching: Matching, runs: _EncodedRuns
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Normalise the answers of the small tables in place (``answer_raw`` keeps the original),
    number the facts and turn the encoded runs into their frame (Categorical text columns).

    Fact ids are the ranks of ``(query_id, normalised answer)`` in sorted order, so they do not
    depend on which file mentions a fact first.  Returns ``(facts, runs frame)``.
    """
    queries = runs.queries
    small = []
    for frame in frames:
        frame["answer_raw"] = frame["answer"]
        frame["answer"] = normalize_answers(frame["answer"], matching)
        codes, _ = runs.normalized.encode(frame["answer"]) if len(frame) else (np.zeros(0), None)
        small.append((queries.get_indexer(frame["query_id"]), codes.astype(np.int64)))
    rank, answers = runs.normalized.ranks()
    width = max(len(answers), 1)
    to_answer = rank[runs.normalized_codes().astype(np.int64)]
    keys = [q.astype(np.int64) * width + rank[a] for q, a in small]
    uniques = _sorted_unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
    duplicates = False
    from receval.design import chunked_bincount
    from receval.progress import progress

    seen = np.zeros(len(runs.systems), dtype=bool)
    several = set()  # parts of several systems: repeats looked for once facts are numbered
    with progress(runs.parts, "numbering facts") as parts:
        for i, p in enumerate(parts):  # one run file at a time: its keys merged into ``uniques``
            key = p["query_id"].astype(np.int64) * width + to_answer[p["answer_raw"]]
            part = _sorted_unique(key)
            # within one part, checked here; a system spread over several parts (row groups,
            # dataset files) may repeat a fact across them: _collapse_outputs then looks
            present = np.flatnonzero(chunked_bincount(p["system"], minlength=len(seen)))
            duplicates |= bool(seen[present].any())
            seen[present] = True
            if len(present) == 1:
                duplicates |= len(part) < len(key)
            else:
                several.add(i)
            at = np.minimum(np.searchsorted(uniques, part), max(len(uniques) - 1, 0))
            new = part if not len(uniques) else part[uniques[at] != part]
            if len(new):
                uniques = np.sort(np.concatenate([uniques, new]), kind="stable")
    facts = pd.DataFrame(
        {
            "query_id": queries.to_numpy(dtype=object)[uniques // width],
            "answer": answers.to_numpy(dtype=object)[uniques % width],
        }
    )
    facts.index.name = "fact"
    lookup = pd.Index(uniques)  # every key is in it: its hash table gives searchsorted's answer
    for frame, key in zip(frames, keys, strict=True):
        frame["fact"] = lookup.get_indexer(key).astype(np.int64)
    fact = np.empty(sum(p["_rows"] for p in runs.parts), dtype=np.int64)
    start = 0
    for i, p in enumerate(runs.parts):  # filled file by file: no second copy of the column
        key = p["query_id"].astype(np.int64) * width + to_answer[p["answer_raw"]]
        part = fact[start : start + len(key)]
        part[:] = lookup.get_indexer(key)
        if i in several and not duplicates:
            duplicates = output_repeats(p["system"], part, len(runs.systems), len(uniques))
        start += len(key)
    frame = _run_frame(runs, fact, uniques % width, answers)
    frame.attrs["duplicates"] = duplicates
    return facts, frame


def _normalisation_changed_nothing(runs: _EncodedRuns) -> bool:
    """Whether every raw answer is its own normalised form (the raw and normalised
    vocabularies hold the same values in the same order), so the answer column serves as
    ``answer_raw`` without sorting the raw answers again."""
    to_normalized = runs.normalized_codes()
    return (
        len(runs.raw) == len(runs.normalized) == len(to_normalized)
        and bool((to_normalized == np.arange(len(to_normalized))).all())
        and runs.raw.values.equals(runs.normalized.values)
    )


def _run_frame(
    runs: _EncodedRuns, fact: np.ndarray, fact_answer: np.ndarray, answers: pd.Index
) -> pd.DataFrame:
    """The runs as one frame: ``system, team, query_id, answer, answer_raw, score, provenance,
    fact``, extra columns, ``_file, _line``; text columns are Categoricals (sorted categories)."""
    teams = _run_teams(runs)
    sys_codes = runs.column("system", pop=True)
    system = runs.systems.categorical(sys_codes)
    team_vocab = Vocabulary()
    team_codes, _ = team_vocab.encode(teams)
    n = len(fact)
    answer = pd.Categorical.from_codes(
        fact_answer.astype(_code_dtype(len(answers)))[fact],
        dtype=pd.CategoricalDtype(answers),
        validate=False,
    )
    if _normalisation_changed_nothing(runs):  # one column for both
        raw = answer
        runs.drop("answer_raw")
    else:
        raw = runs.raw.categorical(runs.column("answer_raw", pop=True))
        if raw.categories.equals(answers) and np.array_equal(raw.codes, answer.codes):
            raw = answer
    columns = {
        "system": system,
        "team": team_vocab.categorical(team_codes[sys_codes] if n else []),
        "query_id": pd.Categorical.from_codes(
            runs.column("query_id", pop=True).astype(_code_dtype(len(runs.queries))),
            dtype=pd.CategoricalDtype(pd.Index(runs.queries, dtype=STRING)),
            validate=False,
        ),
        "answer": answer,
        "answer_raw": raw,
        "score": np.asarray(runs.column("score", blank=np.nan, pop=True), dtype=float),
    }
    text = dict(runs.text)
    text.setdefault("provenance", Vocabulary())
    for name, vocab in text.items():
        if vocab is None:
            columns[name] = runs.plain_column(name)
            continue
        blank = vocab.code_of("")
        columns[name] = vocab.categorical(runs.column(name, blank=blank, pop=True))
    columns["fact"] = np.asarray(fact, dtype=np.int64)
    file_codes = runs.column("_file", pop=True)
    columns["_file"] = pd.Categorical.from_codes(
        file_codes.astype(_code_dtype(len(runs.paths))),
        categories=pd.Index(runs.paths),
        validate=False,
    )
    columns[LINE] = runs.column(LINE, pop=True)
    runs.parts.clear()
    order = ["system", "team", "query_id", "answer", "answer_raw", "score", "provenance", "fact"]
    order += [c for c in columns if c not in order]
    frame = pd.DataFrame({c: columns[c] for c in order}, copy=False)
    frame.attrs["empty_systems"] = runs.empty_systems
    return frame


def check_conflicting_duplicates(runs: pd.DataFrame, rows: np.ndarray) -> None:
    """BundleError naming both lines when a system gives the same answer (same text, query and
    provenance) twice with different scores: which score counts would decide its ranking.

    ``rows`` are the input rows of the (system, fact) groups with more than one row.  Rows that
    differ only in the answer's surface form ("Paris" / "paris") or in provenance are distinct
    outputs of one fact, collapsed as before; identical rows are a counted warning.
    """
    if not len(rows):
        return
    cols = ["system", "query_id", "answer_raw", "provenance"]
    sub = runs[cols].take(rows).astype(object).reset_index(drop=True)
    sub["score"] = runs["score"].to_numpy(float)[rows]
    sub["_row"] = rows
    sub = sub.sort_values([*cols, "_row"], kind="stable")
    same = sub[cols].eq(sub[cols].shift()).all(axis=1).to_numpy()
    score = sub["score"].to_numpy()
    prev = np.r_[np.nan, score[:-1]]
    differs = same & ~((score == prev) | (np.isnan(score) & np.isnan(prev)))
    if not differs.any():
        return
    i = int(np.flatnonzero(differs)[0])
    first, second = int(sub["_row"].iloc[i - 1]), int(sub["_row"].iloc[i])
    files = runs["_file"].astype(object).to_numpy()
    lines = runs[LINE].to_numpy()
    where = f"{files[first]}:{int(lines[first])}"
    raise BundleError(
        files[second],
        int(lines[second]),
        f"system {sub['system'].iloc[i]!r} outputs answer {sub['answer_raw'].iloc[i]!r} for query "
        f"{sub['query_id'].iloc[i]!r} twice with different scores ({_score_text(prev[i])} at "
        f"{where}, {_score_text(score[i])} here): keep one row (the kept score decides the ranking)",
    )


def _score_text(score: float) -> str:
    return "no score" if np.isnan(score) else repr(float(score))


def _collapse_outputs(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``outputs`` (one row per system and fact: the highest score, first in file order among
    equal scores, ``copies`` counted) and ``raw_outputs`` (every input row)."""
    keep = ["system", "team", "query_id", "answer", "answer_raw", "score", "provenance", "fact"]
    extra = [c for c in runs.columns if c not in keep and c not in (LINE, "_file", "_order")]
    raw_outputs = runs[keep + extra + ["_file", LINE]].reset_index(drop=True)
    key = None
    if runs.attrs.get("duplicates", True):  # perhaps: one sort tells (cheaper than a lexsort)
        sys_codes, _ = pd.factorize(runs["system"])
        fact = runs["fact"].to_numpy(np.int64)
        key = sys_codes.astype(np.int64) * (int(fact.max(initial=0)) + 1) + fact
    if key is None or len(_sorted_unique(key)) == len(key):
        outputs = runs[keep + extra].reset_index(drop=True)  # every row is an output (no copy)
        outputs.insert(len(keep), "copies", np.ones(len(runs), dtype=np.int32))
        return outputs, raw_outputs
    score = runs["score"].to_numpy(float)
    # by (system, fact), then score descending (NaN last), then input order
    order = np.lexsort((np.arange(len(key)), np.isnan(score), -np.nan_to_num(score), key))
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    copies = np.diff(np.r_[starts, len(key)])
    check_conflicting_duplicates(runs, order[np.repeat(copies > 1, copies)])
    first = order[starts]
    back = np.argsort(first, kind="stable")  # outputs in input order
    outputs = runs[keep + extra].take(first[back]).reset_index(drop=True)
    outputs.insert(len(keep), "copies", copies[back].astype(np.int32))
    return outputs, raw_outputs


def _labels(frame: pd.DataFrame, path: Path, config: TaskConfig) -> None:
    mapping = config.label_map()
    raw = frame["label"].astype(str).str.strip()
    category = raw.str.casefold().map(mapping)

    def problem(i: int) -> str:
        vocab = ", ".join(sorted({v for vs in config.labels.values() for v in vs}))
        return unknown_label_text(raw.iloc[i], vocab)

    raise_first_bad(frame, path, category.isna(), problem)
    values = config.category_value()
    frame["label_raw"] = raw
    frame["category"] = category
    frame["value"] = category.map(values).astype(float)


def _check_judgments(src: _Source | None, config: TaskConfig, known: set[str]) -> pd.DataFrame:
    cols = [
        "query_id",
        "answer",
        "label_raw",
        "category",
        "value",
        "annotator",
        "sample",
        "equivalence_class",
    ]
    if src is None:
        empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
        empty["value"] = empty["value"].astype(float)
        empty["_file"] = pd.Series([], dtype=object)
        empty[LINE] = pd.Series([], dtype="int64")
        return empty
    frame, path = src.frame, src.path
    _require(src, ("query_id", "answer", "label"), "judgments")
    nonempty(frame, path, ("query_id", "answer", "label"))
    check_queries_known(frame, path, known)
    _labels(frame, path, config)
    for col in ("annotator", "sample", "equivalence_class"):
        if col not in frame.columns:
            frame[col] = ""
        frame[col] = frame[col].astype(str).str.strip()
    frame["_file"] = str(path)
    extra = [c for c in frame.columns if c not in cols and c not in ("label", "_file", LINE)]
    return frame[cols + extra + ["_file", LINE]]


def _prob(frame: pd.DataFrame, path: Path) -> pd.Series:
    p = numbers(frame, path, "prob", allow_empty=False)
    raise_first_bad(
        frame, path, (p <= 0) | (p > 1), lambda i: f"prob {p.iloc[i]!r} is outside (0, 1]"
    )
    return p


def _check_samples(src: _Source | None, known: set[str]) -> pd.DataFrame:
    cols = ["sample", "system", "query_id", "answer", "prob", "draw", "stratum"]
    if src is None:
        empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
        empty["prob"] = empty["prob"].astype(float)
        empty[LINE] = pd.Series([], dtype="int64")
        return empty
    frame, path = src.frame, src.path
    _require(src, ("sample", "system", "query_id", "answer", "prob"), "samples")
    nonempty(frame, path, ("sample", "system", "query_id", "answer"))
    check_queries_known(frame, path, known)
    frame["prob"] = _prob(frame, path)
    if "draw" not in frame.columns:
        frame["draw"] = ""
    if "stratum" not in frame.columns:
        frame["stratum"] = ""
    frame["draw"] = frame["draw"].astype(str).str.strip()
    frame["stratum"] = frame["stratum"].astype(str).str.strip()
    extra = [c for c in frame.columns if c not in cols and c != LINE]
    return frame[[*cols, *extra, LINE]]


def _check_samples_against_outputs(
    samples: pd.DataFrame, outputs: pd.DataFrame, path: Path | None
) -> None:
    if samples.empty or path is None:
        return
    out_codes, systems = system_codes(outputs["system"])
    drawn_codes = systems.get_indexer(samples["system"])
    raise_first_bad(
        samples,
        path,
        drawn_codes < 0,
        lambda i: f"system {samples['system'].iloc[i]!r} has no outputs",
    )
    # (system, fact) pairs as integers, over the outputs of the drawn facts only
    fact = outputs["fact"].to_numpy(np.int64)
    drawn_facts = samples["fact"].to_numpy(np.int64)
    width = int(max(fact.max(initial=0), drawn_facts.max(initial=0))) + 1
    near = np.isin(fact, np.unique(drawn_facts))
    pairs = out_codes[near].astype(np.int64) * width + fact[near]
    missing = ~np.isin(drawn_codes.astype(np.int64) * width + drawn_facts, pairs)
    raise_first_bad(
        samples,
        path,
        missing,
        lambda i: (
            f"system {samples['system'].iloc[i]!r} never output the drawn answer "
            f"{samples['answer_raw'].iloc[i]!r} for query {samples['query_id'].iloc[i]!r}"
        ),
    )
    # a draw's prob must be the same every time the same (sample, system, fact) is drawn
    spread = samples.groupby(["sample", "system", "fact"], observed=True)["prob"].agg(
        ["min", "max"]
    )
    bad = ~np.isclose(spread["min"], spread["max"], rtol=1e-9, atol=0)
    if bad.any():
        key = spread.index[bad.nonzero()[0][0]]
        rows = samples[
            (samples["sample"] == key[0])
            & (samples["system"] == key[1])
            & (samples["fact"] == key[2])
        ]
        raise BundleError(
            path,
            int(rows[LINE].iloc[-1]),
            f"sample {key[0]!r} gives two different prob values for the same answer of system {key[1]!r}",
        )


def _check_exhaustive(
    usrc: _Source | None, esrc: _Source | None, known: set[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    units = pd.DataFrame({"unit": pd.Series([], dtype=object), "prob": pd.Series([], dtype=float)})
    exhaustive = pd.DataFrame(
        {c: pd.Series([], dtype=object) for c in ("unit", "query_id", "answer")}
    )
    exhaustive[LINE] = pd.Series([], dtype="int64")
    if usrc is not None:
        frame, upath = usrc.frame, usrc.path
        _require(usrc, ("unit",), "exhaustive_units")
        nonempty(frame, upath, ("unit",))
        raise_first_bad(
            frame,
            upath,
            frame["unit"].duplicated(),
            lambda i: f"duplicate unit {frame['unit'].iloc[i]!r}",
        )
        # an all-empty prob column means uniform units, as `sample --units-from` writes it
        uniform = "prob" not in frame.columns or (frame["prob"].astype(str).str.strip() == "").all()
        frame["prob"] = np.nan if uniform else _prob(frame, upath)
        extra = [c for c in frame.columns if c not in ("unit", "prob", LINE)]
        units = frame[["unit", "prob", *extra]].reset_index(drop=True)
    if esrc is not None:
        epath = esrc.path
        if usrc is None:
            raise BundleError(
                epath,
                None,
                "exhaustive.tsv needs exhaustive_units.tsv (the units annotated, including empty ones)",
            )
        frame = esrc.frame
        _require(esrc, ("unit", "query_id", "answer"), "exhaustive")
        nonempty(frame, epath, ("unit", "query_id", "answer"))
        check_queries_known(frame, epath, known)
        raise_first_bad(
            frame,
            epath,
            ~frame["unit"].isin(set(units["unit"])),
            lambda i: f"unit {frame['unit'].iloc[i]!r} is not in exhaustive_units",
        )
        extra = [c for c in frame.columns if c not in ("unit", "query_id", "answer", LINE)]
        exhaustive = frame[["unit", "query_id", "answer", *extra, LINE]]
    return units, exhaustive


def _dedupe_truth(truth: pd.DataFrame, path: Path) -> pd.DataFrame:
    spread = truth.groupby("fact", observed=True)["value"].agg(["min", "max"])
    bad = spread["min"] != spread["max"]
    if bad.any():
        fact = spread.index[bad.to_numpy().nonzero()[0][0]]
        rows = truth[truth["fact"] == fact]
        raise BundleError(
            path,
            int(rows[LINE].iloc[-1]),
            f"answer {rows['answer_raw'].iloc[-1]!r} has two truth labels",
        )
    extra = ["equivalence_class"] if "equivalence_class" in truth.columns else []
    out = truth.drop_duplicates("fact")[["query_id", "answer", "fact", "value", *extra]]
    return out.reset_index(drop=True)


def _check_truth(src: _Source | None, config: TaskConfig, known: set[str]) -> pd.DataFrame | None:
    if src is None:
        return None
    frame, path = src.frame, src.path
    _require(src, ("query_id", "answer", "label"), "truth")
    nonempty(frame, path, ("query_id", "answer", "label"))
    check_queries_known(frame, path, known)
    _labels(frame, path, config)
    raise_first_bad(
        frame, path, frame["value"].isna(), "truth labels must be correct or wrong, not ignored"
    )
    extra = ["equivalence_class"] if "equivalence_class" in frame.columns else []
    return frame[["query_id", "answer", "value", *extra, LINE]]


def with_annotation(
    task: Task,
    *,
    samples: pd.DataFrame | None = None,
    judgments: pd.DataFrame | None = None,
    exhaustive_units: pd.DataFrame | None = None,
    exhaustive: pd.DataFrame | None = None,
    judge: pd.DataFrame | None = None,
) -> Task:
    """``task`` with its annotation tables replaced by in-memory bundle frames (for simulations).

    The frames have the bundle's columns (``samples``: sample, system, query_id, answer, prob;
    ``judgments``: query_id, answer, label; ``exhaustive_units``: unit [, prob];
    ``exhaustive``: unit, query_id, answer; ``judge``: query_id, answer, judge_score [, judge]).
    Every answer must be a fact the task already
    knows (a bundle with ``truth.tsv`` knows them all); nothing is re-read from disk, so a
    simulation study can redraw the annotation many times against one loaded world.
    """
    key = pd.MultiIndex.from_frame(task.facts[["query_id", "answer"]])
    lookup = pd.Series(np.arange(len(key), dtype=np.int64), index=key)

    def facts_of(frame: pd.DataFrame, what: str) -> pd.DataFrame:
        frame = frame.copy()
        frame["answer_raw"] = frame["answer"].astype(str)
        frame["answer"] = normalize_answers(frame["answer"], task.config.matching)
        codes = lookup.reindex(
            pd.MultiIndex.from_arrays([frame["query_id"], frame["answer"]])
        ).to_numpy()
        if np.isnan(codes.astype(float)).any():
            raise ValueError(f"{what}: answers the task does not know")
        frame["fact"] = codes.astype(np.int64)
        frame[LINE] = np.arange(2, len(frame) + 2)
        return frame

    changes: dict[str, pd.DataFrame] = {}
    if samples is not None:
        s = facts_of(samples, "samples")
        s["prob"] = s["prob"].astype(float)
        for col in ("draw", "stratum"):
            s[col] = s[col].astype(str) if col in s else ""
        _check_samples_against_outputs(s, task.outputs, Path("samples.tsv"))
        changes["samples"] = s.reset_index(drop=True)
    if judgments is not None:
        j = facts_of(judgments, "judgments")
        _labels(j, Path("judgments.tsv"), task.config)
        for col in ("annotator", "sample", "equivalence_class"):
            j[col] = j[col].astype(str) if col in j else ""
        j["_file"] = "judgments.tsv"
        changes["judgments"] = j.reset_index(drop=True)
    if exhaustive_units is not None:
        u = exhaustive_units.copy()
        u["prob"] = u["prob"].astype(float) if "prob" in u else np.nan
        kept = [c for c in ("draws", "design") if c in u.columns]  # a with-replacement design
        changes["exhaustive_units"] = u[["unit", "prob", *kept]].reset_index(drop=True)
    if exhaustive is not None:
        changes["exhaustive"] = facts_of(exhaustive, "exhaustive").reset_index(drop=True)
    if judge is not None:
        frame = facts_of(judge, "judge")
        frame["judge"] = frame["judge"].astype(str) if "judge" in frame else ""
        frame["judge_score"] = frame["judge_score"].astype(float)
        frame["_file"] = "judge.tsv"
        changes["judge"] = dedupe_judge(frame, Path("judge.tsv"))
        outputs = task.outputs.copy()
        view = SimpleNamespace(facts=task.facts, judge=changes["judge"], config=task.config)
        attach_judge_scores(outputs, view)
        changes["outputs"] = outputs
    return dataclasses.replace(task, **changes)
