"""Issue 23 item 13: the terminal leaderboard fits the terminal (≤ 100 columns when the width
is unknown), giving up columns in a fixed order and saying so."""

from __future__ import annotations

import os

import pandas as pd
import pytest
from click.testing import CliRunner
from test_terminal import board

from receval.cli import cli
from receval.report.terminal import format_leaderboard, terminal_width


def wide_board() -> pd.DataFrame:
    frame = board()
    frame["system"] = [f"{s}-system-with-a-long-name" for s in frame["system"]]
    frame["team"] = [f"{t}-organisation" for t in frame["team"]]
    return frame


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_without_a_width_nothing_changes():
    assert widest(format_leaderboard(wide_board())) > 100
    assert "not shown" not in format_leaderboard(wide_board())


@pytest.mark.parametrize("width", [100, 80, 60, 50])
def test_the_table_and_legend_fit_the_width(width):
    text = format_leaderboard(wide_board(), width=width)
    assert widest(text) <= width
    assert "not shown to fit the terminal: team" in text.replace("\n   ", " ")
    lines = text.splitlines()
    assert lines[0].startswith("rank") and "F1" in lines[0] and "P@R_T" in lines[0]
    assert len([line for line in lines if line.lstrip()[:1].isdigit()]) >= 3  # the ranked rows


def test_columns_are_given_up_in_order():
    full = widest(format_leaderboard(wide_board(), legend=False))
    heads = [
        format_leaderboard(wide_board(), width=w).splitlines()[0].split() for w in (full, full - 1)
    ]
    assert "team" in heads[0] and "team" not in heads[1] and "tier" in heads[1]
    narrow = format_leaderboard(wide_board(), width=60)
    assert "system names cut to 14 characters" in narrow.replace("\n   ", " ")
    assert "A-system-with…" in narrow


def test_an_unknown_width_is_100_columns(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)

    def no_terminal(*args):
        raise OSError("not a terminal")

    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    assert terminal_width() == 100
    monkeypatch.setenv("COLUMNS", "72")
    assert terminal_width() == 72


def test_the_cli_leaderboard_fits(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    wide_board().to_csv(out / "leaderboard.csv", index=False)
    (out / ".receval-output").write_text("")
    monkeypatch.setenv("COLUMNS", "64")
    result = CliRunner().invoke(cli, ["leaderboard", str(out)])
    assert result.exit_code == 0, result.output
    assert widest(result.output) <= 64 and "A-system-with…" in result.output
