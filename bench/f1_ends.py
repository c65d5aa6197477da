"""What F1's two joint ends of ``score --intervals anytime`` cost on data/kbp-sim, against
another checkout's :mod:`receval.estimators.anytime.cells` (e.g. main's), in one process.

The task is scored once with ``intervals="anytime"`` (seed ``--seed``) and the arguments of
every :func:`receval.estimators.anytime.cells.lazy_joint_end` call are kept (F1's lower and
upper ends: the :class:`~receval.estimators.anytime.f1.DirectF1`, θ's streams and bets, α,
the side).  Then both codes' ``lazy_joint_end`` are run on them, interleaved run for run
(``--repeat`` rounds, the least CPU seconds of each kept), and their ends compared bit for
bit.  Only ``cells.py`` is taken from ``--against`` (loaded as a separate module; every
module it imports is this checkout's, which this comparison assumes unchanged).

Per code: CPU seconds (both sides; with the capital evaluations' thread pool as the library
runs it), the capital evaluations from the streams (calls and entries: levels × streams ×
steps; the bisections, and the checks rounding could decide), the cells evaluated once at a
fixed end from their θ-free factors (``fast``), the cells bisected per side, and for this
checkout :data:`receval.estimators.anytime.cells.COUNTS` per side and stage.

Usage: PYTHONPATH=<checkout> python bench/f1_ends.py --against /tmp/base37 [--label f1ends37]
       [--seed 1] [--repeat 3]
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness  # noqa: E402


def capture(task: str, seed: int) -> list[tuple]:
    """The arguments of every lazy_joint_end call of one anytime scoring (F1's two ends)."""
    import receval
    import receval.estimators.anytime.f1 as f1
    from receval.task import load_task

    calls = []
    plain = f1.lazy_joint_end

    def keep(direct, theta, alpha, side):
        calls.append((direct, theta, alpha, side))
        return plain(direct, theta, alpha, side)

    f1.lazy_joint_end = keep
    try:
        receval.score(load_task(task), seed=seed, intervals="anytime")
    finally:
        f1.lazy_joint_end = plain
    return calls


def other_cells(checkout: Path):
    """``cells.py`` of ``checkout`` (a folder holding a receval package) as its own module."""
    path = checkout / "receval" / "estimators" / "anytime" / "cells.py"
    spec = importlib.util.spec_from_file_location("_against_cells", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def counted(module, calls) -> tuple[dict, list]:
    """One run of ``module``'s ends on ``calls`` with its work counted, and the ends."""
    import receval.estimators.anytime.betting as betting

    tally = {"capital_calls": 0, "capital_entries": 0, "fast_cells": 0, "bisected": {}}
    plain = betting.log_capital

    def capital(streams, bets, mu, *rest, **kw):
        tally["capital_calls"] += 1
        tally["capital_entries"] += int(np.size(mu)) * int(streams.shape[1])
        return plain(streams, bets, mu, *rest, **kw)

    keys = module._Cells.keys

    def bisect(self, theta, budget, rows, guess=None):
        side = "lower" if self.side > 0 else "upper"
        tally["bisected"][side] = tally["bisected"].get(side, 0) + int(rows.size)
        return keys(self, theta, budget, rows, guess)

    betting.log_capital, module._Cells.keys = capital, bisect
    fast = _count_fast(module, tally)
    try:
        ends = [module.lazy_joint_end(*call) for call in calls]
    finally:
        betting.log_capital, module._Cells.keys = plain, keys
        fast()
    return tally, ends


def _count_fast(module, tally):
    """Count the cells evaluated from their factors (``fast`` per system before, the batched
    ``_fast_rows`` after); returns the function that undoes it."""
    if hasattr(module, "_fast_rows"):
        plain = module._fast_rows

        def rows(P, Q, r, c):
            tally["fast_cells"] += int(np.size(r))
            return plain(P, Q, r, c)

        module._fast_rows = rows
        return lambda: setattr(module, "_fast_rows", plain)
    plain = module._Cells.fast

    def one(p, q, end, theta):
        tally["fast_cells"] += int(np.size(theta))
        return plain(p, q, end, theta)

    module._Cells.fast = staticmethod(one)
    return lambda: setattr(module._Cells, "fast", staticmethod(plain))


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=1)
    parser.add_argument("--label", default="f1ends37")
    parser.add_argument("--task", default=str(HERE.parent / "data" / "kbp-sim"))
    parser.add_argument("--against", type=Path, required=True,
                        help="a checkout (folder holding its receval) whose cells.py to compare")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (least CPU)")
    args = harness.parse(parser, argv)
    import receval.estimators.anytime.cells as ours

    calls = capture(args.task, args.seed)
    codes = {"after": ours, "before": other_cells(args.against)}
    cpu: dict[str, list[float]] = {name: [] for name in codes}
    ends = {}
    for _ in range(args.repeat):
        for name, module in codes.items():
            run = harness.timed(lambda m=module: [m.lazy_joint_end(*call) for call in calls])
            cpu[name].append(run.cpu)
            ends[name] = run.value
    same = all(np.array_equal(a, b) for a, b in zip(ends["after"], ends["before"], strict=True))
    figures: dict = {"against": str(args.against), "systems": int(calls[0][0].u.shape[0]),
                     "steps": int(calls[0][0].u.shape[1]), "ends_identical": bool(same)}  # fmt: skip
    for name, module in codes.items():
        ours.COUNTS.clear()
        tally, _ = counted(module, calls)
        figures[f"{name}_cpu_s"] = round(min(cpu[name]), 3)
        figures.update({f"{name}_{k}": v for k, v in tally.items()})
        if module is ours:
            figures["after_counts"] = {
                f"{'lower' if side > 0 else 'upper'} stage {stage} {what}": n
                for (side, stage, what), n in sorted(ours.COUNTS.items())
            }  # fmt: skip
    figures["cpu_ratio"] = round(figures["after_cpu_s"] / figures["before_cpu_s"], 3)
    print(json.dumps({args.label: figures}, indent=2))
    harness.store(args, "f1_ends", figures, argv, title=args.label)


if __name__ == "__main__":
    main()
