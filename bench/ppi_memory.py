"""Peak memory of `score --estimator ppi` on a two-judge copy of data/kbp-sim (71 systems).

A copy of ``data/kbp-sim`` with a ``judge.tsv`` of two judges on every fact of ``truth.tsv``
(``strong``: the truth with 10 % flipped, ``weak``: 30 % flipped, each mapped to 0.1 / 0.9 plus
N(0, 0.05) noise, three decimals: continuous scores, hundreds of distinct values), scored by
``receval score --estimator ppi`` in a child process; printed: its peak resident memory (the
child's ``ru_maxrss``), CPU and wall time.

    PYTHONPATH=. python bench/ppi_memory.py

Where the memory went (a sampling profiler over the run, before the fix): the judge audit's
Krippendorff α (``judge_audit.interval_alpha``, per judge and system) called the package, which
builds an (items × values × values) coincidence array: RSS grew to 5.9 GB and the run failed
allocating 12.8 GiB for (7437, 480, 480) under a 12 GB cap, after ~17 of its 20 minutes in
that function.  The closed form (O(raters × items)) removes it; what is left is the PPI terms
(≈ 0.7 GB at ``ppi.terms``) and the bootstrap's replicate totals (≈ 1.0 GB peak).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

ROOT = Path(__file__).resolve().parents[1]


def two_judge_copy(dest: Path, seed: int) -> tuple[int, int]:
    """``data/kbp-sim`` copied to ``dest`` with the two judges (module docstring); returns the
    facts and the distinct scores."""
    shutil.copytree(ROOT / "data" / "kbp-sim", dest)
    truth = pd.read_csv(dest / "truth.tsv", sep="\t", dtype=str)
    correct = truth["label"].str.upper().eq("C").to_numpy()
    rng = np.random.default_rng(seed)
    parts = []
    for name, flip in (("strong", 0.1), ("weak", 0.3)):
        said = np.where(rng.random(correct.size) < flip, ~correct, correct).astype(float)
        score = np.clip(0.1 + 0.8 * said + rng.normal(0, 0.05, correct.size), 0, 1).round(3)
        parts.append(truth[["query_id", "answer"]].assign(judge_score=score, judge=name))
    table = pd.concat(parts, ignore_index=True)
    table.to_csv(dest / "judge.tsv", sep="\t", index=False)
    return len(truth), int(table["judge_score"].nunique())


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(harness.parser(__doc__, seed=0), argv)
    with tempfile.TemporaryDirectory() as tmp:
        facts, values = two_judge_copy(Path(tmp) / "kbp2", args.seed)
        command = [sys.executable, "-c", "from receval.cli import main; main()", "score",
                   str(Path(tmp) / "kbp2"), "--estimator", "ppi", "--out", str(Path(tmp) / "out")]  # fmt: skip
        child = harness.run_child(command)
    figures = {
        "systems": 71,
        "facts": facts,
        "distinct_judge_scores": values,
        "peak_rss_mib": round(child.rss_mib, 1),
        "cpu_seconds": round(child.cpu, 1),
        "wall_seconds": round(child.wall, 1),
    }
    print(figures)
    harness.store(args, "ppi_memory", figures, argv)


if __name__ == "__main__":
    main()
