"""Benchmark: Dimm's extrapolated precision against treating precision as constant (Fig. 9).

Repeats the comparison of Fig. 9 of Dimm (2015) on fully labelled ranked lists: for a list with a
known precision-recall curve P(R), extrapolate from the point (R + d, P(R + d)) to recall R with
Dimm's model, X(R) − P(R), and with the "constant precision" method, P(R + d) − P(R), for
d = ±0.05, ±0.10, ±0.15 (d > 0 extrapolates down to a lower recall, as in the paper's figure).
Signs are kept: a positive error over-states precision at R.

Lists:

* simulated binormal: relevance scores N(μ, 1) for relevant and N(0, 1) for other items, N items,
  prevalence ρ in {0.01, 0.05, 0.25}, separation μ in {1, 1.5, 2, 3} (four "systems" per ρ);
* simulated on-model: lists whose relevant items sit exactly where X(R; ρ, β) puts them
  (ρ = 0.03, β in {5, 50, 500}), a check of the benchmark itself: errors must be ~1/(ρN);
* ParaBank-Eval (``../shared/data/parabank-eval``, read when present), ranked by −NLL:
  - per system (1..34; system 0 copies the reference and 35 is ParaNMT, both with sentinel NLL
    -2 / -1 and so no ranking): a system's list is every distinct (ref_id, candidate) whose sys_id
    list contains it; the universe is that list, so recall is relative to the correct candidates
    in the system's own list, the list reaches recall 1 and ρ = its share of correct candidates
    (Dimm's X(1) = ρ then holds by construction);
  - pooled: one list of every candidate with a real NLL (any system), recall relative to all
    correct candidates in the pool, ρ = the pool's share of correct candidates;
  - pool-relative recall per system (what a shared task would report) is summarised too: each
    system then reaches only a small recall and its precision is near the pool's prevalence.
  A candidate is correct when the mean of its annotators' human_score (0-100 semantic similarity)
  is >= THRESHOLD (default 70: clearly above the scale's midpoint, i.e. the annotators on average
  judge the meaning as largely preserved; 71% of candidates pass). A judgment with gm = 0
  ("nonsensical"), whose human_score is empty, counts as score 0. Thresholds 60 and 80 are run as
  a sensitivity check.

Ties in the ranking score (NLL has three decimals) are handled exactly: P(R) is the expected
precision when the items of a tie block come in random order (cumulative true positives are linear
within a block), so R need not fall on an item boundary. Wall time (time.perf_counter) and peak
traced memory (tracemalloc) are printed, with the throughput of the vectorised fit for the
bootstrap's 1000 replicates x 70 systems.

Usage: python bench/extrapolation.py [--size N] [--threshold T] [--seed S]
"""

from __future__ import annotations

import gzip
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

from receval.extrapolation import (
    DEFAULT_MAX_RECALL_DISTANCE,
    MAX_MEASURED,
    Refusal,
    backtest,
    extrapolated_precision,
    fit_beta,
    reference_precision,
    validity_floor,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "parabank-eval"
OFFSETS = (0.05, -0.05, 0.10, -0.10, 0.15, -0.15)
TARGETS = np.round(np.arange(0.05, 0.951, 0.05), 2)


# --------------------------------------------------------------------------- ranked lists


@dataclass(frozen=True)
class RankedCurve:
    """Cumulative counts at the ends of tie blocks of one fully labelled ranked list."""

    name: str
    retrieved: np.ndarray  # items retrieved at each block end, starting with 0
    relevant: np.ndarray  # relevant items among them, starting with 0

    @property
    def prevalence(self) -> float:
        return float(self.relevant[-1] / self.retrieved[-1])

    def precision_at(self, recall: np.ndarray) -> np.ndarray:
        """Expected precision at recall R (random order inside tie blocks); R in (0, 1]."""
        want = np.asarray(recall, dtype=np.float64) * self.relevant[-1]
        block = np.searchsorted(self.relevant, want, side="left")
        lo_tp, hi_tp = self.relevant[block - 1], self.relevant[block]
        lo_k, hi_k = self.retrieved[block - 1], self.retrieved[block]
        k = lo_k + (want - lo_tp) / (hi_tp - lo_tp) * (hi_k - lo_k)
        return want / k


def ranked_curve(name: str, score: np.ndarray, label: np.ndarray) -> RankedCurve:
    """The curve of items ranked by decreasing ``score`` (ties form blocks)."""
    order = np.argsort(-score, kind="stable")
    s, y = score[order], label[order].astype(np.float64)
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True])
    cum = np.cumsum(y)
    return RankedCurve(
        name, np.r_[0.0, ends + 1.0].astype(np.float64), np.r_[0.0, cum[ends]].astype(np.float64)
    )


def binormal_curves(rho: float, size: int, rng: np.random.Generator) -> list[RankedCurve]:
    curves = []
    for mu in (1.0, 1.5, 2.0, 3.0):
        label = rng.random(size) < rho
        score = rng.standard_normal(size) + mu * label
        curves.append(ranked_curve(f"mu={mu:g}", score, label))
    return curves


def on_model_curves(rho: float, size: int) -> list[RankedCurve]:
    """Lists whose j-th relevant item is at rank ceil(j / X(j/n; ρ, β)) (eq. 4: n R / X)."""
    n_rel = round(rho * size)
    rel_recall = np.arange(1, n_rel + 1) / n_rel
    curves = []
    for beta in (5.0, 50.0, 500.0):
        ranks = np.ceil(np.arange(1, n_rel + 1) / reference_precision(rel_recall, rho, beta) - 1e-9)
        label = np.zeros(int(ranks[-1]), dtype=bool)
        label[ranks.astype(np.int64) - 1] = True
        score = -np.arange(label.size, dtype=np.float64)
        curves.append(ranked_curve(f"beta={beta:g}", score, label))
    return curves


def load_parabank(threshold: float) -> pd.DataFrame | None:
    """One row per distinct (ref_id, candidate): systems, NLL, mean score, correct."""
    path = DATA / "candidates.tsv.gz"
    if not path.exists():
        return None
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        raw = pd.read_csv(fh, sep="\t", quoting=3, keep_default_na=False, na_values=[""])
    raw["score"] = raw["human_score"].fillna(0.0)  # gm = 0 ("nonsensical") has no score
    items = raw.groupby(["ref_id", "candidate"], sort=True).agg(
        systems=("sys_id", lambda s: frozenset(x for v in s for x in str(v).split())),
        nll=("NLL", "max"),  # sentinels -1 / -2 are below every real NLL (>= 0.077)
        score=("score", "mean"),
        judgments=("score", "size"),
    )
    items["correct"] = items["score"] >= threshold
    return items.reset_index()


def parabank_system_curves(items: pd.DataFrame) -> list[RankedCurve]:
    curves = []
    for system in range(1, 35):
        mine = items[items["systems"].map(lambda s, key=str(system): key in s)]
        assert (mine["nll"] >= 0).all()
        curves.append(
            ranked_curve(f"sys{system}", -mine["nll"].to_numpy(), mine["correct"].to_numpy())
        )
    return curves


# --------------------------------------------------------------------------- the experiment


@dataclass(frozen=True)
class Errors:
    group: str
    curve: str
    offset: float
    target: float
    dimm: float  # X(R) − P(R); NaN when refused
    constant: float  # P(R + d) − P(R)
    refusal: int


def figure9(group: str, curves: list[RankedCurve]) -> list[Errors]:
    rows: list[Errors] = []
    for curve in curves:
        rho = curve.prevalence
        for d in OFFSETS:
            source = np.round(TARGETS + d, 10)
            usable = (source > 0.0) & (source < 1.0)
            t, s = TARGETS[usable], source[usable]
            p_t, p_s = curve.precision_at(t), curve.precision_at(s)
            res = extrapolated_precision(p_s, s, rho, t)
            for i in range(t.size):
                rows.append(
                    Errors(
                        group,
                        curve.name,
                        d,
                        float(t[i]),
                        float(res.precision_at_target[i] - p_t[i]),
                        float(p_s[i] - p_t[i]),
                        int(res.refusal[i]),
                    )
                )
    return rows


def summary_table(frame: pd.DataFrame) -> pd.DataFrame:
    def stats(g: pd.DataFrame) -> pd.Series:
        ok = g[g["refusal"] == 0]
        return pd.Series(
            {
                "points": len(g),
                "refused": int((g["refusal"] != 0).sum()),
                "X_mean": ok["dimm"].mean(),
                "X_mae": ok["dimm"].abs().mean(),
                "X_rms": np.sqrt((ok["dimm"] ** 2).mean()),
                "const_mean": ok["constant"].mean(),
                "const_mae": ok["constant"].abs().mean(),
                "const_rms": np.sqrt((ok["constant"] ** 2).mean()),
                "X_closer": (ok["dimm"].abs() < ok["constant"].abs()).mean(),
            }
        )

    out = frame.groupby(["group", "offset"], sort=False).apply(stats, include_groups=False)
    out["points"] = out["points"].astype(int)
    out["refused"] = out["refused"].astype(int)
    return out


def figure9_table(frame: pd.DataFrame, offset: float) -> pd.DataFrame:
    """Rows R, per group: mean over lists of X − P and of const − P, with the range of X − P."""
    sub = frame[(frame["offset"] == offset) & (frame["refusal"] == 0)]
    g = sub.groupby(["group", "target"], sort=False)
    table = pd.DataFrame(
        {
            "lists": g["dimm"].size(),
            "X-P mean": g["dimm"].mean(),
            "X-P min": g["dimm"].min(),
            "X-P max": g["dimm"].max(),
            "const-P mean": g["constant"].mean(),
            "const-P min": g["constant"].min(),
            "const-P max": g["constant"].max(),
        }
    )
    return table


def backtest_table(group: str, curves: list[RankedCurve], anchor: float) -> dict[str, object]:
    """Backtest at ``anchor`` on each curve: deviations of X within ±0.15 and at ±0.1."""
    grid = np.round(np.arange(0.05, 0.951, 0.01), 2)
    within, at_minus, at_plus, refused = [], [], [], 0
    for curve in curves:
        try:
            bt = backtest(
                grid,
                curve.precision_at(grid),
                curve.prevalence,
                anchor_recall=anchor,
                distances=(-0.10, 0.10),
                window=0.15,
            )
        except ValueError:
            refused += 1
            continue
        within.append(bt.max_abs_deviation)
        at_minus.append(bt.deviation_at_distance[0])
        at_plus.append(bt.deviation_at_distance[1])
    return {
        "group": group,
        "anchor": anchor,
        "lists": len(curves),
        "refused": refused,
        "median max|X-P| within 0.15": float(np.median(within)) if within else np.nan,
        "worst max|X-P| within 0.15": float(np.max(within)) if within else np.nan,
        "mean X-P at anchor-0.10": float(np.mean(at_minus)) if at_minus else np.nan,
        "mean X-P at anchor+0.10": float(np.mean(at_plus)) if at_plus else np.nan,
    }


def pool_relative_note(items: pd.DataFrame) -> str:
    """Per-system curves with recall relative to the whole pool: what the model says about them."""
    pool = items[items["nll"] >= 0]
    rho = float(pool["correct"].mean())
    n_correct = float(pool["correct"].sum())
    reach, refused, total = [], 0, 0
    for curve in parabank_system_curves(items):
        # recall relative to the pool = own recall * own relevant / pool relevant
        scale = curve.relevant[-1] / n_correct
        reach.append(scale)
        own = np.round(np.arange(0.05, 0.951, 0.05), 2)
        p = curve.precision_at(own)
        refused += int(np.sum(fit_beta(p, own * scale, rho).refusal == Refusal.AT_OR_BELOW_FLOOR))
        total += own.size
    return (
        f"pool-relative recall: rho(pool) = {rho:.3f}; systems reach recall "
        f"{min(reach):.3f}..{max(reach):.3f} of the pool's correct candidates; "
        f"{refused}/{total} points of their curves are at or below the model's floor "
        f"(2rho/(1+rho+R(1-rho)) = {float(validity_floor(0.05, rho)):.3f} at R = 0.05) and refused"
    )


# --------------------------------------------------------------------------- main


def fmt(frame: pd.DataFrame) -> str:
    return frame.to_string(float_format=lambda v: f"{v:+.4f}" if abs(v) < 1 else f"{v:.3f}")


def throughput(rng: np.random.Generator) -> str:
    n = 1000 * 70
    rho = rng.uniform(0.005, 0.5, n)
    r = rng.uniform(0.05, 0.98, n)
    floor = validity_floor(r, rho)
    p = floor + (MAX_MEASURED - floor) * rng.uniform(0.001, 0.999, n)
    extrapolated_precision(p[:10], r[:10], rho[:10], 0.75)  # imports and warm-up
    times = [harness.timed(extrapolated_precision, p, r, rho, 0.75).wall for _ in range(5)]
    peak = harness.timed(extrapolated_precision, p, r, rho, 0.75, trace=True).peak
    return (
        f"fit + extrapolate {n} points (1000 replicates x 70 systems): best {min(times):.3f} s, "
        f"median {np.median(times):.3f} s over 5 runs; peak traced memory {peak / 2**20:.1f} MiB"
    )


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=20150513, quick={"size": 20_000})
    parser.add_argument("--size", type=int, default=100_000, help="items per simulated list")
    parser.add_argument("--threshold", type=float, default=70.0, help="ParaBank correct score")
    args = harness.parse(parser, argv)
    tee = harness.Tee()
    rng = np.random.default_rng(args.seed)
    pd.set_option("display.width", 200)

    def experiment() -> tuple[dict[str, list[RankedCurve]], pd.DataFrame | None]:
        groups: dict[str, list[RankedCurve]] = {}
        for rho in (0.01, 0.05, 0.25):
            groups[f"binormal rho={rho:g}"] = binormal_curves(rho, args.size, rng)
        groups["on-model rho=0.03"] = on_model_curves(0.03, args.size)
        items = load_parabank(args.threshold)
        if items is not None:
            groups["parabank per-system"] = parabank_system_curves(items)
            pool = items[items["nll"] >= 0]
            groups["parabank pooled"] = [
                ranked_curve("pool", -pool["nll"].to_numpy(), pool["correct"].to_numpy())
            ]
        return groups, items

    run = harness.timed(experiment, trace=True)
    (groups, items), elapsed, peak = run.value, run.wall, run.peak
    frame = pd.DataFrame([e for name, curves in groups.items() for e in figure9(name, curves)])

    print("# Dimm's extrapolated precision vs constant precision (Dimm 2015, Fig. 9)\n")
    print(f"simulated lists: {args.size} items each, seed {args.seed}")
    for name, curves in groups.items():
        rhos = [c.prevalence for c in curves]
        print(f"  {name}: {len(curves)} lists, rho {min(rhos):.3f}..{max(rhos):.3f}")
    if items is None:
        print(f"  (ParaBank data not found at {DATA}: skipped)")
    else:
        print(
            f"  ParaBank: {len(items)} distinct candidates, correct = mean human_score >= "
            f"{args.threshold:g} ({items['correct'].mean():.3f} of candidates)"
        )
    print("\nError of extrapolating from recall R + d to R; X = Dimm, const = P(R + d).")
    print("mean = signed mean (positive: over-states precision), mae = mean |error|,")
    print("X_closer = share of points where |X error| < |const error|; refused points excluded.\n")
    print(fmt(summary_table(frame)))
    print("\n## Fig. 9 as a table: d = +0.05 (extrapolating down from R + 0.05 to R)\n")
    print(fmt(figure9_table(frame, 0.05)))
    print("\n## Refusals by reason\n")
    reasons = frame[frame["refusal"] != 0].groupby(["group", "refusal"]).size()
    reasons.index = reasons.index.set_levels(
        [Refusal(int(v)).name for v in reasons.index.levels[1]], level=1
    )
    print(reasons.to_string() if len(reasons) else "none")

    print("\n## Backtest at anchor R = 0.75 (what a report shows beside the extrapolation)\n")
    bts = pd.DataFrame([backtest_table(n, c, 0.75) for n, c in groups.items()]).set_index("group")
    print(fmt(bts))

    if items is not None:
        print("\n## ParaBank: other choices\n")
        print(pool_relative_note(items))
        for thr in (60.0, 80.0):
            alt = load_parabank(thr)
            assert alt is not None
            alt_rows = figure9(f"per-system thr={thr:g}", parabank_system_curves(alt))
            alt_frame = pd.DataFrame(alt_rows)
            print(f"\nthreshold {thr:g} (correct share {alt['correct'].mean():.3f}):")
            print(fmt(summary_table(alt_frame)))

    print("\n## Cost\n")
    print(f"experiment: {elapsed:.2f} s wall, peak traced memory {peak / 2**20:.1f} MiB")
    print(throughput(rng))
    print(f"flag threshold in receval: recall distance > {DEFAULT_MAX_RECALL_DISTANCE:.2f}")
    figures = {
        "summary": harness.rows(summary_table(frame)),
        "figure9_d_plus_0.05": harness.rows(figure9_table(frame, 0.05)),
        "backtest_at_0.75": harness.rows(bts),
        "experiment_wall_s": round(elapsed, 2),
    }
    harness.store(args, "extrapolation", figures, argv, output=tee, title="Dimm extrapolation")


if __name__ == "__main__":
    main()
