"""Benchmark: joint vs simple estimators in Chaganty et al.'s simulation design, and the adaptive planner.

Part 1 — interval widths (Chaganty et al. 2017, §6.1; notes §2 "Bias/variance simulation").
One simulated world of ``--systems`` systems (default 40, as the paper's "top 40") and 317
queries; the annotation campaign is redrawn ``--repetitions`` times.  Each campaign spends
``--labels`` labels (default 5,000) split evenly over the systems and the exhaustive annotation,
as the paper's code does (``5000 / (#systems + 1)`` per source): every system gets that many
uniform draws with replacement, and about as many true facts are found by exhaustively
annotating uniformly drawn documents.  Per campaign the benchmark computes

* the **joint** estimators (receval's default): joint precision with balance-heuristic weights
  w_ij ∝ n_j (unbiased), true recall θ̂·ν̂ (pool coverage from the documents × reweighted pooled
  recall; consistent);
* the **simple** estimators: each system's own sample for precision (unbiased), the exhaustively
  found facts alone for recall (consistent);

and two kinds of 90% interval width, both printed:

* **spread across repetitions** (what the paper reports): for each system the 5th–95th
  percentile of its R estimates; median over systems.  The acceptance criterion (joint/simple
  width ratio ≤ 0.6 for precision and for recall) applies to this one;
* **bootstrap** (what receval reports to a user with one campaign): percentile 90% intervals from
  ``--bootstrap`` replicates shared by all systems, in every repetition; median over systems and
  repetitions.  Their coverage of the true values is printed too.

Part 2 — the adaptive planner (§6.2; notes §1 "Adaptive sample size").  The systems of the same
world are added one at a time in a random order (``--trials`` orders).  Each new system gets the
smallest uniform sample that :func:`receval.planning.adaptive_sample_sizes` finds for the target
"variance of 500 draws for a lone system" (worst case p = 0.5: 90% half-width z·√(0.25/500)),
reusing every label collected for earlier systems; the sample is drawn, labelled from the truth
and added before the next system is planned.  The planner also holds pooled recall's bound to the
same target (no exhaustive documents are drawn in this part, so pooled rather than true recall).
Draws per system are capped at 500, the paper's bisection range.  Totals (draws, and distinct
facts that needed a new label) are compared with the simple design's 500 × systems draws
(criterion: ≤ 40%).

Usage: python bench/estimators.py [--systems 40] [--labels 5000] [--repetitions 200]
       [--bootstrap 200] [--trials 3] [--seed 2017]
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.special import ndtri

from receval.design import draw_precision_samples
from receval.estimators.base import terms_and_statistic
from receval.estimators.bootstrap import (
    confidence_interval,
    draw_replicates,
    replicate_totals,
)
from receval.estimators.sample_data import build_sample_data
from receval.formats.bundle import write_bundle
from receval.planning import adaptive_sample_sizes
from receval.scoring import bootstrap_stages
from receval.simulation import SimulationConfig, World, simulate_world
from receval.task import Task, load_task, with_annotation

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

LEVEL = 0.9
METRICS = ("precision", "recall", "f1")
ESTIMATORS = ("simple", "joint")
#: Chaganty et al. 2017 (rebuttal numbers; notes §2): median 90% width, simple and joint.
PAPER_WIDTHS = {"precision": (0.135, 0.063), "recall": (0.141, 0.081), "f1": (0.118, 0.072)}
PAPER_ADAPTIVE = 7570  # mean draws after 40 systems (notes §2, from the trajectory files)
RATIO_TARGET = 0.6
LABEL_SHARE_TARGET = 0.4
LONE_DRAWS = 500


# ---------------------------------------------------------------------------------------------
# part 1: widths over repeated campaigns


@dataclass(frozen=True)
class WidthStudy:
    """Estimates and bootstrap intervals of R campaigns (arrays (R, m) per estimator, metric)."""

    systems: list[str]
    estimates: dict[tuple[str, str], np.ndarray]
    boot_low: dict[tuple[str, str], np.ndarray]
    boot_high: dict[tuple[str, str], np.ndarray]
    truth: pd.DataFrame  # indexed by system
    draws: int
    labelled: np.ndarray  # (R,) distinct judged facts
    units: int
    exhaustive_facts: np.ndarray  # (R,) true facts found in the documents

    def spread_width(self, estimator: str, metric: str) -> float:
        """Median over systems of the 5th–95th percentile range across repetitions."""
        est = self.estimates[(estimator, metric)]
        lo, hi = np.nanquantile(est, [0.05, 0.95], axis=0)
        return float(np.nanmedian(hi - lo))

    def bootstrap_width(self, estimator: str, metric: str) -> float:
        """Median over systems and repetitions of the bootstrap interval width."""
        width = self.boot_high[(estimator, metric)] - self.boot_low[(estimator, metric)]
        return float(np.nanmedian(width))

    def coverage(self, estimator: str, metric: str) -> float:
        """Share of bootstrap intervals (all systems, all repetitions) covering the truth."""
        true = self.truth.loc[self.systems, metric].to_numpy()[None, :]
        lo, hi = self.boot_low[(estimator, metric)], self.boot_high[(estimator, metric)]
        ok = np.isfinite(lo) & np.isfinite(hi)
        return float(((lo <= true) & (true <= hi))[ok].mean())

    def mean_abs_bias(self, estimator: str, metric: str) -> tuple[float, float]:
        """(mean over systems of |mean error|, its largest 3-SE noise floor), both in points."""
        est = self.estimates[(estimator, metric)]
        error = est - self.truth.loc[self.systems, metric].to_numpy()[None, :]
        bias = np.nanmean(error, axis=0)
        se = np.nanstd(error, axis=0, ddof=1) / np.sqrt(np.isfinite(error).sum(axis=0))
        return 100 * float(np.mean(np.abs(bias))), 100 * float(np.mean(3 * se))


def width_study(
    world: World, base: Task, repetitions: int, B: int, rng: np.random.Generator
) -> WidthStudy:
    """Redraw the annotation ``repetitions`` times; joint and simple estimates + bootstrap CIs."""
    systems = base.systems
    estimates = {(e, k): np.empty((repetitions, len(systems))) for e in ESTIMATORS for k in METRICS}
    low = {key: np.empty_like(v) for key, v in estimates.items()}
    high = {key: np.empty_like(v) for key, v in estimates.items()}
    labelled = np.empty(repetitions, np.int64)
    found = np.empty(repetitions, np.int64)
    draws = units = 0
    for r in range(repetitions):
        annotation = world.annotate(rng)
        task = with_annotation(base, **annotation.tables())
        data = build_sample_data(task)
        stages = bootstrap_stages(data)
        replicates = draw_replicates(stages, B, rng)
        for e in ESTIMATORS:
            terms, statistic = terms_and_statistic(data, e)
            full = {name: t.sum(axis=0) for name, t in terms.items()}
            totals = {
                s.name: replicate_totals(replicates.counts[s.name], terms[s.name]) for s in stages
            }
            point, reps = statistic(full), statistic(totals)
            for k in METRICS:
                estimates[(e, k)][r] = point[k]
                ci = confidence_interval(point[k], reps[k], method="percentile", level=LEVEL)
                low[(e, k)][r], high[(e, k)][r] = ci.low, ci.high
        labelled[r] = len(task.labels)
        found[r] = int(task.exhaustive["fact"].nunique())
        draws, units = data.K, data.U
    return WidthStudy(
        systems=systems,
        estimates=estimates,
        boot_low=low,
        boot_high=high,
        truth=world.truth_metrics().set_index("system"),
        draws=draws,
        labelled=labelled,
        units=units,
        exhaustive_facts=found,
    )


# ---------------------------------------------------------------------------------------------
# part 2: the adaptive planner, systems added one at a time


@dataclass(frozen=True)
class AdaptiveTrial:
    """One order of arrival: draws and new labels per system, in order."""

    order: list[str]
    n: np.ndarray  # draws planned (and drawn) per system
    new_labels: np.ndarray  # facts that needed a label when the system was added
    reached: np.ndarray  # the planner met the target within the cap
    bound_halfwidth: np.ndarray  # the planner's precision half-width bound at n
    exact_halfwidth: np.ndarray  # exact (Theorem 1, truth) half-width at n, draws so far
    oracle_n: np.ndarray  # smallest n meeting the target with the exact variance (same order)
    final_halfwidth: np.ndarray  # bootstrap half-width of joint precision after all systems
    seconds: float


class ExactPrecisionVariance:
    """Theorem 1's variance of joint precision from the truth (balance heuristic, uniform draws).

    With w_ij = n_j/N and mixture mass M(x) = Σ_j n_j s_j(x), the joint precision of system i has
    Var π̂_i = Σ_j n_j Var_{x~s_j}[t_i(x) f(x) / M(x)] (Chaganty et al. 2017, appendix Theorem 1):
    exact for i.i.d. draws, and a function of the sample sizes only, so an oracle can plan with it.
    """

    def __init__(self, task: Task) -> None:
        out = task.outputs
        index = {s: k for k, s in enumerate(task.systems)}
        system = out["system"].map(index).to_numpy()
        fact = out["fact"].to_numpy(np.int64)
        size = np.bincount(system, minlength=len(index)).astype(float)
        shape = (len(task.facts), len(index))
        self.S = sparse.csc_matrix((1.0 / size[system], (fact, system)), shape=shape)
        self.ST = self.S.T.tocsr()
        value = task.truth.set_index("fact")["value"].reindex(np.arange(shape[0]))
        self.f = value.fillna(0.0).to_numpy(float)
        self.index = index

    def __call__(self, i: int, sizes: np.ndarray) -> float:
        """Var π̂_i when system j has ``sizes[j]`` draws (systems with 0 draws take no part)."""
        mass = self.S @ sizes
        lo, hi = self.S.indptr[i], self.S.indptr[i + 1]
        rows, t = self.S.indices[lo:hi], self.S.data[lo:hi]
        v = np.zeros(self.S.shape[0])
        v[rows] = t * self.f[rows] / mass[rows]
        m1, m2 = self.ST @ v, self.ST @ (v * v)
        return float(np.sum(sizes * (m2 - m1**2)))

    def smallest_n(self, i: int, sizes: np.ndarray, limit: float, max_n: int) -> int:
        """Smallest n ≤ max_n with Var π̂_i ≤ ``limit`` (bisection; max_n when none)."""
        trial = sizes.astype(float).copy()

        def ok(n: int) -> bool:
            trial[i] = n
            return self(i, trial) <= limit

        if not ok(max_n):
            return max_n
        lo, hi = 1, max_n
        while lo < hi:
            mid = (lo + hi) // 2
            if ok(mid):
                hi = mid
            else:
                lo = mid + 1
        return hi


def _labels_from_truth(task: Task, facts: np.ndarray) -> pd.DataFrame:
    """Judgments for ``facts`` (task fact ids) from ``truth.tsv``: C or W."""
    value = task.truth.set_index("fact")["value"].reindex(facts).to_numpy()
    if np.isnan(value).any():  # pragma: no cover - the simulated bundle's truth is complete
        raise ValueError("a drawn fact has no truth")
    return pd.DataFrame(
        {
            "query_id": task.facts["query_id"].to_numpy()[facts],
            "answer": task.facts["answer"].to_numpy()[facts],
            "label": np.where(value == 1, "C", "W"),
        }
    )


def adaptive_trial(
    base: Task,
    rng: np.random.Generator,
    target: float,
    max_n: int,
    B: int,
    exact: ExactPrecisionVariance,
    bound_kind: str = "paper",
    metrics: tuple[str, ...] = ("precision",),
) -> AdaptiveTrial:
    """Add every system of ``base`` in a random order, each with its planned sample.

    Alongside, for the same order: the exact Theorem-1 half-width at each planned n, and the
    sizes an oracle planner would choose from the exact variance (precision only).
    """
    z = float(ndtri(0.5 + LEVEL / 2))
    limit = (target / z) ** 2
    sizes = np.zeros(len(exact.index))
    oracle = np.zeros(len(exact.index))
    exact_half, oracle_n = [], []
    start = time.perf_counter()
    order = [str(s) for s in rng.permutation(base.systems)]
    task = base
    samples: list[pd.DataFrame] = []
    judgments: list[pd.DataFrame] = []
    labelled = np.empty(0, np.int64)
    n, new, reached, bound = [], [], [], []
    for name in order:
        plan = adaptive_sample_sizes(
            task,
            target,
            confidence=LEVEL,
            systems=[name],
            max_n=max_n,
            bound=bound_kind,
            metrics=metrics,
        ).iloc[0]
        size = int(plan["n"])
        drawn = draw_precision_samples(
            base.outputs, base.queries, {name: size}, rng, sample="adaptive"
        )
        drawn.attrs.clear()  # the drawn row indices: pandas ≥ 3 cannot concatenate array attrs
        samples.append(drawn)
        task = with_annotation(task, samples=pd.concat(samples, ignore_index=True))
        fresh = np.setdiff1d(task.samples["fact"].to_numpy(np.int64), labelled)
        labelled = np.union1d(labelled, fresh)
        judgments.append(_labels_from_truth(base, fresh))
        task = with_annotation(task, judgments=pd.concat(judgments, ignore_index=True))
        n.append(size)
        new.append(fresh.size)
        reached.append(bool(plan["reached"]))
        bound.append(float(plan["precision_halfwidth"]))
        i = exact.index[name]
        sizes[i] = size
        exact_half.append(z * np.sqrt(exact(i, sizes)))
        oracle[i] = exact.smallest_n(i, oracle, limit, max_n)
        oracle_n.append(int(oracle[i]))
    seconds = time.perf_counter() - start
    # how wide are the joint precision intervals actually, once everyone is in?
    data = build_sample_data(task)
    stages = bootstrap_stages(data)
    terms, statistic = terms_and_statistic(data)
    totals = {
        s.name: replicate_totals(c, terms[s.name])
        for s, c in zip(stages, draw_replicates(stages, B, rng).counts.values(), strict=True)
    }
    point = statistic({k: t.sum(axis=0) for k, t in terms.items()})["precision"]
    ci = confidence_interval(point, statistic(totals)["precision"], level=LEVEL)
    half = pd.Series((ci.high - ci.low) / 2, index=data.systems).reindex(order).to_numpy()
    return AdaptiveTrial(
        order=order,
        n=np.array(n),
        new_labels=np.array(new),
        reached=np.array(reached),
        bound_halfwidth=np.array(bound),
        exact_halfwidth=np.array(exact_half),
        oracle_n=np.array(oracle_n),
        final_halfwidth=half,
        seconds=seconds,
    )


def lone_design_labels(world: World, rng: np.random.Generator) -> int:
    """Distinct facts labelled when every system gets 500 uniform draws (labels reused)."""
    annotation = world.annotate(rng, per_system=LONE_DRAWS, exhaustive_units=0)
    return int(annotation.judgments[["query_id", "answer"]].drop_duplicates().shape[0])


# ---------------------------------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(
        __doc__, seed=2017, reps=200, reps_name="repetitions", quick={"repetitions": 40}
    )
    parser.add_argument("--systems", type=int, default=40)
    parser.add_argument("--queries", type=int, default=317)
    parser.add_argument("--labels", type=int, default=5000, help="labels per campaign")
    parser.add_argument("--bootstrap", type=int, default=200, help="replicates per campaign")
    parser.add_argument("--trials", type=int, default=3, help="adaptive orders (paper: 100)")
    parser.add_argument("--max-n", type=int, default=LONE_DRAWS, help="cap on draws per system")
    parser.add_argument(
        "--bound",
        choices=("paper", "exchangeable"),
        default="paper",
        help="planner's variance bound; the target is the same bound for a lone system with 500 draws",
    )
    parser.add_argument(
        "--width-for",
        choices=("precision", "both"),
        default="precision",
        help="intervals the adaptive planner must bring under the target (paper: precision)",
    )
    args = harness.parse(parser, argv)
    tee = harness.Tee()

    per_source = args.labels // (args.systems + 1)
    config = SimulationConfig(
        systems=args.systems,
        queries=args.queries,
        per_system=per_source,
        exhaustive_facts=per_source,
        name="estimators-bench",
    )
    world_seq, study_seq, adaptive_seq = np.random.SeedSequence(args.seed).spawn(3)
    start = time.perf_counter()
    world = simulate_world(config, np.random.default_rng(world_seq))
    with tempfile.TemporaryDirectory() as tmp:
        base = load_task(write_bundle(Path(tmp) / "world", world.tables(), world.task_config()))
    t_world = time.perf_counter() - start
    truth = world.truth_metrics()

    print(
        f"world: {args.systems} systems in {config.n_teams} teams, {args.queries} queries, "
        f"{len(base.outputs):,} outputs, {world.pool.size:,} distinct facts output, "
        f"{world.n_true:,} true facts, pool coverage θ = {world.pool_coverage:.3f} "
        f"(seed {args.seed}, {t_world:.1f} s)"
    )
    print(
        f"  true precision {truth['precision'].min():.2f}-{truth['precision'].max():.2f}, "
        f"true recall {truth['recall'].min():.3f}-{truth['recall'].max():.3f}"
    )

    # part 1
    start = time.perf_counter()
    study = width_study(
        world, base, args.repetitions, args.bootstrap, np.random.default_rng(study_seq)
    )
    t_study = time.perf_counter() - start
    print()
    print(
        f"PART 1: {args.repetitions} annotation campaigns of {args.labels:,} labels: "
        f"{per_source} uniform draws per system ({study.draws:,} draws, "
        f"{study.labelled.mean():,.0f} distinct facts labelled on average) + {study.units} "
        f"documents exhaustively annotated ({study.exhaustive_facts.mean():.0f} true facts on "
        f"average)  [{t_study:.0f} s]"
    )
    print(
        "  90% interval widths, median over systems; joint = receval default "
        "(balance-heuristic weights)"
    )
    header = f"  {'':44s}{'simple':>8s}{'joint':>8s}{'ratio':>8s}"
    ratios, table = {}, []
    for metric in METRICS:
        print(f"  {metric}{' (true recall)' if metric == 'recall' else ''}")
        print(header)
        s, j = study.spread_width("simple", metric), study.spread_width("joint", metric)
        ratios[metric] = j / s
        print(
            f"  {'spread across campaigns, 5th-95th pct (paper)':44s}{s:8.3f}{j:8.3f}{j / s:8.2f}"
        )
        bs, bj = study.bootstrap_width("simple", metric), study.bootstrap_width("joint", metric)
        label = f"bootstrap percentile, B={args.bootstrap}, median"
        print(f"  {label:44s}{bs:8.3f}{bj:8.3f}{bj / bs:8.2f}")
        ps, pj = PAPER_WIDTHS[metric]
        table.append(
            {"metric": metric, "spread_simple": s, "spread_joint": j, "spread_ratio": j / s}
            | {"bootstrap_simple": bs, "bootstrap_joint": bj, "paper_simple": ps, "paper_joint": pj}
        )
        print(f"  {'paper (spread across 500 campaigns)':44s}{ps:8.3f}{pj:8.3f}{pj / ps:8.2f}")
    print(
        "  bootstrap 90% interval coverage of the truth; |bias| = mean over systems of "
        "|mean error| (points) with the mean 3-SE noise level:"
    )
    for metric in ("precision", "recall"):
        parts = []
        for e in ESTIMATORS:
            bias, floor = study.mean_abs_bias(e, metric)
            parts.append(
                f"{e} {study.coverage(e, metric):.3f}, |bias| {bias:.2f} (3 SE {floor:.2f})"
            )
        print(f"    {metric:10s} " + "; ".join(parts))
    for metric in ("precision", "recall"):
        print(
            f"  joint/simple width ratio, {metric} (spread across campaigns): "
            f"{ratios[metric]:.2f}  {_verdict(ratios[metric] <= RATIO_TARGET)} "
            f"(target <= {RATIO_TARGET})"
        )

    # part 2
    z = float(ndtri(0.5 + LEVEL / 2))
    # the paper's target: "the variance of 500 samples for a lone system", measured with the same
    # bound the planner uses (paper: 1/n; exchangeable: the binomial worst case 1/(4n))
    lone = 1.0 if args.bound == "paper" else 0.25
    target = z * np.sqrt(lone / LONE_DRAWS)
    rng = np.random.default_rng(adaptive_seq)
    exact = ExactPrecisionVariance(base)
    trials = [
        adaptive_trial(
            base,
            rng,
            target,
            args.max_n,
            args.bootstrap,
            exact,
            args.bound,
            ("precision",) if args.width_for == "precision" else ("precision", "recall"),
        )
        for _ in range(args.trials)
    ]
    baseline = LONE_DRAWS * args.systems
    reused = lone_design_labels(world, rng)
    draws = np.array([t.n.sum() for t in trials])
    labels = np.array([t.new_labels.sum() for t in trials])
    last = max(1, min(10, args.systems // 4))
    print()
    print(
        f"PART 2: adaptive planner, {args.systems} systems added one at a time in random order, "
        f"{args.trials} orders; {args.bound} bound; target 90% half-width "
        f"z·√({lone:g}/{LONE_DRAWS}) = {target:.4f} (the bound of a lone system with {LONE_DRAWS} draws) "
        f"for {'precision (as in the paper)' if args.width_for == 'precision' else 'precision and pooled recall'}"
        f", at most {args.max_n} draws per system"
    )
    print(f"  {'order':>5s}{'draws':>9s}{'new labels':>12s}{'capped':>8s}{'seconds':>9s}")
    for k, t in enumerate(trials):
        print(
            f"  {k + 1:5d}{t.n.sum():9,d}{t.new_labels.sum():12,d}{int((~t.reached).sum()):8d}"
            f"{t.seconds:9.0f}"
        )
    n_all = np.stack([t.n for t in trials])
    print(
        f"  draws per system by arrival: first {n_all[:, 0].mean():.0f}, last {last}: "
        f"{n_all[:, -last:].mean():.0f} on average (paper: ~89 for the last 10)"
    )
    bound = np.concatenate([t.bound_halfwidth for t in trials])
    final = np.concatenate([t.final_halfwidth for t in trials])
    print(
        f"  planner's precision half-width bound at the chosen n: median {np.median(bound):.4f}; "
        f"joint precision bootstrap half-width once all are in: median {np.nanmedian(final):.4f}, "
        f"max {np.nanmax(final):.4f} (target {target:.4f})"
    )
    exact_half = np.concatenate([t.exact_halfwidth for t in trials])
    oracle = np.array([t.oracle_n.sum() for t in trials])
    print(
        f"  exact Theorem-1 half-width at the planner's n (from the truth, draws so far): median "
        f"{np.median(exact_half):.4f}, max {np.max(exact_half):.4f}"
    )
    print(
        f"  oracle planner (smallest n meeting the target with the exact variance; precision "
        f"only; same orders): {oracle.mean():,.0f} draws = {oracle.mean() / baseline:.1%} of "
        f"{baseline:,}; last {last}: {np.stack([t.oracle_n for t in trials])[:, -last:].mean():.0f}"
        " per system"
    )
    print(
        f"  simple design: {baseline:,} draws ({LONE_DRAWS} per system); with labels reused "
        f"across systems those draws need {reused:,} distinct labels"
    )
    print(
        f"  paper: ~{PAPER_ADAPTIVE:,} draws after 40 systems "
        f"({PAPER_ADAPTIVE / (LONE_DRAWS * 40):.0%} of 20,000)"
    )
    share_draws = draws.mean() / baseline
    share_labels = labels.mean() / baseline
    print(
        f"  adaptive draws / {baseline:,}: {draws.mean():,.0f} = {share_draws:.1%}  "
        f"{_verdict(share_draws <= LABEL_SHARE_TARGET)} (target <= {LABEL_SHARE_TARGET:.0%})"
    )
    print(
        f"  adaptive new labels / {baseline:,}: {labels.mean():,.0f} = {share_labels:.1%}  "
        f"{_verdict(share_labels <= LABEL_SHARE_TARGET)} (target <= {LABEL_SHARE_TARGET:.0%}); "
        f"against the simple design's {reused:,} distinct labels: {labels.mean() / reused:.1%}"
    )
    figures = {
        "repetitions": args.repetitions,
        "widths_90": table,
        "adaptive_draws_share": round(float(share_draws), 4),
        "adaptive_new_labels_share": round(float(share_labels), 4),
        "adaptive_orders": args.trials,
    }
    harness.store(args, "estimators", figures, argv, output=tee, title="joint vs simple widths")


if __name__ == "__main__":
    main()
