"""What the curve commands read from a task bundle, without loading every run.

``receval curve plan`` and ``curve estimate`` need, for one system, the size N of its ranked
list, the labels the task has at some of its ranks, and the items at the ranks a plan asks for.
:func:`load_task` holds every output row of every system in pandas, which does not fit for a
ranked list of 10⁸ items.  :class:`CurveBundle` reads only ``task.toml``, the queries, the
judgments (and, on request, the truth) with the same checks and error lines as
:func:`~receval.task.load_task`; a system's run file goes through the engine
(:func:`receval.engine.ranked.rank_run_file`): validated and normalised in batches, sorted once
out of core into ``TASK/.receval/ranked/<system>.parquet`` with the same order as
:func:`~receval.curves.ranked.system_ranked_list`, and re-ranked whenever the run file changes.

Both sources offer the same :class:`RankedSystem` view (``size``, ``known``, ``items``), so the
curve workflow (:mod:`receval.curves.workflow`) does not care which one it has.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from receval.config import unknown_label_text
from receval.curves.base import Labels
from receval.errors import BundleError
from receval.formats.checks import raise_first_bad, unique_values

__all__ = [
    "ENGINE_ROWS",
    "CurveBundle",
    "RankedSystem",
    "duplicate_rows",
    "engine_run_file",
    "frame_system",
    "ranked_system",
]

#: Runs with at least this many rows go through the engine (env ``RECEVAL_CURVE_ENGINE_ROWS``).
ENGINE_ROWS = 2_000_000

#: DuckDB's memory limit for ranking a run (env ``RECEVAL_DUCKDB_MEMORY_LIMIT`` overrides).
MEMORY_LIMIT = "3GB"

#: Every character :meth:`str.isspace` accepts below U+3001 (what the loader strips).


@dataclass(frozen=True)
class RankedSystem:
    """One system's ranked list as the curve methods see it.

    ``size`` is N, ``known`` the labels the task has at its ranks, ``items(ranks)`` the rows at
    1-based ranks (``rank, query_id, answer``; ``answer`` as the run file spells it), ``judge``
    the automatic judge's score per rank when the task has a judge table (NaN where it gives
    none; None without one or for an engine-ranked run).
    """

    system: str
    size: int
    known: Labels
    fetch: object = field(repr=False)
    #: Input rows dropped as copies of a fact the system output again (a counted warning).
    duplicate_rows: int = 0
    judge: np.ndarray | None = field(default=None, repr=False)

    def items(self, ranks: np.ndarray) -> pd.DataFrame:
        """The items at the 1-based ``ranks`` (sorted, unique), in rank order."""
        return self.fetch(np.asarray(ranks, dtype=np.int64))


def system_labels(task, system: str) -> tuple[pd.DataFrame, Labels]:
    """(ranked list with ``rank``, the labels the task has at those ranks) for one system."""
    from receval.curves.ranked import system_ranked_list

    if system not in task.systems:
        raise ValueError(f"unknown system {system!r}")
    ranked = system_ranked_list(task.outputs, system)
    value = task.labels.reindex(ranked["fact"]).to_numpy()
    have = ~np.isnan(value)
    return ranked, Labels(ranked["rank"].to_numpy()[have], value[have])


def frame_system(task, system: str) -> RankedSystem:
    """The :class:`RankedSystem` of a loaded :class:`~receval.task.Task` (pandas)."""
    ranked, known = system_labels(task, system)

    def fetch(ranks: np.ndarray) -> pd.DataFrame:
        rows = ranked.iloc[ranks - 1]
        answers = rows["answer_raw"] if "answer_raw" in rows else rows["answer"]
        return pd.DataFrame(
            {"rank": ranks, "query_id": rows["query_id"].to_numpy(), "answer": answers.to_numpy()}
        )

    judge = None
    if "judge_score" in task.outputs.columns:
        per_fact = task.outputs.drop_duplicates("fact").set_index("fact")["judge_score"]
        judge = per_fact.reindex(ranked["fact"]).to_numpy(np.float64)
    return RankedSystem(
        system, len(ranked), known, fetch, duplicate_rows(task, system), judge=judge
    )


def duplicate_rows(task, system: str) -> int:
    """Input rows of ``system`` dropped as copies of a fact it output again, in a loaded
    :class:`~receval.task.Task` or a :class:`CurveBundle` (ranks the run when needed)."""
    if isinstance(task, CurveBundle):
        return task.ranked(system).duplicate_rows
    outputs = task.outputs
    copies = outputs.loc[outputs["system"] == system, "copies"].to_numpy(np.int64)
    return int((copies - 1).sum())


def ranked_system(task, system: str) -> RankedSystem:
    """The ranked list of ``system`` from a :class:`~receval.task.Task` or a :class:`CurveBundle`."""
    if isinstance(task, CurveBundle):
        return task.ranked(system)
    return frame_system(task, system)


# ----------------------------------------------------------------------------- the light bundle


def _strings(frame: pd.DataFrame, col: str) -> pd.Series:
    return frame[col].astype(str)


def _require(frame: pd.DataFrame, path: Path, columns: tuple[str, ...], reserved=()) -> None:
    """Required columns present and derived ones absent (the messages of the loader)."""
    from receval.formats.tables import LINE

    missing = [c for c in columns if c not in frame.columns]
    if missing:
        names = [c for c in frame.columns if c != LINE]
        hint = ""
        if len(names) == 1 and any(d in names[0] for d in ";|,\t "):
            hint = "; wrong delimiter? .tsv is tab-separated, .csv comma-separated"
        raise BundleError(
            path,
            1,
            f"missing required column(s) {', '.join(missing)} "
            f"(header has: {', '.join(names) or 'none'}){hint}",
        )
    clash = [c for c in reserved if c in frame.columns]
    if clash:
        raise BundleError(
            path,
            1,
            f"column name(s) {', '.join(clash)} are reserved (receval derives them); rename them",
        )


def _nonempty(frame: pd.DataFrame, path: Path, columns: tuple[str, ...]) -> None:
    for col in columns:
        values = _strings(frame, col)
        stripped = values.str.strip()
        raise_first_bad(frame, path, stripped == "", f"empty value in required column {col!r}")
        frame[col] = values if col == "answer" else stripped


def _known_queries(frame: pd.DataFrame, path: Path, known: set[str]) -> None:
    unknown = ~frame["query_id"].isin(known)
    raise_first_bad(
        frame,
        path,
        unknown,
        lambda i: (
            f"query_id {frame['query_id'].iloc[i]!r} is not in queries "
            f"({int(unknown.sum())} such rows)"
        ),
    )


def _labelled(frame: pd.DataFrame, path: Path, config) -> None:
    mapping = config.label_map()
    raw = _strings(frame, "label").str.strip()
    category = raw.str.casefold().map(mapping)

    def problem(i: int) -> str:
        vocab = ", ".join(sorted({v for vs in config.labels.values() for v in vs}))
        return unknown_label_text(raw.iloc[i], vocab)

    raise_first_bad(frame, path, category.isna(), problem)
    frame["category"] = category
    frame["value"] = category.map(config.category_value()).astype(float)


@dataclass
class CurveBundle:
    """The parts of a task bundle the curve commands read (see the module docstring).

    Build it with :meth:`load`.  ``labels`` holds one merged label per judged fact
    (``query_id, answer`` normalised, ``value``), as :attr:`receval.task.Task.labels`.
    """

    root: Path
    config: object
    query_ids: set[str]
    labels: pd.DataFrame
    run_files: dict[str, Path]
    memory_limit: str | None = None
    temp_directory: Path | None = None
    #: the engine that ranks a Parquet run: ``duckdb``, or ``spark`` (reading the run itself,
    #: :mod:`receval.engine.spark_ranked`) on ``spark_master``
    engine_name: str = "duckdb"
    spark_master: str | None = None
    _ranked: dict[str, RankedSystem] = field(default_factory=dict, repr=False)

    @classmethod
    def load(
        cls,
        root: Path | str,
        *,
        memory_limit: str | None = None,
        temp_directory=None,
        engine: str = "duckdb",
        spark_master: str | None = None,
    ) -> CurveBundle:
        """Read ``task.toml``, the queries and the judgments of the bundle ``root`` (raises
        :class:`~receval.errors.BundleError` as :func:`~receval.task.load_task` does);
        ``engine``: which engine ranks a Parquet run (``spark``: Spark on ``spark_master``)."""
        from receval.config import load_config
        from receval.formats.tables import find_table, read_table

        root = Path(root)
        if not root.exists():
            raise BundleError(root, None, "no such task bundle (directory not found)")
        if not root.is_dir():
            raise BundleError(root, None, "a task bundle is a directory")
        config = load_config(root / "task.toml", default_name=root.resolve().name)
        qpath = find_table(root, "queries")
        if qpath is None:
            raise BundleError(
                root / "queries.tsv",
                None,
                "missing file: a bundle needs queries.tsv (the query universe)",
            )
        queries = read_table(qpath, ("weight",))
        _require(queries, qpath, ("query_id",))
        if queries.empty:
            raise BundleError(qpath, 2, "no queries: the file has a header but no rows")
        _nonempty(queries, qpath, ("query_id",))
        unique_values(queries, qpath, "query_id")
        known = set(queries["query_id"])
        labels = _merged_labels(root, config, known)
        return cls(
            root, config, known, labels, _run_files(root), memory_limit, temp_directory,
            engine, spark_master,
        )  # fmt: skip

    @property
    def systems(self) -> list[str]:
        return sorted(self.run_files)

    def true_facts(self) -> int | None:
        """The number of correct facts in ``truth.*`` (None without a truth table)."""
        from receval.formats.tables import find_table, read_table
        from receval.task import normalize_answers

        path = find_table(self.root, "truth")
        if path is None:
            return None
        truth = read_table(path)
        _require(truth, path, ("query_id", "answer", "label"), ("answer_raw", "fact", "value"))
        _nonempty(truth, path, ("query_id", "answer", "label"))
        _known_queries(truth, path, self.query_ids)
        _labelled(truth, path, self.config)
        raise_first_bad(
            truth, path, truth["value"].isna(), "truth labels must be correct or wrong, not ignored"
        )
        truth["answer_raw"] = truth["answer"]
        truth["answer"] = normalize_answers(truth["answer"], self.config.matching)
        spread = truth.groupby(["query_id", "answer"], sort=False, observed=True)["value"].agg(
            ["min", "max"]
        )
        bad = spread["min"] != spread["max"]
        if bad.any():
            q, a = spread.index[np.flatnonzero(bad.to_numpy())[0]]
            rows = truth[(truth["query_id"] == q) & (truth["answer"] == a)]
            last = np.r_[np.zeros(len(rows) - 1, bool), True]  # the row that contradicts
            raise_first_bad(
                rows, path, last, f"answer {rows['answer_raw'].iloc[-1]!r} has two truth labels"
            )
        return int((spread["min"] == 1).sum())

    @cached_property
    def spark(self):
        """The Spark engine that ranks the Parquet runs (``engine_name`` ``spark``)."""
        from receval.engine import connect

        return connect("spark", master=self.spark_master)

    @cached_property
    def engine(self):
        from receval.engine import connect

        return connect(
            "duckdb",
            memory_limit=self.memory_limit
            or os.environ.get("RECEVAL_DUCKDB_MEMORY_LIMIT", MEMORY_LIMIT),
            temp_directory=self.temp_directory or (self.root / ".receval" / "tmp"),
        )

    def ranked(self, system: str) -> RankedSystem:
        """``system``'s ranked list from the engine's cache (ranked first when needed)."""
        from receval.engine.ranked import (
            cached_duplicates,
            cached_items,
            labelled_ranks,
            rank_run_file,
        )

        if system not in self.run_files:
            raise ValueError(f"unknown system {system!r}")
        if system in self._ranked:
            return self._ranked[system]
        run = self.run_files[system]
        if self.engine_name == "spark" and run.suffix.lower() == ".parquet":
            self._ranked[system] = self._spark_ranked(system)
            return self._ranked[system]
        cache = rank_run_file(
            self.run_files[system],
            self.root / ".receval" / "ranked" / system,
            self.engine,
            queries=self.query_ids,
            matching=self.config.matching,
        )
        size, ranks, values = labelled_ranks(cache, self.labels, self.engine)
        known = Labels(ranks, values)

        def fetch(wanted: np.ndarray) -> pd.DataFrame:
            return cached_items(cache, wanted, self.engine)

        self._ranked[system] = RankedSystem(system, size, known, fetch, cached_duplicates(cache))
        return self._ranked[system]

    def _spark_ranked(self, system: str) -> RankedSystem:
        """``system``'s ranked list built and read by Spark (:mod:`receval.engine.spark_ranked`)."""
        from receval.engine.spark_ranked import (
            spark_cache,
            spark_cached_duplicates,
            spark_cached_items,
            spark_labelled_ranks,
            spark_rank_run_file,
        )

        engine = self.spark
        cache = spark_rank_run_file(
            self.run_files[system],
            spark_cache(self.root, system),
            engine,
            queries=self.query_ids,
            matching=self.config.matching,
        )
        size, ranks, values = spark_labelled_ranks(cache, self.labels, engine)

        def fetch(wanted: np.ndarray) -> pd.DataFrame:
            return spark_cached_items(cache, wanted, engine)

        known = Labels(ranks, values)
        return RankedSystem(system, size, known, fetch, spark_cached_duplicates(cache))


def _merged_labels(root: Path, config, known: set[str]) -> pd.DataFrame:
    """One merged label per judged fact: ``query_id, answer`` (normalised), ``value``."""
    from receval.formats.tables import find_table, read_table
    from receval.merge import merge_labels
    from receval.task import normalize_answers

    path = find_table(root, "judgments")
    empty = pd.DataFrame({"query_id": pd.Series([], dtype=str), "answer": pd.Series([], dtype=str)})
    if path is None:
        return empty.assign(value=pd.Series([], dtype=float))
    frame = read_table(path)
    reserved = ("answer_raw", "fact", "label_raw", "category", "value", "_file")
    _require(frame, path, ("query_id", "answer", "label"), reserved)
    _nonempty(frame, path, ("query_id", "answer", "label"))
    _known_queries(frame, path, known)
    _labelled(frame, path, config)
    for col in ("annotator", "sample", "equivalence_class"):
        frame[col] = _strings(frame, col).str.strip() if col in frame.columns else ""
    frame["answer"] = normalize_answers(frame["answer"], config.matching)
    codes, keys = pd.factorize(pd.MultiIndex.from_arrays([frame["query_id"], frame["answer"]]))
    frame["fact"] = codes.astype(np.int64)
    merged = merge_labels(frame, config.merge_rule, config.tie_policy).labels
    pairs = keys[merged.index.to_numpy()]
    return pd.DataFrame(
        {
            "query_id": pairs.get_level_values(0).astype(str),
            "answer": pairs.get_level_values(1).astype(str),
            "value": merged.to_numpy(np.float64),
        }
    )


def _run_files(root: Path) -> dict[str, Path]:
    """system -> its file in ``runs/`` (the loader's rules; a single runs table gives {})."""
    from receval.formats.tables import find_table
    from receval.task import run_folder_files

    folder = root / "runs"
    single = find_table(root, "runs")
    if single is not None and folder.is_dir():
        raise BundleError(
            single, None, "ambiguous: both a runs table and a runs/ folder exist; keep one"
        )
    return run_folder_files(folder) if folder.is_dir() else {}


def engine_run_file(root: Path | str, system: str) -> Path | None:
    """The run file of ``system`` when the curve commands should rank it in the engine: a
    Parquet file ``runs/<system>.parquet`` with at least ``RECEVAL_CURVE_ENGINE_ROWS`` rows
    (default :data:`ENGINE_ROWS`; ``0`` sends every Parquet run through the engine), or, when
    that variable is not set, any such file of a bundle too large to load
    (:func:`large_bundle`)."""
    path = Path(root) / "runs" / f"{system}.parquet"
    if not path.is_file() or (Path(root) / "runs" / f"{system}.tsv").exists():
        return None
    given = os.environ.get("RECEVAL_CURVE_ENGINE_ROWS")
    threshold = int(given if given is not None else ENGINE_ROWS)
    rows = _parquet_rows(path)
    if rows is None:  # an unreadable file: the loader reports it
        return None
    if rows >= threshold or (given is None and large_bundle(Path(root))):
        return path
    return None


def _parquet_rows(path: Path) -> int | None:
    try:
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    except Exception:
        return None


def large_bundle(root: Path) -> bool:
    """Whether loading ``root`` for one curve would hold too many rows: its ``runs/*.parquet``
    hold at least :data:`receval.engine.score.ENGINE_PATH_ROWS` rows together (``score`` and
    ``validate`` go out of core from there too), and it has no table that only the loaded task
    reads for a curve (exhaustive units: the estimated true facts; a judge table: the judge's
    scores), so that the engine-ranked run gives the same batches and curve."""
    from receval.engine.score import ENGINE_PATH_ROWS
    from receval.formats.tables import find_table

    if any(
        find_table(root, name) is not None for name in ("exhaustive_units", "exhaustive", "judge")
    ):
        return False
    total = 0
    for path in sorted((root / "runs").glob("*.parquet")):
        rows = _parquet_rows(path)
        if rows is None:
            return False  # the loader names the file
        total += rows
        if total >= ENGINE_PATH_ROWS:
            return True
    return False
