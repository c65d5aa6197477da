"""What ``score --intervals anytime`` costs against the bootstrap on data/kbp-sim (the README's
demo bundle, scored as the README scores it: ``receval score data/kbp-sim``).

Runs both through the library in one process (the task loaded once, then ``score`` with the
default bootstrap and with ``intervals="anytime"``), and prints CPU seconds (all threads) and
wall seconds of each and their ratio, and for the anytime run the capital evaluations of its
bisections (calls and entries: levels × streams × steps). CPU time is the figure to compare on a
shared machine; wall time follows the load (the bootstrap's figures: the best of 3 runs; its
first run, which pays the first call's start-up costs, as earlier runs of this script measured
it, is kept too). ``--label`` names the code measured (e.g. ``before``/``after``); results are
merged into ``bench/results/anytime_speed.json`` under it.

Usage: PYTHONPATH=<checkout> python bench/anytime_speed.py [--label after] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent))
from harness import git_commit

HERE = Path(__file__).resolve().parent


def timed(func):
    wall, cpu = time.perf_counter(), time.process_time()
    out = func()
    return out, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", default="after")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--task", default=str(HERE.parent / "data" / "kbp-sim"))
    args = parser.parse_args()
    import receval
    import receval.estimators.anytime.betting as betting
    from receval.task import load_task

    task = load_task(args.task)
    # the bootstrap is short, so the load of the machine moves it most: its best of 3 runs
    boots = [timed(lambda: receval.score(task, seed=args.seed))[1:] for _ in range(3)]
    boot_cpu, boot_wall = min(b[0] for b in boots), min(b[1] for b in boots)
    counts = [0, 0]
    plain = betting.log_capital

    def counted(streams, bets, mu, *rest, **kw):
        counts[0] += 1
        counts[1] += int(np.size(mu)) * int(streams.shape[1])
        return plain(streams, bets, mu, *rest, **kw)

    betting.log_capital = counted
    result, any_cpu, any_wall = timed(
        lambda: receval.score(task, seed=args.seed, intervals="anytime")
    )
    betting.log_capital = plain
    board = result.leaderboard
    widths = {m: float(np.nanmedian(board[f"{m}_hi"] - board[f"{m}_lo"]))
              for m in ("precision", "pooled_recall", "recall", "f1")}  # fmt: skip
    figures = {
        "bootstrap_cpu_s": round(boot_cpu, 1), "bootstrap_wall_s": round(boot_wall, 1),
        "bootstrap_first_cpu_s": round(boots[0][0], 1),  # with the first call's start-up costs
        "cpu_ratio_to_first": round(any_cpu / boots[0][0], 2),
        "anytime_cpu_s": round(any_cpu, 1), "anytime_wall_s": round(any_wall, 1),
        "cpu_ratio": round(any_cpu / boot_cpu, 2), "wall_ratio": round(any_wall / boot_wall, 2),
        "capital_evaluations": counts[0], "capital_entries": counts[1],
        "anytime_median_widths": {k: round(v, 5) for k, v in widths.items()},
    }  # fmt: skip
    print(json.dumps({args.label: figures}, indent=2))
    path = HERE / "results" / "anytime_speed.json"
    record = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    commit = git_commit()
    record["command"] = "PYTHONPATH=<checkout> python bench/anytime_speed.py --label LABEL"
    record["seed"] = args.seed
    record["runs"][args.label] = {
        "commit": commit or "exported tree", "date": datetime.now(UTC).isoformat(),
        "receval": str(Path(receval.__file__).parent), "figures": figures,
    }  # fmt: skip
    if {"before", "after"} <= set(record["runs"]):
        b, a = (record["runs"][k]["figures"] for k in ("before", "after"))
        record["anytime_cpu_before_to_after"] = [b["anytime_cpu_s"], a["anytime_cpu_s"]]
        record["cpu_ratio_before_to_after"] = [b["cpu_ratio"], a["cpu_ratio"]]
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
