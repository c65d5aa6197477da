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

Each child reports its wall time and its **own** peak resident memory (``RUSAGE_SELF``: the
Python process; Spark's JVM is a separate process bounded by its heap setting).  The census and
leave-one-team-out columns must agree to 1e-9 (counts exactly).  Results go to
``bench/results/spark.json``.

Usage: python bench/spark.py [--systems 50 --queries 1000 --depth 1000] [--master local[2]]
       [--driver-memory 1g] [--cli] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent))
from harness import git_commit

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
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=50)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--partitions", type=int, default=16, help="spark.sql.shuffle.partitions")
    parser.add_argument(
        "--cli", action="store_true", help="also time `receval score --engine spark`"
    )
    parser.add_argument("--child", nargs=3, metavar=("KIND", "TASK", "OUT"), help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child:
        child(ns.child[0], Path(ns.child[1]), Path(ns.child[2]), ns.master)
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
            begin = time.perf_counter()
            proc = subprocess.Popen(args, env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            figures["cli_score_spark"] = {
                "wall_s": time.perf_counter() - begin,
                "peak_rss_bytes_incl_jvm_max": usage.ru_maxrss * 1024,
                "exit": os.waitstatus_to_exitcode(status),
            }
            print("cli", json.dumps(figures["cli_score_spark"]), flush=True)
        save(ns, rows, generated, figures, agreement)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def save(ns, rows: int, generated: float, figures: dict, agreement: dict) -> None:
    commit = git_commit()
    record = {
        "command": "python bench/spark.py " + " ".join(sys.argv[1:]),
        "seed": ns.seed,
        "git_commit": commit,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
        "shape": {"systems": ns.systems, "queries": ns.queries, "depth": ns.depth},
        "master": ns.master,
        "driver_memory": ns.driver_memory,
        "shuffle_partitions": ns.partitions,
        "generate_s": generated,
        "figures": figures,
        "agreement": agreement,
        "note": "spark: bundle_census (Spark reads the Parquet runs; Python holds the small "
        "tables); duckdb: load_task + official_census + leave_team_out; peak RSS is the Python "
        "process's own (RUSAGE_SELF)",
    }
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    path = results / "spark.json"
    runs = json.loads(path.read_text(encoding="utf-8")).get("runs", []) if path.is_file() else []
    runs = [r for r in runs if r.get("rows") != rows] + [record]  # one entry per size
    path.write_text(json.dumps({"runs": runs}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
