"""Benchmark: the official census and leave-one-team-out counts of a TREC-style Parquet task, with
Spark reading the runs itself, against DuckDB on the same bundle.

The task is :func:`bench/scale.py <scale.generate>`'s generator (``--systems`` runs × ``--queries``
queries × ``--depth`` documents, ``runs/<system>.parquet``, qrels for the top-20 pool), written one
run at a time under ``/tmp`` (never the whole task in memory) and deleted afterwards.  Then, each
in its own process:

1. **spark**: :func:`receval.official.census.bundle_census` with ``--master`` (``local[2]``) and
   ``spark.driver.memory`` (``1g``): Python reads ``task.toml``, the queries and the judgments;
   Spark reads and normalises the runs, numbers the facts and counts; one row per system or team
   comes back;
2. **duckdb** (the reference): ``load_task`` then :func:`receval.official.census.official_census` and
   :func:`receval.official.census.leave_team_out` in DuckDB;
3. with ``--cli``: ``receval score TASK --estimator official --engine spark`` as a user runs it
   (the ``score`` pipeline still loads the task in Python: per-query and annotation diagnostics
   and the leaderboard read it).

With ``--score-task TASK`` (a labelled task, e.g. ``bench/scale_sampled.py``'s generated task
after its ``score`` command labelled a round), instead: ``receval score TASK --out-of-core
--no-report`` (the engine path, :mod:`receval.engine.score`) once with ``--engine spark``
(``--master``, ``spark.driver.memory``) and once in DuckDB, each in its own process on a copy
of the task (runs hard-linked).  Each child reports its wall time, the Python process's own
peak RSS (``RUSAGE_SELF``) and the peak RSS of its descendants (the JVM: ``/proc`` sampled
every 0.5 s); the leaderboards' precision and pooled recall (full float precision) must
agree to 1e-9, and each CSV of the two output sets is compared byte for byte.

Each child reports its wall time and its **own** peak resident memory (``RUSAGE_SELF``: the
Python process; Spark's JVM is a separate process bounded by its heap setting).  The census and
leave-one-team-out columns must agree to 1e-9 (counts exactly).  Results go to
``bench/results/spark.json``.

Usage: python bench/spark.py [--systems 50 --queries 1000 --depth 1000] [--master local[2]]
       [--driver-memory 1g] [--cli] [--seed 0]
       python bench/spark.py --score-task /tmp/escore/t5e7 [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def child(kind: str, task: Path, out: Path, master: str) -> None:
    """Run one side in this process; write its frames to ``out`` and print wall time and peak
    RSS (this process only) as JSON."""
    import pandas as pd

    start = time.perf_counter()
    if kind == "spark":
        from receval.engine import connect
        from receval.official.census import bundle_census

        engine = connect("spark", master=master)
        census, lto = bundle_census(task, engine)
    else:
        from receval.engine import connect
        from receval.official.census import leave_team_out, official_census
        from receval.task import load_task

        loaded = load_task(task, tables=("judgments",))
        with connect("duckdb", temp_directory=out / "duckdb-spill") as engine:
            census, lto = official_census(loaded, engine), leave_team_out(loaded, engine)
    wall = time.perf_counter() - start
    census.to_csv(out / f"{kind}-census.csv", index=False)
    lto.reset_index().to_csv(out / f"{kind}-lto.csv", index=False)
    peak = round(harness.peak_rss_mib() * 2**20)
    print(
        json.dumps({"wall_s": wall, "peak_rss_bytes": peak, "rows": int(census["outputs"].sum())})
    )
    del pd


def run(args: list[str], env: dict) -> dict:
    proc = subprocess.run(args, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(out: Path) -> dict:
    """Largest absolute difference of every rate column, and whether the counts are equal."""
    import numpy as np
    import pandas as pd

    report = {}
    for name in ("census", "lto"):
        spark = pd.read_csv(out / f"spark-{name}.csv", keep_default_na=False)
        duck = pd.read_csv(out / f"duckdb-{name}.csv", keep_default_na=False)
        assert list(spark["system"]) == list(duck["system"])
        rates = [c for c in ("precision", "recall", "f1") if c in duck.columns]
        counts = [c for c in duck.columns if c not in (*rates, "system", "team", "note")]
        report[name] = {
            "max_abs_diff": float(
                max(np.abs(spark[c].to_numpy(float) - duck[c].to_numpy(float)).max() for c in rates)
            ),
            "counts_equal": bool((spark[counts].to_numpy() == duck[counts].to_numpy()).all()),
        }
    return report


def main() -> None:
    parser = harness.parser(__doc__, seed=0)
    parser.add_argument("--systems", type=int, default=50)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--partitions", type=int, default=16, help="spark.sql.shuffle.partitions")
    parser.add_argument(
        "--cli", action="store_true", help="also time `receval score --engine spark`"
    )
    parser.add_argument(
        "--score-task", type=Path, default=None, help="time `score` of this labelled task"
    )
    parser.add_argument("--child", nargs=3, metavar=("KIND", "TASK", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--score-child", nargs=3, help=argparse.SUPPRESS)
    ns = harness.parse(parser)
    if ns.child:
        child(ns.child[0], Path(ns.child[1]), Path(ns.child[2]), ns.master)
        return
    if ns.score_child:
        score_child(ns.score_child[0], Path(ns.score_child[1]), Path(ns.score_child[2]), ns.master)
        return
    if ns.score_task is not None:
        score_task(ns)
        return
    from scale import generate

    work = Path(tempfile.mkdtemp(prefix="receval-bench-spark-", dir="/tmp"))
    try:
        task = work / "task"
        start = time.perf_counter()
        rows = generate(task, systems=ns.systems, queries=ns.queries, depth=ns.depth, seed=ns.seed)
        generated = time.perf_counter() - start
        print(f"generated {rows:,} rows in {generated:.0f} s", flush=True)
        conf = work / "spark-conf"
        conf.mkdir()
        (conf / "spark-defaults.conf").write_text(
            f"spark.driver.memory {ns.driver_memory}\nspark.local.dir {work / 'spark-tmp'}\n"
            f"spark.sql.shuffle.partitions {ns.partitions}\n",
            encoding="utf-8",
        )
        root = str(HERE.parent)
        env = {**os.environ, "SPARK_CONF_DIR": str(conf), "PYTHONPATH": root}
        me = [sys.executable, str(Path(__file__).resolve()), "--master", ns.master]
        figures = {}
        for kind in ("spark", "duckdb"):
            figures[kind] = run([*me, "--child", kind, str(task), str(work)], env)
            print(kind, json.dumps(figures[kind]), flush=True)
        agreement = compare(work)
        print("agreement", json.dumps(agreement), flush=True)
        if ns.cli:
            args = [sys.executable, "-m", "receval.cli", "score", str(task), "--estimator",
                    "official", "--engine", "spark", "--spark-master", ns.master, "--out",
                    str(work / "cli"), "--quiet", "--no-report"]  # fmt: skip
            cli_run = harness.run_child(args, env=env, check=False)
            figures["cli_score_spark"] = {
                "wall_s": cli_run.wall,
                "peak_rss_bytes_incl_jvm_max": round(cli_run.rss_mib * 2**20),
                "exit": cli_run.exit,
            }
            print("cli", json.dumps(figures["cli_score_spark"]), flush=True)
        save(ns, rows, generated, figures, agreement)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def save(ns, rows: int, generated: float, figures: dict, agreement: dict) -> None:
    record = {
        "rows": rows,
        "shape": {"systems": ns.systems, "queries": ns.queries, "depth": ns.depth},
        "master": ns.master,
        "driver_memory": ns.driver_memory,
        "shuffle_partitions": ns.partitions,
        "generate_s": generated,
        "agreement": agreement,
        "note": "spark: bundle_census (Spark reads the Parquet runs; Python holds the small "
        "tables); duckdb: load_task + official_census + leave_team_out; peak RSS is the Python "
        "process's own (RUSAGE_SELF)",
    }
    if not ns.no_store:  # one record per size
        title = f"{rows:,} rows"
        command = harness.command("spark")
        harness.store_result("spark", command, ns.seed, figures, title=title, **record)


# ---------------------------------------------------------------------------------------------
# --score-task: `receval score --out-of-core` on Spark and on DuckDB

#: the output set's CSVs compared byte for byte
SCORE_CSVS = ("leaderboard.csv", "pool.csv", "conflicts.csv", "per_query.csv", "annotation.csv",
              "pooling_bias.csv", "agreement.csv")  # fmt: skip


class DescendantPeak:
    """The peak summed RSS of this process's descendants (the JVM pyspark starts), sampled
    from ``/proc`` every ``every`` seconds on a daemon thread (Linux only; 0 elsewhere)."""

    def __init__(self, every: float = 0.5) -> None:
        import threading

        self.peak_mib = 0.0
        self.every = every
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self) -> None:
        while True:
            total = sum(_rss_mib(pid) for pid in _descendants(os.getpid()))
            self.peak_mib = max(self.peak_mib, total)
            time.sleep(self.every)


def _descendants(pid: int) -> list[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [p for k in kids for p in (int(k), *_descendants(int(k)))]


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def score_child(kind: str, task: Path, out: Path, master: str) -> None:
    """``receval score TASK --out-of-core --no-report`` in this process (the CLI's code path),
    on ``kind``'s engine; writes the output set to ``out/kind`` and the leaderboard's
    precision and pooled recall with full precision to ``out/kind-estimates.csv``; prints
    wall time and peak memory as JSON."""
    import receval.api as api
    from receval.cli import cli

    jvm = DescendantPeak()
    captured = {}
    real = api.score

    def spy(*args, **kwargs):
        captured["result"] = real(*args, **kwargs)
        return captured["result"]

    api.score = spy
    engine = ["--engine", "spark", "--spark-master", master] if kind == "spark" else []
    args = ["score", str(task), "--out", str(out / kind), "--no-report", "--quiet", "--seed",
            "1", "--out-of-core", *engine]  # fmt: skip
    start = time.perf_counter()
    try:
        cli.main(args, prog_name="receval", standalone_mode=False)
    finally:
        api.score = real
    wall = time.perf_counter() - start
    board = captured["result"].leaderboard
    board[["system", "precision", "pooled_recall"]].to_csv(
        out / f"{kind}-estimates.csv", index=False, float_format="%.17g"
    )
    print(json.dumps({
        "wall_s": round(wall, 1),
        "python_peak_rss_mib": round(harness.peak_rss_mib(), 1),
        "descendants_peak_rss_mib": round(jvm.peak_mib, 1),
    }))  # fmt: skip


def compare_scores(out: Path) -> dict:
    """Largest absolute difference of precision and pooled recall (full precision) between
    the two engines, and which CSVs are byte-identical."""
    import numpy as np
    import pandas as pd

    spark, duck = (pd.read_csv(out / f"{k}-estimates.csv") for k in ("spark", "duckdb"))
    assert list(spark["system"]) == list(duck["system"])
    diffs = {
        column: float(np.nanmax(np.abs(spark[column].to_numpy() - duck[column].to_numpy())))
        for column in ("precision", "pooled_recall")
    }
    same = {
        name: (out / "spark" / name).read_bytes() == (out / "duckdb" / name).read_bytes()
        for name in SCORE_CSVS
    }
    return {"max_abs_diff": diffs, "csv_identical": same}


def score_task(ns) -> None:
    """``--score-task``: both children on a copy of the task, compared, stored."""
    import pyarrow.parquet as pq

    work = Path(tempfile.mkdtemp(prefix="receval-bench-spark-score-", dir="/tmp"))
    try:
        env = _score_env(ns, work)
        task = work / "task"
        shutil.copytree(ns.score_task, task, copy_function=os.link, ignore=shutil.ignore_patterns(
            ".receval.lock", "*.tsv", "*.toml"))  # fmt: skip
        for small in [*ns.score_task.glob("*.tsv"), *ns.score_task.glob("*.toml")]:
            shutil.copy2(small, task / small.name)  # small tables copied: never written back
        rows = sum(pq.ParquetFile(p).metadata.num_rows for p in task.rglob("*.parquet"))
        me = [sys.executable, str(Path(__file__).resolve()), "--master", ns.master]
        figures = {}
        for kind in ("spark", "duckdb"):
            figures[kind] = run([*me, "--score-child", kind, str(task), str(work)], env)
            print(kind, json.dumps(figures[kind]), flush=True)
        agreement = compare_scores(work)
        print("agreement", json.dumps(agreement), flush=True)
        if not ns.no_store:
            harness.store_result(
                "spark", harness.command("spark"), ns.seed, figures,
                title=f"score {rows:,} rows", rows=rows, task=str(ns.score_task),
                master=ns.master, driver_memory=ns.driver_memory, agreement=agreement,
                note="receval score --out-of-core --no-report --seed 1 on each engine; "
                "python_peak_rss_mib: the Python process's own peak (RUSAGE_SELF); "
                "descendants_peak_rss_mib: the JVM's (local mode: driver and executors in one "
                "JVM), sampled from /proc every 0.5 s; Spark's shuffle partitions: receval's "
                "local default unless spark-defaults.conf sets them",
            )  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _score_env(ns, work: Path) -> dict:
    """The children's environment: a Spark configuration folder (in ``work``) with the
    driver's heap and a local folder for shuffles and checkpoints, this checkout first."""
    conf = work / "spark-conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        f"spark.driver.memory {ns.driver_memory}\nspark.local.dir {conf / 'spark-tmp'}\n",
        encoding="utf-8",
    )
    return {**os.environ, "SPARK_CONF_DIR": str(conf), "PYTHONPATH": str(HERE.parent),
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}  # fmt: skip


if __name__ == "__main__":
    main()
