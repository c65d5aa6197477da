"""Precision curves: budgets, planning at 2·10⁹ items, coverage and accuracy in simulation.

Run: ``python bench/curves.py [--seeds 3] [--scales 1,10,100] [--ppdb] [--parabank]``

0. StratBand against PAULA: labels side by side at the four sizes of AdaStrat Tables 1-2
   (ε = 0.03, Δ = 100), and StratBand's designed band half-width.

1. Budgets: queries and annotations of PAULA, LogStrat (β = 1.05 and β = γ) and the random
   baseline for the PPDB-36K sizes, next to AdaStrat Tables 1-2 / PAULA §5.2, plus the
   expected number of *distinct* items LogStrat and the random baseline ask for (their draws
   are with replacement).
2. Scale: wall time (``time.perf_counter``) and peak traced memory (``tracemalloc``) of planning
   PAULA, LogStrat, StratBand and AdaStrat's first steps for N = 2·10⁹ (head, then
   points/strata) and of building their budgets; peak RSS of the process at the end
   (``resource``).  The random baseline is not planned: its plan is Θ(√(N log N)) labels
   (~7.8M at 2·10⁹), which is its cost, not an artefact.
3. Accuracy: each method run to completion on simulated lists — a PPDB-like list (a
   logistic density from 0.95 to 0.35 around rank 12K, Bernoulli labels, 35,615 items, and
   its AdaStrat §5 scaled variants) and a list with a bump at 15K-20K like PAULA Fig. 2 —
   reporting each curve's kind, distinct labels used, the *smallest* share over seeds of ranks
   past the exact prefix where the truth lies in [lower, upper], the median band width, the
   worst ratio max(p̃/p, p/p̃) beyond the head, and the flags raised.  Also a noisy flat list
   and a low-precision list.  With ``--ppdb``, also the real PPDB 2.0 human labels
   (``../shared/data/ppdb2-human``) ranked by a proxy score (the sum of two of the five
   ratings; the PPDB score itself is not in the data); with ``--parabank`` the ParaBank-Eval
   judgments ranked by the model's NLL (ε = 0.1, Δ = 20: the list has 4,877 items).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from receval.curves.adastrat import AdaStrat
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
from receval.curves.stratband import StratBand

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

PAPER_N = [35_615, 356_150, 3_561_500, 35_615_000]
PAPER = {
    "paula": [11_292, 19_092, 26_892, 34_692],
    "logstrat": [18_287, 35_631, 53_937, 72_867],
    "random": [24_745, 84_369, 284_834, 954_359],
}
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _labels_for_halfwidth(size: int, target: float) -> tuple[int, int]:
    """Smallest labels per stratum n whose StratBand knot half-width is ≤ target; (n, labels)."""
    for n in range(2, 1_001):
        got = curve_budget("stratband", size, labels_per_stratum=n)
        if got["halfwidth"] <= target:
            return n, int(got["annotations"])
    raise ValueError("target half-width not reached")


def stratband_vs_paula() -> None:
    print("0. StratBand vs PAULA labels (ε = 0.03, Δ = 100; StratBand δ = 0.05)")
    print(
        "   (last columns: StratBand sized for LogStrat's promised half-width 0.025 = (β−1)p_min)"
    )
    print(
        f"{'N':>11} {'PAULA':>8} {'StratBand':>10} {'ratio':>6} {'band half-width':>16} "
        f"{'n for 0.025':>11} {'labels':>8} {'ratio':>6}"
    )
    for i, size in enumerate(PAPER_N):
        paula = curve_budget("paula", size)["annotations"]
        band = curve_budget("stratband", size)
        assert paula == PAPER["paula"][i]
        n, labels = _labels_for_halfwidth(size, 0.025)
        print(
            f"{size:>11,} {paula:>8,} {band['annotations']:>10,} "
            f"{band['annotations'] / paula:>6.3f} {band['halfwidth']:>16.4f} "
            f"{n:>11} {labels:>8,} {labels / paula:>6.3f}"
        )
    print()


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


def _plan_both(method, size: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """Both planning stages of ``method`` (head labels faked as correct) and its budget
    (AdaStrat's second stage is the query of p(N), its first adaptive round)."""
    head = method.plan(size, Labels.empty())
    rest = method.plan(size, Labels(head, np.ones(head.size)))
    return head, rest, method.budget(size)


def plan_at_scale(size: int = 2_000_000_000) -> None:
    print(f"2. Planning for N = {size:,} (both stages; head labels faked as known)")
    for method in (Paula(), LogStrat(seed=1), StratBand(seed=1)):
        run = harness.timed(_plan_both, method, size, trace=True)
        head, rest, budget = run.value
        print(
            f"   {method.name:<9} queries {budget['queries']:>4}  head {head.size:>6,}  "
            f"then {rest.size:>7,} ranks  time {run.wall * 1e3:7.1f} ms  "
            f"peak traced memory {run.peak / 2**20:6.1f} MiB"
        )
    run = harness.timed(_plan_both, AdaStrat(), size, trace=True)  # its first round only
    head, first, budget = run.value
    print(
        f"   adastrat  queries ≤{budget['queries']:>3}  head {head.size:>6,}  "
        f"then {first.size:>7,} ranks  time {run.wall * 1e3:7.1f} ms  "
        f"peak traced memory {run.peak / 2**20:6.1f} MiB  (first round only: adaptive)"
    )
    random = curve_budget("random", size)
    print(f"   random    not planned: {random['annotations']:,} labels (Θ(√(N log N)))")
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


def flat_noisy(seed: int) -> SimulatedRankedList:
    return SimulatedRankedList(100_000, LogisticShape(0.6, 0.55, 50_000.0, 25_000.0), seed=seed)


def low_precision(seed: int) -> SimulatedRankedList:
    return SimulatedRankedList(100_000, LogisticShape(0.2, 0.03, 33_000.0, 10_000.0), seed=seed)


def parabank() -> ArrayRankedList | None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "curves"))
    from real_lists import parabank_by_model_score

    labels = parabank_by_model_score()
    return None if labels is None else ArrayRankedList(labels)


def _methods(seeds: int, params: dict) -> list:
    methods: list = [Paula(**params)]
    for cls in (StratBand, LogStrat, AdaStrat, RandomSampling):
        methods += [cls(seed=s, **params) for s in range(seeds)]
    return methods


def accuracy(
    name: str, ranked: SimulatedRankedList | ArrayRankedList, seeds: int, **params
) -> None:
    size = ranked.size
    step = max(1, size // 200_000)  # evaluate on at most ~200K ranks (all ranks when small)
    ranks = np.unique(np.concatenate([np.arange(1, size + 1, step), [size]]))
    truth = ranked.true_precision(ranks)
    results: dict[str, list[tuple]] = {}
    for method in _methods(seeds, params):
        start = time.perf_counter()
        est = method.run(size, ranked.labels)
        elapsed = time.perf_counter() - start
        q, lower, upper = est.at(ranks)
        past = ranks > est.exact_prefix
        ok = (lower <= truth + 1e-12) & (truth <= upper + 1e-12)
        inside = float(np.mean(ok[past])) if past.any() else 1.0
        width = float(np.median((upper - lower)[past])) if past.any() else 0.0
        beyond = past & (truth > 0) & (q > 0)
        worst = float(np.max(np.maximum(q / truth, truth / q)[beyond])) if beyond.any() else 1.0
        centre = float(np.max(np.abs(q - truth)[past])) if past.any() else 0.0
        results.setdefault(method.name, []).append(
            (est.annotations, inside, worst, elapsed, est.flags, est.kind, width, centre)
        )
    print(f"   {name} (N = {size:,})")
    for method_name, rows in results.items():
        ann = np.mean([r[0] for r in rows])
        inside = min(r[1] for r in rows)
        worst = max(r[2] for r in rows)
        secs = np.mean([r[3] for r in rows])
        width = np.mean([r[6] for r in rows])
        centre = max(r[7] for r in rows)
        flags = sorted({f.split(":")[0] for r in rows for f in r[4]})
        print(
            f"      {method_name:<9} {rows[0][5]:<13} runs {len(rows):>2}  labels {ann:>9,.0f}  "
            f"min share inside {inside:6.4f}  median width {width:6.4f}  "
            f"worst |p̃-p| {centre:6.4f}  worst ratio {worst:6.4f}  "
            f"run {secs:6.2f} s  flags: {'; '.join(flags) or '-'}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, reps=3, reps_name="seeds", quick={"scales": "1,10"})
    parser.add_argument("--scales", default="1,10,100")
    parser.add_argument("--ppdb", action="store_true")
    parser.add_argument("--parabank", action="store_true")
    args = harness.parse(parser, argv)
    tee = harness.Tee()
    stratband_vs_paula()
    budgets()
    plan_at_scale()
    rss = harness.peak_rss_mib()
    print(f"peak RSS of this process after planning: {rss:.0f} MiB\n")
    print("3. Accuracy in simulation (PAULA deterministic; the others over seeds)")
    for scale in [int(s) for s in args.scales.split(",")]:
        accuracy(f"PPDB-like x{scale}", ppdb_like(scale, seed=scale), args.seeds)
    accuracy("bump at 15K-20K (PAULA Fig. 2)", bumped(seed=7), args.seeds)
    accuracy("flat and noisy, p ≈ 0.57", flat_noisy(seed=3), args.seeds)
    accuracy("low precision 0.2 → 0.03", low_precision(seed=4), args.seeds)
    if args.parabank:
        items = parabank()
        if items is None:
            print("   (ParaBank data not found; skipped)")
        else:
            accuracy("ParaBank-Eval by NLL", items, args.seeds, epsilon=0.1, window=20)
    if args.ppdb:
        proxy = ppdb_proxy()
        if proxy is None:
            print("   (PPDB data not found; skipped)")
        else:
            accuracy("PPDB 2.0 human labels, proxy ranking", proxy, args.seeds)
    rss = harness.peak_rss_mib()
    print(f"\npeak RSS of this process: {rss:.0f} MiB")
    figures = {"peak_rss_mib": round(rss), "seeds": args.seeds, "scales": args.scales}
    harness.store(args, "curves", figures, argv, output=tee, seed=f"0 … {args.seeds - 1}")


if __name__ == "__main__":
    main()
