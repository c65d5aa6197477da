"""The engine interface and its two implementations (DuckDB, Spark)."""

from __future__ import annotations

import contextlib
import os
import warnings
from abc import ABC, abstractmethod
from pathlib import Path

import pandas as pd

ENGINES = ("duckdb", "spark")


class Engine(ABC):
    """Runs SQL text over registered tables and returns small results as pandas frames."""

    name: str

    @abstractmethod
    def register(self, name: str, table: pd.DataFrame | Path | str) -> None:
        """Make ``table`` (a pandas frame, or a Parquet file / folder / glob) queryable as ``name``."""

    @abstractmethod
    def query(self, sql: str) -> pd.DataFrame:
        """Run one SELECT and return its result as a pandas frame."""

    @abstractmethod
    def write_parquet(self, sql: str, path: Path | str) -> None:
        """Write the result of one SELECT to ``path`` as Parquet (a file for DuckDB, a folder
        of part files for Spark), in the SELECT's order."""

    @property
    def dialect(self):
        """The engine's SQL spelling of the functions that differ
        (:class:`receval.engine.dialect.Dialect`)."""
        from receval.engine.dialect import DIALECTS

        return DIALECTS[self.name]

    def close(self) -> None:  # noqa: B027 - optional
        """Release the engine's resources."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: environment variables overriding :class:`DuckDBEngine`'s defaults
MEMORY_LIMIT_ENV = "RECEVAL_DUCKDB_MEMORY_LIMIT"
TEMP_DIRECTORY_ENV = "RECEVAL_DUCKDB_TEMP_DIRECTORY"
#: the default memory limit: this share of the machine's RAM, at most :data:`MEMORY_CAP` bytes
MEMORY_SHARE = 0.25
MEMORY_CAP = 1 << 30


@contextlib.contextmanager
def one_line_oom():
    """DuckDB's out-of-memory error as one line (ValueError: ``error:`` and exit 2), naming
    :data:`MEMORY_LIMIT_ENV` and the in-memory alternative."""
    try:
        yield
    except Exception as exc:
        if type(exc).__name__ == "OutOfMemoryException":
            raise ValueError(
                f"the engine ran out of its memory limit ({exc}); set {MEMORY_LIMIT_ENV} "
                "higher (e.g. 4GB), or score with --in-memory if the task fits in RAM "
                "(about 80 bytes per output row)"
            ) from None
        raise


def default_memory_limit() -> str:
    """DuckDB's memory limit unless told otherwise: ``$RECEVAL_DUCKDB_MEMORY_LIMIT``, else a
    quarter of the RAM capped at 1 GiB (at least 256 MiB), so a score or a sample round stays
    bounded on a shared machine; larger sorts and joins spill to the temporary directory."""
    given = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if given:
        return given
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        ram = 4 * MEMORY_CAP
    limit = max(min(int(ram * MEMORY_SHARE), MEMORY_CAP), 256 << 20)
    return f"{limit >> 20}MB"


class DuckDBEngine(Engine):
    """DuckDB in this process, bounded in memory by default; spills to a temporary directory
    when a sort, join or aggregation does not fit.

    Parameters
    ----------
    memory_limit : str, optional
        DuckDB's ``memory_limit`` (e.g. ``"4GB"``); default :func:`default_memory_limit`
        (``$RECEVAL_DUCKDB_MEMORY_LIMIT``, else ¼ of RAM capped at 1 GiB).
    temp_directory : path, optional
        Where large sorts and joins spill; default ``$RECEVAL_DUCKDB_TEMP_DIRECTORY``, else a
        fresh temporary folder removed on :meth:`close`.
    threads : int, optional
    on_disk : bool
        Keep the tables the engine creates (:meth:`create_table`) in a database file in a fresh
        folder under the spill directory (removed on :meth:`close`), so they may exceed the
        memory limit; rows of a query without ORDER BY then come in no particular order.
    """

    name = "duckdb"

    def __init__(
        self,
        memory_limit: str | None = None,
        temp_directory: Path | str | None = None,
        threads: int | None = None,
        *,
        on_disk: bool = False,
    ) -> None:
        import tempfile

        import duckdb

        self._owned_temp: str | None = None
        temp_directory = temp_directory or os.environ.get(TEMP_DIRECTORY_ENV) or None
        if temp_directory is None or on_disk:
            base = None if temp_directory is None else str(temp_directory)
            if base is not None:
                Path(base).mkdir(parents=True, exist_ok=True)
            self._owned_temp = tempfile.mkdtemp(prefix="receval-duckdb-", dir=base)
            temp_directory = self._owned_temp
        # on_disk: tables created in the engine (create_table) live in a database file in the
        # spill folder, so a table larger than the memory limit is written out, not refused
        database = str(Path(temp_directory) / "engine.duckdb") if on_disk else ":memory:"
        self.con = duckdb.connect(database=database)
        self.con.execute("SET enable_progress_bar = false")  # stdout belongs to the command
        limit = str(memory_limit or default_memory_limit()).replace("'", "")
        self.con.execute(f"SET memory_limit = '{limit}'")
        if on_disk:  # large aggregations and tables need not keep their rows' order
            self.con.execute("SET preserve_insertion_order = false")
        spill = Path(temp_directory).as_posix().replace("'", "''")
        self.con.execute(f"SET temp_directory = '{spill}'")
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")

    def register(self, name: str, table) -> None:
        # a registered frame and a file view share the temporary namespace: drop either first
        self.con.unregister(name)
        self.con.execute(f"DROP VIEW IF EXISTS {name}")
        if isinstance(table, (str, Path)):
            path = Path(table)
            glob = (path / "**" / "*.parquet").as_posix() if path.is_dir() else path.as_posix()
            self.con.execute(f"CREATE TEMP VIEW {name} AS SELECT * FROM read_parquet('{glob}')")
        else:
            self.con.register(name, table)

    def create_view(self, name: str, sql: str) -> None:
        """Make the SELECT ``sql`` queryable as ``name`` (a temporary view)."""
        self.con.unregister(name)
        self.con.execute(f"DROP VIEW IF EXISTS {name}")
        self.con.execute(f"CREATE TEMP VIEW {name} AS {sql}")

    def create_table(self, name: str, sql: str) -> None:
        """Materialise the SELECT ``sql`` as the temporary table ``name`` (spilled to the
        temporary directory beyond the memory limit)."""
        import duckdb

        self.con.unregister(name)
        for kind in ("VIEW", "TABLE"):
            # DROP VIEW of a table (or the reverse) is a CatalogException, not a no-op
            with contextlib.suppress(duckdb.CatalogException):
                self.con.execute(f"DROP {kind} IF EXISTS {name}")
        self.con.execute(f"CREATE TABLE {name} AS {sql}")

    def query(self, sql: str) -> pd.DataFrame:
        return self.con.execute(sql).fetch_df()

    def write_parquet(self, sql: str, path) -> None:
        target = Path(path).as_posix().replace("'", "''")
        self.con.execute(f"COPY ({sql}) TO '{target}' (FORMAT PARQUET)")

    def close(self) -> None:
        self.con.close()
        if self._owned_temp is not None:
            import shutil

            shutil.rmtree(self._owned_temp, ignore_errors=True)
            self._owned_temp = None


class SparkEngine(Engine):
    """Apache Spark through ``pyspark``: the same SQL on a cluster (or ``local[*]``).

    The session is ``SparkSession.builder.getOrCreate()`` with ``spark.master`` set from
    ``master`` or ``SPARK_MASTER`` when given (otherwise Spark's own configuration:
    ``spark-defaults.conf``, ``spark-submit`` flags, else ``local[*]``).  Pandas frames go in
    through Arrow.
    """

    name = "spark"
    #: rows of the Parquet runs registered (:func:`receval.engine.spark_runs.register_parquet_runs`)
    run_rows: int = 0
    #: whether some registered run file has a team column (False: none has)
    run_teams: bool = True
    #: the cached ``normed`` table (:func:`receval.engine.spark_runs.keep_normed`)
    kept_normed = None

    def __init__(self, master: str | None = None, app_name: str = "receval") -> None:
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise ImportError(
                "--engine spark needs pyspark and a Java runtime: pip install 'receval[spark]'"
            ) from None
        master = master or os.environ.get("SPARK_MASTER")
        if master:
            check_master(master)
        builder = SparkSession.builder.appName(app_name)
        if master:
            builder = builder.master(master)
        builder = builder.config("spark.sql.execution.arrow.pyspark.enabled", "true")
        builder = builder.config("spark.sql.session.timeZone", "UTC")
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # pyspark's note on pandas >= 3
                self.spark = builder.getOrCreate()
        except Exception as exc:  # no Java, a JVM that does not start, a refused master
            from receval.engine.spark_runs import _java_message
            from receval.errors import BundleError

            raise BundleError(
                master or "spark", None, f"cannot start Spark: {_java_message(exc)}"
            ) from None
        self.spark.sparkContext.setLogLevel("ERROR")
        local_shuffle_partitions(self.spark)

    def register_census_runs(self, task, location: Path | str | None = None) -> bool:
        """Register the coded census tables of ``task`` with Spark reading its Parquet runs
        itself from ``location`` (default: the bundle folder; any path Spark reads); False
        when the runs are text tables or in memory
        (:func:`receval.engine.spark_runs.register_task_runs`)."""
        from receval.engine.spark_runs import register_task_runs

        return register_task_runs(self, task, location)

    def register(self, name: str, table) -> None:
        """A Parquet path is read by Spark (any path it reads); a pandas frame is sent from the
        driver: for the small tables only (queries, systems, judgments, draws)."""
        with self._one_line_errors(str(table) if isinstance(table, (str, Path)) else name):
            if isinstance(table, (str, Path)):
                frame = self.spark.read.parquet(str(table))
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)
                    frame = self.spark.createDataFrame(table)
            frame.createOrReplaceTempView(name)

    def create_view(self, name: str, sql: str) -> None:
        """Make the SELECT ``sql`` queryable as ``name`` (a temporary view)."""
        with self._one_line_errors(name):
            self.spark.sql(sql).createOrReplaceTempView(name)

    def create_table(self, name: str, sql: str) -> None:
        """Materialise the SELECT ``sql`` on the executors (``localCheckpoint``: memory, then
        their local disks) and make it queryable as ``name``."""
        self.describe(f"table {name}: {sql}")
        with self._one_line_errors(name):
            self.spark.sql(sql).localCheckpoint(eager=True).createOrReplaceTempView(name)

    def query(self, sql: str) -> pd.DataFrame:
        self.describe(sql)
        with self._one_line_errors("spark"), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return self.spark.sql(sql).toPandas()

    def write_parquet(self, sql: str, path) -> None:
        self.describe(f"write {path}: {sql}")
        with self._one_line_errors(str(path)):
            self.spark.sql(sql).write.mode("overwrite").parquet(str(path))

    def describe(self, text: str) -> None:
        """Name the next jobs in Spark's UI and event log by the start of ``text`` (the SQL,
        whitespace collapsed) instead of the pyspark call that ran them."""
        self.spark.sparkContext.setJobDescription(" ".join(text.split())[:DESCRIPTION_CHARS])

    @staticmethod
    @contextlib.contextmanager
    def _one_line_errors(where: str):
        """A failed Spark job (an unreadable file, a lost executor) as one BundleError line
        instead of a Java stack trace through py4j."""
        from receval.errors import BundleError

        try:
            yield
        except BundleError:
            raise
        except Exception as exc:
            if type(exc).__module__.split(".")[0] not in ("pyspark", "py4j"):
                raise
            from receval.engine.spark_runs import _java_message

            raise BundleError(where, None, f"Spark failed: {_java_message(exc)}") from None


#: characters of a query's SQL that name its jobs (:meth:`SparkEngine.describe`)
DESCRIPTION_CHARS = 200

#: shuffle partitions per local core when the configuration sets none (Spark's 200 is for
#: clusters: on ``local[2]`` each shuffle of a small aggregate became 200 tasks)
LOCAL_PARTITIONS_PER_CORE = 4


def local_shuffle_partitions(spark) -> None:
    """On a ``local`` master whose configuration does not set ``spark.sql.shuffle.partitions``,
    set it to :data:`LOCAL_PARTITIONS_PER_CORE` per core (adaptive execution coalesces further);
    a cluster's setting, or the user's, is left alone."""
    context = spark.sparkContext
    if not context.master.startswith("local") or context.getConf().contains(
        "spark.sql.shuffle.partitions"
    ):
        return
    partitions = LOCAL_PARTITIONS_PER_CORE * max(1, context.defaultParallelism)
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))


#: seconds to wait for a standalone master's port before giving up
MASTER_TIMEOUT = 10.0


def check_master(master: str, timeout: float = MASTER_TIMEOUT) -> None:
    """BundleError naming ``master`` when a standalone master (``spark://host:port``, several
    hosts separated by commas) does not accept a connection within ``timeout`` seconds: Spark
    itself would retry for minutes.  Other masters (``local``, ``yarn``, ``k8s://``) pass."""
    import socket

    from receval.errors import BundleError

    if not master.startswith("spark://"):
        return
    problems = []
    for hostport in master[len("spark://") :].split(","):
        host, _, port = hostport.rpartition(":")
        try:
            with socket.create_connection((host or hostport, int(port or 7077)), timeout=timeout):
                return
        except (OSError, ValueError) as exc:
            problems.append(
                f"{hostport}: {exc.strerror or exc}" if isinstance(exc, OSError) else str(exc)
            )
    raise BundleError(
        master, None, f"cannot reach the Spark master ({'; '.join(problems)}; waited {timeout:g} s)"
    )


def connect(name: str = "duckdb", *, master: str | None = None, **options) -> Engine:
    """An engine by name: ``"duckdb"`` (default; ``options`` go to :class:`DuckDBEngine`) or
    ``"spark"`` (``master`` as in :class:`SparkEngine`)."""
    if name == "duckdb":
        return DuckDBEngine(**options)
    if name == "spark":
        return SparkEngine(master=master, **options)
    raise ValueError(f"unknown engine {name!r} (choose from {', '.join(ENGINES)})")
