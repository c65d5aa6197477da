"""Benchmark: loading, validating and official (closed-world) scoring of a TAC-2015-sized bundle.

The bundle is the embedded ``data/kbp-sim`` (70 systems, 317 queries, ~141,000 outputs; the
default simulated task, seed 2022), or ``--task DIR``, or a fresh simulation with
``--simulate SEED``.  Figures, each timed with ``time.perf_counter``:

1. ``receval validate TASK`` in a child process: wall time and the child's own peak resident
   memory (``ru_maxrss`` from ``os.wait4``, per child);
2. in this process, best of ``--repeat`` runs: :func:`receval.task.load_task` + ``summary()``,
   and :func:`receval.official.scores.official_scores` (the TAC Cold Start hop-0 micro
   scorer) on

   * the judgments as bundled (the labelled sample draws: a partly assessed pool), and
   * a census: every response judged from ``truth.tsv`` (what TAC does: the whole pool
     assessed), replaced in memory with :func:`receval.task.with_annotation`;

   each once more under ``tracemalloc`` for the peak of traced Python allocations;
3. a child process that loads the bundle and scores it officially (its peak resident memory is
   the load's plus the scorer's);
4. ``receval score TASK --estimator official`` end to end in a child process (it also writes
   the diagnostics: per-query scores and the leave-one-team-out pooling bias, which re-runs the
   official scorer once per team).

Usage: python bench/official.py [--task DIR | --simulate SEED] [--repeat N]
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
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from receval.official.scores import official_scores
from receval.task import Task, load_task, with_annotation

DEFAULT_TASK = Path(__file__).resolve().parents[1] / "data" / "kbp-sim"


def _mib(rss: int) -> float:
    """``ru_maxrss`` in MiB (KiB on Linux, bytes on macOS)."""
    return rss / (1024**2 if sys.platform == "darwin" else 1024)


def run_child(args: list[str]) -> tuple[float, float, str]:
    """Run a command; return (wall seconds, its own peak RSS in MiB, stdout).

    ``os.wait4`` reports the resource usage of exactly this child, so several measured children
    do not mask each other (``RUSAGE_CHILDREN`` keeps only the largest so far).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{err.read().decode()}")
        return wall, _mib(usage.ru_maxrss), out.read().decode()


def receval_command() -> list[str]:
    exe = shutil.which("receval")
    return [exe] if exe else [sys.executable, "-c", "from receval.cli import main; main()"]


def census(task: Task) -> Task:
    """``task`` with every response judged from its truth (a fully assessed pool, as in TAC).

    One judgment per distinct (query, answer as spelled by a system): the official scorer matches
    filler strings exactly, so each spelling needs its own assessment.
    """
    if task.truth is None:
        raise ValueError("the census needs truth.tsv")
    value = task.truth.set_index("fact")["value"]
    spelled = task.outputs.drop_duplicates(["query_id", "answer_raw"])
    judgments = pd.DataFrame(
        {
            "query_id": spelled["query_id"].to_numpy(),
            "answer": spelled["answer_raw"].to_numpy(),
            "label": value.reindex(spelled["fact"]).map({1: "C", 0: "W"}).to_numpy(),
        }
    )
    return with_annotation(task, judgments=judgments)


def best(call: Callable[[], object], repeat: int) -> float:
    """Smallest wall time of ``repeat`` calls (the machine is shared: the minimum is the cost)."""
    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        walls.append(time.perf_counter() - start)
    return min(walls)


def traced(call: Callable[[], object]) -> float:
    """Peak traced allocations of one call, MiB."""
    tracemalloc.start()
    try:
        call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20


def child_main(root: Path) -> None:
    """Child mode: load and score officially once; print the figures as JSON."""
    import resource

    start = time.perf_counter()
    task = load_task(root)
    task.summary()
    t_load = time.perf_counter() - start
    start = time.perf_counter()
    official_scores(task)
    t_score = time.perf_counter() - start
    rss = _mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    print(json.dumps({"load_s": t_load, "official_s": t_score, "maxrss_mib": rss}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--task", type=Path, default=DEFAULT_TASK)
    source.add_argument("--simulate", type=int, metavar="SEED", help="simulate a 70x317 bundle")
    parser.add_argument("--repeat", type=int, default=3, help="in-process timings: best of N")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child_main(args.child)
        return

    with tempfile.TemporaryDirectory() as tmp:
        root = args.task
        if args.simulate is not None:
            from receval.simulation import simulate_task

            start = time.perf_counter()
            root = simulate_task(Path(tmp) / "bundle", seed=args.simulate)
            print(
                f"simulated a bundle (seed {args.simulate}) in {time.perf_counter() - start:.2f} s"
            )
        command = receval_command()
        t_validate, rss_validate, _ = run_child([*command, "validate", str(root)])
        _, rss_child, child_out = run_child([sys.executable, __file__, "--child", str(root)])
        child = json.loads(child_out)
        out = Path(tmp) / "official"
        official = ["score", str(root), "--estimator", "official", "--quiet", "--out", str(out)]
        t_cli, rss_cli, _ = run_child([*command, *official])
        files = ", ".join(sorted(p.name for p in out.iterdir()))

        task = load_task(root)
        summary = task.summary()
        t_load = best(lambda: load_task(root).summary(), args.repeat)
        peak_load = traced(lambda: load_task(root).summary())
        t_official = best(lambda: official_scores(task), args.repeat)
        fresh = load_task(root)
        peak_official = traced(lambda: official_scores(fresh))
        full = census(task)
        full_judged = len(full.judgments)
        t_census = best(lambda: official_scores(full), args.repeat)
        full_fresh = census(load_task(root))
        peak_census = traced(lambda: official_scores(full_fresh))
        scores = official_scores(task)

    print(f"task {root} ({summary['task']})")
    print(
        f"  {summary['systems']} systems, {summary['teams']} teams, {summary['queries']} queries, "
        f"{summary['outputs']:,} outputs, {summary['distinct facts output']:,} distinct facts "
        f"output, {summary['judged facts']:,} judged facts"
    )
    print()
    print("loading and validating")
    print(
        f"  receval validate (child process)   {t_validate:6.2f} s   peak RSS {rss_validate:6.1f} MiB"
    )
    print(
        f"  load_task + summary() (in process) {t_load:6.2f} s   peak traced "
        f"{peak_load:6.1f} MiB (tracemalloc; best of {args.repeat} for the time)"
    )
    print("official scoring (official_scores: TAC Cold Start hop-0 micro P/R/F1, closed world)")
    print(
        f"  judgments as bundled ({summary['judged facts']:,} judged facts)  {t_official:6.2f} s   "
        f"peak traced {peak_official:6.1f} MiB"
    )
    print(
        f"  census: every response judged ({full_judged:,} spellings)  {t_census:6.2f} s   "
        f"peak traced {peak_census:6.1f} MiB"
    )
    print(
        f"  child process: load {child['load_s']:.2f} s + official_scores "
        f"{child['official_s']:.2f} s, peak RSS {rss_child:.1f} MiB"
    )
    print(
        f"receval score --estimator official (child, end to end)  {t_cli:6.2f} s   "
        f"peak RSS {rss_cli:6.1f} MiB"
    )
    print(f"  wrote {files}")
    unmatched = int((scores["judged"] == 0).sum())
    if unmatched:
        print(
            f"note: as bundled, {unmatched} systems have no assessed response: the official scorer "
            "matches answers exactly and their spelling differs from the judgments'"
        )
    print(
        f"official scores as bundled: precision {scores['precision'].min():.3f}-"
        f"{scores['precision'].max():.3f}, recall {scores['recall'].min():.3f}-"
        f"{scores['recall'].max():.3f} (closed world: biased, no interval)"
    )


if __name__ == "__main__":
    main()
