"""Warm CPU of the stages of ``score --intervals anytime`` that recall37 made cheaper, before and
after, in one process, interleaved (data/kbp-sim, the README's demo bundle).

The stages' inputs are recorded from one warm ``receval.score(task, intervals="anytime")`` of
this checkout, then each stage is timed with the code before and after its change, run for run
(best of ``--reps``, the order of the three runs reversed every other repetition; CPU = user +
system of every thread of the process, the figure compared):

* **recall lower / upper**: recall's ends over s = r/θ, every grid point's capital evaluated
  (``sequences._dense_over_s``: main's search, unchanged) against the lazy search where it is
  provably exact (``sequences._recall_over_s``);
* **sequences**: precision's, pooled recall's and θ's sequences (``sequences._bounds``), the
  guided bisection started from the range (``betting._normal_guess`` off: main's) against the
  normal-width guess;
* **plugin_bets** and **popularity_strata**: the functions of the checkout given by
  ``--against`` (main exported, e.g. /tmp/base37, the folder holding its ``receval``), loaded
  under another name, against this checkout's.

Every stage's outputs are compared (``identical``), and the capital evaluations of the recall
and sequence stages counted (calls, entries: values × streams).  The code after is also timed
on one thread (``betting.WORKERS`` = 1 instead of the default): what the thread pool costs in
CPU against what it saves in wall.

Usage: PYTHONPATH=<checkout> python bench/betting_stages.py [--against /tmp/base37] [--reps 3]
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness  # noqa: E402


def _load(path: Path, name: str):
    """The module at ``path`` under ``name`` (its own imports resolve to this checkout)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def record_inputs(task):
    """The arguments of every call of the measured stages in one warm anytime score."""
    import receval
    from receval.estimators.anytime import betting, f1, method, sequences, stream

    spied = {"recall": [], "bounds": [], "plugin_bets": [], "strata": []}
    plain = {
        (sequences, "_recall_over_s"): "recall",
        (sequences, "_bounds"): "bounds",
        (method, "_bounds"): "bounds",  # imported by name: a warm run has it already
        (betting, "plugin_bets"): "plugin_bets",
        (sequences, "plugin_bets"): "plugin_bets",
        (f1, "plugin_bets"): "plugin_bets",
        (stream, "popularity_strata"): "strata",
    }
    kept = {key: getattr(*key) for key in plain}

    def spy(func, name):
        def call(*args, **kwargs):
            spied[name].append((args, kwargs))
            return func(*args, **kwargs)

        return call

    for (module, attr), name in plain.items():
        setattr(module, attr, spy(kept[(module, attr)], name))
    try:
        receval.score(task, seed=1, intervals="anytime")
    finally:
        for (module, attr), func in kept.items():
            setattr(module, attr, func)
    return spied


def stages(spied, base_betting, base_control):
    """{stage: (before, after)}: functions of no argument returning the stage's outputs."""
    from receval.estimators.anytime import betting, control, sequences

    def each(func, calls):
        return lambda: [func(*a, **k) for a, k in calls]

    def unguided():
        plain = betting._normal_guess
        betting._normal_guess = lambda *a, **k: None
        try:
            return [sequences._bounds(*a, **k) for a, k in spied["bounds"]]
        finally:
            betting._normal_guess = plain

    lower = [c for c in spied["recall"] if c[0][3] > 0]
    upper = [c for c in spied["recall"] if c[0][3] < 0]
    return {
        "recall lower": (each(sequences._dense_over_s, lower),
                         each(sequences._recall_over_s, lower)),
        "recall upper": (each(sequences._dense_over_s, upper),
                         each(sequences._recall_over_s, upper)),
        "sequences": (unguided, each(sequences._bounds, spied["bounds"])),
        "plugin_bets": (each(base_betting.plugin_bets, spied["plugin_bets"]),
                        each(betting.plugin_bets, spied["plugin_bets"])),
        "popularity_strata": (each(base_control.popularity_strata, spied["strata"]),
                              each(control.popularity_strata, spied["strata"])),
    }  # fmt: skip


def same(a, b) -> bool:
    """Whether two stage outputs are equal bit for bit (NaN equal to NaN)."""
    if isinstance(a, dict | list | tuple):
        keys = a.keys() if isinstance(a, dict) else range(len(a))
        return len(a) == len(b) and all(same(a[k], b[k]) for k in keys)
    if hasattr(a, "__dataclass_fields__"):
        return all(same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def counted(func):
    """func()'s capital evaluations: (calls, entries = values × streams)."""
    from receval.estimators.anytime import betting

    count, plain = [0, 0], betting.log_capital

    def log_capital(streams, bets, mu, *rest, **kw):
        count[0] += 1
        count[1] += int(np.size(mu))
        return plain(streams, bets, mu, *rest, **kw)

    betting.log_capital = log_capital
    try:
        func()
    finally:
        betting.log_capital = plain
    return count


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, reps=3)
    parser.add_argument("--task", default=str(HERE.parent / "data" / "kbp-sim"))
    parser.add_argument("--against", type=Path, default=Path("/tmp/base37"))
    args = harness.parse(parser, argv)
    import receval

    anytime = args.against / "receval" / "estimators" / "anytime"
    base_betting = _load(anytime / "betting.py", "base_betting")
    base_control = _load(anytime / "control.py", "base_control")
    task = receval.load_task(args.task)
    receval.score(task, seed=1, intervals="anytime")  # warm
    measured = stages(record_inputs(task), base_betting, base_control)
    from receval.estimators.anytime import betting

    sides = ("before", "after", "one thread")
    times = {name: {side: [] for side in sides} for name in measured}
    outputs, workers = {}, betting.WORKERS
    for rep in range(args.reps):
        for name, (before, after) in measured.items():
            runs = list(zip(sides, (before, after, after), strict=True))
            for side, func in runs if rep % 2 == 0 else runs[::-1]:  # each order in turn
                betting.WORKERS = 1 if side == "one thread" else workers
                run = harness.timed(func)
                times[name][side].append((run.cpu, run.wall))
                outputs[(name, side)] = run.value
    betting.WORKERS = workers
    figures = []
    for name, (before, after) in measured.items():
        cpu = {s: min(c for c, _ in times[name][s]) for s in sides}
        wall = {s: min(w for _, w in times[name][s]) for s in sides}
        row = {"stage": name, "cpu_before": cpu["before"], "cpu_after": cpu["after"],
               "cpu_ratio": cpu["after"] / cpu["before"], "wall_before": wall["before"],
               "wall_after": wall["after"],
               "identical": same(outputs[(name, "before")], outputs[(name, "after")]),
               "cpu_after_one_thread": cpu["one thread"],
               "wall_after_one_thread": wall["one thread"], "threads": workers}  # fmt: skip
        if name.startswith(("recall", "sequences")):
            row["capitals_before"], row["capitals_after"] = counted(before), counted(after)
        figures.append(row)
        print(f"{name:18s} CPU {cpu['before']:.3f} -> {cpu['after']:.3f} s "
              f"({row['cpu_ratio']:.2f}x), wall {wall['before']:.3f} -> {wall['after']:.3f} s, "
              f"identical {row['identical']}; one thread: CPU {cpu['one thread']:.3f} s, "
              f"wall {wall['one thread']:.3f} s"
              + (f", capitals {row['capitals_before']} -> {row['capitals_after']}"
                 if "capitals_before" in row else ""))  # fmt: skip
    total = {s: sum(r[f"cpu_{s}"] for r in figures) for s in ("before", "after")}
    print(f"{'all':18s} CPU {total['before']:.3f} -> {total['after']:.3f} s")
    if not args.no_store:
        harness.store_result(
            "betting_stages", harness.command("betting_stages", argv), None,
            {"stages": figures, "cpu_before": total["before"], "cpu_after": total["after"]},
            config=harness.configuration(args), title="kbp-sim warm stages",
            against=str(args.against),
        )  # fmt: skip


if __name__ == "__main__":
    main()
