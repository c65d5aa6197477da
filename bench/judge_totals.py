"""Benchmark: ``--estimator ppi``'s known totals of one probability judge on the engine path
(:func:`receval.engine.judge_totals.bundle_judge_totals`), this checkout against a baseline
source tree, in the same rounds.

The task is one ``bench/scale_sampled.py`` generated and labelled earlier (``--task PATH``, read
only: ``S`` runs × ``Q`` queries × ``D`` answers); its small files are copied and its run files
linked into a work bundle (:func:`scale_score.work_bundle`), with a judge scoring every
candidate fact (:func:`scale_score.write_judge`, 3·D per query).  Each side computes the totals
in a child process (``python -P -c``, ``PYTHONPATH`` = the side's tree; CPU s = user + system of
the child, :func:`harness.run_child`) and saves them; the script prints each side's CPU and
wall seconds and peak RSS, the ratio after ÷ before, and the largest relative difference
between the two sides' totals.  Before (the baseline, e.g. ``git archive 9f896d0``), the pool
sums were a self-join of the distinct (system, fact) pairs on the fact; after, on DuckDB, they
are :mod:`receval.engine.judge_stream`'s streamed sums.

    python bench/judge_totals.py --task /tmp/escore/t1e7 --queries 200 --depth 1000 \\
        --baseline /tmp/base
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from scale_score import work_bundle, write_judge

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ("score_drawn", "scored_drawn", "expected_score", "expected_mass", "scored_share",
          "judge_precision")  # fmt: skip
TOTALS = (
    "import sys; import numpy as np; from receval.bundle import Bundle; "
    "from receval.engine.judge_totals import bundle_judge_totals; "
    "t = bundle_judge_totals(Bundle(sys.argv[1])); "
    f"np.savez(sys.argv[2], **{{n: getattr(t, n) for n in {FIELDS!r}}})"
)


def one_side(tree: Path, bundle: Path, out: Path) -> harness.Child:
    """The totals of ``bundle`` by the receval of ``tree``, saved to ``out`` (.npz)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    # -P: the working directory (maybe a checkout) does not shadow ``tree``
    return harness.run_child([sys.executable, "-P", "-c", TOTALS, str(bundle), str(out)], env)


def largest_difference(a: Path, b: Path) -> float:
    """The largest relative difference between two sides' saved totals."""
    with np.load(a) as x, np.load(b) as y:
        out = 0.0
        for name in FIELDS:
            u, v = np.asarray(x[name], float), np.asarray(y[name], float)
            if u.shape != v.shape:
                return float("inf")
            scale = np.maximum(np.abs(v), 1e-300)
            out = max(out, float(np.max(np.abs(u - v) / scale, initial=0.0)))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--task", type=Path, required=True, help="a scale_sampled task")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--baseline", type=Path, required=True, help="the source tree before")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    args = harness.parse(parser, argv)
    work = Path(tempfile.mkdtemp(prefix="receval-judge-totals-", dir=args.tmp))
    try:
        bundle = work / "plain"
        work_bundle(args.task, bundle, 0, args.depth)
        judged = write_judge(bundle, args.queries, args.depth)
        rows = {"after": [], "before": []}
        for r in range(args.repeat):
            for side, tree in (("after", ROOT), ("before", args.baseline)):
                child = one_side(tree, bundle, work / f"{side}.npz")
                rows[side].append((child.wall, child.cpu, child.rss_mib))
                print(f"round {r + 1} {side}: {child.cpu:.1f} CPU s, {child.wall:.1f} s wall, "
                      f"{child.rss_mib:.0f} MiB", flush=True)  # fmt: skip
        figures = {"judge_rows": judged, "baseline": str(args.baseline), "repeat": args.repeat}
        for side, measured in rows.items():
            wall, cpu, rss = np.median(np.array(measured), axis=0)
            figures[side] = {"cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
                             "peak_rss_mib": round(rss)}  # fmt: skip
        figures["cpu_after_over_before"] = round(
            figures["after"]["cpu_s"] / figures["before"]["cpu_s"], 3
        )
        figures["max_relative_difference"] = largest_difference(
            work / "after.npz", work / "before.npz"
        )
        print(figures, flush=True)
        harness.store(args, "judge_totals", figures, argv, title=f"{args.task.name}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
