"""Precision curves without AdaStrat: budgets, planning at 2·10⁹ items, accuracy in simulation.

Run: ``python bench/curves.py [--seeds 5] [--scales 1,10,100]``

1. Budgets: queries and annotations of PAULA, LogStrat (β = 1.05 and β = γ) and the random
   baseline for the PPDB-36K sizes, next to AdaStrat Tables 1-2 / PAULA §5.2, plus the
   expected number of *distinct* items LogStrat and the random baseline ask for (their draws
   are with replacement).
2. Scale: wall time (``time.perf_counter``) and peak traced memory (``tracemalloc``) of planning
   PAULA and LogStrat for N = 2·10⁹ (both stages: head, then points/strata) and of building
   their budgets; peak RSS of the process at the end (``resource``).
3. Accuracy: each method run to completion on simulated lists — a PPDB-like list (a
   logistic density from 0.95 to 0.35 around rank 12K, Bernoulli labels, 35,615 items, and
   its AdaStrat §5 scaled variants) and a list with a bump at 15K-20K like PAULA Fig. 2 —
   reporting distinct labels used, the share of ranks where the truth lies in [lower, upper],
   the worst ratio max(p̃/p, p/p̃) beyond the head, and the flags raised.  With
   ``--ppdb``, also the real PPDB 2.0 human labels (``../shared/data/ppdb2-human``) ranked by a
   proxy score (the sum of two of the five ratings; the PPDB score itself is not in the data).
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

from receval.curves.base import Labels
from receval.curves.budget import curve_budget
from receval.curves.logstrat import LogStrat
from receval.curves.paula import Paula
from receval.curves.random_sampling import RandomSampling
from receval.curves.ranked import (
    ArrayRankedList,
    BumpShape,
    LogisticShape,
    ScaledSequenceShape,
    SimulatedRankedList,
)

PAPER_N = [35_615, 356_150, 3_561_500, 35_615_000]
PAPER = {
    "paula": [11_292, 19_092, 26_892, 34_692],
    "logstrat": [18_287, 35_631, 53_937, 72_867],
    "random": [24_745, 84_369, 284_834, 954_359],
}
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def budgets() -> None:
    print("1. Budgets (queries / annotations; paper = AdaStrat Tables 1-2)")
    header = (
        f"{'N':>11} {'method':<16} {'queries':>7} {'annotations':>11} {'paper':>8} {'distinct':>9}"
    )
    print(header)
    for i, size in enumerate(PAPER_N):
        rows = [
            ("paula", curve_budget("paula", size), PAPER["paula"][i]),
            ("logstrat β=1.05", curve_budget("logstrat", size), PAPER["logstrat"][i]),
            ("logstrat β=γ", curve_budget("logstrat", size, beta=None), PAPER["logstrat"][i]),
            ("random", curve_budget("random", size), PAPER["random"][i]),
        ]
        for name, b, paper in rows:
            distinct = b.get("expected_distinct", b["annotations"])
            print(
                f"{size:>11,} {name:<16} {b['queries']:>7} {b['annotations']:>11,} "
                f"{paper:>8,} {distinct:>9,.0f}"
            )
    print()


def plan_at_scale(size: int = 2_000_000_000) -> None:
    print(f"2. Planning for N = {size:,} (both stages; head labels faked as known)")
    for method in (Paula(), LogStrat(seed=1)):
        tracemalloc.start()
        start = time.perf_counter()
        head = method.plan(size, Labels.empty())
        known = Labels(head, np.ones(head.size))
        rest = method.plan(size, known)
        budget = method.budget(size)
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"   {method.name:<9} queries {budget['queries']:>4}  head {head.size:>6,}  "
            f"then {rest.size:>7,} ranks  time {elapsed * 1e3:7.1f} ms  "
            f"peak traced memory {peak / 2**20:6.1f} MiB"
        )
    print()


def ppdb_like(scale: int, seed: int) -> SimulatedRankedList:
    base = LogisticShape(0.95, 0.35, 12_000.0, 5_000.0)
    if scale == 1:
        return SimulatedRankedList(35_615, base, seed=seed)
    probs = base.cumulative(np.arange(1, 35_616.0)) - base.cumulative(np.arange(0, 35_615.0))
    return SimulatedRankedList(35_615 * scale, ScaledSequenceShape(probs, scale), seed=seed)


def bumped(seed: int) -> SimulatedRankedList:
    shape = BumpShape(LogisticShape(0.95, 0.35, 12_000.0, 5_000.0), 15_000.0, 20_000.0, 0.3)
    return SimulatedRankedList(35_615, shape, seed=seed)


def ppdb_proxy() -> ArrayRankedList | None:
    path = DATA / "ppdb2-human" / "ppdb-sample.tsv"
    if not path.exists():
        return None
    frame = pd.read_csv(path, sep="\t", header=None, quoting=3)
    ratings = frame[4].str.split(",", expand=True).astype(float)
    order = np.argsort(-(ratings[0] + ratings[1]).to_numpy(), kind="stable")
    return ArrayRankedList((frame[0] >= 3).to_numpy(np.float64)[order])


def accuracy(name: str, ranked: SimulatedRankedList | ArrayRankedList, seeds: int) -> None:
    size = ranked.size
    step = max(1, size // 200_000)  # evaluate on at most ~200K ranks (all ranks when small)
    ranks = np.unique(np.concatenate([np.arange(1, size + 1, step), [size]]))
    truth = ranked.true_precision(ranks)
    methods = [Paula()] + [LogStrat(seed=s) for s in range(seeds)]
    methods += [RandomSampling(seed=s) for s in range(seeds)]
    results: dict[str, list[tuple[int, float, float, float, tuple[str, ...]]]] = {}
    for method in methods:
        start = time.perf_counter()
        est = method.run(size, ranked.labels)
        elapsed = time.perf_counter() - start
        q, lower, upper = est.at(ranks)
        inside = float(np.mean((lower <= truth + 1e-12) & (truth <= upper + 1e-12)))
        beyond = (ranks > 3_492) & (truth > 0) & (q > 0)
        worst = float(np.max(np.maximum(q / truth, truth / q)[beyond])) if beyond.any() else 1.0
        results.setdefault(method.name, []).append(
            (est.annotations, inside, worst, elapsed, est.flags)
        )
    print(f"   {name} (N = {size:,})")
    for method_name, rows in results.items():
        ann = np.mean([r[0] for r in rows])
        inside = min(r[1] for r in rows)
        worst = max(r[2] for r in rows)
        secs = np.mean([r[3] for r in rows])
        flags = sorted({f.split(":")[0] for r in rows for f in r[4]})
        print(
            f"      {method_name:<9} runs {len(rows):>2}  labels {ann:>9,.0f}  "
            f"min share inside bounds {inside:6.4f}  worst ratio {worst:6.4f}  "
            f"run {secs:6.2f} s  flags: {'; '.join(flags) or '-'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--scales", default="1,10,100")
    parser.add_argument("--ppdb", action="store_true")
    args = parser.parse_args()
    budgets()
    plan_at_scale()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process after planning: {rss:.0f} MiB\n")
    print("3. Accuracy in simulation (PAULA deterministic; LogStrat/random over seeds)")
    for scale in [int(s) for s in args.scales.split(",")]:
        accuracy(f"PPDB-like x{scale}", ppdb_like(scale, seed=scale), args.seeds)
    accuracy("bump at 15K-20K (PAULA Fig. 2)", bumped(seed=7), args.seeds)
    if args.ppdb:
        proxy = ppdb_proxy()
        if proxy is None:
            print("   (PPDB data not found; skipped)")
        else:
            accuracy("PPDB 2.0 human labels, proxy ranking", proxy, args.seeds)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of this process: {rss:.0f} MiB")


if __name__ == "__main__":
    main()
