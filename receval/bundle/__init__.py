"""The one owner of a task bundle on disk: :class:`Bundle`, and the bundle's reading.

A :class:`Bundle` knows where every table of a task folder is, reads and checks it (errors name
the file and line), appends rounds, judgments and units **under one lock**
(:func:`receval.lock.bundle_lock`, re-exported here, taken by the library and the CLI alike;
re-entrant within a thread, so a command holding it can call a library writer that takes it
too), and opens the engine that runs the SQL aggregations over the runs (:meth:`Bundle.engine`).
:class:`~receval.task.Task` is the in-memory view a bundle produces (:meth:`Bundle.load`).

The package, bottom up (each module imports only those before it):

* :mod:`receval.bundle.answers`: answer normalisation per ``[matching]``;
* :mod:`receval.bundle.sources`: where the tables are and how they are read (string tables with
  line numbers; runs as codes, one file, row group or dataset part at a time; in-memory frames);
* :mod:`receval.bundle.checks`: the small tables checked, alone and across tables;
* :mod:`receval.bundle.runs`: the runs checked, encoded into facts, duplicates collapsed;
* :mod:`receval.task` (above the package) assembles a ``Task`` from them (:func:`load_task`);
  this module's :class:`Bundle` sits on top: it loads through :mod:`receval.task` and writes
  through :mod:`receval.formats.bundle` and :mod:`receval.judgments`, under its lock.

This module imports nothing heavy at import time (the CLI starts instantly).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from receval.errors import BundleError
from receval.lock import LOCK_NAME, ROUND_LOCK_WAIT, bundle_lock

if TYPE_CHECKING:
    import pandas as pd

    from receval.config import TaskConfig
    from receval.engine.base import Engine
    from receval.task import Task

__all__ = ["LOCK_NAME", "ROUND_LOCK_WAIT", "Bundle", "bundle_lock"]

#: the optional tables of a bundle, besides ``queries`` and the runs
TABLES = ("judgments", "samples", "exhaustive_units", "exhaustive", "truth", "judge")


@dataclass(frozen=True)
class Bundle:
    """A task folder on disk: its tables' paths, reading, locked appends, the engine.

    Parameters
    ----------
    root : the bundle directory.
    lock_timeout : seconds a writer waits for the bundle lock (default :data:`ROUND_LOCK_WAIT`).

    Examples
    --------
    >>> bundle = Bundle("data/kbp-sim")          # doctest: +SKIP
    >>> task = bundle.load()                      # the validated in-memory view
    >>> with bundle.engine() as engine: ...       # SQL over the runs (DuckDB, bounded memory)
    """

    root: Path
    lock_timeout: float = ROUND_LOCK_WAIT

    def __init__(self, root: Path | str, lock_timeout: float = ROUND_LOCK_WAIT) -> None:
        object.__setattr__(self, "root", Path(root))
        object.__setattr__(self, "lock_timeout", lock_timeout)

    # -- where things are --------------------------------------------------------------------

    def check_folder(self) -> None:
        """A BundleError unless ``root`` is a directory holding a queries table."""
        if not self.root.exists():
            raise BundleError(self.root, None, "no such task bundle (directory not found)")
        if not self.root.is_dir():
            raise BundleError(self.root, None, "a task bundle is a directory")
        if self.table("queries") is None:
            raise BundleError(
                self.root / "queries.tsv",
                None,
                "missing file: a bundle needs queries.tsv (the query universe)",
            )

    def table(self, name: str) -> Path | None:
        """The file of table ``name`` (``queries``, ``judgments``, ...; any of .tsv/.csv/.parquet),
        or None when absent; two formats of one table are an error."""
        from receval.formats.tables import find_table

        return find_table(self.root, name)

    def table_path(self, name: str) -> Path:
        """Where table ``name`` is, or would be created (``<name>.tsv``)."""
        return self.table(name) or self.root / f"{name}.tsv"

    def run_files(self) -> dict[str, Path]:
        """Every run file of the bundle by its bundle-relative name (``runs.tsv``,
        ``runs/A.parquet``, ``runs.parquet/part-0.parquet``, ...), checked as the loader does
        (an ambiguous layout or an empty ``runs/`` folder is a BundleError)."""
        from receval.bundle.sources import _run_sources

        files: dict[str, Path] = {}
        _run_sources(self.root, files, ("score",))
        return files

    def parquet_runs(self) -> list[tuple[Path, dict[str, str]]] | None:
        """The runs as Parquet files with what each file's location says about its rows
        (``{"system": "A"}`` for ``runs/A.parquet`` or ``runs/system=A/``), or None when some
        run table is not Parquet (the engine path then registers the loaded frame instead)."""
        from receval.bundle.sources import parquet_sources

        return parquet_sources(self.run_files())

    # -- reading -----------------------------------------------------------------------------

    def config(self) -> TaskConfig:
        """The parsed ``task.toml`` (:func:`receval.config.load_config`; defaults without one)."""
        from receval.config import load_config

        return load_config(self.root / "task.toml", default_name=self.root.resolve().name)

    def load(self, **options: Any) -> Task:
        """The validated in-memory view (:func:`receval.task.load_task`; ``options`` are its
        ``tables`` and ``run_columns``)."""
        from receval.task import load_task

        return load_task(self.root, **options)

    # -- writing (always under the lock) -----------------------------------------------------

    def lock(self, timeout: float | None = None):
        """The bundle lock as a context manager (:func:`bundle_lock`)."""
        return bundle_lock(self.root, self.lock_timeout if timeout is None else timeout)

    def append(self, name: str, rows: pd.DataFrame) -> Path:
        """Append ``rows`` to table ``name`` under the lock (atomic; see
        :func:`receval.formats.bundle.append_rows`)."""
        from receval.formats.bundle import append_rows

        with self.lock():
            return append_rows(self.root, name, rows)

    def record_round(self, drawn: Any) -> Path:
        """Record a drawn round (:func:`receval.api.sample`'s result) under the lock: its draws
        appended to ``samples.tsv``, ``to_annotate.tsv`` rewritten; returns the latter's path."""
        from receval.formats.bundle import record_sample_round

        return record_sample_round(self.root, drawn, timeout=self.lock_timeout)

    def add_judgments(self, files: list[Path | str], **options: Any) -> Any:
        """``judgments add`` (:func:`receval.judgments.add_judgments`, which takes the lock)."""
        from receval.judgments import add_judgments

        options.setdefault("timeout", self.lock_timeout)
        return add_judgments(self.root, files, **options)

    def add_units(self, units: pd.DataFrame, facts: pd.DataFrame | None = None) -> Path:
        """Append annotated exhaustive units (``unit`` [, ``prob``]) to ``exhaustive_units`` and
        their correct facts (``unit, query_id, answer``) to ``exhaustive``, both under one hold
        of the lock (no other writer lands between them; readers do not take the lock, so one
        reading in between sees the units without their facts); returns the units' path."""
        with self.lock():
            path = self.append("exhaustive_units", units)
            if facts is not None and len(facts):
                self.append("exhaustive", facts)
        return path

    # -- the engine --------------------------------------------------------------------------

    def engine(self, name: str = "duckdb", **options: Any) -> Engine:
        """A connection of engine ``name`` (:func:`receval.engine.connect`; DuckDB bounded in
        memory by default), with the Parquet runs registered as view ``runs`` when the runs are
        Parquet (see :mod:`receval.engine.sampled`)."""
        from receval.engine.base import connect
        from receval.engine.sampled import register_runs

        engine = connect(name, **options)
        sources = self.parquet_runs()
        if sources is not None:
            register_runs(engine, sources, strip=self.config().matching.strip)
        return engine
