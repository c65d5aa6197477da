"""AdaStrat at PPDB scale: queries, annotations, wall time and peak memory (AdaStrat §5).

Run: ``python bench/curves_adastrat.py [--seeds 3] [--scales 1,10,100,1000] [--replay]``

The list is PPDB-like: a fully labelled base of 35,615 items (the size of PPDB-36K) whose label
density falls from 0.95 to 0.32 (p(N) ≈ 0.52), and the paper's scaled variants built from it
(§5: running average with Δ = 100, each position repeated 10/100/1000 times, fresh Bernoulli
labels), up to 35,615,000 items.  (The real PPDB-36K ranking is not available to us: the
PPDB 2.0 human labels ship without the PPDB score, so the shape is synthetic.)

For each scale and QUERY estimator it prints K (queried points), the distinct labels used, the
paper's Table 1/2 numbers for AdaStrat, the annotation saving of the interval estimators
against the paper's Hoeffding sizes, the worst error max|log(p̃/p)| at 2,000 log-spaced ranks
and at every queried rank (the guarantee is log(β(1+ε)) = 0.0784), wall time
(``time.perf_counter``) and peak traced memory (``tracemalloc``) of one in-memory run, and the
process's peak RSS at the end.  ``--replay`` also times the CLI's way of running
(plan → label → plan …, each plan replaying the algorithm from the start) at every scale.
``--noise`` adds the audit's noisy-label scenarios (η = 0.1, p_min = 0.1, β = 1.25; precision
0.35 → 0.1 and 0.5 → 0.15, N = 100,000, one fixed flipped label per rank beyond the prefix):
the share of ranks where the truth lies in the band [lower, upper], the worst ratio of the
noise-corrected estimate to the truth against the promised β(1+ε), labels and flags.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

from receval.curves.adastrat import AdaStrat
from receval.curves.base import run_to_completion
from receval.curves.ranked import ArrayRankedList, LogisticShape, SimulatedRankedList

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

BASE_SIZE = 35_615
#: AdaStrat Tables 1 and 2 (queries, annotations) for PPDB-36K and its scaled variants.
PAPER = {1: (18, 14_612), 10: (20, 24_004), 100: (18, 23_707), 1000: (21, 28_477)}
ESTIMATORS = ("hoeffding", "clopper-pearson", "bernstein")


def ppdb_like_labels(seed: int = 2018) -> np.ndarray:
    """35,615 labels with density 0.32 + 0.63·(1 + i/3000)^(−0.7) (p(N) ≈ 0.52)."""
    i = np.arange(1, BASE_SIZE + 1)
    q = 0.32 + 0.63 * (1 + i / 3000) ** -0.7
    return (np.random.default_rng(seed).random(BASE_SIZE) < q).astype(np.float64)


def ranked_list(scale: int, base: np.ndarray) -> ArrayRankedList | SimulatedRankedList:
    if scale == 1:
        return ArrayRankedList(base)
    return SimulatedRankedList.scaled(base, scale=scale, window=100, seed=7)


def noise_scenarios(seeds: int) -> None:
    size, eta = 100_000, 0.1
    print(f"\nnoisy labels: η = {eta}, p_min = 0.1, β = 1.25, N = {size:,}")
    for top, bottom in ((0.35, 0.1), (0.5, 0.15)):
        lst = SimulatedRankedList(size, LogisticShape(top, bottom, size / 3, size / 10), seed=5)
        for seed in range(seeds):
            method = AdaStrat(eta=eta, beta=1.25, pmin=0.1, seed=seed)
            lt = method.constants.l_tilde
            flips = np.random.default_rng([7, seed]).random(size + 1) < eta
            flips[: lt + 1] = False

            def noisy(ranks: np.ndarray, flips=flips, lst=lst) -> np.ndarray:
                labels = lst.labels(ranks)
                return np.where(flips[ranks], 1.0 - labels, labels)

            curve = method.run(size, noisy)
            ranks = np.arange(lt + 1, size + 1)
            truth = lst.true_precision(ranks)
            value, lower, upper = curve.at(ranks)
            inside = np.mean((lower <= truth + 1e-12) & (truth <= upper + 1e-12))
            worst = np.max(np.maximum(value / truth, truth / value))
            flags = ",".join(sorted({f.split(":")[0] for f in curve.flags})) or "-"
            print(
                f"   p {top} → {bottom} seed {seed}: inside band {inside:.4f}  worst ratio "
                f"{worst:.3f} (promised {method.factor:.3f})  labels {curve.annotations:,}  "
                f"flags {flags}"
            )


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, reps=3, reps_name="seeds", quick={"scales": "1,10,100"})
    parser.add_argument("--scales", default="1,10,100,1000")
    parser.add_argument("--replay", action="store_true", help="also time plan/label rounds")
    parser.add_argument("--noise", action="store_true", help="the audit's η = 0.1 scenarios")
    args = harness.parse(parser, argv)
    tee, table = harness.Tee(), []
    scales = [int(s) for s in args.scales.split(",")]
    base = ppdb_like_labels()
    limit = math.log(1.05 * 1.03)
    print(f"AdaStrat, ε=0.03 Δ=100 δ=0.05 β=1.05 pmin=0.5; {args.seeds} seeds; limit {limit:.4f}")
    header = (
        f"{'N':>11} {'estimator':>15} {'K':>9} {'paper K':>7} {'annotations':>17} "
        f"{'paper':>7} {'saving':>7} {'max err':>8} {'wall s':>7} {'peak MB':>8}  flags"
    )
    print(header)
    print("-" * len(header))
    for scale in scales:
        lst = ranked_list(scale, base)
        size = lst.size
        grid = np.unique(np.geomspace(1, size, 2_000).astype(np.int64))
        truth_ranks = grid
        hoeffding_mean = None
        rows = []
        runs: dict[str, list[tuple]] = {}
        for estimator in ESTIMATORS:
            for seed in range(args.seeds):
                method = AdaStrat(estimator=estimator, seed=seed)
                run = harness.timed(method.run_with_trace, size, lst.labels, trace=True)
                curve, trace = run.value
                runs.setdefault(estimator, []).append((curve, trace, run.wall, run.peak))
                truth_ranks = np.union1d(truth_ranks, curve.queried)
        truth = dict(zip(truth_ranks.tolist(), lst.true_precision(truth_ranks), strict=True))
        for estimator, results in runs.items():
            ks = [r[1].queries for r in results]
            ann = [r[1].annotations for r in results]
            errs = []
            for curve, _trace, _wall, _peak in results:
                ranks = np.union1d(grid, curve.queried)
                p = np.array([truth[r] for r in ranks.tolist()])
                ok = p > 0
                errs.append(float(np.abs(np.log(curve.at(ranks[ok])[0] / p[ok])).max()))
            mean_ann = float(np.mean(ann))
            if estimator == "hoeffding":
                hoeffding_mean = mean_ann
            saving = 1 - mean_ann / hoeffding_mean if hoeffding_mean else 0.0
            flags = sorted({f.split(":")[0] for r in results for f in r[0].flags})
            table.append(
                {"N": size, "estimator": estimator, "K_min": min(ks), "K_max": max(ks)}
                | {"annotations_mean": mean_ann, "saving": saving, "max_log_error": max(errs)}
                | {"wall_s_max": max(r[2] for r in results), "flags": ",".join(flags)}
            )
            rows.append(
                f"{size:>11,} {estimator:>15} {min(ks):>4}-{max(ks):<4} {PAPER[scale][0]:>7} "
                f"{min(ann):>8,}-{max(ann):<8,} {PAPER[scale][1]:>7,} {saving:>7.1%} "
                f"{max(errs):>8.4f} {max(r[2] for r in results):>7.2f} "
                f"{max(r[3] for r in results) / 2**20:>8.1f}  {','.join(flags) or '-'}"
            )
        print("\n".join(rows))
        if args.replay:
            method = AdaStrat(seed=0)
            start = time.perf_counter()
            rounds = [0]

            def oracle(ranks: np.ndarray, _lst=lst, _rounds=rounds) -> np.ndarray:
                _rounds[0] += 1
                return _lst.labels(ranks)

            curve = run_to_completion(method, size, oracle)
            wall = time.perf_counter() - start
            print(
                f"{'':>11} plan/label replay (hoeffding, seed 0): {rounds[0]} rounds, "
                f"{curve.annotations:,} annotations, {wall:.2f} s"
            )
    if args.noise:
        noise_scenarios(args.seeds)
    rss = harness.peak_rss_mib()
    print(f"peak RSS of this process: {rss:.0f} MB")
    figures = {"runs": table, "guarantee_log_error": limit, "peak_rss_mib": round(rss)}
    harness.store(args, "curves_adastrat", figures, argv, output=tee, seed=f"0 … {args.seeds - 1}")


if __name__ == "__main__":
    main()
