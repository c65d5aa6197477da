"""A task bundle, loaded and validated: :class:`Task` (the in-memory view) and :func:`load_task`.

Data flow: the bundle's tables are found and read by :mod:`receval.bundle.sources` (small tables
as string tables, :mod:`receval.formats.tables`; the runs one file or Parquet row group at a time
as distinct values plus integer codes, :mod:`receval.formats.coded`); the small tables are
checked by :mod:`receval.bundle.checks`, the runs encoded by :mod:`receval.bundle.runs`, answers
normalised into **facts** (``query_id`` + normalised answer, :mod:`receval.bundle.answers`,
numbered ``fact`` 0..F-1 over everything the bundle mentions); labels are mapped through the
``[labels]`` vocabulary, and annotator votes are merged into one label per fact
(:mod:`receval.merge`).  Every problem raises :class:`~receval.errors.BundleError` naming the file
and line.  :func:`_build_task` is the one path from checked tables (files or frames) to a
:class:`Task`; :class:`receval.bundle.Bundle` owns the folder (reading, locked writes, the engine).

The names that moved to :mod:`receval.bundle` are re-exported here (``from receval.task import
normalize_answers`` keeps working).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from receval.bundle.answers import _strip as _strip
from receval.bundle.answers import normalize_answers
from receval.bundle.checks import (
    _check_exhaustive,
    _check_judgments,
    _check_queries,
    _check_samples,
    _check_samples_against_outputs,
    _check_truth,
    _check_universe,
    _dedupe_truth,
    _labels,
)
from receval.bundle.runs import (
    Vocabulary,
    _attach_facts,
    _collapse_outputs,
    _encode_runs,
    check_conflicting_duplicates,
    output_repeats,
)
from receval.bundle.runs import _run_frame as _run_frame
from receval.bundle.sources import (
    NUMERIC,
    SCORING_RUN_COLUMNS,
    WHOLE_FILE_ROWS,
    _frame_runs,
    _frame_source,
    _mentioned_queries,
    _require,
    _Source,
    read_folder,
    run_folder_files,
)
from receval.bundle.sources import _partition as _partition
from receval.bundle.sources import _run_sources as _run_sources
from receval.bundle.sources import _table_source as _table_source
from receval.config import TaskConfig, config_from_mapping, load_config
from receval.errors import BundleError
from receval.formats.tables import LINE
from receval.judge import attach_judge_scores, check_judge_table, dedupe_judge

__all__ = [
    "NUMERIC",
    "SCORING_RUN_COLUMNS",
    "WHOLE_FILE_ROWS",
    "BundleError",
    "Task",
    "Vocabulary",
    "check_conflicting_duplicates",
    "load_task",
    "normalize_answers",
    "output_repeats",
    "run_folder_files",
    "with_annotation",
]


#: the reading modules whose names ``receval.task`` held before the split (see :func:`__getattr__`)
_MOVED = ("answers", "sources", "checks", "runs")


def __getattr__(name: str) -> Any:
    """A name that moved to :mod:`receval.bundle` (``from receval.task import _check_truth``
    keeps working for every name this module defined before the split; PEP 562)."""
    import importlib

    for module in _MOVED:
        found = importlib.import_module(f"receval.bundle.{module}")
        if name in vars(found):
            return vars(found)[name]
    raise AttributeError(f"module 'receval.task' has no attribute {name!r}")


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
    def pool_size(self) -> int:
        """Distinct facts output by some system."""
        return int(self.facts["in_pool"].sum())

    @cached_property
    def duplicate_rows(self) -> int:
        """Input run rows collapsed because the system output the same fact again."""
        return int(len(self.raw_outputs) - len(self.outputs))

    def checksums(self, known: Mapping[Path, str] | None = None) -> dict[str, str]:
        """SHA-256 of every input file (for the run card); ``known``: digests already
        computed, by path (the TREC run table's, checked against its sidecar)."""
        from receval.formats.runs_sidecar import file_sha256

        known = known or {}
        return {
            str(path.relative_to(self.root)): known.get(path) or file_sha256(path)
            for _, path in sorted(self.files.items())
        }

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
    config, files, queries, runs, sources = read_folder(root, tables, run_columns)
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
