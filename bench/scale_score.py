"""Any size, scoring: CPU time and peak memory of ``receval score`` on the engine path with
exhaustive units (true recall θ̂·ν̂) and with anytime intervals, on a generated TREC-style
Parquet task (issue 35).

The task is one ``bench/scale_sampled.py`` generated and labelled earlier (``--task PATH``, read
only: ``S`` runs × ``Q`` queries × ``D`` answers, a uniform round and its labels).  Its small
files are copied and its run files linked into a work bundle, to which exhaustive units are
added: ``--units U`` queries, each annotated exhaustively with every correct fact of its
candidate list (``doc-q-k``, k < 3·D; correct as ``label_drawn`` labels: the first hex digit of
MD5(query ␟ answer) below 5), so pool coverage θ̂ is estimated from U units of ~0.31·3·D facts.

``--commands`` (each a subprocess under ``/usr/bin/time -v``: CPU s = user + system of all
threads, peak RSS of the largest process):

* ``score``: ``receval score TASK --out DIR --no-report --seed S`` without the units (the path
  as it stood: joint, bootstrap);
* ``score-units``: the same with the units (the engine path adds their facts to the membership
  join);
* ``score-anytime``: with the units and ``--intervals anytime`` (one more aggregation: the
  pool's popularity strata, :mod:`receval.engine.popularity`);
* ``summary`` / ``summary-popularity``: the runs' aggregates alone
  (:func:`receval.engine.score.summarise_for_scoring`), without and with the popularity strata:
  what the anytime intervals add in SQL, apart from the sequences themselves;
* ``judge-totals``: a judge scoring every candidate fact (``judge.tsv``, 3·D per query, the
  score a function of MD5(query ␟ answer)), then ``--estimator ppi``'s known totals in SQL
  (:func:`receval.engine.judge_totals.bundle_judge_totals`; not yet wired into ``score``): its
  self-join costs Σ_x |S(x)|² rows, S(x) the systems that output fact x;
* ``score-classes`` / ``score-classes-in-memory``: ``score`` (default path, then
  ``--in-memory``) with equivalence classes in the judgments (:func:`with_classes`: every
  correct judged fact of a query in one of three classes), what TAC-KBP tasks always have.
* ``judge-sums``: in one process, ppi's pool sums (three maps) streamed by slices of the
  numbered pool (:mod:`receval.engine.judge_stream`, the DuckDB path) and by the self-join
  (:func:`receval.engine.judge.pair_sums`, the Spark path), each's CPU seconds and their
  largest relative difference;
* ``judge-setup``: in one process, the CPU seconds of opening the engine judge (the judge table
  staged, the systems' distinct facts ``judge_pairs`` — of which ``_create_pairs`` —, the keys,
  the numbered pool), one pass of the pool sums and the audit's sums;
* ``score-ppi`` / ``score-ppi-memory``: the same judge table, then ``receval score TASK
  --estimator ppi --no-report`` by the default path (the engine path from 10⁷ Parquet rows;
  before it took ppi, the default path loaded the task in memory with a warning) and with
  ``--in-memory``; the judge audit (``judge.csv``) is written by both.
* ``score-ppi-anytime`` / ``score-ppi-anytime-memory``: the same with ``--intervals anytime``
  (the streams take the judge, calibrated as they go, as their control: on the engine path its
  maps' sums come from :mod:`receval.engine.judge_anytime`).

    python bench/scale_score.py --task /tmp/escore/t5e7 --systems 50 --queries 1000 --depth 1000
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from scale_sampled import measure

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SMALL = ("queries.tsv", "task.toml", "samples.tsv", "judgments.tsv")


def work_bundle(task: Path, root: Path, units: int, depth: int) -> int:
    """``root``: ``task``'s small files copied, its run files linked, and ``units`` exhaustive
    units (queries q0 … q{units-1}); returns the number of exhaustive facts written."""
    (root / "runs").mkdir(parents=True)
    for name in SMALL:
        if (task / name).is_file():
            shutil.copy(task / name, root / name)
    for path in sorted((task / "runs").glob("*.parquet")):
        (root / "runs" / path.name).symlink_to(path.resolve())
    if not units:
        return 0
    names = [f"q{q}" for q in range(units)]
    (root / "exhaustive_units.tsv").write_text(
        "unit\n" + "".join(f"{n}\n" for n in names), encoding="utf-8"
    )
    rows = ["unit\tquery_id\tanswer"]
    for q, name in enumerate(names):
        for k in range(3 * depth):
            answer = f"doc-{q}-{k}"
            if int(hashlib.md5(f"{name}\x1f{answer}".encode()).hexdigest()[0], 16) < 5:
                rows.append(f"{name}\t{name}\t{answer}")
    (root / "exhaustive.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return len(rows) - 1


def with_classes(root: Path, classes: int = 3) -> int:
    """``root``'s judgments with an ``equivalence_class`` on every correct annotation (by
    MD5(answer) modulo ``classes``, per query); returns the classed judgment rows."""
    lines = (root / "judgments.tsv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    label, answer = header.index("label"), header.index("answer")
    out = ["\t".join([*header, "equivalence_class"])]
    classed = 0
    for line in lines[1:]:
        cells = line.split("\t")
        name = ""
        if cells[label] == "C":
            name = f"e{int(hashlib.md5(cells[answer].encode()).hexdigest()[:4], 16) % classes}"
            classed += 1
        out.append("\t".join([*cells, name]))
    (root / "judgments.tsv").unlink()  # a copy (work_bundle): never the task's own file
    (root / "judgments.tsv").write_text("\n".join(out) + "\n", encoding="utf-8")
    return classed


def score_classes(args, work: Path, command: str) -> dict:
    """``score`` of the task with classes in its judgments (:func:`with_classes`), on the
    default path (``score-classes``) or in memory (``score-classes-in-memory``)."""
    bundle = work / "classes"
    if not bundle.is_dir():
        work_bundle(args.task, bundle, 0, args.depth)
        with_classes(bundle)
    extra = ["--in-memory"] if command.endswith("in-memory") else []
    out = measure(
        ["score", str(bundle), "--out", str(work / command), "--no-report",
         "--seed", str(args.seed), *extra],
        args.receval,
    )  # fmt: skip
    board = work / command / "leaderboard.csv"
    if board.is_file():
        out["leaderboard_sha256"] = hashlib.sha256(board.read_bytes()).hexdigest()
    run = work / command / "run.json"
    if run.is_file():
        out["engine_path"] = "engine_path" in run.read_text(encoding="utf-8")
    return out


JUDGE_TOTALS = (
    "import sys; from receval.bundle import Bundle; "
    "from receval.engine.judge_totals import bundle_judge_totals; "
    "t = bundle_judge_totals(Bundle(sys.argv[1])); print(t.judge_precision[:3])"
)


JUDGE_SUMS = """
import sys, time
import numpy as np
from receval.bundle import Bundle
from receval.engine.judge import open_engine_judge
from receval.engine.sampled_data import engine_sample_data, read_small_tables
from receval.engine.score import summarise_bundle
b = Bundle(sys.argv[1]); small = read_small_tables(b)
summary = summarise_bundle(b, small, 'duckdb')
t0 = time.process_time(); judge = open_engine_judge(b, small, summary, 'duckdb')
t1 = time.process_time(); data = engine_sample_data(small, summary, 'micro')
raw = judge.key_scores(); values = np.vstack([raw, raw ** 2, 1 - raw])
t2 = time.process_time(); got = judge.pool_sums(data, 'micro', values)
t3 = time.process_time(); judge.numbered = -1  # the self-join (Spark's path) from here
want = judge.pool_sums(data, 'micro', values)
t4 = time.process_time()
rel = max(float(np.max(np.abs(getattr(got, n) - getattr(want, n))
          / np.maximum(np.abs(getattr(want, n)), 1e-300))) for n in ('g1', 'pm', 'gs', 'ps', 'jp'))
print(f'open_judge_cpu_s {t1 - t0:.1f} streamed_cpu_s {t3 - t2:.1f} '
      f'self_join_cpu_s {t4 - t3:.1f} max_relative_difference {rel:.2e}')
"""

JUDGE_SETUP = """
import sys, time
import numpy as np
import receval.engine.judge as J
from receval.bundle import Bundle
from receval.engine.sampled_data import engine_sample_data, read_small_tables
from receval.engine.score import summarise_bundle
spent = {}
def timed(name, func):
    def run(*args, **kwargs):
        t = time.process_time(); out = func(*args, **kwargs)
        spent[name] = spent.get(name, 0.0) + time.process_time() - t
        return out
    return run
J._create_pairs = timed('create_pairs', J._create_pairs)
b = Bundle(sys.argv[1]); small = read_small_tables(b)
summary = summarise_bundle(b, small, 'duckdb')
t0 = time.process_time(); judge = J.open_engine_judge(b, small, summary, 'duckdb')
t1 = time.process_time(); data = engine_sample_data(small, summary, 'micro')
raw = judge.key_scores()
t2 = time.process_time(); judge.pool_sums(data, 'micro', np.vstack([raw]))
t3 = time.process_time(); judge.audit('micro'); t4 = time.process_time()
print(f'open_judge_cpu_s {t1 - t0:.1f} create_pairs_cpu_s {spent["create_pairs"]:.1f} '
      f'pool_sums_cpu_s {t3 - t2:.1f} audit_cpu_s {t4 - t3:.1f}')
"""

SUMMARY = (
    "import sys; from receval.bundle import Bundle; "
    "from receval.engine.sampled_data import read_small_tables; "
    "from receval.engine.score import summarise_for_scoring; "
    "b = Bundle(sys.argv[1]); small = read_small_tables(b); "
    "s, p = summarise_for_scoring(b, small, 'duckdb', sys.argv[2] == 'yes'); "
    "print(s.pool_size, None if p is None else (len(p[0]), p[1]))"
)


def write_judge(root: Path, queries: int, depth: int) -> int:
    """``judge.tsv``: a score for every candidate fact of every query; returns its rows."""
    lines = ["query_id\tanswer\tjudge_score"]
    for q in range(queries):
        for k in range(3 * depth):
            digest = hashlib.md5(f"q{q}\x1fdoc-{q}-{k}".encode()).hexdigest()
            lines.append(f"q{q}\tdoc-{q}-{k}\t{int(digest[:4], 16) / 65535:.4f}")
    (root / "judge.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines) - 1


def output_digests(out: Path) -> dict[str, str]:
    """SHA-256 of every CSV that ``score`` wrote to ``out`` and of its ``run.json`` without
    the lines that name the time, the command, the paths or the engine path's notes (what
    differs between two checkouts' runs of the same task): before and after compare."""
    digests = {}
    for path in sorted(out.glob("*.csv")):
        digests[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    run = out / "run.json"
    if run.is_file():
        skip = ("created", "command", "receval_version", "bundle", "out", "seconds", "path")
        lines = [ln for ln in run.read_text(encoding="utf-8").splitlines()
                 if not any(f'"{k}' in ln for k in skip)]  # fmt: skip
        digests["run.json (filtered)"] = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    return digests


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=1)
    parser.add_argument("--task", type=Path, required=True, help="a scale_sampled task")
    parser.add_argument("--systems", type=int, default=50)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--units", type=int, default=20)
    parser.add_argument("--commands", default="score,score-units,score-anytime")
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--receval", type=Path, default=ROOT, help="checkout to run")
    parser.add_argument("--commit", default=None, help="its commit, when not a git checkout")
    parser.add_argument("--label", default=None, help="what this run measures (before/after)")
    parser.add_argument("--keep", type=Path, default=None, help="copy score-ppi's outputs here")
    args = harness.parse(parser, argv)
    work = Path(tempfile.mkdtemp(prefix="receval-scale-score-", dir=args.tmp))
    rows = args.systems * args.queries * args.depth
    figures = {"rows": rows, "units": args.units, "runs": []}
    try:
        plain = work / "plain"
        work_bundle(args.task, plain, 0, args.depth)
        units = work / "units"
        figures["exhaustive_facts"] = work_bundle(args.task, units, args.units, args.depth)
        for command in args.commands.split(","):
            if command == "judge-totals":
                figures["judge_rows"] = write_judge(plain, args.queries, args.depth)
                out = measure([str(plain)], args.receval, code=JUDGE_TOTALS)
                figures["runs"].append({"what": command, **out})
                print(figures["runs"][-1], flush=True)
                continue
            if command in ("judge-sums", "judge-setup"):
                if not (plain / "judge.tsv").is_file():
                    figures["judge_rows"] = write_judge(plain, args.queries, args.depth)
                code = JUDGE_SUMS if command == "judge-sums" else JUDGE_SETUP
                out = measure([str(plain)], args.receval, code=code, keep_stdout=True)
                figures["runs"].append({"what": command, **out})
                print(figures["runs"][-1], flush=True)
                continue
            if command.startswith("score-classes"):
                figures["runs"].append({"what": command, **score_classes(args, work, command)})
                print(figures["runs"][-1], flush=True)
                continue
            if command in ("summary", "summary-popularity"):
                strata = "yes" if command == "summary-popularity" else "no"
                out = measure([str(units), strata], args.receval, code=SUMMARY)
                figures["runs"].append({"what": command, **out})
                print(figures["runs"][-1], flush=True)
                continue
            bundle = plain if command == "score" else units
            extra = ["--intervals", "anytime"] if command == "score-anytime" else []
            if command.startswith("score-ppi"):
                if not (plain / "judge.tsv").is_file():
                    figures["judge_rows"] = write_judge(plain, args.queries, args.depth)
                bundle = plain
                extra = ["--estimator", "ppi"]
                extra += ["--intervals", "anytime"] if "anytime" in command else []
                extra += ["--in-memory"] if command.endswith("-memory") else []
            out = measure(
                ["score", str(bundle), "--out", str(work / command), "--no-report",
                 "--seed", str(args.seed), *extra],
                args.receval,
            )  # fmt: skip
            if command.startswith("score-ppi"):
                out["outputs_sha256"] = output_digests(work / command)
                if args.keep is not None:
                    name = f"{args.label or 'run'}-{rows}-{command}"
                    shutil.copytree(work / command, args.keep / name, dirs_exist_ok=True)
            pool = work / command / "pool.csv"
            if pool.is_file():
                lines = pool.read_text(encoding="utf-8").splitlines()
                out["pool_coverage"] = next(ln for ln in lines if ln.startswith("pool_coverage"))
            figures["runs"].append({"what": command, **out})
            print(figures["runs"][-1], flush=True)
        if not args.no_store:
            harness.store_result(
                "scale_score", harness.command("scale_score", argv), args.seed, figures,
                title=f"{rows:,} rows, {args.commands}" + (f", {args.label}" if args.label else ""),
                receval=str(args.receval),
                commit=args.commit or harness.git_commit(args.receval),
            )  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
