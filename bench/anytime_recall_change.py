"""Recall's anytime ends before and after a change of the recall code, on the same labels.

The loop of :mod:`bench.anytime` (ranked and decided by precision: a first ``--until-decided``
round of 20 per system, then rounds of 10 per system, ``score --intervals anytime`` at every
look) runs once in a child importing this checkout's ``receval`` (or ``--after DIR``'s) and once in a child importing
``--against DIR``'s (e.g. the commit before dae3547, which searched recall's joint ends over
ν = r/θ instead of bisecting per θ cell).  Ranked by precision, the draws do not depend on
recall, so both children see the same labels; the script checks it (the precision ends must
agree) before comparing.  Worlds: ``null12`` (bench/anytime.py's null world, 12 systems of
precision 0.5) and ``classes`` (bench/anytime_classes.py's null world with aliases).

Printed per world, over (repetition, look, system): the largest change of the precision ends
(0 when the labels are the same), recall's width after / before (median, 5 % and 95 %
quantiles), the largest change of each recall end, the share of recall intervals narrower,
wider and equal (within 1e-9); per (repetition, system) recall covered at every look after
and before (SE over repetitions) and the pairs whose verdict differs; F1 the same (F1's joint
ends are its own code: they should not move).  Stored in
``bench/results/anytime_recall_change.json``.

Usage: python bench/anytime_recall_change.py --against DIR [--after DIR] [--label TEXT] [--reps R]
[--seed S] [--worlds null12 classes] [--rounds L]
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import harness  # noqa: E402

ENDS = ("precision", "recall", "f1")


def _world(name: str, seed: int, where: Path):
    """(world, task, a loop factory) of ``name``: bench/anytime.py's null12 or the classes
    world of bench/anytime_classes.py."""
    import anytime as base
    import anytime_classes as classes

    from receval.simulation import SimulationConfig

    if name == "classes":
        world, task = classes.alias_world(12, seed, where, 0.25)
        return world, task, lambda s: classes.class_loop(world, task, 20, s)
    config = SimulationConfig(
        systems=12, queries=40, precision_range=(0.5, 0.500001), recall_range=(0.05, 0.3),
        uppercase_teams=0.0, exhaustive_facts=60,
    )  # fmt: skip
    world, task = base.world_task(config, seed, where)
    return world, task, lambda s: base.Loop(world, task, first=20, seed=s)


def emit(name: str, reps: int, seed: int, rounds: int, out: Path) -> None:
    """Every look's ends (rep, look, system) of ``name`` into ``out`` (.npz), NaN past a
    loop's last look; the loops seeded as bench/anytime.py's and anytime_classes.py's."""
    with tempfile.TemporaryDirectory() as tmp:
        world, task, loop_of = _world(name, seed, Path(tmp))
        names = list(task.systems)
        shape = (reps, rounds + 1, len(names))
        ends = {f"{m}_{side}": np.full(shape, np.nan) for m in ENDS for side in ("lo", "hi")}
        for rep in range(reps):
            loop = loop_of(1000 * seed + rep)
            for r in range(rounds + 1):
                board = loop.look("precision").leaderboard.set_index("system").reindex(names)
                for key, values in ends.items():
                    values[rep, r] = board[key].to_numpy(float)
                if r == rounds or not loop.step(10 * len(names), seed=rep, rank_by="precision"):
                    break
        truth = world.truth_metrics().set_index("system").reindex(names)
        np.savez(out, **ends, **{f"true_{m}": truth[m].to_numpy(float) for m in ENDS})


def _run(checkout: Path, name: str, args, out: Path) -> float:
    """This script in ``--emit`` mode in a child importing ``checkout``'s receval; CPU s."""
    env = os.environ | {"PYTHONPATH": f"{checkout}{os.pathsep}{HERE}"}
    cmd = [sys.executable, "-P", str(Path(__file__).resolve()), "--emit", str(out),
           "--worlds", name, "--reps", str(args.reps), "--seed", str(args.seed),
           "--rounds", str(args.rounds)]  # fmt: skip
    return harness.run_child(["nice", "-n", "10", *cmd], env=env).cpu


def _covered(d, metric: str) -> np.ndarray:
    """Per (rep, system): the true value inside the interval at every look it had."""
    lo, hi, true = d[f"{metric}_lo"], d[f"{metric}_hi"], d[f"true_{metric}"]
    inside = (lo - 1e-9 <= true) & (true <= hi + 1e-9)
    return np.where(np.isnan(lo), True, inside).all(axis=1)


def _rep_share(ok: np.ndarray) -> tuple[float, float]:
    """Mean over repetitions of the share covered, with its SE over repetitions."""
    per = ok.mean(axis=1)
    return float(per.mean()), float(per.std(ddof=1) / math.sqrt(per.size)) if per.size > 1 else 0.0


def compare(after, before) -> dict:
    """The figures of one world (module docstring)."""
    fig: dict = {}
    lo, hi = after["precision_lo"], after["precision_hi"]
    fig["precision_ends_max_change"] = float(
        np.nanmax(
            np.abs(
                np.r_[(lo - before["precision_lo"]).ravel(), (hi - before["precision_hi"]).ravel()]
            )
        )
    )
    for m in ("recall", "f1"):
        wa = after[f"{m}_hi"] - after[f"{m}_lo"]
        wb = before[f"{m}_hi"] - before[f"{m}_lo"]
        keep = np.isfinite(wa) & np.isfinite(wb) & (wb > 0)
        ratio = wa[keep] / wb[keep]
        diff = wa[keep] - wb[keep]
        ca, cb = _covered(after, m), _covered(before, m)
        fig[m] = {
            "intervals": int(keep.sum()),
            "width_ratio_median": float(np.median(ratio)),
            "width_ratio_q05_q95": [
                float(np.quantile(ratio, 0.05)),
                float(np.quantile(ratio, 0.95)),
            ],
            "width_ratio_mean": float(ratio.mean()),
            "lo_max_change": float(np.nanmax(np.abs(after[f"{m}_lo"] - before[f"{m}_lo"]))),
            "hi_max_change": float(np.nanmax(np.abs(after[f"{m}_hi"] - before[f"{m}_hi"]))),
            "narrower": float((diff < -1e-9).mean()),
            "wider": float((diff > 1e-9).mean()),
            "covered_every_look_after": _rep_share(ca),
            "covered_every_look_before": _rep_share(cb),
            "verdicts_differ": int((ca != cb).sum()),
        }
    return fig


def _print(name: str, fig: dict, reps: int) -> None:
    print(f"{name}: {reps} reps, precision ends max change {fig['precision_ends_max_change']:.3g}"
          " (0: the same labels)")  # fmt: skip
    for m in ("recall", "f1"):
        f = fig[m]
        q = f["width_ratio_q05_q95"]
        print(f"  {m}: width after / before median {f['width_ratio_median']:.4f} (5-95 % "
              f"{q[0]:.4f}-{q[1]:.4f}, mean {f['width_ratio_mean']:.4f}, {f['intervals']} "
              f"intervals); narrower {f['narrower']:.3f}, wider {f['wider']:.3f}; max end "
              f"change lo {f['lo_max_change']:.3g} hi {f['hi_max_change']:.3g}")  # fmt: skip
        a, b = f["covered_every_look_after"], f["covered_every_look_before"]
        print(f"  {m}: covered at every look after {a[0]:.3f} (SE {a[1]:.3f}), before "
              f"{b[0]:.3f} (SE {b[1]:.3f}); (rep, system) verdicts differing: "
              f"{f['verdicts_differ']}")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=1, reps=20)
    parser.add_argument("--against", type=Path, default=None,
                        help="folder holding the receval before the change")  # fmt: skip
    parser.add_argument("--after", type=Path, default=HERE.parent,
                        help="folder holding the receval after the change (default: this checkout)")  # fmt: skip
    parser.add_argument("--label", default="", help="what the folders are (e.g. their commits)")
    parser.add_argument("--worlds", nargs="*", default=["null12", "classes"])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--emit", type=Path, default=None,
                        help="internal: write one world's ends to this .npz (the children)")  # fmt: skip
    args = harness.parse(parser, argv)
    if args.emit is not None:
        emit(args.worlds[0], args.reps, args.seed, args.rounds, args.emit)
        return
    if args.against is None:
        parser.error("--against DIR is required")
    figures: dict = {"after": str(args.after), "against": str(args.against), "label": args.label}
    tee = harness.Tee()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.worlds:
            start = time.perf_counter()
            paths = {k: Path(tmp) / f"{name}-{k}.npz" for k in ("after", "before")}
            cpu = {"after": _run(args.after, name, args, paths["after"]),
                   "before": _run(args.against, name, args, paths["before"])}  # fmt: skip
            fig = compare(np.load(paths["after"]), np.load(paths["before"]))
            fig["cpu_s"] = {k: round(v, 1) for k, v in cpu.items()}
            fig["seconds"] = round(time.perf_counter() - start, 1)
            _print(name, fig, args.reps)
            figures[name] = fig
    harness.store(args, "anytime_recall_change", figures, argv, output=tee)


if __name__ == "__main__":
    main()
