"""Any size: wall time and peak memory of ``receval sample`` / ``receval score`` on a generated
TREC-style Parquet task (issue 35).

The task: ``S`` runs × ``Q`` queries × ``D`` answers per query (``runs/<system>.parquet``, one file
per run written by DuckDB straight to disk, never in memory at once), each run's answers ``D``
distinct documents of a per-query candidate list of ``3·D`` (systems overlap at random); no
labels.  ``--commands`` runs, each as a subprocess under ``/usr/bin/time -v`` (wall time, peak
RSS of the process tree's largest process):

* ``sample``: ``receval sample TASK --per-system N --seed S`` (in memory);
* ``sample-engine``: the same with ``--engine duckdb`` (the SQL sampled path);
* ``round-synthetic``: the uniform round written from the generator's formula instead
  (:func:`synthetic_round`: no scan of the runs);
* ``score-engine``: the same labels, then the joint estimates (1,000 bootstrap replicates)
  from the engine's arrays (:func:`receval.engine.score.joint_estimates`; no output set);
* ``score``: label the drawn facts from a synthetic truth (a fact is correct when the first
  hex digit of MD5(query, answer) is below 5), then ``receval score TASK --out DIR --no-report
  --seed S`` (default estimator; from 10⁷ Parquet rows the engine path,
  :mod:`receval.engine.score`); ``score-memory`` adds ``--in-memory`` (the path before),
  ``score-engine-cli`` ``--out-of-core``;
* ``leaderboard``, ``report``: ``receval leaderboard OUT`` / ``receval report OUT`` on the
  folder ``score`` wrote (``--out``: kept between invocations, so one command can run at a
  time);
* ``validate``: ``receval validate TASK``; ``curve``: ``receval curve plan TASK --system
  run000 --method random`` (its ``curve_to_annotate.tsv`` removed after).  Both load the whole
  task into memory at main 5a5b37c (about 70 bytes per output row: not run at 10⁹ rows there);
  the modes stay for their out-of-core versions;
* ``curve-estimate``: ``receval curve plan TASK --system run000 --method M`` (``--curve-method``,
  default ``stratband``), its batch labelled from the synthetic truth and appended to
  ``judgments.tsv`` (:func:`label_curve_batch`, not timed), repeated until the plan is empty,
  then ``receval curve estimate`` (each plan and the estimate measured).  It appends labels to
  the task: run it on a copy (small files copied, runs hard-linked).

Each command records wall and CPU seconds (user + system, all threads), peak RSS and the load
average before and after (the machine may be shared).  ``--task PATH`` reuses a task generated
earlier (kept).

``--receval PATH`` runs another checkout's receval (e.g. ``git archive 13e5542`` unpacked in
/tmp: the "before" figures).  Results are appended to ``bench/results/scale_sampled.json`` (``bench/scale.py`` is the
end-to-end benchmark of the whole pipeline).

    python bench/scale_sampled.py --systems 100 --queries 2000 --depth 1000 --commands sample-engine
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "scale_sampled.json"


def generate(root: Path, systems: int, queries: int, depth: int, seed: int) -> int:
    """Write the task into ``root`` (one DuckDB COPY per run); returns the number of rows."""
    import duckdb

    (root / "runs").mkdir(parents=True)
    (root / "queries.tsv").write_text(
        "query_id\n" + "".join(f"q{q}\n" for q in range(queries)), encoding="utf-8"
    )
    (root / "task.toml").write_text('name = "scale"\n', encoding="utf-8")
    con = duckdb.connect()
    con.execute("SET threads = 2")
    pool = 3 * depth
    for j in range(systems):
        # answer r of query q: candidate (r·7 + offset(j, q)) mod pool, distinct for r < pool/7·…;
        # stride 7 is coprime to pool = 3000 so D < pool answers are distinct
        sql = f"""
        SELECT 'run{j:03d}' AS system, 'q' || q.range AS query_id,
               'doc-' || q.range || '-' || ((r.range * 7 + (hash({seed}, {j}, q.range) % {pool}))
                                            % {pool}) AS answer,
               CAST({depth} - r.range AS DOUBLE) AS score
        FROM range({queries}) q, range({depth}) r
        """
        target = (root / "runs" / f"run{j:03d}.parquet").as_posix()
        con.execute(f"COPY ({sql}) TO '{target}' (FORMAT PARQUET, ROW_GROUP_SIZE 1000000)")
    con.close()
    return systems * queries * depth


def label_drawn(root: Path) -> int:
    """Label every fact of ``to_annotate.tsv`` from the synthetic truth into judgments.tsv."""
    lines = (root / "to_annotate.tsv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    qi, ai, ki = header.index("query_id"), header.index("answer"), header.index("kind")
    out = ["query_id\tanswer\tlabel\tannotator"]
    for line in lines[1:]:
        f = line.split("\t")
        if f[ki] != "fact":
            continue
        digit = int(hashlib.md5(f"{f[qi]}\x1f{f[ai]}".encode()).hexdigest()[0], 16)
        out.append(f"{f[qi]}\t{f[ai]}\t{'C' if digit < 5 else 'W'}\tbench")
    (root / "judgments.tsv").write_text("\n".join(out) + "\n", encoding="utf-8")
    return len(out) - 1


def truth_labels(queries: list[str], answers: list[str]) -> list[str]:
    """The synthetic truth: ``C`` when the first hex digit of MD5(query, answer) is below 5."""
    digits = (
        int(hashlib.md5(f"{q}\x1f{a}".encode()).hexdigest()[0], 16)
        for q, a in zip(queries, answers, strict=True)
    )
    return ["C" if d < 5 else "W" for d in digits]


def label_curve_batch(root: Path) -> int:
    """Append a label for every row of ``curve_to_annotate.tsv`` (the synthetic truth) to
    ``judgments.tsv``; returns the number of rows labelled."""
    batch = root / "curve_to_annotate.tsv"
    if not batch.exists():
        return 0
    lines = batch.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    qi, ai = header.index("query_id"), header.index("answer")
    rows = [line.split("\t") for line in lines[1:] if line]
    queries, answers = [r[qi] for r in rows], [r[ai] for r in rows]
    judged = root / "judgments.tsv"
    text = judged.read_text(encoding="utf-8") if judged.exists() else ""
    lead = "" if text else "query_id\tanswer\tlabel\tannotator\n"
    lead += "" if not text or text.endswith("\n") else "\n"
    body = "".join(
        f"{q}\t{a}\t{label}\tbench\n"
        for q, a, label in zip(queries, answers, truth_labels(queries, answers), strict=True)
    )
    with judged.open("a", encoding="utf-8") as handle:
        handle.write(lead + body)
    batch.unlink()
    return len(rows)


def curve_rounds(
    task: Path, out: Path, method: str, seed: int, measure_one, rounds: int = 8
) -> list[dict]:
    """``curve plan`` + labelling until the plan is empty (at most ``rounds`` plans), then
    ``curve estimate`` into ``out``; ``measure_one(args)`` runs and measures one command."""
    base = ["--system", "run000", "--method", method, "--seed", str(seed)]
    figures = []
    for _ in range(rounds):
        step = measure_one(["curve", "plan", str(task), *base])
        step["labelled"] = label_curve_batch(task)
        figures.append(step)
        if step["exit"] != 0 or step["labelled"] == 0:
            break
    figures.append(measure_one(["curve", "estimate", str(task), *base, "--out", str(out)]))
    return figures


def synthetic_round(root: Path, systems: int, queries: int, depth: int, per_system: int,
                    seed: int) -> int:  # fmt: skip
    """Write a uniform round of ``per_system`` draws per run straight from the generator's
    formula (each run outputs exactly ``queries · depth`` distinct facts: a uniform draw picks
    a (query, rank) pair uniformly, ``prob`` = 1/(queries · depth)), with ``to_annotate.tsv``
    listing its facts: the round ``sample`` would record, without scanning the runs (for tasks
    where ``sample --engine`` takes longer than the time at hand).  ``score`` checks every
    drawn fact against the runs."""
    import duckdb
    import numpy as np

    rng = np.random.default_rng(seed)
    con = duckdb.connect()
    pool, parts = 3 * depth, []
    for j in range(systems):
        q = rng.integers(0, queries, per_system)
        r = rng.integers(0, depth, per_system)
        con.register("picks", {"q": q.astype(np.int64), "r": r.astype(np.int64)})
        parts.append(
            con.execute(
                f"SELECT 'run{j:03d}' AS system, 'q' || q AS query_id, 'doc-' || q || '-' || "
                f"((r * 7 + (hash({seed}, {j}, q) % {pool})) % {pool}) AS answer FROM picks"
            ).fetch_df()
        )
    con.close()
    import pandas as pd

    frame = pd.concat(parts, ignore_index=True)
    frame.insert(0, "sample", "round-1")
    frame["prob"] = 1.0 / (queries * depth)
    frame["draw"] = frame.groupby("system").cumcount() + 1
    frame["design"] = "uniform"
    frame.to_csv(root / "samples.tsv", sep="\t", index=False)
    todo = frame.drop_duplicates(["query_id", "answer"])[["query_id", "answer"]]
    todo.assign(kind="fact").to_csv(root / "to_annotate.tsv", sep="\t", index=False)
    return len(frame)


#: ``score-engine``: the joint estimates from the engine's arrays (no output set yet)
ENGINE_SCORE = (
    "import sys; from receval.bundle import Bundle; "
    "from receval.engine.score import joint_estimates; "
    "print(joint_estimates(Bundle(sys.argv[1]), bootstrap=1000, seed=1).head(3).to_string())"
)


def measure(
    args: list[str],
    receval: Path,
    code: str | None = None,
    nice: int | None = None,
    keep_stdout: bool = False,
) -> dict:
    """Run ``python -m receval.cli ARGS`` (or ``python -c CODE ARGS``) under /usr/bin/time -v
    (at niceness ``nice`` when given): wall seconds, CPU seconds, peak RSS."""
    env = {**os.environ, "PYTHONPATH": str(receval), "OMP_NUM_THREADS": "1"}
    runner = ["-m", "receval.cli"] if code is None else ["-c", code]
    prefix = [] if nice is None else ["nice", "-n", str(nice)]
    # -P: the checkout on PYTHONPATH, not the working directory, is the receval measured
    safe = ["-P"] if sys.version_info >= (3, 11) else []
    cmd = [*prefix, "/usr/bin/time", "-v", sys.executable, *safe, *runner, *args]
    start, load = time.monotonic(), os.getloadavg()[0]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    cpu = [float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", proc.stderr)]
    tail = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()][:3]
    return {
        "command": ("receval " if code is None else "python -c ENGINE_SCORE ") + " ".join(args),
        "exit": proc.returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round(sum(cpu), 1),
        "peak_rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else None,
        "load_average_1min_before_after": [round(load, 1), round(os.getloadavg()[0], 1)],
        **({"nice": nice} if nice is not None else {}),
        **({"stderr": tail} if proc.returncode else {}),
        **({"stdout": proc.stdout.strip().splitlines()[-3:]} if keep_stdout else {}),
    }


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=1)
    parser.add_argument("--systems", type=int, default=50)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--per-system", type=int, default=200)
    parser.add_argument("--commands", default="sample-engine")
    parser.add_argument("--receval", type=Path, default=ROOT, help="checkout to run")
    parser.add_argument("--label", default=None, help="what this run measures (before/after)")
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="keep the generated task")
    parser.add_argument(
        "--out", type=Path, default=None, help="score's output folder (default: a temporary one)"
    )
    parser.add_argument("--nice", type=int, default=None, help="run each command at this niceness")
    parser.add_argument("--curve-method", default="stratband", help="curve-estimate's method")
    parser.add_argument(
        "--task", type=Path, default=None, help="score this task generated earlier (kept)"
    )
    args = harness.parse(parser, argv)
    work = Path(tempfile.mkdtemp(prefix="receval-scale-", dir=args.tmp))
    task = work / "task" if args.task is None else args.task
    try:
        start = time.monotonic()
        if args.task is None:
            rows = generate(task, args.systems, args.queries, args.depth, args.seed)
        else:  # a task generated earlier (the same generate(); its figures given)
            rows = args.systems * args.queries * args.depth
        generated = round(time.monotonic() - start, 1) if args.task is None else None
        figures = {"rows": rows, "generate_s": generated, "per_system": args.per_system, "runs": []}
        print(f"{rows:,} rows (generated in {generated} s)", flush=True)
        for command in args.commands.split(","):
            figures["runs"].append(run_command(command, task, work, args))
            print(json.dumps(figures["runs"][-1]), flush=True)
        if not args.no_store:
            title = f"{rows:,} rows, {args.label or args.commands}, at {harness.git_commit(args.receval)[:7]}"
            command = harness.command("scale_sampled", argv)
            harness.store_result("scale_sampled", command, args.seed, figures, title=title,
                                 receval=str(args.receval), commit=harness.git_commit(args.receval),
                                 bench_commit=harness.git_commit(ROOT))  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run_command(command: str, task: Path, work: Path, args) -> dict:
    out = args.out or work / "out"
    if command in ("leaderboard", "report"):
        return measure([command, str(out)], args.receval, nice=args.nice)
    if command == "validate":
        return measure(["validate", str(task)], args.receval, nice=args.nice)
    if command == "curve-estimate":
        steps = curve_rounds(
            task, work / "curve.csv", args.curve_method, args.seed,
            lambda cmd: measure(cmd, args.receval, nice=args.nice, keep_stdout=True),
        )  # fmt: skip
        return {"command": f"curve plan (until empty) + curve estimate ({args.curve_method})",
                "steps": steps}  # fmt: skip
    if command == "curve":
        plan = ["curve", "plan", str(task), "--system", "run000", "--method", "random"]
        figures = measure(plan, args.receval, nice=args.nice)
        (task / "curve_to_annotate.tsv").unlink(missing_ok=True)
        return figures
    base = ["sample", str(task), "--per-system", str(args.per_system), "--seed", str(args.seed)]
    if command == "sample":
        return measure(base, args.receval, nice=args.nice)
    if command == "sample-engine":
        return measure([*base, "--engine", "duckdb"], args.receval, nice=args.nice)
    if command == "round-synthetic":
        start = time.monotonic()
        draws = synthetic_round(
            task, args.systems, args.queries, args.depth, args.per_system, args.seed
        )
        return {
            "command": "synthetic_round (a uniform round from the generator's formula)",
            "draws": draws,
            "wall_s": round(time.monotonic() - start, 1),
        }
    if command in ("score", "score-memory", "score-engine-cli"):
        labelled = label_drawn(task)
        path = {"score": [], "score-memory": ["--in-memory"], "score-engine-cli": ["--out-of-core"]}
        figures = measure(
            ["score", str(task), "--out", str(out), "--no-report", "--seed", "1",
             *path[command]],
            args.receval, nice=args.nice,
        )  # fmt: skip
        return {**figures, "labelled_facts": labelled}
    if command == "score-engine":
        labelled = label_drawn(task)
        out = measure([str(task)], args.receval, code=ENGINE_SCORE)
        return {**out, "labelled_facts": labelled}
    raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
