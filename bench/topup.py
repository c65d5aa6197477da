"""Top-up then rescore: does the fixed-n bootstrap stay honest after a data-dependent top-up?

The issue-20 audit scenario, through the library API (no subprocesses):

1. a 12-system *null* world (:mod:`receval.simulation`: every system the same true precision
   and recall; teams; facts shared across systems; exhaustive units);
2. round 1: 30 uniform draws per system, labelled from the truth; score (default bootstrap);
3. the systems whose F1 interval overlaps the leader's are topped up with
   :func:`receval.planning.adaptive_sample_sizes` at ``--target-width`` (default 0.05) — what
   ``receval sample --adaptive --target-width 0.05 --system …`` does — labelled from the truth;
4. score again.

Per repetition it records, after the second score: whether the leaderboard has more than one
tier (every system is equally good, so any split is a family-wise error), whether every rank set
contains rank 1, each system's 95 % interval coverage of precision, pooled recall, true recall and
F1 (counting only numbers not flagged in ``note``; flagged ones are counted apart), the planned
sizes and the realised F1/precision half-widths of the topped-up systems.

``--design fixed`` scores a single round with the *same* sizes drawn without peeking (the audit's
control), ``--design equal`` tops every system up by ``--equal`` draws, and ``--design uneven``
gives the whole planned top-up to the first overlapping system (what the sequential planner
before issue 20 did: sizes from 0 to ~1,300, a few systems left with 30 own draws inside a large
pool — the case the reliability flags must catch).

Usage: python bench/topup.py [--reps R] [--bootstrap B] [--seed S]
[--design adaptive|fixed|uneven|equal] [--equal N] [--width W] [--systems M]
The default (100 repetitions, B = 200) takes about 1 minute of CPU.  Every figure is printed with
its Monte Carlo standard error.  The script uses only APIs that existed before issue 20
(93c1d3a), so run against that commit it gives the "before" figures.  Measured (seed 20, 100
repetitions; before -> after the joint planner and the variance-draws flag):

* adaptive: tier FWER 0.54 ± 0.05 -> 0.06 ± 0.024; every rank set holds rank 1: 0.35 -> 0.92;
  unflagged 95 % coverage precision 0.819 -> 0.938, pooled recall 0.604 -> 0.941, recall
  0.899 -> 0.949, F1 0.908 -> 0.952 (± 0.01–0.02); nothing flagged -> 8 % of repetitions;
  own draws 30–2,030 (median 740) -> 30–185 (median 143); realised precision half-width 0.019
  -> 0.043 at a 0.05 target;
* fixed (same sizes, no peeking): FWER 0.13 -> 0.05; unflagged precision coverage 0.879 -> 0.936;
* uneven (after): 32 % of precision numbers flagged, unflagged coverage 0.925–0.937;
* equal (+600 each): FWER 0.06 ± 0.024, coverage 0.939–0.946 (unchanged).
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from receval.design import new_sample_round
from receval.formats.bundle import write_bundle
from receval.planning import adaptive_sample_sizes
from receval.scoring import ScoreOptions, score_task
from receval.simulation import SimulationConfig, World, simulate_world
from receval.task import Task, load_task, with_annotation

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

METRICS = ("precision", "pooled_recall", "recall", "f1")
NULL_WORLD = {"precision_range": (0.4, 0.400001), "recall_range": (0.2, 0.200001)}


@dataclass
class Rep:
    """What one repetition gives (arrays over the systems in sorted order)."""

    split: bool
    rank1: bool
    cover: dict[str, np.ndarray] = field(default_factory=dict)
    flag: dict[str, np.ndarray] = field(default_factory=dict)
    own: np.ndarray | None = None  # own draws per system after the top-up
    topped: np.ndarray | None = None  # which systems were topped up
    halfwidth: dict[str, np.ndarray] = field(default_factory=dict)


def null_world(seed: int, systems: int = 12, queries: int = 100) -> tuple[World, Task]:
    """The null world and its task (written once to a temporary bundle, then kept in memory)."""
    cfg = SimulationConfig(
        systems=systems, queries=queries, teams=max(1, systems // 3), per_system=30, **NULL_WORLD
    )
    for k in range(200):  # the first world whose teams all have 2–4 systems (the audit's)
        world = simulate_world(cfg, np.random.default_rng([seed, 1, k]))
        sizes = pd.Series(world.teams).value_counts()
        if sizes.between(2, 4).all():
            break
    with tempfile.TemporaryDirectory() as tmp:
        base = load_task(write_bundle(Path(tmp) / "world", world.tables(), world.task_config()))
    return world, base


def label_from_truth(world: World, samples: pd.DataFrame) -> pd.DataFrame:
    """One perfect judgment per distinct drawn fact."""
    ids = np.unique(world.candidate_ids(samples["query_id"], samples["answer"]))
    query_ids = world.queries["query_id"].to_numpy()
    return pd.DataFrame(
        {
            "query_id": query_ids[world.candidate_query[ids]],
            "answer": world.candidate_answer[ids],
            "label": np.where(world.candidate_true[ids], "C", "W").astype(object),
        }
    )


def _annotated(world: World, base: Task, samples: pd.DataFrame, ann) -> Task:
    return with_annotation(
        base,
        samples=samples,
        judgments=label_from_truth(world, samples),
        exhaustive_units=ann.exhaustive_units,
        exhaustive=ann.exhaustive,
    )


def _concat(*frames: pd.DataFrame) -> pd.DataFrame:
    """Sample rounds stacked (their ``attrs`` hold row arrays that pandas cannot compare)."""
    plain = []
    for frame in frames:
        frame = frame.copy()
        frame.attrs = {}
        plain.append(frame)
    return pd.concat(plain, ignore_index=True)


def _f1_overlap(board: pd.DataFrame) -> list[str]:
    """Systems whose F1 interval overlaps the leader's (the leader included)."""
    lead = board.iloc[0]
    hit = (board["f1_hi"] >= lead["f1_lo"]) & (board["f1_lo"] <= lead["f1_hi"])
    return sorted(board.loc[hit, "system"])


def one_rep(world, base, truth, rng, *, design: str, B: int, width: float, equal: int) -> Rep:
    """Round 1, top-up (or a control design), rescore; see the module docstring."""
    ann = world.annotate(rng, per_system=30)
    samples = ann.samples
    systems = sorted(world.systems)
    opts = ScoreOptions(bootstrap=B, seed=int(rng.integers(2**31)))
    task = _annotated(world, base, samples, ann)
    topped = np.zeros(len(systems), bool)
    if design in ("adaptive", "fixed", "uneven"):
        first = score_task(task, opts).leaderboard
        chosen = _f1_overlap(first)
        plan = adaptive_sample_sizes(task, width, systems=chosen)
        sizes = dict(zip(plan["system"], plan["n"].astype(int), strict=True))
        topped = np.isin(systems, [s for s, n in sizes.items() if n > 0])
        if design == "uneven":  # the old sequential planner's pattern: the first takes all
            sizes = {chosen[0]: sum(sizes.values())} if chosen else {}
            topped = np.isin(systems, [s for s, n in sizes.items() if n > 0])
        if design == "fixed":  # the same unequal sizes drawn at once, with no peeking
            total = {s: 30 + sizes.get(s, 0) for s in systems}
            samples = new_sample_round(base, total, seed=int(rng.integers(2**31))).samples
        else:
            extra = new_sample_round(task, sizes, seed=int(rng.integers(2**31)), systems=chosen)
            samples = _concat(samples, extra.samples)
    elif design == "equal":
        extra = new_sample_round(task, equal, seed=int(rng.integers(2**31)))
        samples = _concat(samples, extra.samples)
        topped[:] = True
    else:
        raise ValueError(design)
    result = score_task(_annotated(world, base, samples, ann), opts)
    board = result.leaderboard.set_index("system").reindex(systems)
    tiers = board["tier"].replace("", np.nan).astype(float)
    rep = Rep(
        split=bool(np.nanmax(tiers) > 1),
        rank1=bool((board["rank_lo"] <= 1).all()),
        topped=topped,
        own=samples.groupby("system").size().reindex(systems, fill_value=0).to_numpy(),
    )
    notes = board["note"].fillna("").astype(str)
    for metric in METRICS:
        true = truth[metric].reindex(systems).to_numpy()
        lo, hi = board[f"{metric}_lo"].to_numpy(float), board[f"{metric}_hi"].to_numpy(float)
        rep.cover[metric] = (lo <= true + 1e-12) & (true - 1e-12 <= hi)
        tag = "f1: flagged" if metric == "f1" else f"{metric}: flagged"
        flagged = notes.str.contains(tag, regex=False).to_numpy()
        if metric == "f1":  # F1 rests on precision and recall: a flag on either flags it
            flagged = notes.str.contains("flagged", regex=False).to_numpy()
        rep.flag[metric] = flagged | ~np.isfinite(lo)
        rep.halfwidth[metric] = (hi - lo) / 2
    return rep


def _share(x: np.ndarray) -> tuple[float, float]:
    """Mean of a 0/1 array over repetitions and its binomial Monte Carlo SE."""
    x = np.asarray(x, float)
    p = float(x.mean())
    return p, math.sqrt(max(p * (1 - p), 1e-12) / x.size)


def _coverage(hit: np.ndarray, ok: np.ndarray) -> tuple[float, float]:
    """Coverage pooled over unflagged (rep, system) cells; SE from per-rep shares (reps i.i.d.)."""
    n = ok.sum(axis=1)
    keep = n > 0
    if not keep.any():
        return math.nan, math.nan
    total = float((hit & ok).sum() / ok.sum())
    # ratio estimator SE over repetitions: Σ (h_r − c n_r)² / (R (R − 1) n̄²)
    h = (hit & ok).sum(axis=1)
    R = hit.shape[0]
    se = math.sqrt(np.sum((h - total * n) ** 2) / (R * (R - 1))) / n.mean() if R > 1 else math.nan
    return total, se


def figures(reps: list[Rep]) -> dict[str, tuple[float, float]]:
    """The study's figures as (value, Monte Carlo SE): ``fwer``, ``rank1``, ``any_flag``,
    ``cover_<metric>`` (unflagged), ``cover_all_<metric>``, ``flagged_<metric>``."""
    out = {
        "fwer": _share([r.split for r in reps]),
        "rank1": _share([r.rank1 for r in reps]),
        "any_flag": _share([any(r.flag[m].any() for m in METRICS) for r in reps]),
    }
    for metric in METRICS:
        hit = np.array([r.cover[metric] for r in reps])
        flag = np.array([r.flag[metric] for r in reps])
        out[f"cover_{metric}"] = _coverage(hit, ~flag)
        out[f"cover_all_{metric}"] = _coverage(hit, np.ones_like(flag))
        out[f"flagged_{metric}"] = (float(flag.mean()), math.nan)
    own = np.array([r.own for r in reps])
    out["spread"] = (float(np.median(own.max(axis=1) / own.min(axis=1))), math.nan)
    topped = np.array([r.topped for r in reps])
    if topped.any():
        hw = np.array([r.halfwidth["precision"] for r in reps])[topped]
        out["precision_halfwidth"] = (float(np.median(hw)), math.nan)
    return out


def summarise(reps: list[Rep], seconds: float, design: str) -> str:
    """The printed figures (one run)."""
    R = len(reps)
    fig = figures(reps)
    lines = [f"design {design}: {R} repetitions, {seconds:.0f} s CPU"]
    p, se = fig["fwer"]
    lines.append(f"  tier FWER (more than one tier)      {p:.3f} ± {se:.3f}  (nominal 0.05)")
    p, se = fig["rank1"]
    lines.append(f"  every rank set contains rank 1      {p:.3f} ± {se:.3f}")
    p, se = fig["any_flag"]
    lines.append(f"  repetitions with any flag           {p:.3f} ± {se:.3f}")
    for metric in METRICS:
        c, cse = fig[f"cover_{metric}"]
        lines.append(
            f"  95% coverage {metric:<14} unflagged {c:.3f} ± {cse:.3f}  "
            f"all {fig[f'cover_all_{metric}'][0]:.3f}  flagged share {fig[f'flagged_{metric}'][0]:.3f}"
        )
    own = np.array([r.own for r in reps])
    topped = np.array([r.topped for r in reps])
    lines.append(
        f"  own draws per system: min {own.min()} median {np.median(own):.0f} max {own.max()}; "
        f"max/min within a repetition: median {fig['spread'][0]:.1f}"
    )
    if topped.any():
        for metric in ("precision", "f1"):
            hw = np.array([r.halfwidth[metric] for r in reps])[topped]
            lines.append(
                f"  realised {metric} half-width of topped-up systems: median {np.median(hw):.3f} "
                f"(q10 {np.quantile(hw, 0.1):.3f}, q90 {np.quantile(hw, 0.9):.3f})"
            )
        small = own <= 30
        for metric in ("precision", "pooled_recall"):
            hit = np.array([r.cover[metric] for r in reps])
            flag = np.array([r.flag[metric] for r in reps])
            ok = small & ~flag & (own.max(axis=1, keepdims=True) > 150)
            if ok.any():
                c, cse = _coverage(hit, ok)
                lines.append(
                    f"  {metric}: unflagged systems with ≤ 30 own draws beside a system with "
                    f"> 150: coverage {c:.3f} ± {cse:.3f} over {int(ok.sum())} cells"
                )
    return "\n".join(lines)


def study(
    reps: int,
    *,
    B: int = 200,
    seed: int = 20,
    design: str = "adaptive",
    width: float = 0.05,
    equal: int = 600,
    systems: int = 12,
) -> list[Rep]:
    """``reps`` repetitions of the scenario in one null world (the world from ``seed``)."""
    world, base = null_world(seed, systems)
    truth = world.truth_metrics().set_index("system")
    rng = np.random.default_rng([seed, 2])
    return [
        one_rep(world, base, truth, rng, design=design, B=B, width=width, equal=equal)
        for _ in range(reps)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, seed=20, reps=100, quick={"reps": 12})
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--width", type=float, default=0.05)
    parser.add_argument(
        "--design", choices=("adaptive", "fixed", "uneven", "equal"), default="adaptive"
    )
    parser.add_argument("--equal", type=int, default=600)
    parser.add_argument("--systems", type=int, default=12)
    args = harness.parse(parser, argv)
    tee = harness.Tee()
    start = time.process_time()
    reps = study(
        args.reps,
        B=args.bootstrap,
        seed=args.seed,
        design=args.design,
        width=args.width,
        equal=args.equal,
        systems=args.systems,
    )
    print(summarise(reps, time.process_time() - start, args.design))
    table = [{"figure": k, "value": v, "se": se} for k, (v, se) in figures(reps).items()]
    title = f"design {args.design}"
    harness.store(
        args, "topup", {"reps": len(reps), "figures": table}, argv, output=tee, title=title
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
