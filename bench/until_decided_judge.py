"""Does `sample --until-decided --estimator ppi` decide with the judge, and validly?

Worlds of 6 systems with precisions spread over 0.2-0.7, one round of N draws per system, a
judge.tsv of a given quality (the truth with a share of labels flipped; 0.5: no information).
Per repetition: the pairs by precision still open under joint and under ppi (the loop's
decisions, :func:`receval.until_decided.decisions`), and whether any decided pair contradicts
the true precisions (a wrong decision; the family-wise error the tests bound by 1 - confidence).

    PYTHONPATH=. python bench/until_decided_judge.py --reps 20 --draws 60 --flip 0.05 --seed 0
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness


def one(rep: int, draws: int, flip: float, seed: int) -> dict:
    from receval.scoring import true_metrics
    from receval.simulation import SimulationConfig, simulate_task
    from receval.task import load_task
    from receval.until_decided import decisions

    with tempfile.TemporaryDirectory() as tmp:
        config = SimulationConfig(systems=6, teams=6, queries=40, per_system=draws,
                                  precision_range=(0.2, 0.7), uppercase_teams=0.0)  # fmt: skip
        root = simulate_task(Path(tmp) / "w", config, seed=seed * 1000 + rep)
        truth = pd.read_csv(root / "truth.tsv", sep="\t", dtype=str)
        correct = truth["label"].str.lower().isin(["c", "correct", "1", "true", "yes"])
        rng = np.random.default_rng([seed, rep])
        flips = rng.random(len(truth)) < flip
        score = np.where(flips, ~correct, correct).astype(float)
        truth[["query_id", "answer"]].assign(judge_score=score).to_csv(
            root / "judge.tsv", sep="\t", index=False
        )
        task = load_task(root)
        true = true_metrics(task)["precision"]
        out = {}
        for est in ("joint", "ppi"):
            d = decisions(task, "precision", estimator=est)
            wrong = 0
            for a, b in {(i, j) for i in range(6) for j in range(6) if i != j}:
                pair = (min(a, b), max(a, b))
                if pair in {tuple(p) for p in d.open_pairs}:
                    continue
                # decided: the points' order is the decision's direction
                sa, sb = d.systems[a], d.systems[b]
                if d.point[a] > d.point[b] and true[sa] < true[sb]:
                    wrong += 1
            out[est] = {"open": len(d.open_pairs), "wrong": wrong}
        return out


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__, seed=0, reps=20)
    parser.add_argument("--draws", type=int, default=60)
    parser.add_argument("--flip", type=float, default=0.05)
    args = harness.parse(parser, argv)
    start = time.time()
    rows = [one(r, args.draws, args.flip, args.seed) for r in range(args.reps)]
    figures = {}
    for est in ("joint", "ppi"):
        opened = np.array([r[est]["open"] for r in rows], float)
        wrong = np.array([r[est]["wrong"] > 0 for r in rows], float)
        figures[est] = {"mean_open_pairs": float(opened.mean()),
                        "any_wrong_decision": float(wrong.mean())}  # fmt: skip
    figures["open_ratio_ppi_over_joint"] = (
        figures["ppi"]["mean_open_pairs"] / figures["joint"]["mean_open_pairs"]
    )
    print(json.dumps(figures, indent=1))
    seconds = round(time.time() - start, 1)
    harness.store(args, "until_decided_judge", figures, argv, pairs=15, seconds=seconds)


if __name__ == "__main__":
    main()
