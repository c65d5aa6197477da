"""Benchmark: ``receval import trec`` + official score against pytrec_eval on real-format files.

TREC runs as NIST distributes them are **tab-separated** (``301\\tQ0\\tFBIS3-10082\\t1\\t12.5\\ttag``),
qrels space-separated (``301 0 FBIS3-10082 1``); files edited by hand or written by other tools
carry runs of spaces, trailing whitespace and CRLF line ends.  This script writes a TREC-style
task of about ``--rows`` run lines (``--runs`` runs, depth 1000, the queries to match) in one of
three layouts:

* ``nist``: runs tab-separated, qrels space-separated (the default; how TREC 2003 Robust runs
  look);
* ``mixed``: runs with tabs and runs of spaces between fields, a trailing space and CRLF line
  ends, a comment line at the top;
* ``spaces``: single spaces everywhere (the synthetic files earlier figures were measured on).

Documents are chosen per query from a collection of 3000 by a noisy popularity score (Gumbel
top-k), so runs overlap as pooled runs do; qrels hold the top-100 pool of every run, labels from
a hidden per-document truth.  Files are written with Arrow's CSV writer, one run at a time.

Then ``--repeat`` interleaved rounds, each side as whole processes from the same text files
(receval byte-compiled first, as an installed package is):

* receval: ``receval import trec BUNDLE --qrels Q --runs ...`` then ``receval score BUNDLE
  --estimator official --no-report --quiet`` (start-up, parsing, validation, trec_eval's ranking,
  writing the bundle; loading it, the census and the diagnostics, writing the output folder);
* pytrec_eval: one process reading qrels and runs with ``str.split`` into dictionaries as its
  examples do, then ``RelevanceEvaluator`` with ``set_P``, ``set_recall``, ``set_F``.

It prints wall and CPU seconds (user + system of the child) and peak RSS per side and the median
ratios, and stores them in ``bench/results/trec.json`` (command, seed, git commit, date, figures).

Real files: ``--files DIR`` benchmarks the TREC files in ``DIR`` instead (the qrels file is the
one whose name starts with ``qrels``, every other file is a run: ``input.<tag>`` or
``input.<tag>.gz`` as NIST distributes them), e.g. the TREC 2003 Robust runs.  ``--keep DIR``
writes the generated files to ``DIR`` and reuses them when they are there (the 3·10⁷-line task
takes minutes to write).

``--baseline DIR`` also times the receval of the source tree ``DIR`` (e.g. ``git archive main |
tar -x -C DIR``) in the same rounds, and says whether its output files are the same bytes
(``run.json`` aside): before and after under the same machine load.

Usage: python bench/trec.py [--rows 1.5e6] [--layout nist|mixed|spaces] [--format tsv|parquet]
                           [--repeat 3] [--seed 0] [--files DIR | --keep DIR] [--baseline DIR]
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

RESULTS = Path(__file__).resolve().parent / "results" / "trec.json"
COLLECTION = 3000
DEPTH = 1000


def _relevant(query: np.ndarray, doc: np.ndarray) -> np.ndarray:
    """Hidden truth: document ``doc`` (0 = most popular) of ``query`` is relevant with
    probability 0.5 · (1 − doc/collection)², decided by a hash (the same for every run)."""
    h = (
        query.astype(np.uint64) * np.uint64(2654435761) + doc.astype(np.uint64) * np.uint64(40503)
    ) % np.uint64(1_000_003)
    return h.astype(np.float64) / 1_000_003.0 < 0.5 * (1.0 - doc / COLLECTION) ** 2


def _write_lines(path: Path, columns: dict, sep: str, layout: str) -> None:
    """Write ``columns`` as text lines with Arrow's CSV writer (C++), in ``layout``."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = pa.table(columns)
    options = pacsv.WriteOptions(include_header=False, delimiter=sep, quoting_style="none")
    pacsv.write_csv(table, str(path), options)
    if layout == "mixed":  # runs of spaces, a trailing space, CRLF, a comment line
        raw = path.read_bytes().replace(b"\tQ0\t", b"  Q0 \t").replace(b"\n", b" \r\n")
        path.write_bytes(b"# written by bench/trec.py\r\n" + raw)


def write_task(folder: Path, rows: int, *, runs: int, layout: str, seed: int):
    """Runs and qrels of about ``rows`` run lines; returns (qrels path, run paths)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    queries = max(1, rows // (runs * DEPTH))
    log_weight = -3.0 * np.arange(COLLECTION) / COLLECTION
    sep = " " if layout == "spaces" else "\t"
    folder.mkdir(parents=True)
    paths, pooled = [], []
    qid = np.repeat(np.arange(queries) + 301, DEPTH)
    rank = np.tile(np.arange(1, DEPTH + 1), queries)
    for s in range(runs):
        keys = rng.uniform(0.5, 2.0) * log_weight + rng.gumbel(size=(queries, COLLECTION))
        top = np.argsort(-keys, axis=1)[:, :DEPTH]
        score = np.round(np.take_along_axis(keys, top, axis=1).ravel(), 6)
        docno = pc.binary_join_element_wise(
            pa.array(qid.astype(str)), pa.array(top.ravel().astype(str)), "-"
        )
        columns = {
            "qid": qid.astype(str),
            "q0": np.full(qid.size, "Q0"),
            "docno": pc.binary_join_element_wise("D", docno, ""),
            "rank": rank,
            "score": score,
            "tag": np.full(qid.size, f"run{s:02d}"),
        }
        path = folder / f"input.run{s:02d}"
        _write_lines(path, columns, sep, layout)
        paths.append(path)
        keep = rank <= 100
        pooled.append((qid[keep] - 301) * COLLECTION + top.ravel()[keep])
        del keys, top
    pool = np.unique(np.concatenate(pooled))
    q, d = pool // COLLECTION, pool % COLLECTION
    qrels = folder / "qrels.txt"
    docno = [f"D{a + 301}-{b}" for a, b in zip(q, d, strict=True)]
    columns = {"qid": (q + 301).astype(str), "iter": np.zeros(q.size, int), "docno": docno}
    columns["rel"] = _relevant(q, d).astype(int)
    _write_lines(qrels, columns, " ", "spaces")
    return qrels, paths


def trec_files(folder: Path) -> tuple[Path, list[Path]]:
    """(qrels, runs) of a folder of TREC files: the one file whose name starts with ``qrels``
    and every other file (hidden ones left out), in name order."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    qrels = [p for p in files if p.name.startswith("qrels")]
    if len(qrels) != 1:
        raise SystemExit(f"{folder}: expected one qrels* file, found {len(qrels)}")
    return qrels[0], [p for p in files if p != qrels[0]]


def task_files(args, base: Path) -> tuple[Path, list[Path]]:
    """The benchmark's files: ``--files``, the ``--keep`` folder (written there once), or
    generated in ``base``."""
    if args.files:
        return trec_files(Path(args.files))
    folder = Path(args.keep) if args.keep else base / "trec"
    if args.keep and folder.exists():
        return trec_files(folder)
    return write_task(folder, int(args.rows), runs=args.runs, layout=args.layout, seed=args.seed)


def pytrec_eval_side(qrels: str, runs: list[str]) -> None:
    """pytrec_eval's set_P, set_recall, set_F per run and query, files read as its examples do."""
    import pytrec_eval

    judged: dict[str, dict[str, int]] = {}
    with open_file(qrels, "r") as fh:
        for line in fh:
            qid, _, doc, rel = line.split()
            judged.setdefault(qid, {})[doc] = int(rel)
    evaluator = pytrec_eval.RelevanceEvaluator(judged, {"set_P", "set_recall", "set_F"})
    for path in runs:
        run: dict[str, dict[str, float]] = {}
        with open_file(path, "r") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) == 6 and not fields[0].startswith("#"):
                    run.setdefault(fields[0], {})[fields[2]] = float(fields[4])
        evaluator.evaluate(run)


def open_file(path: Path | str, mode: str = "rb"):
    """A TREC file, gzipped (as NIST distributes runs) or not."""
    import gzip

    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    if gz:
        return gzip.open(path, mode.replace("b", "") + ("t" if "b" not in mode else ""))
    return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


def run_child(args: list[str], env: dict | None = None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MiB) of one child process (``os.wait4``)."""
    child = harness.run_child(args, env=env)
    return child.wall, child.cpu, child.rss_mib


def receval_side(base: Path, name: str, qrels: Path, runs: list[Path], fmt: str,
                 source: str | None = None) -> tuple[tuple, tuple, Path]:  # fmt: skip
    """``import trec`` then ``score --estimator official`` as two processes (the receval of
    ``source``, a source tree, when given); their measures and the output folder."""
    import os

    env = None if source is None else {**os.environ, "PYTHONPATH": source}
    # -P: the working directory (a checkout with its own receval) does not shadow ``source``
    receval = [sys.executable, *(["-P"] if source else []), "-m", "receval.cli"]
    bundle, out = base / f"bundle-{name}", base / f"out-{name}"
    imp = run_child([*receval, "import", "trec", str(bundle), "--qrels", str(qrels), "--format",
                     fmt] + [a for p in runs for a in ("--runs", str(p))], env)  # fmt: skip
    score = run_child([*receval, "score", str(bundle), "--estimator", "official", "--out",
                       str(out), "--no-report", "--quiet"], env)  # fmt: skip
    shutil.rmtree(bundle, ignore_errors=True)
    return imp, score, out


def same_outputs(a: Path, b: Path) -> bool:
    """Whether two output folders hold the same files with the same bytes (run.json aside: it
    records the run's own time and version)."""
    names = sorted(p.name for p in a.iterdir())
    if names != sorted(p.name for p in b.iterdir()):
        return False
    return all((a / n).read_bytes() == (b / n).read_bytes() for n in names if n != "run.json")


def one_round(base: Path, r: int, qrels: Path, runs: list[Path], fmt: str = "tsv",
              baseline: str | None = None) -> dict:  # fmt: skip
    """One round: receval (and the ``baseline`` source tree's receval), then pytrec_eval."""
    imp, score, out = receval_side(base, f"{r}", qrels, runs, fmt)
    sides = {"import": imp, "score": score}
    if baseline is not None:
        b_imp, b_score, b_out = receval_side(base, f"{r}-baseline", qrels, runs, fmt, baseline)
        sides |= {"baseline_import": b_imp, "baseline_score": b_score}
        sides["same_outputs"] = same_outputs(out, b_out)
        shutil.rmtree(b_out, ignore_errors=True)
    here = str(Path(__file__).resolve().parent)
    code = (f"import sys; sys.path.insert(0, {here!r}); import trec; "
            f"trec.pytrec_eval_side({str(qrels)!r}, {[str(p) for p in runs]!r})")  # fmt: skip
    sides["pytrec_eval"] = run_child([sys.executable, "-c", code])
    shutil.rmtree(out, ignore_errors=True)
    return sides


def byte_compile() -> None:
    """Byte-compile receval first, as ``pip install`` does (``bench/scale.py`` does the same):
    run from a worktree with ``PYTHONDONTWRITEBYTECODE`` every receval process would compile
    every module it imports (0.2 s of CPU for ``score``), which pytrec_eval, installed, does
    not."""
    import compileall

    import receval

    compileall.compile_dir(Path(receval.__file__).parent, quiet=1)


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=0)
    parser.add_argument("--rows", type=float, default=1.5e6)
    parser.add_argument("--runs", type=int, default=17)
    parser.add_argument("--layout", choices=("nist", "mixed", "spaces"), default="nist")
    parser.add_argument("--format", choices=("tsv", "parquet"), default="tsv",
                        help="the bundle's table format (import trec --format)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--files", help="benchmark the real TREC files of this folder")
    where.add_argument("--keep", help="write the generated files here (reused when present)")
    parser.add_argument("--baseline", help="also time the receval of this source tree (e.g. "
                        "`git archive` of main) in the same rounds")  # fmt: skip
    args = harness.parse(parser, argv)
    if args.baseline:
        import compileall

        compileall.compile_dir(Path(args.baseline) / "receval", quiet=1)
    if args.files:
        args.layout = f"files {Path(args.files).name}"
    byte_compile()
    base = Path(tempfile.mkdtemp(prefix="receval-trec-"))
    try:
        qrels, runs = task_files(args, base)
        lines = sum(1 for p in runs for _ in open_file(p))
        print(f"{len(runs)} runs ({args.layout}), {lines:,} run lines", flush=True)
        rounds = []
        for r in range(args.repeat):
            rounds.append(one_round(base, r, qrels, runs, args.format, args.baseline))
            x = rounds[-1]
            print(f"  round {r + 1}: import {x['import'][0]:.1f} s + score {x['score'][0]:.1f} s;"
                  f" pytrec_eval {x['pytrec_eval'][0]:.1f} s", flush=True)  # fmt: skip
        figures = summarise(rounds, lines, args)
        print(json.dumps(figures, indent=2))
        # one record per (rows, layout, format) and commit
        title = f"{lines:,} lines, {args.layout}, {args.format}, at {harness.git_commit()[:7]}"
        harness.store(args, "trec", figures, argv, title=title)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def summarise(rounds: list[dict], lines: int, args) -> dict:
    """Medians over the rounds and the ratios receval / pytrec_eval (wall and CPU)."""
    timed = [side for side in rounds[0] if side != "same_outputs"]
    med = {side: np.median(np.array([r[side] for r in rounds]), axis=0) for side in timed}
    figures = {"rows": lines, "layout": args.layout, "format": args.format, "runs": args.runs,
               "repeat": args.repeat}  # fmt: skip
    for side, (w, c, m) in med.items():
        figures[side] = {"wall_s": round(w, 2), "cpu_s": round(c, 2), "peak_rss_mib": round(m)}
    for prefix in ("", "baseline_") if args.baseline else ("",):
        for j, what in ((0, "wall"), (1, "cpu")):
            ratios = [(r[f"{prefix}import"][j] + r[f"{prefix}score"][j]) / r["pytrec_eval"][j]
                      for r in rounds]  # fmt: skip
            figures[f"{prefix}ratio_{what}"] = round(float(np.median(ratios)), 2)
    if args.baseline:
        figures["baseline"] = args.baseline
        figures["baseline_same_outputs"] = all(r["same_outputs"] for r in rounds)
    return figures


if __name__ == "__main__":
    main()
