"""bench/anytime_auto.py: what ``auto`` should switch to after a top-up (fast: the figures and
verdicts from made-up repetitions; the study itself is in bench/results/anytime_auto.json)."""

from __future__ import annotations

import numpy as np
from conftest import load_bench

METHODS = ("anytime", "anytime-asymptotic")


def _look(cover: bool, split: bool = False) -> dict:
    rec = {"cpu": 1.0, "split": split, "interval": "x"}
    for metric in ("precision", "pooled_recall", "recall", "f1"):
        rec[f"cover_{metric}"] = np.array([cover, True, True, True])
        rec[f"half_{metric}"] = np.full(4, 0.1)
    return rec


def _runs(reps: int, miss_every: int) -> list[dict]:
    """Repetitions of 4 systems (the first topped up): the asymptotic method misses the topped-up
    system at the second look in every ``miss_every``-th repetition; betting never."""
    runs = []
    for r in range(reps):
        miss = r % miss_every == 0
        runs.append({
            "topped": np.array([True, False, False, False]),
            "anytime": [_look(True), _look(True)],
            "anytime-asymptotic": [_look(True), _look(not miss)],
        })  # fmt: skip
    return runs


def test_verdicts_flag_a_look_whose_coverage_is_below_the_tolerance():
    bench = load_bench("anytime_auto")
    fig = bench.figures(_runs(40, 2), METHODS)
    verdict = bench.verdicts(fig, METHODS)
    assert verdict["anytime"]["valid"]
    assert not verdict["anytime-asymptotic"]["valid"]
    assert any("look2" in b for b in verdict["anytime-asymptotic"]["below"])
    c, _ = fig["anytime-asymptotic"]["precision_topped"]["cover_both"]
    assert c == 0.5


def test_a_rare_miss_within_two_standard_errors_stays_valid():
    bench = load_bench("anytime_auto")
    fig = bench.figures(_runs(40, 40), METHODS)  # one miss in 40: 0.975
    assert bench.verdicts(fig, METHODS)["anytime-asymptotic"]["valid"]
