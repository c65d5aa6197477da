"""Asymptotic anytime intervals (``--intervals anytime-asymptotic``) against the betting sequences
(``--intervals anytime``) and the fixed-n bootstrap: resolution, validity at every look, widths.

Studies (each prints its figures with Monte Carlo standard errors and stores them in
``bench/results/anytime_asymptotic.json`` with the command, seed, git commit and date):

* **population** (unit level, no scoring): campaigns of until-decided-style rounds on one fixed
  finite population whose design makes the importance weights uneven (correct facts of half the
  systems drawn with weight 0.15: weights ~7x the typical one; :func:`bench.anytime
  .finite_population`), a data-dependent allocation chasing the leaders; per system the share
  of campaigns whose precision sequence *ever* misses the truth (target ≤ 0.05 + 2 SE),
  betting and asymptotic on the same terms and bets, plus the final widths (240 draws);
  ``long``: rounds of 400 (2,040 draws).
* **gradient** (:data:`bench.anytime.GRADIENT`: 12 systems, precision 0.35-0.80 in three
  groups, 50 queries): per repetition the loop (``sample --until-decided``, a first round of 20
  per system, then 8 rounds of 39 per system: 3,984 draws) deciding with each method, the
  ordered pairs at its final look and whether any look ordered a pair against the truth; a
  fixed equal design of the same draws (same first round and floor, ``fixed_round``) scored
  once with the bootstrap (step-down): its ordered pairs; targets: loop / equal-bootstrap ≥ 0.8,
  a wrong pair in ≤ 0.05 + 2 SE of repetitions.  Widths at the final look (median over systems
  of asymptotic / bootstrap and asymptotic / betting, on the asymptotic loop's labels), and the
  ordered pairs of every method at every look of the equal design (its resolution as labels
  grow).
* **null** (12 systems of equal precision 0.5, ranked by precision): the loop deciding with the
  asymptotic method, 8 looks after the first round (rounds of 10 per system); the share of
  repetitions in which no look splits the tiers (target ≥ 0.95 − 2 SE), and of (repetition,
  system) whose precision and pooled-recall intervals cover the truth at every look (target
  ≥ 0.95 − 2 SE, SE over repetitions).

Usage: python bench/anytime_asymptotic.py [--reps R] [--seed S] [--only population gradient
null] [--rank-by precision|f1] [--out FILE]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import anytime as base  # noqa: E402  (bench/anytime.py: worlds, loops, populations)
import harness  # noqa: E402

import receval  # noqa: E402
from receval.simulation import SimulationConfig  # noqa: E402

METHODS = ("anytime", "anytime-asymptotic")
RESULTS = HERE / "results" / "anytime_asymptotic.json"


class MethodLoop(base.Loop):
    """bench/anytime.py's campaign with the loop deciding by ``intervals``."""

    def __init__(self, world, task, first: int, seed: int, intervals: str):
        self.intervals = intervals
        super().__init__(world, task, first, seed)

    def step(self, batch: int, seed: int, rank_by: str, top: int | None = None) -> bool:
        drawn = receval.sample(self.task, until_decided=True, batch=batch, seed=seed,
                               rank_by=rank_by, intervals=self.intervals)  # fmt: skip
        self.state = drawn.decisions
        if drawn.decided:
            return False
        new = drawn.samples.reindex(columns=base.COLUMNS)
        new.attrs = {}
        self.samples = (
            pd.concat([self.samples, new], ignore_index=True) if len(self.samples) else new
        )
        self.task = self._task()
        return True


def ordered_pairs(task, intervals: str, rank_by: str) -> set[tuple[str, str]]:
    """The pairs (better, worse) the method's paired tests order at this look."""
    from receval.estimators.base import ScoringContext
    from receval.estimators.registry import get_interval_method
    from receval.estimators.sample_data import build_sample_data
    from receval.options import ScoreOptions

    data = build_sample_data(task)
    ctx = ScoringContext(task, data, ScoreOptions(intervals=intervals, confidence=0.95))
    key = "pooled_recall" if rank_by == "recall" else rank_by
    tests = get_interval_method(intervals).pair_tests(ctx, key, data.sizes > 0)
    a, b = np.nonzero(tests.better)
    names = list(data.systems)
    return {(names[i], names[j]) for i, j in zip(a, b, strict=True)}


def bootstrap_pairs(task, rank_by: str, B: int = 1000) -> int:
    """Ordered pairs of one bootstrap score (step-down tests): Σ (rank_lo − 1)."""
    board = receval.score(task, intervals="bootstrap", rank_by=rank_by, bootstrap=B).leaderboard
    return int((board["rank_lo"] - 1).sum())


def widths(task, rank_by: str) -> dict[str, dict[str, float]]:
    """Median over systems of the width ratios asymptotic / bootstrap and asymptotic / betting."""
    boards = {
        iv: receval.score(
            task, intervals=iv, rank_by=rank_by, bootstrap=1000
        ).leaderboard.set_index("system")
        for iv in ("bootstrap", *METHODS)
    }
    asym = boards["anytime-asymptotic"]
    return {
        "vs_bootstrap": base.width_ratios(asym, boards["bootstrap"]),
        "vs_betting": base.width_ratios(asym, boards["anytime"]),
        "betting_vs_bootstrap": base.width_ratios(boards["anytime"], boards["bootstrap"]),
    }


def gradient_world(seed: int, where: Path):
    g = base.GRADIENT
    config = SimulationConfig(
        systems=g["systems"], teams=g["teams"], queries=g["queries"],
        precision_range=g["precision"], recall_range=(0.1, 0.3), uppercase_teams=0.0,
        exhaustive_facts=60,
    )  # fmt: skip
    world, task = base.world_task(config, seed, where)
    return world, task, world.truth_metrics().set_index("system")


def gradient_study(reps: int, seed: int, where: Path, rank_by: str = "precision",
                   rounds: int = 8, per: int = 39, with_widths: bool = True) -> dict:  # fmt: skip
    """The loop deciding with each method against the equal design scored by the bootstrap
    (module docstring)."""
    world, task, truth = gradient_world(seed, where)
    m = len(task.systems)
    key = "pooled_recall" if rank_by == "recall" else rank_by
    out: dict[str, list] = {"equal_bootstrap": [], "draws": []}
    for iv in METHODS:
        out.update({f"{iv} loop": [], f"{iv} wrong": [], f"{iv} equal": []})
    curve: dict[str, list] = {iv: [] for iv in ("bootstrap", *METHODS)}
    ratio = {k: {met: [] for met in base.METRICS} for k in
             ("vs_bootstrap", "vs_betting", "betting_vs_bootstrap")}  # fmt: skip
    for rep in range(reps):
        draws = {}
        for iv in METHODS:
            loop = MethodLoop(world, task, first=20, seed=2000 * seed + rep, intervals=iv)
            wrong = False
            for r in range(rounds + 1):
                got = ordered_pairs(loop.task, iv, rank_by)
                wrong |= any(truth[key][a] < truth[key][b] for a, b in got)
                if r == rounds or not loop.step(per * m, seed=rep, rank_by=rank_by):
                    break
            out[f"{iv} loop"].append(len(got))
            out[f"{iv} wrong"].append(wrong)
            draws[iv] = len(loop.samples)
            if with_widths and iv == "anytime-asymptotic":
                for k, v in widths(loop.task, rank_by).items():
                    for met, x in v.items():
                        ratio[k][met].append(x)
        equal = base.Loop(world, task, first=20, seed=2000 * seed + rep)
        look = []
        for r in range(rounds):
            base._fixed_step(equal, per * m, seed=10_000 + rep + r)
            if r % 2 == 1 or r == rounds - 1:
                look.append([bootstrap_pairs(equal.task, rank_by)]
                            + [len(ordered_pairs(equal.task, iv, rank_by)) for iv in METHODS])  # fmt: skip
        for k, iv in enumerate(("bootstrap", *METHODS)):
            curve[iv].append([row[k] for row in look])
        out["equal_bootstrap"].append(look[-1][0])
        for k, iv in enumerate(METHODS, start=1):
            out[f"{iv} equal"].append(look[-1][k])
        out["draws"].append([draws[iv] for iv in METHODS] + [len(equal.samples)])
        print(f"  rep {rep}: loop pairs {[out[f'{iv} loop'][-1] for iv in METHODS]}, equal "
              f"bootstrap {look[-1][0]}, equal by method {look[-1][1:]}, draws "
              f"{out['draws'][-1]}", file=sys.stderr, flush=True)  # fmt: skip
    res = {k: np.asarray(v, float) for k, v in out.items()}
    res["curve"] = {iv: np.asarray(v, float) for iv, v in curve.items()}
    res["curve_draws"] = [20 * m + per * m * (r + 1) for r in range(rounds)
                          if r % 2 == 1 or r == rounds - 1]  # fmt: skip
    res["ratios"] = ratio
    res["truth"] = sorted(truth[key].to_numpy(), reverse=True)
    return res


def null_study(reps: int, seed: int, where: Path, rounds: int = 8,
               intervals: str = "anytime-asymptotic") -> dict:  # fmt: skip
    """Equal systems (precision 0.5), the loop deciding by precision with ``intervals``, scored
    with it at every look: tiers split at some look, coverage at every look."""
    systems = 12
    config = SimulationConfig(
        systems=systems, queries=40, precision_range=(0.5, 0.500001), recall_range=(0.05, 0.3),
        uppercase_teams=0.0, exhaustive_facts=60,
    )  # fmt: skip
    world, task = base.world_task(config, seed, where)
    truth = world.truth_metrics().set_index("system")
    names = list(task.systems)
    metrics = ("precision", "pooled_recall")
    split, covered, unflagged = [], {m: [] for m in metrics}, {m: [] for m in metrics}
    for rep in range(reps):
        loop = MethodLoop(world, task, first=20, seed=1000 * seed + rep, intervals=intervals)
        any_split = False
        ok = {m: np.ones(systems, bool) for m in metrics}
        ok_unflagged = {m: np.ones(systems, bool) for m in metrics}  # a flagged look claims nothing
        for r in range(rounds + 1):
            board = loop.look("precision", intervals=intervals).leaderboard.set_index("system")
            any_split |= board["tier"].astype(str).nunique() > 1
            notes = board["note"].reindex(names).fillna("").astype(str)
            for m in metrics:
                inside = base.inside_by_system(board, truth, m, names)
                ok[m] &= inside
                ok_unflagged[m] &= inside | notes.str.contains(f"{m}: flagged").to_numpy()
            if r == rounds or not loop.step(10 * systems, seed=rep, rank_by="precision"):
                break
        split.append(any_split)
        for m in metrics:
            covered[m].append(ok[m].mean())
            unflagged[m].append(ok_unflagged[m].mean())
        print(f"  rep {rep}: split {any_split}, covered {[ok[m].mean() for m in metrics]}, "
              f"unflagged {[ok_unflagged[m].mean() for m in metrics]}",
              file=sys.stderr, flush=True)  # fmt: skip
    return {"split": np.asarray(split, float),
            **{f"covered {m}": np.asarray(v, float) for m, v in covered.items()},
            **{f"covered unflagged {m}": np.asarray(v, float) for m, v in unflagged.items()}}  # fmt: skip


def population_study(
    streams: int, seed: int, rounds: int = 6, alpha: float = 0.05, batch: int = 40
) -> dict:
    """Precision sequences of both capitals on the same terms and bets (module docstring):
    per system the share of campaigns that ever miss the truth, and the final widths."""
    from receval.estimators.anytime.asymptotic import (
        asymptotic_ends,
        gaussian_log_path,
        warm,
        warm_ess,
    )
    from receval.estimators.anytime.betting import BettingStreams, confidence_bounds, rejected
    from receval.estimators.anytime.control import controlled_precision_streams
    from receval.estimators.anytime.sequences import sequence_bets

    rng = np.random.default_rng(seed)
    pop = base.finite_population(rng)
    m = pop.p.shape[1]
    runs = [base.population_stream(pop, rng, rounds=rounds, batch=batch) for _ in range(streams)]
    parts = [
        controlled_precision_streams(
            pop.target[r["fact"]], pop.label[r["fact"]], r["q"], r["own"], r["own_b"],
            r["stratum"], r["mass"], fact=r["fact"],
        ) for r in runs
    ]  # fmt: skip
    stacked = BettingStreams(*(np.concatenate([getattr(p, f) for p in parts]) for f in (
        "u", "v", "lo0", "lo1", "hi0", "hi1", "active")))  # fmt: skip
    horizon = np.concatenate([r["horizon"].T for r in runs])
    bets = sequence_bets(stacked, alpha, horizon)
    hits = np.concatenate([(pop.target[r["fact"]] > 0).T for r in runs])
    # the method's precision warm-up (asymptotic_bounds): WARMUP_HITS hits and a Kish ESS of
    # the system's earlier importance weights t/q of WARMUP_ESS
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.concatenate([
            np.where(r["own"] > 0, pop.target[r["fact"]] / r["q"][:, None], 0.0).T for r in runs
        ])  # fmt: skip
    ready = warm_ess(weights)
    warmed = np.where(warm(hits, hits.shape) & ready, bets, 0.0)
    truth = np.tile(pop.precision, streams)
    level = np.log(2.0 / alpha)
    miss_asym = (gaussian_log_path(stacked, warmed, truth, +1, True) >= level) | (
        gaussian_log_path(stacked, warmed, truth, -1, True) >= level
    )
    miss_bet = rejected(stacked, bets, truth, alpha)
    lo, hi = confidence_bounds(stacked, [alpha], alpha_bets=alpha, prior_mean=0.5,
                               horizon=horizon, prior_scale=0.5, iterations=16)  # fmt: skip
    a_lo, a_hi = asymptotic_ends(stacked, [alpha], (0.0, 1.0), alpha, horizon, hits=hits,
                                 ready=ready)[alpha]  # fmt: skip
    with np.errstate(divide="ignore", invalid="ignore"):  # a width 0 (all known) is left out
        ratio = np.where(hi[0] > lo[0], (a_hi - a_lo) / (hi[0] - lo[0]), np.nan)
    return {
        "miss asymptotic": miss_asym.reshape(streams, m).mean(axis=0),
        "miss betting": miss_bet.reshape(streams, m).mean(axis=0),
        "width asymptotic / betting": float(np.nanmedian(ratio)),
        "streams": streams,
        "draws": int(stacked.shape[1]),
    }


def _mean_se(x) -> tuple[float, float]:
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if not x.size:
        return float("nan"), float("nan")
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else float("nan")


def _share(x) -> tuple[float, float]:
    x = np.asarray(x, float)
    p = float(x.mean())
    return p, float(np.sqrt(max(p * (1 - p), 0.05 * 0.95) / x.size))


def report_population(out: dict, label: str) -> dict:
    se = float(np.sqrt(0.05 * 0.95 / out["streams"]))
    fig = {"streams": out["streams"], "draws": out["draws"], "se": se,
           "width asymptotic / betting": out["width asymptotic / betting"]}  # fmt: skip
    print(f"population{label}: {out['streams']} campaigns, {out['draws']} draws each, "
          f"SE of a 0.05 share {se:.4f}")  # fmt: skip
    for k in ("miss betting", "miss asymptotic"):
        share = out[k]
        verdict = "PASS" if share.max() <= 0.05 + 2 * se else "FAIL"
        fig[k] = share.round(4).tolist()
        fig[f"{k} pass"] = verdict == "PASS"
        print(f"  ever-miss share per system, {k[5:]}: {share.round(4).tolist()} (target <= "
              f"0.05 + 2 SE) {verdict}")  # fmt: skip
    print(f"  final width asymptotic / betting (median): {out['width asymptotic / betting']:.3f}")
    return fig


def report_gradient(out: dict, rank_by: str) -> dict:
    fig: dict = {"truth": [round(x, 3) for x in out["truth"]], "rank_by": rank_by}
    eb, eb_se = _mean_se(out["equal_bootstrap"])
    print(f"gradient ({len(out['equal_bootstrap'])} reps, ranked by {rank_by}): true "
          f"{' '.join(f'{x:.2f}' for x in out['truth'])}")  # fmt: skip
    print(f"  equal design, {out['draws'][0][-1]:.0f} draws, bootstrap (step-down) orders "
          f"{eb:.2f} pairs (SE {eb_se:.2f})")  # fmt: skip
    fig["equal bootstrap pairs"] = [eb, eb_se]
    for iv in METHODS:
        loop = out[f"{iv} loop"]
        ratio = loop / np.maximum(out["equal_bootstrap"], 1)
        r, r_se = _mean_se(ratio)
        w, w_se = _share(out[f"{iv} wrong"])
        lp, lp_se = _mean_se(loop)
        ep, ep_se = _mean_se(out[f"{iv} equal"])
        verdict = "PASS" if r >= 0.8 else "FAIL"
        wv = "PASS" if w <= 0.05 + 2 * w_se else "FAIL"
        print(f"  {iv}: loop's final look orders {lp:.2f} (SE {lp_se:.2f}; median "
              f"{np.median(loop):.1f}); / equal-bootstrap {r:.3f} (SE {r_se:.3f}; target >= "
              f"0.8) {verdict}; a wrong pair at some look {w:.3f} (SE {w_se:.3f}; target <= "
              f"0.05 + 2 SE) {wv}; the equal design read by it orders {ep:.2f} (SE {ep_se:.2f})")  # fmt: skip
        fig[iv] = {"loop pairs": [lp, lp_se], "loop median": float(np.median(loop)),
                   "loop / equal bootstrap": [r, r_se], "wrong": [w, w_se],
                   "equal design pairs": [ep, ep_se]}  # fmt: skip
    draws = out["curve_draws"]
    fig["equal design pairs by draws"] = {"draws": draws}
    for iv, rows in out["curve"].items():
        means = rows.mean(axis=0)
        fig["equal design pairs by draws"][iv] = means.round(2).tolist()
        print(f"  equal design, pairs by {iv} at {draws} draws: {means.round(2).tolist()}")
    for k, per in out["ratios"].items():
        fig[f"width {k}"] = {}
        for met, v in per.items():
            mu, se = _mean_se(v)
            fig[f"width {k}"][met] = [mu, se]
        text = ", ".join(f"{met} {fig[f'width {k}'][met][0]:.3f}" for met in per)
        print(f"  final-look width ratio {k.replace('_', ' ')} (median over systems): {text}")
    return fig


def report_null(out: dict, intervals: str) -> dict:
    split, se = _share(out["split"])
    fig = {"reps": int(out["split"].size), "no split": [1 - split, se]}
    verdict = "PASS" if 1 - split >= 0.95 - 2 * se else "FAIL"
    print(f"null, {intervals} (12 equal systems, 9 looks, {out['split'].size} reps): tiers never split "
          f"{1 - split:.3f} (SE {se:.3f}; target >= 0.95 - 2 SE) {verdict}")  # fmt: skip
    for key in ("covered", "covered unflagged"):
        for m in ("precision", "pooled_recall"):
            if f"{key} {m}" not in out:
                continue
            c, c_se = _mean_se(out[f"{key} {m}"])
            c_se = c_se if np.isfinite(c_se) else 0.0
            verdict = "PASS" if c >= 0.95 - 2 * c_se else "FAIL"
            where = "every look" if key == "covered" else "every look whose interval is unflagged"
            print(f"  {m} covered at {where}: {c:.3f} (SE {c_se:.3f}; target >= 0.95 - 2 SE) "
                  f"{verdict}")  # fmt: skip
            fig[f"{key} {m}"] = [c, c_se]
    return fig


def main(argv: list[str] | None = None) -> dict:
    parser = harness.parser(__doc__, seed=1, reps=None)
    parser.add_argument("--only", nargs="*", default=["population", "gradient", "null"])
    parser.add_argument("--rank-by", default="precision", choices=["precision", "f1"])
    parser.add_argument("--no-widths", action="store_true")
    parser.add_argument(
        "--intervals", default="anytime-asymptotic", choices=METHODS,
        help="null: the method the loop decides with and the looks are scored with",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = harness.parse(parser, argv)
    figures: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            start = time.process_time()
            if name == "population":
                n = args.reps or 1000
                figures["population"] = report_population(population_study(n, args.seed), "")
                figures["population long"] = report_population(
                    population_study(n, args.seed, batch=400), " long (rounds of 400)"
                )
            elif name == "gradient":
                out = gradient_study(args.reps or 4, args.seed, Path(tmp), args.rank_by,
                                     with_widths=not args.no_widths)  # fmt: skip
                figures[f"gradient {args.rank_by}"] = report_gradient(out, args.rank_by)
            elif name == "null":
                out = null_study(args.reps or 12, args.seed, Path(tmp), intervals=args.intervals)
                figures[f"null {args.intervals}"] = report_null(out, args.intervals)
            cpu = time.process_time() - start
            print(f"  CPU {cpu:.0f} s", flush=True)
    title = " ".join(args.only) + f" {args.rank_by} {args.intervals}"
    command = harness.command("anytime_asymptotic", argv)
    if args.out and not args.no_store:
        harness.store_result("anytime_asymptotic", command, args.seed, figures, title=title,
                             out=args.out)  # fmt: skip
    record = {"command": command, "seed": args.seed, "figures": figures}
    return record


if __name__ == "__main__":
    main()
