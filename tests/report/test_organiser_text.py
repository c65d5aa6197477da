"""What `score` prints and publishes speaks to the organiser: no internal references, every line
within the terminal's width, census tables without empty rank/tier columns, P@K and R@K heads
for a cutoff (issue 36 item 4)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from receval.cli import cli
from receval.report.terminal import fit_text, format_leaderboard, metric_heads
from receval.run_record import RunRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "trec"
INTERNAL = re.compile(r"issue[ -]?\d|bench/|gradient20|topup", re.IGNORECASE)


def invoke(*args, columns: int = 100):
    return CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": str(columns)})


@pytest.fixture(scope="module")
def trec_bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("trec") / "bundle"
    runs = [a for run in ("sysA.run", "sysB.run") for a in ("--runs", FIXTURES / run)]
    result = invoke("import", "trec", root, *runs, "--qrels", FIXTURES / "qrels.txt")
    assert result.exit_code == 0, result.output
    return root


def test_a_cutoff_heads_p_and_r_at_k_without_empty_columns(trec_bundle, tmp_path):
    out = tmp_path / "out"
    result = invoke("score", trec_bundle, "--out", out, "--estimator", "official", "--cutoff", 10)
    assert result.exit_code == 0, result.output
    head = result.output.splitlines()[0].split()
    assert head == ["rank", "system", "P@10", "R@10", "F1"]  # no rank CI, tier, team = system
    assert "values: estimates (no intervals in this run)" in result.output
    again = invoke("leaderboard", out)
    assert again.output.splitlines()[0].split() == head
    page = (out / "report.html").read_text(encoding="utf-8")
    assert ">P@10</th>" in page and ">R@10, recall (pooled, closed-world)</th>" in page
    assert ">tier</th>" not in page and ">rank interval</th>" not in page
    without = invoke("score", trec_bundle, "--out", tmp_path / "plain", "--estimator", "official")
    assert without.output.splitlines()[0].split() == ["rank", "system", "P", "R", "F1"]


@pytest.mark.parametrize("columns", [100, 60])
def test_every_line_score_prints_fits_the_terminal(tmp_path, monkeypatch, columns):
    monkeypatch.chdir(tmp_path)  # short paths: a path itself is never cut
    bundle = Path("sim")
    assert invoke("simulate", bundle, "--systems", 6, "--queries", 30, "--seed", 3).exit_code == 0
    out = Path("out")
    result = invoke("score", bundle, "--out", out, "--bootstrap", 50, columns=columns)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= columns, max(lines, key=len)
    assert any(line.startswith("intervals: percentile bootstrap") for line in lines)
    assert any(line.startswith("results in ") for line in lines)
    # the published run card and record name no internal history
    for name in ("report.html", "run.json"):
        text = (out / name).read_text(encoding="utf-8")
        assert not INTERNAL.search(text), INTERNAL.search(text)


def test_census_board_leaves_out_empty_rank_interval_and_tier():
    import pandas as pd

    board = pd.DataFrame(
        {"system": ["a", "b"], "team": ["t", "u"], "rank": [1, 2], "rank_lo": [None, None],
         "rank_hi": [None, None], "tier": ["", ""], "precision": [0.5, 0.4],
         "recall": [0.3, 0.2], "f1": [0.37, 0.27]}
    )  # fmt: skip
    text = format_leaderboard(board, heads={"precision": "P@5"})
    assert text.splitlines()[0].split() == ["rank", "system", "team", "P@5", "R", "F1"]
    assert "not shown" not in text


def test_metric_heads_and_fit_text():
    def run(official):
        return RunRecord.from_json({"official": official})

    assert metric_heads(run({"cutoff": 10})) == {"precision": "P@10", "recall": "R@10"}
    assert (
        metric_heads(run({"cutoff": None})) == {} == metric_heads(None) == metric_heads(run(None))
    )
    long = "word " * 40
    wrapped = fit_text(long.strip(), 30, "warning: ")
    assert wrapped.startswith("warning: word") and max(map(len, wrapped.splitlines())) <= 30
    path = "/a/very/long/path/that/does/not/fit/anywhere/at/all"
    assert path in fit_text(path, 20, "results in ")  # a path is not cut
