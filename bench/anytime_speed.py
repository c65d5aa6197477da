"""What ``score --intervals anytime`` costs against the bootstrap on data/kbp-sim (the README's
demo bundle, scored as the README scores it: ``receval score data/kbp-sim``).

Measures, for the default bootstrap and for ``--intervals anytime`` (and, with ``--asymptotic``,
``anytime-asymptotic``):

* **cold**: the CLI in a fresh process (``receval score data/kbp-sim --intervals X --no-report``),
  imports and the task's loading included: CPU seconds of the child (user + system, all threads)
  and wall seconds;
* **warm**: the library in this process (the task loaded once, one call made before), CPU and
  wall seconds of ``receval.score`` — the bootstrap's best of 3 runs (it is short, so the load
  of the machine moves it most), the anytime run's best of ``--repeat``;

and their ratios (anytime / bootstrap, CPU: the figure to compare on a shared machine; wall
follows the load), the capital evaluations of the anytime run's bisections (calls and entries:
levels × streams × steps) and its median widths.  With ``--reference DIR`` (an output folder of
the same command written by the code measured against, e.g. main's), the cold run's output
folder is compared with it file by file (run.json without its ``created`` time and the task's
path as given): ``identical``.

Cold runs are repeated (``--cold-repeat``, default 3) and the least CPU kept: on a shared
machine one fresh process's CPU moves by a second or more with the load.  ``--against DIR``
(a checkout of the code to compare with, e.g. main's exported: the folder holding its
``receval``) runs that code's cold processes interleaved with these, run for run, and stores
its figures as ``against_*``: before and after measured in one session.

The bootstrap is the same code on both sides, and its CPU moves most between fresh processes
(OpenBLAS's threads spin while they wait): with ``--against``, ``*_cold_cpu_ratio_pooled``
divides each side's cold anytime CPU by the least bootstrap CPU of both sides' runs.
``--child-env NAME=VALUE`` (repeatable) sets a variable in every cold child, e.g.
``OPENBLAS_NUM_THREADS=1`` (the bootstrap without its BLAS threads' waiting).

``--label`` names the code measured (e.g. ``before``/``after``); results are merged into
``bench/results/anytime_speed.json`` under it.

Usage: PYTHONPATH=<checkout> python bench/anytime_speed.py [--label after] [--seed 1]
       [--reference /tmp/speed-ref/anytime] [--asymptotic] [--cold-repeat 3] [--against DIR]
       [--child-env NAME=VALUE ...]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness  # noqa: E402


def timed(func):
    run = harness.timed(func)
    return run.value, run.cpu, run.wall


#: variables set in every cold child's environment (``--child-env``)
CHILD_ENV: dict[str, str] = {}


def cold(task: str, intervals: str, out: Path, checkout: Path | None = None) -> tuple[float, float]:
    """CPU (user + system of the child) and wall seconds of the CLI in a fresh process (of the
    receval in ``checkout``, a folder holding the package, when given; with
    :data:`CHILD_ENV`)."""
    cmd = [sys.executable, "-m", "receval.cli", "score", task, "--intervals", intervals,
           "--no-report", "--quiet", "--out", str(out)]  # fmt: skip
    env = dict(os.environ, **CHILD_ENV) if CHILD_ENV else None
    if checkout is not None:
        env = dict(env or os.environ, PYTHONPATH=str(checkout))
    child = harness.run_child(cmd, env=env)
    return child.cpu, child.wall


def colds(task: str, kinds: list[str], tmp: Path, repeat: int, against: Path | None) -> dict:
    """Cold CPU and wall per (checkout, method): the least CPU of ``repeat`` fresh processes
    (the run least disturbed by the machine's other work) with its wall; with ``against``,
    that checkout's runs interleaved with this one's, run for run, so both see the same load."""
    sides = {"": None} | ({"against_": against} if against is not None else {})
    runs: dict = {}
    for _ in range(repeat):
        for kind in kinds:
            for prefix, checkout in sides.items():
                out = tmp / f"{prefix}{kind}"
                runs.setdefault((prefix, kind), []).append(cold(task, kind, out, checkout))
    return {key: min(values) for key, values in runs.items()}


def same_outputs(ours: Path, reference: Path) -> dict:
    """Every file of ``reference`` compared with ``ours`` (run.json without ``created`` and
    ``inputs.task``, the path the command line gave)."""
    differ = []
    for path in sorted(reference.iterdir()):
        mine = ours / path.name
        if not mine.exists():
            differ.append(path.name)
        elif path.name == "run.json":
            a, b = (json.loads(p.read_text()) for p in (path, mine))
            for d in (a, b):  # when it ran, and the task's path as the command line gave it
                d.pop("created", None)
                d.get("inputs", {}).pop("task", None)
            if a != b:
                differ.append(path.name)
        elif path.read_bytes() != mine.read_bytes():
            differ.append(path.name)
    return {"reference": str(reference), "identical": not differ, "differ": differ}


def warm_anytime(receval, betting, task, seed: int, intervals: str, repeat: int):
    """Best-of-``repeat`` CPU and wall of the warm anytime run, its result and its counts."""
    counts = [0, 0]
    plain = betting.log_capital

    def counted(streams, bets, mu, *rest, **kw):
        counts[0] += 1
        counts[1] += int(np.size(mu)) * int(streams.shape[1])
        return plain(streams, bets, mu, *rest, **kw)

    runs = []
    for r in range(repeat):
        betting.log_capital = counted if r == 0 else plain
        runs.append(timed(lambda: receval.score(task, seed=seed, intervals=intervals)))
    betting.log_capital = plain
    cpu, wall = min(r[1] for r in runs), min(r[2] for r in runs)
    return runs[0][0], cpu, wall, counts


def pooled_ratios(both: dict, kinds: list[str]) -> dict:
    """Per side and method, cold anytime CPU over the least bootstrap CPU of both sides."""
    boot = min(both["", "bootstrap"][0], both["against_", "bootstrap"][0])
    out = {}
    for kind in kinds:
        key = kind.replace("-", "_")
        for prefix in ("", "against_"):
            out[f"{prefix}{key}_cold_cpu_ratio_pooled"] = round(both[prefix, kind][0] / boot, 2)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=1)
    parser.add_argument("--label", default="after")
    parser.add_argument("--task", default=str(HERE.parent / "data" / "kbp-sim"))
    parser.add_argument("--repeat", type=int, default=2, help="warm anytime runs (best of)")
    parser.add_argument("--reference", type=Path, default=None,
                        help="output folder of the same anytime command by the reference code")  # fmt: skip
    parser.add_argument("--asymptotic", action="store_true", help="also anytime-asymptotic")
    parser.add_argument("--cold-repeat", type=int, default=3,
                        help="fresh processes per method (the least CPU is kept)")  # fmt: skip
    parser.add_argument("--against", type=Path, default=None,
                        help="a second checkout (folder holding its receval package) whose cold "
                        "runs are interleaved with these: before and after in one session")  # fmt: skip
    parser.add_argument("--child-env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable set in every cold child (repeatable)")  # fmt: skip
    args = harness.parse(parser, argv)
    CHILD_ENV.update(item.split("=", 1) for item in args.child_env)
    import receval

    try:
        import receval.estimators.anytime.betting as betting
    except ImportError:  # a checkout from before the anytime subpackage (the 'before' runs)
        import receval.estimators.betting as betting
    from receval.task import load_task

    kinds = ["anytime"] + (["anytime-asymptotic"] if args.asymptotic else [])
    tmp = Path(tempfile.mkdtemp(prefix="anytime_speed_"))
    both = colds(args.task, ["bootstrap", *kinds], tmp, args.cold_repeat, args.against)
    task = load_task(args.task)
    receval.score(task, seed=args.seed)  # the first call's start-up costs
    boots = [timed(lambda: receval.score(task, seed=args.seed))[1:] for _ in range(3)]
    boot_cpu, boot_wall = min(b[0] for b in boots), min(b[1] for b in boots)
    figures = {
        "bootstrap_cold_cpu_s": round(both["", "bootstrap"][0], 2),
        "bootstrap_cold_wall_s": round(both["", "bootstrap"][1], 2),
        "bootstrap_cpu_s": round(boot_cpu, 2), "bootstrap_wall_s": round(boot_wall, 2),
    }  # fmt: skip
    if CHILD_ENV:
        figures["child_env"] = dict(CHILD_ENV)
    if args.against is not None:
        figures["against"] = str(args.against)
        figures.update(pooled_ratios(both, kinds))
        for kind in ["bootstrap", *kinds]:
            key = kind.replace("-", "_")
            figures[f"against_{key}_cold_cpu_s"] = round(both["against_", kind][0], 2)
            if kind != "bootstrap":
                ratio = both["against_", kind][0] / both["against_", "bootstrap"][0]
                figures[f"against_{key}_cold_cpu_ratio"] = round(ratio, 2)
    for kind in kinds:
        key = kind.replace("-", "_")
        result, cpu, wall, counts = warm_anytime(
            receval, betting, task, args.seed, kind, args.repeat
        )
        board = result.leaderboard
        widths = {m: float(np.nanmedian(board[f"{m}_hi"] - board[f"{m}_lo"]))
                  for m in ("precision", "pooled_recall", "recall", "f1")}  # fmt: skip
        figures.update({
            f"{key}_cold_cpu_s": round(both["", kind][0], 2),
            f"{key}_cold_wall_s": round(both["", kind][1], 2),
            f"{key}_cpu_s": round(cpu, 2), f"{key}_wall_s": round(wall, 2),
            f"{key}_cpu_ratio": round(cpu / boot_cpu, 2),
            f"{key}_wall_ratio": round(wall / boot_wall, 2),
            f"{key}_cold_cpu_ratio": round(both["", kind][0] / both["", "bootstrap"][0], 2),
            f"{key}_capital_evaluations": counts[0], f"{key}_capital_entries": counts[1],
            f"{key}_median_widths": {k: round(v, 5) for k, v in widths.items()},
        })  # fmt: skip
    if args.reference is not None:
        figures["anytime_outputs"] = same_outputs(tmp / "anytime", args.reference)
    print(json.dumps({args.label: figures}, indent=2))
    receval_dir = str(Path(receval.__file__).parent)
    harness.store(args, "anytime_speed", figures, argv, title=args.label, receval=receval_dir)


if __name__ == "__main__":
    main()
