"""What the paired tests of ``score --intervals anytime`` cost on data/kbp-sim, this checkout's
against another's (e.g. main's exported), in one process, interleaved run for run.

The inputs are those of a real run (F1's pairs from ``receval.score(task, intervals="anytime")``,
precision's from ``rank_by="precision"``), taken after a bootstrap score so that the process's
memory is in the state of a real run (on inputs loaded in a fresh process the plain passes
paid for their fresh arrays' page faults, and reused buffers looked 1.8× faster than they are).
Prints, per metric, the CPU seconds of ``f1_pair_tests`` / ``pair_tests`` of both checkouts
(best of ``--repeat``) and their ratio, whether every field of the two ``PairTests`` and
``steps_to_decide`` are identical, and, for the shortcut that skips a pair's steps once it is
decided, its upper bound: the pairs decided by the end and the share of all (pair, step) cells
after the step where a direction's log capital first reaches log(2P/α).

Usage: PYTHONPATH=<checkout> python bench/pair_tests_speed.py [--against /tmp/base37]
       [--repeat 3]
"""

from __future__ import annotations

import importlib.util
import sys
import time
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness  # noqa: E402

FIELDS = ("pairs", "up", "down", "mean", "moment", "steps", "better", "pvalues")


def other_modules(checkout: Path):
    """The pairs and f1 modules of ``checkout`` (a folder holding its receval), f1 importing
    that checkout's pairs."""
    folder = checkout / "receval" / "estimators" / "anytime"
    spec = importlib.util.spec_from_file_location("against_pairs", folder / "pairs.py")
    pairs = importlib.util.module_from_spec(spec)
    sys.modules["against_pairs"] = pairs
    spec.loader.exec_module(pairs)
    source = (folder / "f1.py").read_text()
    source = source.replace(
        "from receval.estimators.anytime.pairs import", "from against_pairs import"
    )
    f1 = types.ModuleType("against_f1")
    sys.modules["against_f1"] = f1
    exec(compile(source, str(folder / "f1.py"), "exec"), f1.__dict__)
    return pairs, f1


def captured_inputs(task) -> dict:
    """The arguments of the F1 and precision paired tests of real anytime runs."""
    import receval
    from receval.estimators.anytime import method

    got: dict = {}
    plain_f1, plain_pairs = method.f1_pair_tests, method.pair_tests

    def spy(name, func):
        def inner(*args):
            got[name] = args
            return func(*args)

        return inner

    method.f1_pair_tests = spy("f1", plain_f1)
    method.pair_tests = spy("precision", plain_pairs)
    try:
        receval.score(task, intervals="anytime")
        receval.score(task, intervals="anytime", rank_by="precision")
    finally:
        method.f1_pair_tests, method.pair_tests = plain_f1, plain_pairs
    return got


def identical(a, b) -> bool:
    same = all(
        np.array_equal(getattr(a, f), getattr(b, f), equal_nan=True) for f in FIELDS
    )  # fmt: skip
    return same and np.array_equal(a.steps_to_decide(), b.steps_to_decide(), equal_nan=True)


def cpu(func):
    start = time.process_time()
    value = func()
    return time.process_time() - start, value


def decided_share(metric: str, args) -> dict:
    """Pairs decided by the end, and the share of (pair, step) cells after the first step
    where a direction reaches log(2P/α): what skipping decided pairs could save at most."""
    from receval.estimators.anytime import f1, pairs

    if metric == "f1":
        terms, sizes, facts, ok, alpha = args
        _idx, pp = pairs.ok_pairs(ok & (sizes > 0))
        alpha = alpha * (1.0 - f1.T_SHARE)
    else:
        terms, ok, alpha = args
        _idx, pp = pairs.ok_pairs(ok)
    P, S = pp.shape[0], terms.y.shape[1]
    level = np.log(2 * P / alpha)
    first = np.full(P, S)
    for start in range(0, P, 6):
        a, b = pp[start : start + 6].T
        if metric == "f1":
            n = np.asarray(sizes, float)
            c, r = np.sqrt(n[a] * n[b])[:, None], np.sqrt(n[a] / n[b])[:, None]
            A = terms.y[a] - terms.y[b]
            slope = r * terms.y[a] - terms.y[b] / r - A
            lo = np.minimum(terms.lo[a] - terms.hi[b], r * terms.lo[a] - terms.hi[b] / r)
            hi = np.maximum(terms.hi[a] - terms.lo[b], r * terms.hi[a] - terms.lo[b] / r)
            ref = A + f1._w(facts.reference[None, :], c) * slope
            up, down, act = pairs.pair_bets(ref, lo, hi, terms.active[a] & terms.active[b])
            ds = [np.where(act, A + f1._w(T, c) * slope, 0.0) for T in (facts.lower, facts.upper)]
        else:
            d = terms.y[a] - terms.y[b]
            lo, hi = terms.lo[a] - terms.hi[b], terms.hi[a] - terms.lo[b]
            up, down, act = pairs.pair_bets(d, lo, hi, terms.active[a] & terms.active[b])
            ds = [np.where(act, d, 0.0)]
        path_up = np.minimum.reduce([pairs.capital_path(up, d) for d in ds])
        path_down = np.minimum.reduce([pairs.capital_path(down, -d) for d in ds])
        hit = np.maximum(path_up, path_down) >= level
        first[start : start + 6] = np.where(hit.any(axis=1), hit.argmax(axis=1), S)
    return {
        "pairs": P,
        "decided_pairs": int((first < S).sum()),
        "cells_after_decision_share": round(float(((S - first) / S).sum() / P), 4),
    }


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--task", default=str(HERE.parent / "data" / "kbp-sim"))
    parser.add_argument("--against", type=Path, default=Path("/tmp/base37"))
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs (best of)")
    args = harness.parse(parser, argv)
    import receval
    from receval.estimators.anytime import f1, pairs
    from receval.task import load_task

    task = load_task(args.task)
    receval.score(task)  # the process's memory as in a real run
    inputs = captured_inputs(task)
    other_pairs, other_f1 = other_modules(args.against)
    calls = {
        "f1": (f1.f1_pair_tests, other_f1.f1_pair_tests),
        "precision": (pairs.pair_tests, other_pairs.pair_tests),
    }
    figures: dict = {"against": str(args.against)}
    for metric, (ours, theirs) in calls.items():
        runs: dict = {"ours": [], "against": []}
        same = True
        for _ in range(args.repeat):
            t_them, them = cpu(lambda theirs=theirs, metric=metric: theirs(*inputs[metric]))
            t_us, us = cpu(lambda ours=ours, metric=metric: ours(*inputs[metric]))
            runs["against"].append(t_them)
            runs["ours"].append(t_us)
            same &= identical(us, them)
        best_us, best_them = min(runs["ours"]), min(runs["against"])
        figures[metric] = {
            "cpu_s": round(best_us, 3), "against_cpu_s": round(best_them, 3),
            "cpu_ratio": round(best_us / best_them, 3), "identical": bool(same),
            "shortcut_bound": decided_share(metric, inputs[metric]),
        }  # fmt: skip
        print(metric, figures[metric], flush=True)
    harness.store(args, "pair_tests_speed", figures, argv)


if __name__ == "__main__":
    main()
