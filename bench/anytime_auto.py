"""What ``score``'s default (``intervals="auto"``) should switch to after a top-up chosen by
looking: the betting ``anytime`` intervals or ``anytime-asymptotic``, at small draws.

The scenario is ``bench/flags.py --only looking`` (issue 37), run at several first-round sizes:
a 12-system null world (:func:`bench.topup.null_world`: every system precision 0.4 and recall
0.2, teams that share facts, exhaustive units); round 1 of ``--first`` draws per system
(``uneven``: then a second round of 0–2×first draws for a random half of the systems, chosen
without looking, so the samples are uneven; ``multidoc``: the same null world but each true
fact supported by 2.5 documents on average, :func:`multidoc_world`, so one fact has several
answer strings that the systems output apart); look: score with the bootstrap; top up the best
``--top`` by F1 with :func:`receval.planning.adaptive_sample_sizes` at ``--width`` (what
``receval sample --adaptive --target-width W --system …`` does).  Each method in ``--methods``
scores the task at both looks (before and after the top-up).

Per (first-round size, world, method): the coverage of the 95 % intervals at each look and at
both looks together, per metric, for the topped-up systems and the others (cluster SE over
repetitions: one world's systems err together; the target is ≥ 0.95 − 2 SE per look), the tier
family-wise error (more than one tier at some look: every system is equally good; target ≤
0.05 + 2 SE), the median half-widths after the top-up, and the CPU seconds per scoring.

Usage: python bench/anytime_auto.py [--first 10 20 30] [--worlds null uneven multidoc] [--reps R]
[--seed S] [--methods anytime anytime-asymptotic]
Results go to ``bench/results/anytime_auto.json`` (command, seed, commit, date, figures).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import flags  # noqa: E402  (bench/flags.py: coverage helpers)
import harness  # noqa: E402

from receval.design import new_sample_round  # noqa: E402
from receval.planning import adaptive_sample_sizes  # noqa: E402
from receval.scoring import ScoreOptions, score_task  # noqa: E402

METRICS = flags.METRICS
#: the methods compared by default
METHODS = ["anytime", "anytime-asymptotic"]


#: documents per true fact in the ``multidoc`` world (bench/flags.py's and the F1 tests' 2.5)
DOCUMENTS_PER_FACT = 2.5


def multidoc_world(seed: int, systems: int = 12, queries: int = 100):
    """:func:`bench.topup.null_world` with every true fact supported by
    :data:`DOCUMENTS_PER_FACT` documents on average (the first world whose teams all have 2–4
    systems, as there)."""
    import tempfile

    import pandas as pd

    from receval.formats.bundle import write_bundle
    from receval.simulation import SimulationConfig, simulate_world
    from receval.task import load_task

    topup = flags.sibling("topup")
    cfg = SimulationConfig(systems=systems, queries=queries, teams=max(1, systems // 3),
                           per_system=30, documents_per_fact=DOCUMENTS_PER_FACT,
                           **topup.NULL_WORLD)  # fmt: skip
    for k in range(200):
        world = simulate_world(cfg, np.random.default_rng([seed, 2, k]))
        if pd.Series(world.teams).value_counts().between(2, 4).all():
            break
    with tempfile.TemporaryDirectory() as tmp:
        base = load_task(write_bundle(Path(tmp) / "world", world.tables(), world.task_config()))
    return world, base


def score_look(task, options, systems, truth) -> dict:
    """One look scored with ``options``: per metric the coverage, half-widths; tier split; CPU."""
    start = time.process_time()
    board = score_task(task, options).leaderboard.set_index("system").reindex(systems)
    rec = {"cpu": time.process_time() - start}
    tiers = board["tier"].replace("", np.nan).astype(float)
    rec["split"] = bool(np.nanmax(tiers) > 1) if np.isfinite(tiers).any() else False
    rec["interval"] = str(board["interval"].iloc[0])
    for metric in METRICS:
        rec[f"cover_{metric}"] = flags.covered(board, truth, metric)
        rec[f"half_{metric}"] = (board[f"{metric}_hi"] - board[f"{metric}_lo"]).to_numpy() / 2
    return rec


def uneven_round(world, base, task, samples, ann, rng, first: int):
    """A second round for a random half of the systems, 0–2×first draws each (no looking)."""
    topup = flags.sibling("topup")
    systems = sorted(world.systems)
    pick = rng.choice(systems, size=len(systems) // 2, replace=False).tolist()
    sizes = {s: int(rng.integers(0, 2 * first + 1)) for s in pick}
    extra = new_sample_round(task, sizes, seed=int(rng.integers(2**31)), systems=pick)
    samples = topup._concat(samples, extra.samples)
    return topup._annotated(world, base, samples, ann), samples


def one_rep(world, base, truth, rng, *, first, top, width, methods, uneven) -> dict:
    """Round 1 (and an uneven round), look, top up the leaders by F1; every method at both
    looks."""
    topup = flags.sibling("topup")
    systems = sorted(world.systems)
    ann = world.annotate(rng, per_system=first)
    opts = ScoreOptions(bootstrap=200, seed=int(rng.integers(2**31)))
    task = topup._annotated(world, base, ann.samples, ann)
    samples = ann.samples
    if uneven:
        task, samples = uneven_round(world, base, task, samples, ann, rng, first)
    chosen = list(score_task(task, opts).leaderboard["system"][:top])
    plan = adaptive_sample_sizes(task, width, systems=chosen)
    sizes = dict(zip(plan["system"], plan["n"].astype(int), strict=True))
    extra = new_sample_round(task, sizes, seed=int(rng.integers(2**31)), systems=chosen)
    looked = topup._annotated(world, base, topup._concat(samples, extra.samples), ann)
    out = {"topped": np.isin(systems, [s for s, n in sizes.items() if n > 0])}
    for method in methods:
        options = dataclasses.replace(opts, intervals=method)
        out[method] = [score_look(t, options, systems, truth) for t in (task, looked)]
    return out


def figures(runs: list[dict], methods) -> dict:
    """Per method: coverage per look and at both looks (topped / others), FWER, widths, CPU."""
    topped = np.array([r["topped"] for r in runs])
    fig: dict = {"reps": len(runs)}
    for method in methods:
        looks = [[r[method][k] for r in runs] for k in (0, 1)]
        f = {
            "interval": looks[1][0]["interval"],
            "fwer": flags.share([a["split"] or b["split"] for a, b in zip(*looks, strict=True)]),
            "cpu_per_score_s": float(np.mean([x["cpu"] for look in looks for x in look])),
        }
        for metric in METRICS:
            hit = [np.array([x[f"cover_{metric}"] for x in look]) for look in looks]
            half = np.array([x[f"half_{metric}"] for x in looks[1]])
            for group, mask in (("topped", topped), ("others", ~topped)):
                f[f"{metric}_{group}"] = {
                    "cover_look1": flags.cluster_share(hit[0], mask),
                    "cover_look2": flags.cluster_share(hit[1], mask),
                    "cover_both": flags.cluster_share(hit[0] & hit[1], mask),
                    "half_width": float(np.nanmedian(half[mask])),
                }
        fig[method] = f
    return fig


def verdicts(fig: dict, methods) -> dict:
    """Per method: whether every look's coverage ≥ 0.95 − 2 SE and FWER ≤ 0.05 + 2 SE."""
    out = {}
    for method in methods:
        f = fig[method]
        low = []
        for metric in METRICS:
            for group in ("topped", "others"):
                for look in ("cover_look1", "cover_look2"):
                    c, se = f[f"{metric}_{group}"][look]
                    if np.isfinite(c) and c < 0.95 - 2 * (se if np.isfinite(se) else 0.0):
                        low.append(f"{metric} {group} {look[6:]} {c:.3f}±{se:.3f}")
        p, se = f["fwer"]
        fwer_ok = p <= 0.05 + 2 * max(se, np.sqrt(0.05 * 0.95 / fig["reps"]))
        out[method] = {"valid": not low and fwer_ok, "below": low, "fwer_ok": bool(fwer_ok)}
    return out


def print_figures(label: str, fig: dict, methods, verdict: dict) -> None:
    print(f"{label}: {fig['reps']} repetitions")
    for method in methods:
        f = fig[method]
        p, se = f["fwer"]
        ok = "VALID" if verdict[method]["valid"] else "NOT VALID"
        print(f"  {method}: tier FWER {p:.3f} ± {se:.3f}; {f['cpu_per_score_s']:.2f} CPU s per "
              f"score; {ok} {verdict[method]['below']}")  # fmt: skip
        for metric in METRICS:
            for group in ("topped", "others"):
                g = f[f"{metric}_{group}"]
                looks = "  ".join(f"{k[6:]} {g[k][0]:.3f}±{g[k][1]:.3f}"
                                  for k in ("cover_look1", "cover_look2", "cover_both"))  # fmt: skip
                print(f"    {metric:<14} {group:<7} {looks}  half-width {g['half_width']:.3f}")


def main(argv: list[str] | None = None) -> dict:
    parser = harness.parser(__doc__, seed=37, reps=20)
    parser.add_argument("--first", type=int, nargs="*", default=[10, 20, 30])
    parser.add_argument("--worlds", nargs="*", default=["null", "uneven", "multidoc"],
                        choices=["null", "uneven", "multidoc"])  # fmt: skip
    parser.add_argument("--methods", nargs="*", default=METHODS)
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--width", type=float, default=0.05)
    args = harness.parse(parser, argv)
    topup = flags.sibling("topup")
    out = {}
    for kind in args.worlds:
        make = multidoc_world if kind == "multidoc" else topup.null_world
        world, base = make(args.seed, 12)
        truth = world.truth_metrics().set_index("system")
        for first in args.first:
            rng = np.random.default_rng([args.seed, first, kind == "uneven"])
            runs = []
            for rep in range(args.reps):
                runs.append(one_rep(world, base, truth, rng, first=first, top=args.top,
                                    width=args.width, methods=args.methods,
                                    uneven=kind == "uneven"))  # fmt: skip
                print(f"  {kind} first={first} rep {rep} done", file=sys.stderr, flush=True)
            fig = figures(runs, args.methods)
            fig["verdict"] = verdicts(fig, args.methods)
            label = f"{kind} world, first round {first} per system"
            if args.methods != METHODS:  # its own record, beside the default's
                label += f" ({', '.join(args.methods)} only, {args.reps} repetitions)"
            print_figures(label, fig, args.methods, fig["verdict"])
            out[label] = fig
            # each configuration stored as it ends (a record per title: a long run keeps what
            # it finished)
            harness.store(args, "anytime_auto", fig, argv, title=label)
    return out


if __name__ == "__main__":
    main()
