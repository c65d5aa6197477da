"""Benchmark: a TREC-style synthetic task at 10⁶–10⁸ output rows, Parquet, end to end.

The generator (:func:`generate`) writes a bundle of ``--systems`` runs (teams of three), each
retrieving ``--depth`` documents for every one of ``--queries`` queries (rows = systems ·
queries · depth), as ``runs/<system>.parquet`` with ``score``; ``judgments.parquet`` holds qrels
for the top-``--pool-depth`` pool of every run (labels from a hidden per-document truth).  Each
system chooses its documents from a per-query collection of ``3 · depth`` documents by a noisy
score (Gumbel top-k), so systems overlap as pooled runs do; relevance falls with a document's
popularity.  Everything is vectorised and written one system at a time, so generating never
holds more than one run in memory.

Then, each in a child process whose own peak resident memory (``os.wait4``) is reported:

1. ``receval validate TASK``;
2. ``receval score TASK --estimator official``;
3. ``receval sample TASK --per-system 150`` (an annotation round; the drawn documents are then
   labelled from the hidden truth and appended to the judgments);
4. ``receval score TASK`` (joint, ``--bootstrap B``).

It prints seconds, peak MiB and peak bytes per output row for every step, and with several
``--rows`` values how time grows (the exponent of time ∝ rows^k between consecutive sizes).

``--versus-trec ROWS`` instead writes a TREC-format task of about ROWS lines (17 runs, depth
1000, as TREC 2003 Robust), times ``receval import trec`` + ``receval score --estimator
official`` against pytrec_eval computing the same set measures (P, recall, F over the whole run,
``set_P``/``set_recall``/``set_F``), each side as whole processes including start-up and the
parsing of the same text files, ``--repeat`` interleaved rounds, and prints the median ratio of
wall times and of CPU times (user + system: on a shared machine the wall time depends on the
load).  The import writes the default text bundle unless ``--format parquet``.

Usage: python bench/scale.py [--rows 1e6 1e7] [--bootstrap 1000] [--engine duckdb]
       python bench/scale.py --versus-trec 1.5e6 [--repeat 3] [--format tsv|parquet]
"""

from __future__ import annotations

import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness


def _shape(rows: int, systems: int) -> tuple[int, int]:
    """(queries, depth) with systems · queries · depth ≈ rows (depth ≤ 1000, queries ≤ 1000)."""
    per_system = max(rows // systems, 1)
    depth = int(min(1000, max(10, round(np.sqrt(per_system)))))
    queries = max(1, per_system // depth)
    if queries > 1000:
        queries = 1000
        depth = max(1, per_system // queries)
    return queries, depth


def _relevant(query: np.ndarray, doc: np.ndarray, collection: int) -> np.ndarray:
    """The hidden truth: document ``doc`` (0 = most popular) of ``query`` is relevant with
    probability 0.5 · (1 − doc/collection)², decided by a hash (the same for every system)."""
    h = (
        query.astype(np.uint64) * np.uint64(2654435761) + doc.astype(np.uint64) * np.uint64(40503)
    ) % np.uint64(1_000_003)
    u = h.astype(np.float64) / 1_000_003.0
    return u < 0.5 * (1.0 - doc / collection) ** 2


def generate(
    out: Path, *, systems: int, queries: int, depth: int, pool_depth: int = 20, seed: int = 0
) -> int:
    """Write the synthetic bundle to ``out``; return the number of output rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    collection = 3 * depth
    (out / "runs").mkdir(parents=True)
    (out / "task.toml").write_text(
        'name = "trec-synthetic"\n[matching]\ncasefold = false\n', encoding="utf-8"
    )
    qids = np.array([f"q{q:04d}" for q in range(queries)], dtype=object)
    pq.write_table(pa.table({"query_id": qids}), out / "queries.parquet")
    pooled = []
    # popular documents are found more often: log-weight falls linearly with the document index
    log_weight = -3.0 * np.arange(collection) / collection
    for s in range(systems):
        skill = rng.uniform(0.5, 2.0)
        # chunks of queries so that keys stay a few MB
        q_parts, d_parts, score_parts = [], [], []
        chunk = max(1, 2_000_000 // collection)
        for q0 in range(0, queries, chunk):
            q1 = min(queries, q0 + chunk)
            keys = skill * log_weight + rng.gumbel(size=(q1 - q0, collection))
            top = np.argpartition(-keys, depth - 1, axis=1)[:, :depth]
            score = np.take_along_axis(keys, top, axis=1)
            q_parts.append(np.repeat(np.arange(q0, q1), depth))
            d_parts.append(top.ravel())
            score_parts.append(score.ravel())
        q = np.concatenate(q_parts)
        d = np.concatenate(d_parts)
        score = np.concatenate(score_parts)
        answers = pa.compute.binary_join_element_wise(
            pa.array(qids[q]), pa.array(d.astype(str)), "-d"
        )
        table = pa.table(
            {
                "query_id": pa.array(qids[q]),
                "answer": answers,
                "score": score,
                "team": pa.array(np.full(len(q), f"team{s // 3:03d}", dtype=object)),
            }
        )
        pq.write_table(table, out / "runs" / f"run{s:03d}.parquet")
        # the pool: this run's top pool_depth per query
        rank = np.argsort(np.argsort(-score.reshape(-1, depth), axis=1), axis=1).ravel()
        keep = rank < pool_depth
        pooled.append(q[keep].astype(np.int64) * collection + d[keep])
    pool = np.unique(np.concatenate(pooled))
    pq_, pd_ = pool // collection, pool % collection
    label = np.where(_relevant(pq_, pd_, collection), "1", "0")
    answers = np.char.add(np.char.add(qids[pq_].astype(str), "-d"), pd_.astype(str))
    pq.write_table(
        pa.table({"query_id": qids[pq_], "answer": answers.astype(object), "label": label}),
        out / "judgments.parquet",
    )
    return systems * queries * depth


def label_round(task: Path, collection: int) -> int:
    """Label the drawn documents of ``to_annotate.tsv`` from the hidden truth; append them to
    the judgments.  Returns how many were labelled."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    todo = pd.read_csv(task / "to_annotate.tsv", sep="\t", dtype=str, keep_default_na=False)
    todo = todo[todo["kind"] == "fact"] if "kind" in todo.columns else todo
    q = todo["query_id"].str[1:].astype(np.int64).to_numpy()
    d = todo["answer"].str.rsplit("-d", n=1).str[1].astype(np.int64).to_numpy()
    label = np.where(_relevant(q, d, collection), "1", "0")
    old = pq.read_table(task / "judgments.parquet")
    new = pa.table(
        {
            "query_id": pa.array(todo["query_id"].to_numpy(object), pa.string()),
            "answer": pa.array(todo["answer"].to_numpy(object), pa.string()),
            "label": pa.array(label.astype(object), pa.string()),
        }
    )
    pq.write_table(
        pa.concat_tables([old.select(["query_id", "answer", "label"]), new]),
        task / "judgments.parquet",
    )
    return len(todo)


def run_child(args: list[str]) -> tuple[float, float, str]:
    """Run a command; return (wall seconds, its own peak RSS in bytes, stderr tail)."""
    wall, rss, _, tail = run_child_timed(args)
    return wall, rss, tail


def run_child_timed(args: list[str]) -> tuple[float, float, float, str]:
    """Run a command; return (wall seconds, its own peak RSS in bytes, its CPU seconds (user +
    system: on a shared machine the wall time depends on the load, this much less), stderr
    tail)."""
    child = harness.run_child(args)
    return child.wall, child.rss_mib * 2**20, child.cpu, child.stderr_tail


def pipeline(task: Path, rows: int, *, bootstrap: int, engine: str, workdir: Path) -> list[tuple]:
    receval = [sys.executable, "-m", "receval.cli"]
    steps = [
        ("validate", [*receval, "validate", str(task)]),
        (
            "score official",
            [
                *receval,
                "score",
                str(task),
                "--estimator",
                "official",
                "--out",
                str(workdir / "official"),
                "--quiet",
            ],
        ),
        ("sample 150", [*receval, "sample", str(task), "--per-system", "150", "--seed", "1"]),
        (
            "score joint",
            [
                *receval,
                "score",
                str(task),
                "--bootstrap",
                str(bootstrap),
                "--seed",
                "1",
                "--out",
                str(workdir / "joint"),
                "--quiet",
            ],
        ),
    ]
    if engine != "duckdb":
        for _, args in steps:
            if args[3] == "score":
                args += ["--engine", engine]
    results = []
    for name, args in steps:
        if name == "score joint":
            label_round(task, collection=_collection_of(task))
        wall, rss, cpu, _ = run_child_timed(args)
        results.append((name, wall, rss, rss / rows))
        print(
            f"  {name:<16} {wall:8.1f} s  {rss / 2**20:8.0f} MiB  {rss / rows:8.0f} B/row  "
            f"(cpu {cpu:.1f} s)",
            flush=True,
        )
    return results


def _collection_of(task: Path) -> int:
    return int((task / ".collection").read_text())


def scale(
    rows_list: list[int],
    systems: int,
    bootstrap: int,
    engine: str,
    keep: Path | None,
    generate_only: bool = False,
) -> list[dict]:
    base, table = Path(tempfile.mkdtemp(prefix="receval-scale-")), []
    try:
        timings: dict[str, list[tuple[int, float]]] = {}
        for rows in rows_list:
            queries, depth = _shape(rows, systems)
            task = (keep or base) / f"task-{rows}"
            original = task / ".judgments-generated.parquet"
            if original.is_file():  # a kept task: reuse it, with its generated qrels only
                n = systems * queries * depth
                shutil.copyfile(original, task / "judgments.parquet")
                (task / "samples.tsv").unlink(missing_ok=True)
                (task / "to_annotate.tsv").unlink(missing_ok=True)
                print(f"{n:,} rows ({systems} runs × {queries} queries × depth {depth}); reused")
            else:
                start = time.perf_counter()
                n = generate(task, systems=systems, queries=queries, depth=depth)
                (task / ".collection").write_text(str(3 * depth))
                shutil.copyfile(task / "judgments.parquet", original)
                print(
                    f"{n:,} rows ({systems} runs × {queries} queries × depth {depth}); "
                    f"generated in {time.perf_counter() - start:.1f} s",
                    flush=True,
                )
            if generate_only:
                continue
            for name, wall, rss, per_row in pipeline(
                task, n, bootstrap=bootstrap, engine=engine, workdir=base / f"out-{rows}"
            ):
                timings.setdefault(name, []).append((n, wall))
                table.append(
                    {"rows": n, "step": name, "wall_s": round(wall, 1)}
                    | {"peak_rss_mib": round(rss / 2**20), "bytes_per_row": round(per_row)}
                )
        if len(rows_list) > 1:
            print("time growth (time ∝ rows^k between consecutive sizes):")
            for name, points in timings.items():
                ks = [
                    np.log(t1 / t0) / np.log(n1 / n0)
                    for (n0, t0), (n1, t1) in itertools.pairwise(points)
                ]
                print(f"  {name:<16} k = " + ", ".join(f"{k:.2f}" for k in ks))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return table


def write_trec(folder: Path, rows: int, *, runs: int = 17, depth: int = 1000, seed: int = 0):
    """TREC-format runs (``qid Q0 docno rank score tag``) and qrels (pool depth 100, labels from
    the hidden truth) with about ``rows`` run lines; returns (qrels path, run paths)."""
    rng = np.random.default_rng(seed)
    queries = max(1, rows // (runs * depth))
    collection = 3 * depth
    log_weight = -3.0 * np.arange(collection) / collection
    folder.mkdir(parents=True)
    paths, pooled = [], []
    for s in range(runs):
        keys = rng.uniform(0.5, 2.0) * log_weight + rng.gumbel(size=(queries, collection))
        top = np.argsort(-keys, axis=1)[:, :depth]
        score = np.take_along_axis(keys, top, axis=1)
        q = np.repeat(np.arange(queries), depth)
        rank = np.tile(np.arange(1, depth + 1), queries)
        lines = [
            f"{301 + qi} Q0 D{301 + qi}-{d} {r} {sc:.6f} run{s:02d}"
            for qi, d, r, sc in zip(q, top.ravel(), rank, score.ravel(), strict=True)
        ]
        path = folder / f"run{s:02d}.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(path)
        keep = rank <= 100
        pooled.append(q[keep] * collection + top.ravel()[keep])
    pool = np.unique(np.concatenate(pooled))
    pq_, pd_ = pool // collection, pool % collection
    rel = _relevant(pq_, pd_, collection).astype(int)
    qrels = folder / "qrels.txt"
    qrels.write_text(
        "".join(f"{301 + a} 0 D{301 + a}-{b} {r}\n" for a, b, r in zip(pq_, pd_, rel, strict=True)),
        encoding="utf-8",
    )
    return qrels, paths


def _pytrec_eval(qrels: Path, runs: list[Path]) -> dict:
    """pytrec_eval's set_P, set_recall, set_F per run and query, files read as usual."""
    import pytrec_eval

    judged: dict[str, dict[str, int]] = {}
    with open(qrels, encoding="utf-8") as fh:
        for line in fh:
            qid, _, doc, rel = line.split()
            judged.setdefault(qid, {})[doc] = int(rel)
    evaluator = pytrec_eval.RelevanceEvaluator(judged, {"set_P", "set_recall", "set_F"})
    results = {}
    for path in runs:
        run: dict[str, dict[str, float]] = {}
        tag = None
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                qid, _, doc, _, score, tag = line.split()
                run.setdefault(qid, {})[doc] = float(score)
        results[tag] = evaluator.evaluate(run)
    return results


def _byte_compile() -> None:
    """Byte-compile receval first, as ``pip install`` does: an editable install run with
    ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module in every process."""
    import compileall

    import receval

    compileall.compile_dir(Path(receval.__file__).parent, quiet=1)


def versus_trec(rows: int, repeat: int = 3, bundle_format: str = "tsv") -> dict:
    """``receval import trec`` + ``score --estimator official`` against pytrec_eval, ``repeat``
    rounds (the three commands interleaved, so both sides see the same machine load); prints
    every round and the medians."""
    base = Path(tempfile.mkdtemp(prefix="receval-trec-"))
    try:
        qrels, runs = write_trec(base / "trec", rows)
        lines = sum(1 for p in runs for _ in open(p, encoding="utf-8"))
        print(
            f"TREC-style task: {len(runs)} runs, {lines:,} run lines, qrels "
            f"{qrels.stat().st_size / 1e6:.1f} MB\n"
            "Each side is timed as whole processes (wall time, peak RSS), from the same text files:\n"
            f"  receval: `receval import trec --format {bundle_format}` (Python start-up and imports, "
            "parsing, validation, trec_eval ranking, writing the bundle) + "
            "`receval score --estimator official --quiet` (start-up, loading the bundle, the "
            "official census, the pooling-bias diagnostic, writing the output folder and the "
            "HTML report; also timed with --no-report); receval byte-compiled first, as pip "
            "installs it;\n"
            "  pytrec_eval: one process (Python start-up, import, parsing qrels and runs in "
            "Python as its examples do, RelevanceEvaluator with set_P, set_recall, set_F, "
            "evaluate per run).",
            flush=True,
        )
        _byte_compile()
        receval = [sys.executable, "-m", "receval.cli"]
        code = (
            f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import scale; "
            f"scale._pytrec_eval({str(qrels)!r}, {[str(p) for p in runs]!r})"
        )
        rounds = []
        for r in range(repeat):
            bundle, out = base / f"bundle{r}", base / f"out{r}"
            t_import, rss_import, c_import, _ = run_child_timed(
                [*receval, "import", "trec", str(bundle), "--qrels", str(qrels)]
                + ["--format", bundle_format]
                + [arg for p in runs for arg in ("--runs", str(p))]
            )
            score = ["score", str(bundle), "--estimator", "official", "--out", str(out)]
            t_score, rss_score, c_score, _ = run_child_timed([*receval, *score, "--quiet"])
            shutil.rmtree(out, ignore_errors=True)
            t_bare, _, c_bare, _ = run_child_timed([*receval, *score, "--quiet", "--no-report"])
            t_trec, rss_trec, c_trec, _ = run_child_timed([sys.executable, "-c", code])
            shutil.rmtree(bundle, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            walls = (t_import, t_score, t_bare, t_trec, rss_import, rss_score, rss_trec)
            rounds.append((*walls, c_import, c_score, c_bare, c_trec))
            print(
                f"  round {r + 1}: import {t_import:.1f} s + score {t_score:.1f} s "
                f"({t_bare:.1f} s with --no-report); pytrec_eval {t_trec:.1f} s; "
                f"ratio {(t_import + t_score) / t_trec:.1f}x "
                f"({(t_import + t_bare) / t_trec:.1f}x); CPU seconds {c_import:.1f} + "
                f"{c_score:.1f} ({c_bare:.1f}) vs {c_trec:.1f}: "
                f"{(c_import + c_score) / c_trec:.1f}x ({(c_import + c_bare) / c_trec:.1f}x)",
                flush=True,
            )
        med = np.median(np.array(rounds), axis=0)
        t_import, t_score, t_bare, t_trec, rss_import, rss_score, rss_trec = med[:7]
        c_import, c_score, c_bare, c_trec = med[7:]
        print(f"medians of {repeat} round(s) (wall, CPU = user + system, peak RSS):")
        print(
            f"  receval import trec        {t_import:7.1f} s  {c_import:5.2f} s CPU  "
            f"{rss_import / 2**20:7.0f} MiB"
        )
        print(
            f"  receval score --official   {t_score:7.1f} s  {c_score:5.2f} s CPU  "
            f"{rss_score / 2**20:7.0f} MiB"
        )
        print(f"    the same, --no-report    {t_bare:7.1f} s  {c_bare:5.2f} s CPU")
        print(
            f"  pytrec_eval (set_P/R/F)    {t_trec:7.1f} s  {c_trec:5.2f} s CPU  "
            f"{rss_trec / 2**20:7.0f} MiB"
        )
        figures = {"rounds": repeat, "import_s": t_import, "import_cpu_s": c_import}
        figures |= {"score_s": t_score, "score_cpu_s": c_score, "pytrec_eval_cpu_s": c_trec}
        figures |= {
            "import_peak_rss_mib": rss_import / 2**20,
            "score_peak_rss_mib": rss_score / 2**20,
        }
        figures |= {"pytrec_eval_peak_rss_mib": rss_trec / 2**20}
        for label, col in (("with report.html", 1), ("--no-report", 2)):
            ratios = [(row[0] + row[col]) / row[3] for row in rounds]
            cpu = [(row[7] + row[7 + col]) / row[10] for row in rounds]
            figures[f"cpu_ratio_{label}"] = float(np.median(cpu))
            print(
                f"  ratio receval / pytrec_eval, {label}: {float(np.median(ratios)):.1f}x wall, "
                f"{float(np.median(cpu)):.1f}x CPU (medians of the rounds' ratios; goal <= 3x)"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return {k: round(float(v), 2) if not isinstance(v, int) else v for k, v in figures.items()}


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, quick={"rows": [1e6], "bootstrap": 200})
    parser.add_argument("--rows", type=float, nargs="+", default=[1e6, 1e7])
    parser.add_argument("--systems", type=int, default=100)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--engine", default="duckdb")
    parser.add_argument(
        "--keep", type=Path, help="write the tasks here and keep them (reused when present)"
    )
    parser.add_argument("--versus-trec", type=float, help="rows of the TREC comparison task")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the TREC comparison")
    parser.add_argument(
        "--format",
        default="tsv",
        choices=("tsv", "parquet"),
        help="bundle format of the TREC comparison's import (default: tsv, what users get)",
    )
    parser.add_argument(
        "--generate-only", action="store_true", help="only write the tasks (with --keep)"
    )
    args = harness.parse(parser, argv)
    tee = harness.Tee()
    if args.versus_trec:
        figures = versus_trec(int(args.versus_trec), args.repeat, args.format)
        title = f"import trec + official score vs pytrec_eval, {args.versus_trec:g} lines"
    else:
        rows = [int(r) for r in args.rows]
        table = scale(
            rows, args.systems, args.bootstrap, args.engine, args.keep, args.generate_only
        )
        figures = {"steps": table}
        title = "validate, score, sample at " + ", ".join(f"{r:g}" for r in rows) + " rows"
    harness.store(args, "scale", figures, argv, output=tee, title=title)


if __name__ == "__main__":
    main()
