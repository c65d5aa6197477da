"""Validity study: are receval's published numbers what they claim?  (seeded Monte Carlo)

For every scenario one world is simulated (:mod:`receval.simulation`, exact truth known) and the
annotation campaign is redrawn ``--runs`` times; each campaign is scored with
:func:`receval.scoring.score_task` exactly as ``receval score`` would.  Per scenario the study
prints

* **bias** of θ̂ (pool coverage), precision, ν̂ (pooled recall) and true recall, per system, in
  Monte Carlo standard errors: z = mean(error) / (sd(error)/√R); the worst |z| over systems;
* **coverage** of the 90% and 95% intervals, pooled over systems and runs, counting only numbers
  that the leaderboard did *not* flag in ``note`` (flagged ones are counted separately);
* **FWER** of the tiers: the share of runs with more than one tier in a world where every
  system has identical true precision, recall and F1 (null scenarios only);
* **rank sets**: the share of runs in which *every* system's true F1 rank (1 + #systems strictly
  better) lies in its [rank_lo, rank_hi] (simultaneous coverage).

Targets (PASS/FAIL), each with the Monte Carlo error of R runs allowed for:

* |z| ≤ z_max for every unflagged system-metric, z_max = max(3, Φ⁻¹(1 − 0.005/k)) for the k
  system-metrics checked (a Bonferroni bound: under no bias the whole scenario fails with
  probability ≤ 1%); a number flagged in at least half of the runs is exempt (it says why);
* 95% coverage ≥ 0.93 − 2·ŝe, 90% coverage ≥ 0.88 − 2·ŝe, ŝe the standard error of the coverage
  over runs (per-run coverage shares are independent across runs);
* tier FWER ≤ 0.05 + 2·√(0.05·0.95/R);
* rank-set simultaneous coverage ≥ 0.95 − 2·√(0.05·0.95/R).

Usage: python bench/validity.py [--quick] [--runs R] [--bootstrap B] [--seed S] [--only NAME ...]
[--method percentile|basic|BCa]
The default run (40 runs per scenario, B = 300) took 7.5 minutes on a shared two-core machine;
``--quick`` (five scenarios, 20 runs, B = 200) 46 seconds.  The file only
uses APIs that existed at the branch start (194cf93), so the same script measures the "before"
figures when run against that commit (scenarios it cannot express there are reported n/a).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import ndtri

from receval.design import draw_exhaustive_units
from receval.estimators.bootstrap import confidence_interval
from receval.formats.bundle import write_bundle
from receval.leaderboard import replicate_ranks
from receval.scoring import ScoreOptions, score_task
from receval.simulation import SimulationConfig, World, simulate_world
from receval.task import load_task, with_annotation

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

METRICS = ("precision", "pooled_recall", "recall")


@dataclass
class Scenario:
    """One world and how its campaigns are drawn."""

    name: str
    config: dict
    per_system: int | Callable[[World], dict[str, int]] = 60
    units: int = 27
    weighted_rounds: int = 0  # > 0: weighted units over this many rounds
    null: bool = False
    needs: tuple[str, ...] = ()  # SimulationConfig fields the scenario needs


def _uneven(world: World) -> dict[str, int]:
    names = sorted(world.systems)
    return dict(
        zip(names, np.linspace(5, 80, len(names)).round().astype(int).tolist(), strict=True)
    )


def _tiny(world: World) -> dict[str, int]:
    names = sorted(world.systems)
    return {n: (5 if k == 0 else 60) for k, n in enumerate(names)}


NULL_WORLD = {"precision_range": (0.4, 0.400001), "recall_range": (0.2, 0.200001)}
SCENARIOS = [
    Scenario("base", {"systems": 15, "queries": 100}),
    Scenario("null-10", {"systems": 10, "queries": 100, "teams": 3, **NULL_WORLD}, null=True),
    Scenario("null-30", {"systems": 30, "queries": 100, "teams": 8, **NULL_WORLD}, null=True),
    Scenario("weighted-units", {"systems": 15, "queries": 100}, units=90, weighted_rounds=2),
    Scenario(
        "multi-document",
        {"systems": 15, "queries": 100, "documents_per_fact": 2.2},
        needs=("documents_per_fact",),
    ),
    Scenario(
        "high-precision",
        {"systems": 15, "queries": 100, "precision_range": (0.97, 1.0)},
        per_system=30,
    ),
    Scenario("low-precision", {"systems": 15, "queries": 100, "precision_range": (0.02, 0.03)}),
    Scenario("uneven-n", {"systems": 15, "queries": 100}, per_system=_uneven),
    Scenario("tiny-system", {"systems": 15, "queries": 100}, per_system=_tiny),
    Scenario("few-units", {"systems": 15, "queries": 100}, units=7),
    Scenario(
        "equivalence-classes",
        {"systems": 15, "queries": 100, "alias_rate": 0.3},
        needs=("alias_rate",),
    ),
]
QUICK = ("base", "null-10", "weighted-units", "multi-document", "uneven-n")


# ---------------------------------------------------------------------------------------------
# one campaign


def _unit_weights(world: World) -> pd.DataFrame:
    """Candidate documents with weights 1 + 3 · #true facts some system output: documents the
    systems cite are drawn more often (an organiser's natural choice), so a document's weight
    correlates with the share of its facts in the pool — the case where wrong unit weights bias
    θ̂ (a ratio is unaffected by weights that do not correlate with it)."""
    true = np.flatnonzero(world.candidate_true)
    pooled = np.isin(true, world.pool)
    facts = np.bincount(world.candidate_doc[true[pooled]], minlength=world.documents.size).astype(
        float
    )
    return pd.DataFrame({"unit": world.documents, "prob": 1.0 + 3.0 * facts})


def _weighted_units(world: World, m: int, rounds: int, rng: np.random.Generator) -> pd.DataFrame:
    """``rounds`` rounds of ``m`` weighted units each, as ``receval sample`` draws them."""
    candidates = _unit_weights(world)
    frames: list[pd.DataFrame] = []
    done: set[str] = set()
    for _ in range(rounds):
        drawn = draw_exhaustive_units(candidates, m, rng, exclude=done)
        frames.append(drawn)
        done |= set(drawn["unit"])
    units = pd.concat(frames, ignore_index=True)
    if "draws" in units:  # with-replacement design: one row per unit, draws summed
        units = units.groupby("unit", sort=False).agg(
            prob=("prob", "first"), draws=("draws", "sum"), design=("design", "first")
        )
        units = units.reset_index()
    return units


def _exhaustive(world: World, units: np.ndarray) -> pd.DataFrame:
    if hasattr(world, "exhaustive_annotation"):
        return world.exhaustive_annotation(units)
    ordered, starts = world._true_by_doc  # the branch start's World
    doc_index = pd.Index(world.documents).get_indexer(units)
    found = np.concatenate([ordered[starts[d] : starts[d + 1]] for d in doc_index])
    return pd.DataFrame(
        {
            "unit": world.documents[world.candidate_doc[found]],
            "query_id": world._query_ids[world.candidate_query[found]],
            "answer": world.candidate_answer[found],
        }
    )


#: interval method of every scored campaign (``--method``)
METHOD = {"method": "percentile"}
#: ``--mention-weighted``: drop exhaustive.tsv's documents column (θ̂ as at the branch start)
OPTIONS: dict[str, bool] = {}


def _options(B: int, seed: int) -> ScoreOptions:
    names = {f.name for f in dataclasses.fields(ScoreOptions)}
    extra = {"allow_pending": True} if "allow_pending" in names else {}
    return ScoreOptions(bootstrap=B, seed=seed, method=METHOD["method"], **extra)


def _interval90(run, metric: str):
    jack = None if run.jackknife is None else run.jackknife[metric]
    method = METHOD["method"] if jack is not None or METHOD["method"] != "BCa" else "percentile"
    return confidence_interval(
        run.point[metric], run.replicates[metric], level=0.9, method=method, jackknife=jack
    )


def campaign(world: World, base, sc: Scenario, B: int, rng: np.random.Generator) -> dict:
    """Draw and score one campaign; return estimates, intervals, flags, ranks and tiers."""
    per_system = sc.per_system(world) if callable(sc.per_system) else sc.per_system
    ann = world.annotate(rng, per_system=per_system, exhaustive_units=sc.units)
    units = ann.exhaustive_units
    if sc.weighted_rounds:
        units = _weighted_units(world, sc.units, sc.weighted_rounds, rng)
    exhaustive = _exhaustive(world, units["unit"].to_numpy())
    if OPTIONS.get("mention_weighted") and "documents" in exhaustive:
        exhaustive = exhaustive.drop(columns="documents")  # the branch start's θ̂
    task = with_annotation(
        base,
        samples=ann.samples,
        judgments=ann.judgments,
        exhaustive_units=units[["unit", *(["prob"] if "prob" in units else [])]],
        exhaustive=exhaustive,
    )
    extra = [c for c in ("draws", "design") if c in units]
    if extra:  # the columns exhaustive_units.tsv records for a with-replacement design
        full = task.exhaustive_units.merge(units[["unit", *extra]], on="unit", how="left")
        task = dataclasses.replace(task, exhaustive_units=full)
    result = score_task(task, _options(B, int(rng.integers(2**31))))
    systems = sorted(result.leaderboard["system"])  # one order for every run
    board = result.leaderboard.set_index("system").reindex(systems)
    run = result.run
    out = {"systems": systems, "tiers": board["tier"].replace("", np.nan).astype(float)}
    # run arrays are in the task's system order, the board in rank order
    task_order = list(task.systems)
    for metric in METRICS:
        ci90 = _interval90(run, metric)
        est = pd.Series(run.point[metric], index=task_order)
        out[metric] = est.reindex(systems).to_numpy()
        out[f"{metric}_lo95"] = board[f"{metric}_lo"].to_numpy(float)
        out[f"{metric}_hi95"] = board[f"{metric}_hi"].to_numpy(float)
        out[f"{metric}_lo90"] = pd.Series(ci90.low, index=task_order).reindex(systems).to_numpy()
        out[f"{metric}_hi90"] = pd.Series(ci90.high, index=task_order).reindex(systems).to_numpy()
        # "recall: flagged" also matches "pooled_recall: flagged": true recall θ̂·ν̂ inherits a
        # flag on ν̂
        out[f"{metric}_flag"] = (
            board["note"].fillna("").str.contains(f"{metric}: flagged", regex=False).to_numpy()
        )
    out["precision"] = board["precision"].to_numpy(float)  # the published (chosen) form
    printed = board[["precision", "precision_lo", "precision_hi"]].to_numpy(float)
    out["outside"] = bool(((printed > 1 + 1e-9) | (printed < -1e-9)).any())
    pool = result.pool.set_index("quantity")
    out["theta"] = float(pool.loc["pool_coverage", "estimate"])
    out["theta_lo95"] = float(pool.loc["pool_coverage", "lower"])
    out["theta_hi95"] = float(pool.loc["pool_coverage", "upper"])
    ci90 = _interval90(run, "pool_coverage")
    out["theta_lo90"], out["theta_hi90"] = float(ci90.low[0]), float(ci90.high[0])
    out["theta_flag"] = bool(str(pool.loc["pool_coverage", "note"] or "").strip()) and str(
        pool.loc["pool_coverage", "note"]
    ) not in ("nan",)
    out["rank_lo"] = board["rank_lo"].to_numpy(float)
    out["rank_hi"] = board["rank_hi"].to_numpy(float)
    return out


# ---------------------------------------------------------------------------------------------
# one scenario


@dataclass
class Figures:
    name: str
    runs: int
    seconds: float
    bias: dict[str, float] = field(default_factory=dict)  # worst |z| over unflagged systems
    zmax: float = 3.0
    cover90: dict[str, float] = field(default_factory=dict)
    cover95: dict[str, float] = field(default_factory=dict)
    cover_se: dict[str, float] = field(default_factory=dict)
    flagged: dict[str, float] = field(default_factory=dict)  # share of numbers flagged
    fwer: float | None = None
    rankset: float | None = None
    outside: float = 0.0  # share of runs printing a precision (or an end) outside [0, 1]
    checks: dict[str, bool] = field(default_factory=dict)


def _coverage(lo, hi, true, ok) -> tuple[float, float]:
    """Pooled coverage over unflagged (run, system) cells, and its standard error over runs."""
    hit = (lo <= true + 1e-12) & (true - 1e-12 <= hi) & ok
    per_run_n = ok.sum(axis=1)
    keep = per_run_n > 0
    if not keep.any():
        return np.nan, np.nan
    total = hit.sum() / ok.sum()
    shares = hit.sum(axis=1)[keep] / per_run_n[keep]
    se = shares.std(ddof=1) / math.sqrt(keep.sum()) if keep.sum() > 1 else np.nan
    return float(total), float(se)


def study(sc: Scenario, runs: int, B: int, seed: int) -> Figures | None:
    cfg_fields = {f.name for f in dataclasses.fields(SimulationConfig)}
    if any(n not in cfg_fields for n in sc.needs):
        return None
    cfg = SimulationConfig(per_system=60, **sc.config)
    world = simulate_world(cfg, np.random.default_rng([seed, 1]))
    truth = world.truth_metrics().set_index("system")
    with tempfile.TemporaryDirectory() as tmp:
        base = load_task(write_bundle(Path(tmp) / "world", world.tables(), world.task_config()))
    rng = np.random.default_rng([seed, 2])
    start = time.perf_counter()
    results = [campaign(world, base, sc, B, rng) for _ in range(runs)]
    seconds = time.perf_counter() - start
    fig = Figures(sc.name, runs, seconds)
    systems = results[0]["systems"]
    true_rank = replicate_ranks(truth["f1"].reindex(systems).to_numpy()[None, :])[0]
    arrays = {k: np.array([r[k] for r in results]) for k in results[0] if k != "systems"}
    k_tests = 0
    zs: dict[str, float] = {}
    for metric in (*METRICS, "theta"):
        if metric == "theta":
            true = np.full((runs, 1), world.pool_coverage)
            est = arrays["theta"][:, None]
            flag = np.broadcast_to(np.asarray(arrays["theta_flag"], bool)[:, None], est.shape)
            lo90, hi90 = arrays["theta_lo90"][:, None], arrays["theta_hi90"][:, None]
            lo95, hi95 = arrays["theta_lo95"][:, None], arrays["theta_hi95"][:, None]
        else:
            true = np.broadcast_to(truth[metric].reindex(systems).to_numpy(), (runs, len(systems)))
            est = arrays[metric]
            flag = arrays[f"{metric}_flag"]
            lo90, hi90 = arrays[f"{metric}_lo90"], arrays[f"{metric}_hi90"]
            lo95, hi95 = arrays[f"{metric}_lo95"], arrays[f"{metric}_hi95"]
        err = est - true
        with np.errstate(invalid="ignore", divide="ignore"):
            z = np.nanmean(err, axis=0) / (np.nanstd(err, axis=0, ddof=1) / math.sqrt(runs))
        exempt = flag.mean(axis=0) >= 0.5
        z = np.where(exempt | ~np.isfinite(z), 0.0, np.abs(z))
        k_tests += int((~exempt).sum())
        zs[metric] = float(z.max())
        ok = ~flag & np.isfinite(lo95)
        fig.cover95[metric], fig.cover_se[metric] = _coverage(lo95, hi95, true, ok)
        fig.cover90[metric], _ = _coverage(lo90, hi90, true, ~flag & np.isfinite(lo90))
        fig.flagged[metric] = float(flag.mean())
    fig.zmax = max(3.0, float(ndtri(1 - 0.005 / max(k_tests, 1))))
    fig.bias = zs
    inside = (arrays["rank_lo"] <= true_rank) & (true_rank <= arrays["rank_hi"])
    fig.rankset = float(inside.all(axis=1).mean())
    fig.outside = float(np.mean(arrays["outside"]))
    if sc.null:
        fig.fwer = float((np.nanmax(arrays["tiers"], axis=1) > 1).mean())
    mc = math.sqrt(0.05 * 0.95 / runs)
    fig.checks["bias"] = all(v <= fig.zmax for v in zs.values())
    fig.checks["cover95"] = all(
        not np.isfinite(fig.cover95[m])
        or fig.cover95[m] >= 0.93 - 2 * np.nan_to_num(fig.cover_se[m])
        for m in fig.cover95
    )
    fig.checks["cover90"] = all(
        not np.isfinite(fig.cover90[m])
        or fig.cover90[m] >= 0.88 - 2 * np.nan_to_num(fig.cover_se[m])
        for m in fig.cover90
    )
    fig.checks["rankset"] = fig.rankset >= 0.95 - 2 * mc
    fig.checks["range"] = fig.outside == 0
    if fig.fwer is not None:
        fig.checks["fwer"] = fig.fwer <= 0.05 + 2 * mc
    return fig


def _fmt(v: float | None, spec: str = ".3f") -> str:
    return "n/a" if v is None or not np.isfinite(v) else format(v, spec)


def report(fig: Figures) -> str:
    names = {"theta": "θ̂", "precision": "prec", "pooled_recall": "ν̂", "recall": "recall"}
    lines = [
        f"== {fig.name}: {fig.runs} runs, {fig.seconds:.0f} s "
        f"(bias target |z| <= {fig.zmax:.2f}; coverage targets 0.93/0.88 - 2 se)"
    ]
    for m in ("theta", *METRICS):
        lines.append(
            f"   {names[m]:>7}: |bias| {fig.bias[m]:5.2f} SE   cover90 {_fmt(fig.cover90[m])}   "
            f"cover95 {_fmt(fig.cover95[m])} (se {_fmt(fig.cover_se[m])})   "
            f"flagged {fig.flagged[m]:.1%}"
        )
    extra = f"   rank sets cover all: {fig.rankset:.3f}   precision printed outside [0,1]: {fig.outside:.1%} of runs"
    if fig.fwer is not None:
        extra += f"   tier FWER: {fig.fwer:.3f}"
    lines.append(extra)
    lines.append(
        "   " + "  ".join(f"{k}: {'PASS' if v else 'FAIL'}" for k, v in fig.checks.items())
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, seed=2024, reps=None, reps_name="runs")
    parser.add_argument(
        "--quick", action="store_true", help="five scenarios, 20 runs, B = 200 (else 40, 300)"
    )
    parser.add_argument("--bootstrap", type=int, default=None, help="replicates per campaign")
    parser.add_argument("--only", nargs="*", default=None, help="scenario names")
    parser.add_argument("--method", default="percentile", choices=["percentile", "basic", "BCa"])
    parser.add_argument(
        "--mention-weighted",
        action="store_true",
        help="leave out exhaustive.tsv's documents column (θ̂ mention-weighted, as before)",
    )
    parser.add_argument(
        "--facts-not-classes",
        action="store_true",
        help="count every fact of an equivalence class separately (the estimators as before)",
    )
    args = harness.parse(parser, argv)
    tee = harness.Tee()
    if args.facts_not_classes:
        import functools

        import receval.scoring

        receval.scoring.build_sample_data = functools.partial(
            receval.scoring.build_sample_data, classes=False
        )
    METHOD["method"] = args.method
    OPTIONS["mention_weighted"] = args.mention_weighted
    runs = args.runs or (20 if args.quick else 40)
    B = args.bootstrap or (200 if args.quick else 300)
    chosen = [
        s
        for s in SCENARIOS
        if (args.only is None or s.name in args.only) and (not args.quick or s.name in QUICK)
    ]
    failed, table, checks = 0, [], []
    for sc in chosen:
        fig = study(sc, runs, B, args.seed + zlib.crc32(sc.name.encode()) % 10_000)
        if fig is None:
            print(f"== {sc.name}: n/a (needs {', '.join(sc.needs)})", flush=True)
            continue
        print(report(fig), flush=True)
        failed += not all(fig.checks.values())
        table += _rows(fig)
        checks.append(
            {"scenario": fig.name, "fwer": fig.fwer, "rank_set": fig.rankset}
            | {k: "PASS" if v else "FAIL" for k, v in fig.checks.items()}
        )
    print(f"{len(chosen) - failed} of {len(chosen)} scenarios pass")
    figures = {"runs": runs, "bootstrap": B, "pass": f"{len(chosen) - failed} of {len(chosen)}"}
    figures |= {"coverage": table, "checks": checks}
    harness.store(args, "validity", figures, argv, output=tee, title=f"method {args.method}")
    return 0


def _rows(fig: Figures) -> list[dict]:
    """One row per metric of a scenario's figures (coverage with its Monte Carlo SE, bias)."""
    return [
        {
            "scenario": fig.name,
            "metric": metric,
            "cover90": fig.cover90.get(metric),
            "cover95": fig.cover95[metric],
            "cover_se": fig.cover_se.get(metric),
            "flagged": fig.flagged.get(metric),
            "worst_bias_z": fig.bias.get(metric),
        }
        for metric in fig.cover95
    ]


if __name__ == "__main__":
    raise SystemExit(main())
