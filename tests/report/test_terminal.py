"""The terminal leaderboard: intervals shown compactly, extrapolated and flagged values marked."""

from __future__ import annotations

import math

import pandas as pd

from receval.report.terminal import format_leaderboard, format_value


def board() -> pd.DataFrame:
    nan = math.nan
    return pd.DataFrame(
        {
            "system": ["A", "B", "C", "D"],
            "team": ["t1", "t1", "t2", "t3"],
            "rank": [1, 2, 3, nan],
            "rank_lo": [1, 1, 2, nan],
            "rank_hi": [2, 3, 3, nan],
            "tier": ["1", "1", "2", ""],
            "precision": [0.51234, 0.4, 0.3, nan],
            "precision_lo": [0.45, 0.35, nan, nan],
            "precision_hi": [0.58, 0.45, nan, nan],
            "recall": [0.2, 0.15, 0.1, 0.05],
            "recall_lo": [0.18, 0.12, 0.08, 0.04],
            "recall_hi": [0.22, 0.18, 0.12, 0.06],
            "f1": [0.29, 0.22, 0.15, nan],
            "f1_lo": [0.26, 0.19, 0.12, nan],
            "f1_hi": [0.31, 0.25, 0.18, nan],
            "precision_at_target": [0.7, 0.45, 0.3, nan],
            "precision_at_target_lo": [0.6, 0.4, 0.2, nan],
            "precision_at_target_hi": [0.8, 0.5, 0.4, nan],
            "precision_at_target_method": ["curve", "dimm", "dimm", ""],
            "precision_at_target_backtest": [nan, 0.04, 0.36, nan],
            "note": [
                "",
                "",
                "precision: no interval: 40.0% of the bootstrap replicates cannot be evaluated",
                "precision_at_target: refused: its outputs have no score",
            ],
        }
    )


def test_format_value():
    assert format_value(0.51234, 0.45, 0.58) == "0.512 [.45,.58]"
    assert format_value(1.0, 0.97, 1.0, "*") == "1.000 [.97,1.00] *"
    assert format_value(math.nan, 0.1, 0.2) == "—"
    assert format_value(0.3, math.nan, 0.4) == "0.300"


def test_intervals_and_marks():
    text = format_leaderboard(board(), backtest_limit=0.10)
    lines = text.splitlines()
    head, rows = lines[0], lines[2:6]
    assert head.split()[:8] == ["rank", "rank", "CI", "tier", "system", "team", "P", "R"]
    assert "P@R_T" in head
    a, b, c, d = rows
    assert "0.512 [.45,.58]" in a and "0.700 [.60,.80]" in a and "*" not in a and "!" not in a
    assert "0.450 [.40,.50] *" in b and "!" not in b  # extrapolated, back-test within the limit
    assert "0.300 [.20,.40] *!" in c  # extrapolated and does not fit
    assert "0.300 !" in c  # precision without interval: the note says why
    assert d.split()[:4] == ["—", "—", "—", "D"] and d.rstrip().endswith("— !")
    legend = "\n".join(lines[6:])
    assert "* " in legend and "model extrapolation (Dimm)" in legend
    assert "back-test deviation > 0.10" in legend


def test_no_target_columns_no_marks_legend():
    frame = board().drop(columns=[c for c in board().columns if c.startswith("precision_at")])
    frame["note"] = ""
    text = format_leaderboard(frame)
    assert "P@R_T" not in text and "*" not in text and "!" not in text
    assert text.splitlines()[-1] == "values: estimate [interval]"
