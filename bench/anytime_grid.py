"""What the θ grid of recall's and F1's anytime ends costs and buys on data/kbp-sim: the width
each grid gives against the time it takes (``score --intervals anytime``, warm, the task loaded).

Recall θ·ν and F1 take their ends over the cells of a θ grid (a coarse grid, then finer grids
over each system's extreme cell and its neighbours:
:func:`receval.estimators.anytime.sequences.joint_bounds`).  Every cell bounds the quantity over
the whole cell, so *any* grid gives valid ends (the proof does not depend on the grid); a
coarser one is cheaper and wider.  Per configuration (:data:`CONFIGS`: ``THETA_GRID``,
``REFINE_GRID``, ``REFINE_STAGES``) this prints

* the capital entries of the run (levels × streams × steps summed over every capital
  evaluation: the work, independent of the machine's load) and those of the θ grid alone, and
  the CPU seconds of the run (best of ``--repeat``; follows the load);
* the median widths of recall and F1 and their ratio to the default grid's, the largest
  widening of any system, and how many systems' intervals contain the default's (a coarser
  grid whose cells are unions of the default's cells would contain it everywhere; these grids
  are not nested, so a few may be narrower by a bisection step).

The default grid is the first configuration.  No coverage study here: the grids change only
which valid bound is reported (bench/anytime.py measures coverage).

Usage: PYTHONPATH=<checkout> python bench/anytime_grid.py [--repeat 1] [--task data/kbp-sim]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness  # noqa: E402

#: (THETA_GRID, REFINE_GRID, REFINE_STAGES); the first is the default
CONFIGS = [(20, 16, 2), (20, 16, 1), (12, 16, 2), (12, 8, 2), (12, 8, 1), (8, 8, 1)]


def run(task, config, repeat: int) -> dict:
    """One configuration: its entries (all, θ grid), CPU seconds and the leaderboard's ends."""
    import receval
    import receval.estimators.anytime.betting as betting
    import receval.estimators.anytime.f1 as f1
    import receval.estimators.anytime.sequences as seq

    theta, refine, stages = config
    saved = (seq.THETA_GRID, seq.REFINE_GRID, seq.REFINE_STAGES, betting.log_capital)
    counts = {"all": 0, "grid": 0}
    inside = [False]
    plain, joint_end, lazy = betting.log_capital, seq._joint_end, f1.lazy_joint_end

    def counted(streams, bets, mu, *rest, **kw):
        n = int(np.size(mu)) * int(streams.shape[1])
        counts["all"] += n
        counts["grid"] += n if inside[0] else 0
        return plain(streams, bets, mu, *rest, **kw)

    def grid_of(func):  # recall's (legacy) and F1's (lazy, f1.DirectF1.joint_end) θ grids
        def in_grid(*a, **kw):
            inside[0] = True
            try:
                return func(*a, **kw)
            finally:
                inside[0] = False

        return in_grid

    seq.THETA_GRID, seq.REFINE_GRID, seq.REFINE_STAGES = theta, refine, stages
    cpu, board = [], None
    try:
        for r in range(repeat):
            betting.log_capital, seq._joint_end, f1.lazy_joint_end = (
                (counted, grid_of(joint_end), grid_of(lazy)) if r == 0 else (plain, joint_end, lazy)
            )
            timed = harness.timed(lambda: receval.score(task, seed=1, intervals="anytime"))
            cpu.append(timed.cpu)
            board = timed.value.leaderboard
    finally:
        seq.THETA_GRID, seq.REFINE_GRID, seq.REFINE_STAGES, betting.log_capital = saved
        seq._joint_end, f1.lazy_joint_end = joint_end, lazy
    return {"cpu": min(cpu), "counts": counts, "board": board}


def compare(board, default) -> dict:
    """Median widths of recall and F1, their ratio to the default's, the largest widening of a
    system and how many contain the default's interval."""
    out = {}
    for m in ("recall", "f1"):
        width = (board[f"{m}_hi"] - board[f"{m}_lo"]).to_numpy()
        base = (default[f"{m}_hi"] - default[f"{m}_lo"]).to_numpy()
        ok = np.isfinite(width) & np.isfinite(base) & (base > 0)
        contains = (board[f"{m}_lo"] <= default[f"{m}_lo"]) & (
            board[f"{m}_hi"] >= default[f"{m}_hi"]
        )
        out[m] = {
            "median_width": round(float(np.median(width[ok])), 5),
            "median_ratio": round(float(np.median(width[ok] / base[ok])), 4),
            "max_ratio": round(float(np.max(width[ok] / base[ok])), 4),
            "contain_default": f"{int(contains[ok].sum())}/{int(ok.sum())}",
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--task", default=str(HERE.parent / "data" / "kbp-sim"))
    parser.add_argument("--repeat", type=int, default=1, help="runs per configuration (best of)")
    args = harness.parse(parser, argv)
    import receval
    from receval.task import load_task

    task = load_task(args.task)
    receval.score(task, seed=1)  # the first call's start-up costs
    full = None
    rows = {}
    for config in CONFIGS:
        res = run(task, config, args.repeat)
        if full is None:
            full = res
        key = "theta {}, refine {} x {}".format(*config)
        rows[key] = {
            "cpu_s": round(res["cpu"], 2),
            "entries": res["counts"]["all"],
            "grid_entries": res["counts"]["grid"],
            "entries_ratio": round(res["counts"]["all"] / full["counts"]["all"], 3),
            **compare(res["board"], full["board"]),
        }
        print(key, rows[key], flush=True)
    receval_dir = str(Path(receval.__file__).parent)
    harness.store(args, "anytime_grid", rows, argv, receval=receval_dir)


if __name__ == "__main__":
    main()
