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

With ``--task TASK --commands validate,score,leaderboard,report,sample,curve`` (a labelled
task, e.g. ``/work/big/t1e8``), instead: every command a user runs on a large bundle, as the CLI
runs it, once per engine of ``--engines`` (``spark`` with ``--master`` and ``--driver-memory``,
then ``duckdb``), each engine on its own copy of the task (small files copied, runs
hard-linked), each command in its own process (:func:`cli_child`): wall time, CPU seconds of the
Python process and of its descendants (the JVM), the peak RSS of each.  ``validate`` and
``score`` run ``--out-of-core``; ``leaderboard`` and ``report`` read ``score``'s output folder
(no engine: the same on both); ``sample --per-system 200 --seed 1`` draws a new round;
``curve`` runs ``curve plan --method stratband`` on ``run000`` until the plan is empty (labels
from :mod:`scale_sampled`'s synthetic truth) then ``curve estimate``, each with ``--engine``
(Spark reads and ranks ``run000`` itself, :mod:`receval.engine.spark_ranked`).  The printed
summaries, the score CSVs, the sample round (``samples.tsv``, ``to_annotate.tsv``) and the
curve's batches (as labelled into ``judgments.tsv``) and CSV are compared byte for byte
between the engines.

Each child reports its wall time and its **own** peak resident memory (``RUSAGE_SELF``: the
Python process; Spark's JVM is a separate process bounded by its heap setting).  The census and
leave-one-team-out columns must agree to 1e-9 (counts exactly).  Results go to
``bench/results/spark.json``.

Usage: python bench/spark.py [--systems 50 --queries 1000 --depth 1000] [--master local[2]]
       [--driver-memory 1g] [--cli] [--seed 0]
       python bench/spark.py --score-task /tmp/escore/t5e7 [--master local[2]]
       python bench/spark.py --task /work/big/t1e8 --commands validate,score,leaderboard,report,sample,curve
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
    parser.add_argument("--task", type=Path, default=None, help="run --commands on this task")
    parser.add_argument("--commands", default="validate,score,leaderboard,report,sample,curve")
    parser.add_argument("--engines", default="spark,duckdb")
    parser.add_argument("--work", type=Path, default=None, help="working folder (kept)")
    parser.add_argument("--label", default=None, help="what this run measures")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="with --task: also run each command with this source tree's receval (e.g. "
        "`git archive` of the base commit), as engine ENGINE@base, in the same run",
    )
    parser.add_argument(
        "--event-log", action="store_true", help="Spark event logs in WORK/events (--profile)"
    )
    parser.add_argument(
        "--spark-conf", action="append", default=[], help="KEY=VALUE for spark-defaults.conf"
    )
    parser.add_argument("--cli-child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument(
        "--profile", type=Path, default=None, help="summarise this Spark event log and store it"
    )
    parser.add_argument("--child", nargs=3, metavar=("KIND", "TASK", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--score-child", nargs=3, help=argparse.SUPPRESS)
    ns = harness.parse(parser)
    if ns.child:
        child(ns.child[0], Path(ns.child[1]), Path(ns.child[2]), ns.master)
        return
    if ns.cli_child:
        cli_child(Path(ns.cli_child[0]), Path(ns.cli_child[1]), json.loads(ns.cli_child[2]))
        return
    if ns.profile is not None:
        store_profile(ns)
        return
    if ns.task is not None:
        commands_task(ns)
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
    conf.mkdir(parents=True, exist_ok=True)
    text = f"spark.driver.memory {ns.driver_memory}\nspark.local.dir {conf / 'spark-tmp'}\n"
    if getattr(ns, "event_log", False):  # --profile reads it afterwards
        (work / "events").mkdir(parents=True, exist_ok=True)
        text += f"spark.eventLog.enabled true\nspark.eventLog.dir file://{work / 'events'}\n"
    for setting in getattr(ns, "spark_conf", None) or []:  # --spark-conf KEY=VALUE
        key, _, value = setting.partition("=")
        text += f"{key} {value}\n"
    (conf / "spark-defaults.conf").write_text(text, encoding="utf-8")
    return {**os.environ, "SPARK_CONF_DIR": str(conf), "PYTHONPATH": str(HERE.parent),
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# --task --commands: every command on each engine, as the CLI runs it


class DescendantCpu(DescendantPeak):
    """:class:`DescendantPeak` that also keeps each descendant's last-seen CPU seconds (user +
    system from ``/proc/<pid>/stat``, sampled with the RSS; what the JVM spent until its last
    sample)."""

    def __init__(self, every: float = 0.5) -> None:
        self.cpu: dict[int, float] = {}
        super().__init__(every)

    def _poll(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while True:
            pids = _descendants(os.getpid())
            self.peak_mib = max(self.peak_mib, sum(_rss_mib(pid) for pid in pids))
            for pid in pids:
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                self.cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
            time.sleep(self.every)


def cli_child(result: Path, stdout: Path, args: list[str]) -> None:
    """``receval ARGS`` in this process (the CLI's code path), its printed lines to ``stdout``;
    writes wall time, exit code, CPU seconds and peak RSS of this process and of its
    descendants to ``result`` (JSON)."""
    import contextlib
    import io

    from receval.cli import cli

    jvm = DescendantCpu()
    printed, code = io.StringIO(), 0
    start, cpu = time.perf_counter(), os.times()
    with contextlib.redirect_stdout(printed):
        try:
            cli.main(args, prog_name="receval", standalone_mode=False)
        except SystemExit as exc:  # click's exits
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception as exc:  # recorded, not raised: the bench goes on
            code, printed_error = 1, f"{type(exc).__name__}: {exc}"
            print(printed_error[:2000], file=sys.stderr)
    wall, used = time.perf_counter() - start, os.times()
    time.sleep(jvm.every)  # one more sample of the JVM's CPU
    stdout.write_text(printed.getvalue(), encoding="utf-8")
    result.write_text(json.dumps({
        "exit": code,
        "wall_s": round(wall, 1),
        "python_cpu_s": round(used.user + used.system - cpu.user - cpu.system, 1),
        "python_peak_rss_mib": round(harness.peak_rss_mib(), 1),
        "descendants_cpu_s": round(sum(jvm.cpu.values()), 1),
        "descendants_peak_rss_mib": round(jvm.peak_mib, 1),
    }), encoding="utf-8")  # fmt: skip


def copy_task(source: Path, target: Path) -> None:
    """The task in ``target``: small files copied (written by the commands), runs hard-linked."""
    shutil.copytree(source, target, copy_function=os.link, ignore=shutil.ignore_patterns(
        ".receval*", "*.tsv", "*.toml", "*.json"))  # fmt: skip
    for small in [*source.glob("*.tsv"), *source.glob("*.toml"), *source.glob("*.json")]:
        shutil.copy2(small, target / small.name)


def engine_args(kind: str, master: str) -> list[str]:
    return (
        ["--engine", "spark", "--spark-master", master] if kind == "spark" else ["--engine", kind]
    )


def command_runs(command: str, kind: str, task: Path, out: Path, master: str) -> list[list[str]]:
    """The CLI invocations of one bench command on one engine (``curve``: see curve_steps)."""
    engine = engine_args(kind, master)
    if command == "validate":
        return [["validate", str(task), "--out-of-core", *engine]]
    if command == "score":
        return [["score", str(task), "--out", str(out), "--no-report", "--quiet", "--seed", "1",
                 "--out-of-core", *engine]]  # fmt: skip
    if command in ("leaderboard", "report"):
        return [[command, str(out)]]
    if command == "sample":  # no --spark-master: the children's SPARK_MASTER names it
        return [["sample", str(task), "--per-system", "200", "--seed", "1", *engine[:2]]]
    raise SystemExit(f"unknown command {command!r}")


def commands_task(ns) -> None:
    """``--task --commands``: each command on each engine's copy, compared, stored."""
    import pyarrow.parquet as pq
    from scale_sampled import curve_rounds

    work = ns.work or Path(tempfile.mkdtemp(prefix="receval-bench-spark-cmds-", dir="/tmp"))
    env = {**_score_env(ns, work), "SPARK_MASTER": ns.master}
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in ns.task.rglob("*.parquet"))
    me = [sys.executable, str(Path(__file__).resolve())]
    kinds, commands = ns.engines.split(","), ns.commands.split(",")
    runs_of = {kind: [f"{kind}@base", kind] if ns.baseline else [kind] for kind in kinds}
    figures: dict = {run: {} for kind in kinds for run in runs_of[kind]}
    for run in figures:
        copy_task(ns.task, work / run / "task")
    step = iter(range(10**6))

    def measure(kind: str, args: list[str]) -> dict:
        k = next(step)
        result, stdout = work / kind / f"{k}.json", work / kind / f"{k}.out"
        code = {"PYTHONPATH": str(ns.baseline.resolve())} if kind.endswith("@base") else {}
        subprocess.run([*me, "--cli-child", str(result), str(stdout), json.dumps(args)],
                       env={**env, **code}, check=False)  # fmt: skip
        load = round(os.getloadavg()[0], 1)
        figures_one = json.loads(result.read_text()) if result.exists() else {"exit": "killed"}
        lines = stdout.read_text().strip().splitlines() if stdout.exists() else []
        return {"command": "receval " + " ".join(args), **figures_one, "load_after": load,
                "stdout_tail": lines[-3:], "stdout_file": str(stdout)}  # fmt: skip

    for command in commands:
        for kind, run in [(k, r) for k in kinds for r in runs_of[k]]:
            task, out = work / run / "task", work / run / "out"
            if command == "curve":  # each engine ranks run000 itself
                engine = engine_args(kind, ns.master)
                steps = curve_rounds(
                    task, work / run / "curve.csv", "stratband", 1,
                    lambda a, run=run, engine=engine: measure(run, [*a, *engine]),
                )  # fmt: skip
                figures[run][command] = steps
            else:
                (args,) = command_runs(command, kind, task, out, ns.master)
                figures[run][command] = measure(run, args)
            print(run, command, json.dumps(figures[run][command])[:1500], flush=True)
    agreement = compare_commands(work, figures, kinds, commands)
    if ns.baseline:
        agreement["ratios"] = cpu_ratios(figures, kinds, commands)
        print("ratios", json.dumps(agreement["ratios"]), flush=True)
    print("agreement", json.dumps(agreement), flush=True)
    if not ns.no_store:
        harness.store_result(
            "spark", harness.command("spark"), ns.seed, figures,
            title=f"commands {rows:,} rows: {ns.commands} on {ns.engines}" + (
                f" ({ns.label})" if ns.label else ""),
            rows=rows, task=str(ns.task), master=ns.master, driver_memory=ns.driver_memory,
            spark_conf=ns.spark_conf, baseline=str(ns.baseline) if ns.baseline else None,
            agreement=agreement,
            note="each command in its own process through the CLI's code (cli.main); "
            "python_*: the Python process (os.times, RUSAGE_SELF peak); descendants_*: the JVM "
            "(local mode: driver and executors in one JVM), RSS and CPU sampled from /proc every "
            "0.5 s; curve: curve plan until the plan is empty, then curve estimate, each "
            "ranking run000 in its engine (--engine; Spark reads the run itself)",
        )  # fmt: skip


def cpu_ratios(figures: dict, kinds: list[str], commands: list[str]) -> dict:
    """With ``--baseline``: per command, each engine's CPU seconds (Python + descendants)
    after ÷ before, and the first engine's ÷ the second's, before and after."""

    def cpu(run: str, command: str) -> float | None:
        one = figures[run].get(command)
        if not isinstance(one, dict) or one.get("exit") != 0:
            return None
        return one["python_cpu_s"] + one["descendants_cpu_s"]

    out = {}
    for command in (c for c in commands if c != "curve"):
        row = {}
        for kind in kinds:
            before, after = cpu(f"{kind}@base", command), cpu(kind, command)
            row[f"{kind}_cpu_s"] = [before, after]
            if before and after:
                row[f"{kind}_after_over_before"] = round(after / before, 3)
        if len(kinds) >= 2:
            for label, suffix in (("before", "@base"), ("after", "")):
                a, b = (cpu(k + suffix, command) for k in kinds[:2])
                if a and b:
                    row[f"{kinds[0]}_over_{kinds[1]}_{label}"] = round(a / b, 2)
        out[command] = row
    return out


def compare_commands(work: Path, figures: dict, kinds: list[str], commands: list[str]) -> dict:
    """What each command printed and wrote, byte for byte, between the first two engines."""
    if len(kinds) < 2:
        return {}
    a, b = (work / kind for kind in kinds[:2])
    same = {}
    for command in commands:
        if command == "curve":  # the batches (labelled into judgments.tsv) and the curve
            for name in ("judgments.tsv", "curve_to_annotate.tsv"):
                if (a / "task" / name).exists() or (b / "task" / name).exists():
                    same[f"curve {name}"] = _same_file(a / "task" / name, b / "task" / name)
            for name in ("curve.csv", "curve.csv.json"):
                same[name] = _same_file(a / name, b / name, (str(a), str(b)))
            continue
        files = [Path(figures[kind][command]["stdout_file"]) for kind in kinds[:2]]
        texts = [
            f.read_text().replace(str(work / kind), "WORK")
            for f, kind in zip(files, kinds[:2], strict=True)
        ]
        same[f"{command} stdout"] = texts[0] == texts[1]
    if "score" in commands:
        for name in (*SCORE_CSVS, "report.html"):
            if (a / "out" / name).exists() or (b / "out" / name).exists():
                same[name] = _same_file(a / "out" / name, b / "out" / name, (str(a), str(b)))
    if "sample" in commands:
        for name in ("samples.tsv", "to_annotate.tsv"):
            same[name] = _same_file(a / "task" / name, b / "task" / name)
    return same


def _same_file(x: Path, y: Path, folders: tuple[str, str] = ("", "")) -> bool:
    """Byte-identical, once each engine's folder is written WORK and the report's creation
    date (``run.json created``) dropped."""
    if not (x.exists() and y.exists()):
        return False
    texts = []
    for path, folder in ((x, folders[0]), (y, folders[1])):
        text = path.read_text(encoding="utf-8")
        text = text.replace(folder, "WORK") if folder else text
        texts.append([line for line in text.splitlines() if "(run.json created)" not in line])
    return texts[0] == texts[1]


# ---------------------------------------------------------------------------------------------
# --profile: where a Spark command's time goes, from its event log

#: the task metrics summed per SQL query (Spark's accumulables on each completed stage)
METRICS = {
    "internal.metrics.executorRunTime": ("run_s", 1e-3),
    "internal.metrics.executorCpuTime": ("cpu_s", 1e-9),
    "internal.metrics.jvmGCTime": ("gc_s", 1e-3),
    "internal.metrics.input.bytesRead": ("input_mib", 2**-20),
    "internal.metrics.shuffle.write.bytesWritten": ("shuffle_write_mib", 2**-20),
    "internal.metrics.shuffle.read.localBytesRead": ("shuffle_read_mib", 2**-20),
    "internal.metrics.shuffle.read.remoteBytesRead": ("shuffle_read_mib", 2**-20),
    "internal.metrics.diskBytesSpilled": ("disk_spill_mib", 2**-20),
}


def profile(log: Path) -> dict:
    """Per SQL query of one application's event log (``spark.eventLog.enabled``): its wall
    seconds, stages, tasks and the summed task metrics of :data:`METRICS`; and the totals."""
    queries: dict[int, dict] = {}
    stage_query: dict[int, int] = {}
    for line in _event_lines(log):
        event = json.loads(line)
        kind = event.get("Event", "")
        if kind.endswith("SparkListenerSQLExecutionStart"):
            queries[event["executionId"]] = {
                "description": " ".join(event.get("description", "").split())[:160],
                "start": event["time"], "stages": 0, "tasks": 0}  # fmt: skip
        elif kind.endswith("SparkListenerSQLExecutionEnd") and event["executionId"] in queries:
            queries[event["executionId"]]["wall_s"] = (
                event["time"] - queries[event["executionId"]]["start"]
            ) / 1e3
        elif kind == "SparkListenerJobStart":
            execution = (event.get("Properties") or {}).get("spark.sql.execution.id")
            for stage in event.get("Stage IDs", []):
                stage_query[stage] = int(execution) if execution is not None else -1
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            one = queries.setdefault(stage_query.get(info["Stage ID"], -1), {"description": "?"})
            one["stages"] = one.get("stages", 0) + 1
            one["tasks"] = one.get("tasks", 0) + info["Number of Tasks"]
            for acc in info.get("Accumulables", []):
                if acc.get("Name") in METRICS:
                    name, scale = METRICS[acc["Name"]]
                    one[name] = one.get(name, 0.0) + float(acc["Value"]) * scale
    rows = [
        {k: round(v, 2) if isinstance(v, float) else v for k, v in q.items() if k != "start"}
        for q in queries.values() if q.get("stages")
    ]  # fmt: skip
    keys = sorted({k for r in rows for k in r if k.endswith(("_s", "_mib"))} - {"wall_s"})
    total = {k: round(sum(r.get(k, 0.0) for r in rows), 1) for k in keys}
    total |= {"queries": len(rows), "stages": sum(r["stages"] for r in rows),
              "tasks": sum(r["tasks"] for r in rows)}  # fmt: skip
    rows.sort(key=lambda r: -r.get("run_s", 0.0))
    return {"total": total, "queries": rows}


def _event_lines(log: Path) -> list[str]:
    """The lines of an event log: a file, or a folder of event files (``.zstd``: Spark's
    default compression, several frames, read by the ``zstd`` command)."""
    lines = []
    for path in sorted(log.glob("events_*")) if log.is_dir() else [log]:
        if path.suffix == ".zstd":
            done = subprocess.run(["zstd", "-dc", str(path)], capture_output=True, check=True)
            text = done.stdout.decode("utf-8")
        else:
            text = path.read_text(encoding="utf-8")
        lines.extend(line for line in text.splitlines() if line.strip())
    return lines


def store_profile(ns) -> None:
    """``--profile LOG``: :func:`profile` printed (the ten costliest queries) and stored."""
    found = profile(ns.profile)
    print(json.dumps(found["total"]))
    for row in found["queries"][:10]:
        print(json.dumps(row))
    if not ns.no_store:
        harness.store_result(
            "spark", harness.command("spark"), ns.seed, found,
            title=f"profile {ns.profile.name}" + (f" ({ns.label})" if ns.label else ""),
            note="from the Spark event log: per SQL query, wall seconds, and the task metrics "
            "summed over its completed stages (executor run and CPU time, GC, input, shuffle "
            "written and read, disk spill)",
        )  # fmt: skip


if __name__ == "__main__":
    main()
