"""Curves on a huge ranked list: `curve plan` / `curve estimate` on an unsorted Parquet run.

Generates a task bundle with one system whose run ``runs/S.parquet`` holds N items in random
order, with scores rounded to 3 decimals (so many ties) and a hidden truth (label probability
falling with the score).  Then, each command in a child process with its wall time and peak
RSS (``os.wait4``):

1. the first ``curve plan`` (``--method stratband``, the README walkthrough's method): validates
   and ranks the run in DuckDB (cached under ``TASK/.receval/ranked``) and plans the first batch;
2. the batch is labelled from the hidden truth (appended to judgments.tsv; not timed), and the
   next ``curve plan`` runs — repeated until the plan is empty (each a "later batch");
3. ``curve estimate`` (with ``--true-facts``: the hidden number of correct items);
4. the same for ``--method logstrat`` (its first plan reuses the ranked list).

Usage::

    python bench/curves_scale.py --items 1e6 --dir /work/tmp/curves-bench
    flock /work/notes/big.lock python bench/curves_scale.py --items 1e8 --memory-limit 6GB
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

SYSTEM = "S"
QUERIES = 1000
CHUNK = 2_000_000


def _mix(i: np.ndarray, key: int) -> np.ndarray:
    """Uniform [0, 1) numbers, a fixed function of (key, i) (a counter-based stream)."""
    with np.errstate(over="ignore"):
        z = i.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(key)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / 9007199254740992.0


def item_scores(i: np.ndarray) -> np.ndarray:
    """Item i's score: rounded to 3 decimals, so about N/1000 items share each score."""
    return np.round(_mix(i, 1), 3)


def item_truth(i: np.ndarray) -> np.ndarray:
    """Item i's hidden label: correct with probability 0.2 + 0.75·score²."""
    return (_mix(i, 2) < 0.2 + 0.75 * item_scores(i) ** 2).astype(np.int64)


def generate(root: Path, items: int, seed: int = 0) -> int:
    """Write the bundle; returns the number of correct items (the hidden T)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if root.exists():
        shutil.rmtree(root)
    (root / "runs").mkdir(parents=True)
    queries = [f"q{k:04d}" for k in range(QUERIES)]
    pd.DataFrame({"query_id": queries}).to_csv(root / "queries.tsv", sep="\t", index=False)
    pd.DataFrame(columns=["query_id", "answer", "label", "annotator"]).to_csv(
        root / "judgments.tsv", sep="\t", index=False
    )
    rng = np.random.default_rng(seed)
    order = rng.permutation(items)  # the file's row order: unsorted
    qnames = pa.array(queries)
    correct = 0
    schema = pa.schema(
        [("query_id", pa.string()), ("answer", pa.string()), ("score", pa.float64())]
    )
    with pq.ParquetWriter(root / "runs" / f"{SYSTEM}.parquet", schema) as writer:
        for start in range(0, items, CHUNK):
            i = order[start : start + CHUNK].astype(np.int64)
            answers = pa.array(np.char.add("a", i.astype(str)).astype(object))
            writer.write_table(
                pa.table(
                    {
                        "query_id": qnames.take(pa.array(i % QUERIES)),
                        "answer": answers,
                        "score": item_scores(i),
                    },
                    schema=schema,
                )
            )
            correct += int(item_truth(i).sum())
    return correct


def timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    """(seconds, peak RSS MiB, output) of ``cmd`` in a child process (``os.wait4``)."""
    child = harness.run_child(cmd, env=env)
    return child.wall, child.rss_mib, (child.stdout.strip() or child.stderr_tail)


def label_batch(root: Path) -> int:
    """The hidden truth plays the annotator: label the pending batch into judgments.tsv."""
    batch = pd.read_csv(
        root / "curve_to_annotate.tsv", sep="\t", dtype={"query_id": str, "answer": str}
    )
    if batch.empty:
        return 0
    i = batch["answer"].str.slice(1).astype(np.int64).to_numpy()
    labels = np.where(item_truth(i) == 1, "correct", "wrong")
    rows = pd.DataFrame(
        {
            "query_id": batch["query_id"],
            "answer": batch["answer"],
            "label": labels,
            "annotator": "a",
        }
    )
    rows.to_csv(root / "judgments.tsv", sep="\t", mode="a", header=False, index=False)
    return len(rows)


def curve_rounds(root: Path, method: str, true_facts: int, env: dict, out: Path) -> list[dict]:
    receval = [str(Path(sys.executable).with_name("receval"))]
    rows = []
    for step in range(20):
        cmd = [*receval, "curve", "plan", str(root), "--system", SYSTEM, "--method", method]
        seconds, rss, text = timed(cmd, env)
        labelled = label_batch(root)
        what = "first plan" if step == 0 else "later plan"
        rows.append(
            {"method": method, "step": what, "seconds": seconds, "MiB": rss, "items": labelled}
        )
        print(
            f"{method:9s} {what:11s} {seconds:8.1f} s {rss:8.0f} MiB  {labelled} items", flush=True
        )
        if not labelled:
            break
    cmd = [*receval, "curve", "estimate", str(root), "--system", SYSTEM, "--method", method]
    cmd += ["--true-facts", str(true_facts), "--out", str(out / f"{method}.csv")]
    seconds, rss, text = timed(cmd, env)
    rows.append({"method": method, "step": "estimate", "seconds": seconds, "MiB": rss, "items": 0})
    print(f"{method:9s} {'estimate':11s} {seconds:8.1f} s {rss:8.0f} MiB  {text.splitlines()[0]}")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, quick={"items": 1e5})
    parser.add_argument("--items", type=float, default=1e6)
    parser.add_argument("--dir", type=Path, default=Path("/work/tmp/curves-bench"))
    parser.add_argument("--memory-limit", default="6GB", help="DuckDB memory_limit")
    parser.add_argument(
        "--engine-rows",
        default=None,
        help="RECEVAL_CURVE_ENGINE_ROWS for the children (0: always rank in the engine; a huge "
        "number: the pandas path, for the before/after comparison)",
    )
    parser.add_argument("--methods", nargs="+", default=["stratband", "logstrat"])
    args = harness.parse(parser, argv)
    tee = harness.Tee()
    items = int(args.items)
    root = args.dir / f"task-{items}"
    start = time.perf_counter()
    true_facts = generate(root, items)
    size = (root / "runs" / f"{SYSTEM}.parquet").stat().st_size
    print(
        f"generated {items:,} items ({size / 2**20:.0f} MiB Parquet, {true_facts:,} correct) "
        f"in {time.perf_counter() - start:.0f} s",
        flush=True,
    )
    env = dict(os.environ)
    env["RECEVAL_DUCKDB_MEMORY_LIMIT"] = args.memory_limit
    if args.engine_rows is not None:
        env["RECEVAL_CURVE_ENGINE_ROWS"] = str(int(float(args.engine_rows)))
    results = []
    for method in args.methods:
        results += curve_rounds(root, method, true_facts, env, args.dir)
    frame = pd.DataFrame(results)
    frame.insert(0, "N", items)
    frame.to_csv(args.dir / f"curves_scale_{items}.csv", index=False)
    print(frame.to_string(index=False))
    harness.store(
        args,
        "curves_scale",
        {"rounds": harness.rows(frame)},
        argv,
        output=tee,
        title=f"N = {items:,}",
    )


if __name__ == "__main__":
    main()
