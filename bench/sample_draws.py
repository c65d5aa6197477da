"""``receval sample --engine duckdb``: CPU seconds, wall time and peak memory of a uniform
``--per-system`` round on a generated TREC-style Parquet task, this checkout against another
commit (issue 35: the draws in SQL).

The task is :func:`scale_sampled.generate`'s (``S`` runs × ``Q`` queries × ``D`` answers, one
Parquet file per run; ``--task`` reuses one generated earlier).  Each repetition runs both
checkouts, alternately, as ``nice -n 10 /usr/bin/time -v python -m receval.cli sample ...`` on a
fresh copy of the bundle (the runs linked, not copied).  The machine may be shared: CPU seconds
(user + system, every thread) are the figure to compare; wall time and the load average are
recorded with them.  The ratios are of the fastest repetition of each.

    python bench/sample_draws.py --systems 50 --queries 200 --depth 1000 --before fe95656 --repeat 2
    python bench/sample_draws.py --task /tmp/escore/t2e8 --systems 100 --queries 2000 --default

``--default`` runs ``sample`` without ``--engine`` (out of core by default from 10⁷ Parquet
rows); ``--options`` adds design options (``--options "--by-judge"``, ...; a bundle without a
judge table gets one from :func:`write_judge`).  The in-memory ``sample`` (the hashed draws of
:func:`receval.design.hashed_precision_samples` against numpy's), on kbp-sim (its rounds kept)
and on a generated 10⁶-row task:

    python bench/sample_draws.py --task data/kbp-sim --keep-rounds --rows 140985 --default \
        --options=--in-memory --before f8688c3 --repeat 3 --label "kbp-sim in memory"
    python bench/sample_draws.py --systems 10 --queries 100 --depth 1000 --default \
        --options=--in-memory --before f8688c3 --repeat 3 --label "in memory"

Results: ``bench/results/sample_draws.json`` (one record per task size and ``--label``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness  # noqa: E402

ROOT = HERE.parent


def checkout(commit: str, into: Path) -> Path:
    """``git archive`` of ``commit`` unpacked in ``into`` (the "before" receval)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def fresh_bundle(task: Path, into: Path, keep_rounds: bool = False) -> Path:
    """A copy of ``task``'s small files (its runs table too, when a file) with its ``runs``
    folder linked; its ``samples.tsv`` kept with ``keep_rounds``."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    skip = ("to_annotate.tsv",) if keep_rounds else ("samples.tsv", "to_annotate.tsv")
    for path in task.iterdir():
        if path.is_file() and path.name not in skip:
            shutil.copy(path, into / path.name)
    if (task / "runs").is_dir():
        (into / "runs").symlink_to(task / "runs")
    return into


def write_judge(bundle: Path, seed: int, every: int = 5) -> int:
    """A ``judge.tsv`` for ``--by-judge`` in ``bundle`` (unless it has one): 5 grades
    (round(4·Beta(2, 2))/4) for the facts of ``judgments.tsv`` and every ``every``-th row of
    the first run file; returns its rows."""
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    if (bundle / "judge.tsv").exists():
        return len(pd.read_csv(bundle / "judge.tsv", sep="\t"))
    facts = pd.read_csv(bundle / "judgments.tsv", sep="\t", dtype=str)[["query_id", "answer"]]
    first = sorted((bundle / "runs").resolve().glob("*.parquet"))[0]
    rows = pq.read_table(first, columns=["query_id", "answer"]).to_pandas().iloc[::every]
    facts = pd.concat([facts, rows]).drop_duplicates()
    grades = np.round(np.random.default_rng(seed).beta(2, 2, len(facts)) * 4) / 4
    facts.assign(judge_score=grades).to_csv(bundle / "judge.tsv", sep="\t", index=False)
    return len(facts)


def measure(
    receval: Path, bundle: Path, per_system: int, seed: int, extra: tuple[str, ...]
) -> dict:
    """One ``sample`` with ``extra`` options (``--engine duckdb``, or ``--default``'s) in a
    fresh, niced process (:func:`harness.run_child`: the child's own CPU seconds and peak RSS)."""
    env = {**os.environ, "PYTHONPATH": str(receval), "OMP_NUM_THREADS": "1"}
    args = ["sample", str(bundle), "--per-system", str(per_system), "--seed", str(seed)]
    args += list(extra)
    cmd = ["nice", "-n", "10", sys.executable, "-m", "receval.cli", *args]
    load = os.getloadavg()[0]
    here = os.getcwd()
    os.chdir(receval)  # `python -m` puts the cwd before PYTHONPATH on sys.path
    try:
        child = harness.run_child(cmd, env=env, check=False)
    finally:
        os.chdir(here)
    out = {
        "exit": child.exit,
        "cpu_s": round(child.cpu, 1),
        "wall_s": round(child.wall, 1),
        "peak_rss_mb": round(child.rss_mib, 1),
        "load_average_1min_before_after": [round(load, 1), round(os.getloadavg()[0], 1)],
    }
    if child.exit:
        out["stderr"] = [child.stderr_tail]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=1)
    parser.add_argument("--systems", type=int, default=50)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--per-system", type=int, default=200)
    parser.add_argument("--task", type=Path, default=None, help="a task generated earlier")
    parser.add_argument("--before", default=None, help="commit to compare against")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--default", action="store_true", help="run `sample` without --engine (its default path)"
    )
    parser.add_argument(
        "--options", default="", help="more `sample` options, e.g. '--distribution entity-relation'"
    )
    parser.add_argument(
        "--keep-rounds", action="store_true", help="keep the task's samples.tsv (e.g. kbp-sim)"
    )
    parser.add_argument("--rows", type=int, default=None, help="the --task's rows (records)")
    args = harness.parse(parser, argv)
    extra = (() if args.default else ("--engine", "duckdb")) + tuple(shlex.split(args.options))
    work = Path(tempfile.mkdtemp(prefix="receval-draws-"))
    try:
        task = args.task
        if task is None:
            from scale_sampled import generate

            task = work / "task"
            generate(task, args.systems, args.queries, args.depth, args.seed)
        checkouts = {"after": ROOT}
        if args.before:
            checkouts = {"before": checkout(args.before, work / "before"), **checkouts}
        runs: dict[str, list[dict]] = {name: [] for name in checkouts}
        for rep in range(args.repeat):
            for name in sorted(checkouts):  # "after" first: stored as soon as measured
                bundle = fresh_bundle(task.resolve(), work / f"bundle-{name}", args.keep_rounds)
                if "--by-judge" in extra:
                    print("judge.tsv rows:", write_judge(bundle, args.seed), flush=True)
                runs[name].append(
                    measure(checkouts[name], bundle, args.per_system, args.seed, extra)
                )
                print(rep, name, runs[name][-1], flush=True)
                figures, title = record(args, runs)
                if not args.no_store:
                    harness.store_result(
                        "sample_draws",
                        harness.command("sample_draws", argv),
                        args.seed,
                        figures,
                        title=title,
                        before_commit=args.before,
                        rows=args.rows or args.systems * args.queries * args.depth,
                        task=[args.systems, args.queries, args.depth],
                        per_system=args.per_system,
                        options=list(extra),
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def record(args: argparse.Namespace, runs: dict[str, list[dict]]) -> tuple[dict, str]:
    """The figures of the runs so far (each checkout's fastest run, the ratios) and the
    record's title."""
    rows = args.rows or args.systems * args.queries * args.depth
    figures: dict = {name: {"runs": got} for name, got in runs.items()}
    for name, got in runs.items():
        ok = [r for r in got if r["exit"] == 0]
        if ok:
            figures[name]["best_cpu_s"] = min(r["cpu_s"] for r in ok)
            figures[name]["best_wall_s"] = min(r["wall_s"] for r in ok)
            figures[name]["peak_rss_mb"] = max(r["peak_rss_mb"] for r in ok)
    before, after = figures.get("before", {}), figures.get("after", {})
    if "best_cpu_s" in before and "best_cpu_s" in after:
        figures["cpu_speed_up"] = round(before["best_cpu_s"] / after["best_cpu_s"], 2)
        figures["wall_speed_up"] = round(before["best_wall_s"] / after["best_wall_s"], 2)
        print(json.dumps({k: v for k, v in figures.items() if not isinstance(v, dict)}))
    return figures, f"{rows:.0e} rows {args.label}".strip()


if __name__ == "__main__":
    main()
