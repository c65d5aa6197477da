"""receval.report.svg: the hand-written SVG of the forest plot and the pooling-bias figure."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from receval.report import plots, svg


@pytest.mark.parametrize(
    ("low", "high", "bins"),
    [(0, 0.2245, 8), (0, 0.9, 8), (0, 1.0, 5), (0, 37, 8), (0, 0.36, 8), (0, 1e-3, 8), (0, 1, 1)],
)
def test_ticks_are_matplotlibs(low, high, bins):
    """The tick rule is matplotlib's MaxNLocator with steps 1, 2, 2.5, 5, 10 (the ticks the
    matplotlib figures had), the values inside the axis."""
    from matplotlib.ticker import MaxNLocator

    expected = MaxNLocator(bins, steps=[1, 2, 2.5, 5, 10]).tick_values(low, high)
    expected = [t for t in expected if low - 1e-12 <= t <= high + 1e-12]
    assert svg.nice_ticks(low, high, bins) == pytest.approx(expected, abs=1e-12)


def test_tick_labels_and_numbers():
    assert svg.tick_labels([0.0, 0.2, 0.4]) == ["0.0", "0.2", "0.4"]
    assert svg.tick_labels([0.0, 0.25, 0.5]) == ["0.00", "0.25", "0.50"]
    assert svg.tick_labels([0.0, 5.0, 10.0]) == ["0", "5", "10"]
    assert svg.nice_ticks(1.0, 1.0, 5) == [] and svg.nice_ticks(0.0, np.nan, 5) == []
    assert [svg.num(v) for v in (12.0, 12.04, -0.04, 3.25)] == ["12", "12", "0", "3.2"]
    assert svg.escape('a<b & "c">') == "a&lt;b &amp; &quot;c&quot;&gt;"


def test_axis_maps_linearly_and_limits_leave_a_margin():
    axis = svg.Axis(0.0, 2.0, 100.0, 300.0)
    assert axis(0.0) == 100.0 and axis(1.0) == 200.0 and axis(2.0) == 300.0
    assert svg.data_limits([0.2, 0.6, np.nan]) == (0.0, pytest.approx(0.62))
    assert svg.data_limits([np.nan]) == (0.0, 1.0)


@pytest.mark.parametrize("shape", sorted(svg.MARKERS))
def test_markers_are_closed_paths_centred_on_the_point(shape):
    d = svg.MARKERS[shape](50.0, 20.0, 6.0)
    assert d.startswith("M") and d.endswith("z")
    mark = svg.Mark(shape, 6.0, "#000000")
    assert mark.path(50.0, 20.0) == d


def test_canvas_renders_one_inline_element_with_title():
    canvas = svg.Canvas(200.0, 100.0)
    canvas.text(10, 10, "x < y", 8)
    canvas.band(0, 0, 10, 10, 0.1)
    out = canvas.render("fig", 'A "title"')
    assert out.startswith('<svg class="plot" role="img" aria-label="A &quot;title&quot;"')
    assert 'data-figure="fig"' in out and 'viewBox="0 0 200 100"' in out
    assert "<title>A &quot;title&quot;</title>" in out and "x &lt; y" in out
    assert 'style="opacity: 0.1"' in out and out.endswith("</svg>\n")


def _board(n: int = 6) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "system": [f"s{i}" for i in range(n)],
            "tier": ["1", "1", "2", "2", "3", "3"][:n],
            "precision": np.linspace(0.9, 0.4, n),
            "precision_lo": np.linspace(0.8, 0.3, n),
            "precision_hi": np.linspace(0.95, 0.5, n),
            "recall": np.linspace(0.5, 0.2, n),
        }
    )


def test_forest_plot_draws_every_row_interval_and_label():
    panels = [plots.ForestPanel("precision", "P", "p"), plots.ForestPanel("recall", "R", "r")]
    out = plots.forest_plot(_board(), panels, interval_label="95% interval")
    assert out.count("<svg") == 1 and "<title>Forest plot: P, R</title>" in out
    for i in range(6):
        assert f">s{i}</text>" in out
    blue = re.search(r'<path d="([^"]*)" fill="none" stroke="#0072B2"', out)
    assert blue is not None and blue.group(1).count("M") == 6  # intervals: precision only
    dots = re.findall(r'<path d="([^"]*)" fill="#000000"', out)
    assert sum(d.count("a") // 2 for d in dots) == 2 * 6 + 1  # per panel six, and the legend
    assert "95% interval" in out and "estimate" in out and "tier (alternate" in out
    assert len(re.findall(r'style="opacity: 0.1"', out)) == 2 * 2 + 1


def test_forest_plot_marks_model_extrapolations():
    board = _board(3).assign(precision_at_target=[0.5, 0.4, np.nan])
    panels = [plots.ForestPanel("precision_at_target", "P@R_T", "precision")]
    out = plots.forest_plot(
        board,
        panels,
        interval_label=None,
        methods=["curve", "dimm", "dimm"],
        poor_fit=[False, True, False],
        backtest_limit=0.1,
    )
    assert "does not fit (back-test &gt; 0.10)" in out
    assert "model extrapolation (Dimm)" not in out  # the only other dimm row has no value


def test_pooling_bias_plot_joins_the_two_official_scores():
    bias = pd.DataFrame(
        {
            "team": ["A&B", "C"],
            "official_f1": [0.5, 0.3],
            "official_f1_lto": [0.45, 0.3],
            "delta_f1": [-0.05, 0.0],
            "joint_f1": [np.nan, np.nan],
        }
    )
    out = plots.pooling_bias_plot(bias)
    assert ">A&amp;B</text>" in out and "official F1, full pool" in out
    assert "joint F1" not in out  # no finite joint F1: no series, no legend entry
    grey = re.search(r'<path d="([^"]*)" fill="none" stroke="#999999"', out)
    assert grey is not None and grey.group(1).count("M") == 2


def test_official_trec_report_does_not_import_matplotlib(tmp_path):
    """The official census of a TREC import draws only hand-written figures (forest plot,
    pooling bias): ``receval import trec`` + ``score --estimator official`` never import
    matplotlib (half a second of the TREC path's CPU time)."""
    runs = []
    for s in range(3):
        lines = [
            f"{q} Q0 D{q}-{d} {d + 1} {10 - d - s / 10} run{s}" for q in (1, 2) for d in range(6)
        ]
        runs += ["--runs", str(tmp_path / f"run{s}.txt")]
        Path(runs[-1]).write_text("\n".join(lines) + "\n", encoding="utf-8")
    qrels = "".join(f"{q} 0 D{q}-{d} {int(d % 2 == 0)}\n" for q in (1, 2) for d in range(4))
    (tmp_path / "qrels.txt").write_text(qrels, encoding="utf-8")
    task, out = str(tmp_path / "task"), str(tmp_path / "out")
    commands = [
        ["import", "trec", task, "--qrels", str(tmp_path / "qrels.txt"), *runs],
        ["score", task, "--estimator", "official", "--out", out, "--quiet"],
    ]
    for args in commands:
        code = (
            f"import sys; from receval.cli import main; sys.argv = ['receval', *{args!r}]\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print(sorted(m for m in ('matplotlib', 'scipy', 'duckdb') if m in sys.modules))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert done.stdout.strip().splitlines()[-1] == "[]", (args, done.stdout)
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert re.findall(r'data-figure="([^"]+)"', page) == ["forest", "pooling-bias"]
