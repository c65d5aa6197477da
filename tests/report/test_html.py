"""report.html: built from the CSV/JSON outputs alone, self-contained, honest about what is missing."""

from __future__ import annotations

import json
import re
import shutil
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import make_bundle

from receval.cli import cli
from receval.errors import BundleError
from receval.estimators.target import BACKTEST_LIMIT
from receval.report.html import build_report, read_report_inputs, render_report, section_html
from receval.report.plots import MAX_CURVE_POINTS, thin_curve

pytest_plugins = ["report_outputs"]  # the scored_dir and full_output_dir fixtures

SECTIONS = [
    "leaderboard",
    "run-card",
    "forest",
    "curves",
    "pool",
    "annotation",
    "per-query",
    "files",
]


class LeaderboardRows(HTMLParser):
    """Cells of ``#leaderboard-table``'s body: per cell its attributes and text by part
    (``main``: the value, ``ci``: the interval line, ``method``: the method line)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[dict]] = []
        self.in_table = self.in_body = False
        self.cell: dict | None = None
        self.part = "main"

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == "leaderboard-table":
            self.in_table = True
        elif self.in_table and tag == "tbody":
            self.in_body = True
        elif self.in_body and tag == "tr":
            self.rows.append([])
        elif self.in_body and tag == "td":
            self.cell = {"attrs": attrs, "main": "", "ci": "", "method": "", "sup": ""}
            self.part = "main"
        elif self.cell is not None and tag == "span":
            self.part = attrs.get("class", "main")
        elif self.cell is not None and tag == "sup":
            self.part = "sup"

    def handle_endtag(self, tag):
        if tag in ("span", "sup"):
            self.part = "main"
        elif tag == "td" and self.cell is not None:
            self.rows[-1].append(self.cell)
            self.cell = None
        elif tag == "tbody":
            self.in_body = False
        elif tag == "table":
            self.in_table = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[self.part] += data


def leaderboard_rows(page: str) -> list[list[dict]]:
    parser = LeaderboardRows()
    parser.feed(page)
    return parser.rows


def visible_text(page: str) -> str:
    """The page without tags, scripts, styles and SVG drawings."""
    page = re.sub(r"<(script|style|svg)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"<[^>]+>", " ", page)


def copy_dir(src: Path, dst: Path, keep: set[str] | None = None) -> Path:
    if keep is None:
        shutil.copytree(src, dst)
    else:
        dst.mkdir(parents=True)
        for name in keep:
            shutil.copy2(src / name, dst / name)
    (dst / "report.html").unlink(missing_ok=True)
    return dst


def fmt(v: float) -> str:
    return f"{v:.3f}".replace("-", "−")


# --------------------------------------------------------------------------- the full page


def test_every_section_in_order_and_self_contained(full_output_dir):
    page = build_report(full_output_dir).read_text(encoding="utf-8")
    assert re.findall(r'<section id="([^"]+)"', page) == SECTIONS
    # nothing that a browser would fetch: no URL scheme, no src attribute, no stylesheet link,
    # no CSS import or url() other than the SVGs' own fragment references
    assert not re.search(r"(?i)\b(https?|ftp|wss?):", page)
    assert not re.search(r"(?i)\ssrc\s*=", page)
    assert not re.search(r"(?i)<link\b", page)
    assert "@import" not in page
    assert set(re.findall(r"url\(([^)]*)\)", page)) <= {
        u for u in re.findall(r"url\(([^)]*)\)", page) if u.startswith("#")
    }
    assert "@font-face" not in page
    assert page.count("<script>") == 1  # the inline sort script, no external one
    assert len(page.encode()) < 3_000_000


def test_every_figure_has_title_axis_labels_and_legend(full_output_dir):
    page = build_report(full_output_dir).read_text(encoding="utf-8")
    figures = dict(
        re.findall(r'<svg class="plot"[^>]*data-figure="([^"]+)"[^>]*>(.*?)</svg>', page, re.S)
    )
    board = pd.read_csv(full_output_dir / "leaderboard.csv", dtype={"system": str})
    assert {"forest", "pool-coverage", "pooling-bias", "annotation"} <= set(figures)
    assert sum(name.startswith("curve-") for name in figures) == len(board)
    expected = {
        "forest": [
            "Precision",
            "True recall",
            "Precision at R_T = 0.1",
            "estimate",
            "percentile bootstrap 95%, B=200, small-sample expanded interval",
            "model extrapolation",
            "tier",
        ],
        "pool-coverage": ["Pool coverage θ̂ with interval", "pool coverage θ", "θ̂ = "],
        "pooling-bias": [
            "Pooling bias",
            "F1 (mean over the team",
            "official F1, full pool",
            "joint F1",
        ],
        "annotation": ["Annotation spend per system", "labelled facts drawn", "label reused"],
    }
    for name, words in expected.items():
        for word in words:
            assert word in figures[name], (name, word)
    for name, svg in figures.items():
        if name.startswith("curve-"):
            assert "precision" in svg and "<title>Precision curve of " in svg
            assert "target recall R_T = 0.1" in svg, name
            assert "estimate" in svg or "Dimm reference curve" in svg
    # the PAULA / AdaStrat curves (ranks only) are drawn against rank, with their guarantee named
    assert "rank (log scale; no recall in this curve)" in page
    assert "PAULA: approximation (no coverage claim)" in page
    # AdaStrat claims a band only when its premise check works at the band's resolution
    assert "AdaStrat: approximation (no coverage claim)" in page


def test_svg_ids_unique_and_every_reference_resolves(full_output_dir):
    page = build_report(full_output_dir).read_text(encoding="utf-8")
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    refs = set(re.findall(r"url\(#([^)]+)\)", page)) | set(re.findall(r'href="#([^"]+)"', page))
    assert refs and refs <= set(ids)


def test_leaderboard_numbers_are_the_csv_numbers(scored_dir, tmp_path):
    out = copy_dir(scored_dir, tmp_path / "out")
    page = build_report(out).read_text(encoding="utf-8")
    board = pd.read_csv(out / "leaderboard.csv", dtype={"system": str})
    rows = leaderboard_rows(page)
    assert len(rows) == len(board)
    for cells, (_, r) in zip(rows, board.iterrows(), strict=True):
        rank, rank_int, tier, system, team, precision, recall, f1, at_target, source = cells[:10]
        assert system["main"] == r["system"] and team["main"] == r["team"]
        assert rank["main"] == str(int(r["rank"]))
        assert rank_int["main"] == f"{int(r['rank_lo'])}–{int(r['rank_hi'])}"
        assert tier["main"] == str(int(r["tier"]))
        for cell, col in (
            (precision, "precision"),
            (recall, "recall"),
            (f1, "f1"),
            (at_target, "precision_at_target"),
        ):
            assert cell["main"].strip() == fmt(r[col])
            assert cell["ci"] == f"[{fmt(r[col + '_lo'])}, {fmt(r[col + '_hi'])}]"
            assert float(cell["attrs"]["data-v"]) == pytest.approx(r[col], rel=1e-12)
        method = r["precision_at_target_method"]
        backtest = r["precision_at_target_backtest"]
        if method == "dimm" and backtest > BACKTEST_LIMIT:  # item 3: marked, with its value
            assert source["main"] == f"model (Dimm) ⚠ does not fit (back-test {backtest:.2f})"
            assert (
                "poorfit" in source["attrs"]["class"] and "poorfit" in at_target["attrs"]["class"]
            )
        elif method == "dimm":
            assert source["main"].startswith("model (Dimm)")
            assert "poorfit" not in source["attrs"]["class"]
        else:
            assert source["main"] == "curve (precision samples)"
    assert {r["precision_at_target_method"] for _, r in board.iterrows()} == {"curve", "dimm"}
    interval = board["interval"].iloc[0]
    assert f"({interval})" in section_html(page, "leaderboard")


def test_rebuild_is_identical_and_leaderboard_depends_on_leaderboard_only(scored_dir, tmp_path):
    out = copy_dir(scored_dir, tmp_path / "out")
    first = build_report(out).read_bytes()
    (out / "report.html").unlink()
    time.sleep(0.01)
    second = build_report(out).read_bytes()
    assert first == second
    bare = copy_dir(scored_dir, tmp_path / "bare", keep={"leaderboard.csv", "run.json"})
    page = build_report(bare).read_text(encoding="utf-8")
    # the numbers are the same; only the links to curves drawn from curves/ are gone
    unlinked = re.compile(r'<a href="#curve-\d+">([^<]*)</a>')
    assert unlinked.sub(r"\1", section_html(page, "leaderboard")) == unlinked.sub(
        r"\1", section_html(first.decode(), "leaderboard")
    )


# --------------------------------------------------------------------------- missing inputs


def test_missing_optional_inputs_become_sentences(scored_dir, tmp_path):
    out = copy_dir(scored_dir, tmp_path / "out", keep={"leaderboard.csv", "run.json"})
    page = build_report(out).read_text(encoding="utf-8")
    assert re.findall(r'<section id="([^"]+)"', page) == SECTIONS
    expected = {
        "curves": "run.json records curves for 12 system(s) whose CSV is not in <code>curves/</code>",
        "pool": "No pool.csv in this directory (missing)",
        "annotation": "No per-system annotation spend in this run (annotation.csv missing)",
        "per-query": "No per-query breakdown in this run (per_query.csv missing)",
    }
    for section, sentence in expected.items():
        assert sentence in section_html(page, section), section
    assert "No pooling-bias diagnostic in this run (pooling_bias.csv missing)" in page
    assert "No conflicts table: conflicts.csv missing." in page
    # curves: run.json still records Dimm extrapolations, so those are drawn; nothing else is
    figures = re.findall(r'data-figure="([^"]+)"', page)
    assert [f for f in figures if not f.startswith("curve-")] == ["forest", "curves-overview"]
    text = visible_text(page)
    assert not re.search(r"\b(nan|NaN|None|null)\b", text)


def test_no_curves_and_no_extrapolation(scored_dir, tmp_path):
    out = copy_dir(scored_dir, tmp_path / "out", keep={"leaderboard.csv", "run.json"})
    run = json.loads((out / "run.json").read_text())
    run.pop("target"), run.pop("curves")
    (out / "run.json").write_text(json.dumps(run))
    page = build_report(out).read_text(encoding="utf-8")
    assert 'data-figure="curve-' not in page
    assert '<p class="absent">No precision curves in this run' in section_html(page, "curves")


def test_official_run_has_no_intervals_and_says_so(tmp_path):
    bundle = make_bundle(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["score", str(bundle), "--out", str(out), "--estimator", "official", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    (out / "report.html").unlink(missing_ok=True)
    page = build_report(out).read_text(encoding="utf-8")
    board = section_html(page, "leaderboard")
    assert "Values: estimates, without intervals (none: census" in board
    assert 'class="ci"' not in board and "Rank interval" not in board
    assert "This run has no intervals" in section_html(page, "forest")
    assert "No pool coverage estimate in this run (estimator official" in section_html(page, "pool")
    assert "interval</th><td>none: this estimator has no sampling uncertainty" in page
    rows = leaderboard_rows(page)
    # a census has no rank interval and no tier: those empty columns are left out
    assert [c[1]["main"] for c in rows] == ["A", "B"]
    assert ">rank interval</th>" not in board and ">tier</th>" not in board


def test_rank_interval_is_described_as_what_it_is(scored_dir):
    """One description of rank_lo–rank_hi (issue 23): the simultaneous rank confidence sets of
    the pairwise tests (as run.json and the README say), never "replicate ranks"."""
    page = build_report(scored_dir).read_text(encoding="utf-8")
    caption = visible_text(section_html(page, "leaderboard"))
    assert "Rank interval: simultaneous rank confidence sets from the pairwise tests" in caption
    assert "rank_lo = 1 + #significantly better, rank_hi = S − #significantly worse" in caption
    assert "replicates" not in caption.split("Rank interval:")[1].split(".")[0]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "from the replicate ranks" not in readme


def test_official_report_calls_pooled_recall_pooled(tmp_path):
    """An official (closed-world) run: no "true recall" anywhere, the pooling-bias caption
    follows the bundle's unjudged rule (TREC: wrong), Δ F1 never prints a signed zero."""
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "trec"
    bundle = tmp_path / "trec"
    args = ["import", "trec", str(bundle), "--qrels", str(fixtures / "qrels.txt")]
    for run in ("sysA.run", "sysB.run"):
        args += ["--runs", str(fixtures / run)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["score", str(bundle), "--out", str(out), "--estimator", "official", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    page = (out / "report.html").read_text(encoding="utf-8")
    text = visible_text(page)
    assert "recall (true)" not in text and "True recall" not in page
    assert "recall (pooled, closed-world)" in text
    assert "Pooled recall (closed-world)" in section_html(page, "forest")
    assert "Recall is pooled (closed-world) recall" in section_html(page, "leaderboard")
    bias = section_html(page, "pool")
    assert 'unjudged = "wrong"' in bias and "ignored for precision" not in bias
    run = json.loads((out / "run.json").read_text())
    assert run["pooling_bias"] == {"unjudged": "wrong", "average": "micro"}
    # a difference that rounds to zero is "0.000", never "−0.000"
    frame = pd.read_csv(out / "pooling_bias.csv")
    frame["delta_f1"] = -0.0002
    frame.to_csv(out / "pooling_bias.csv", index=False)
    page = build_report(out).read_text(encoding="utf-8")
    shown = visible_text(page)
    assert "−0.000" not in shown and "-0.000" not in shown
    assert "median 0.000, from 0.000 to 0.000" in section_html(page, "pool")


def test_no_draw_at_all_is_a_sentence_not_a_figure_of_zeros(scored_dir, tmp_path):
    out = copy_dir(scored_dir, tmp_path / "out")
    spend = pd.read_csv(out / "annotation.csv")
    for col in ("draws", "drawn_facts", "drawn_facts_shared", "labelled"):
        spend[col] = 0
    spend.to_csv(out / "annotation.csv", index=False)
    section = section_html(build_report(out).read_text(encoding="utf-8"), "annotation")
    assert "No sample round drawn" in section
    assert 'data-figure="annotation"' not in section


def test_missing_value_shows_dash_with_note(scored_dir, tmp_path):
    out = copy_dir(scored_dir, tmp_path / "out")
    board = pd.read_csv(  # note as text: the scored task may have no note at all
        out / "leaderboard.csv",
        dtype={"system": str, "note": str},
        keep_default_na=False,
        na_values=[""],
    )
    note = "precision_at_target: refused (P at or below the floor of the model family)"
    board.loc[2, ["precision_at_target", "precision_at_target_lo", "precision_at_target_hi"]] = (
        np.nan
    )
    board.loc[2, "note"] = note
    board.to_csv(out / "leaderboard.csv", index=False)
    page = build_report(out).read_text(encoding="utf-8")
    cells = leaderboard_rows(page)[2]
    assert cells[8]["main"] == "—" and cells[8]["ci"] == ""
    assert cells[8]["attrs"]["title"] == note
    marker = cells[3]["sup"].strip("[]")
    assert f'<li id="note-{marker}">{note}</li>' in page


def test_text_is_escaped(scored_dir, tmp_path):
    out = copy_dir(scored_dir, tmp_path / "out", keep={"leaderboard.csv", "run.json"})
    board = pd.read_csv(out / "leaderboard.csv", dtype={"system": str})
    board.loc[0, "team"] = '<img src=x onerror="alert(1)">&'
    board.to_csv(out / "leaderboard.csv", index=False)
    page = build_report(out).read_text(encoding="utf-8")
    assert "<img" not in page
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;&amp;" in page


def test_unreadable_optional_file_is_reported_not_fatal(scored_dir, tmp_path):
    out = copy_dir(scored_dir, tmp_path / "out")
    (out / "pool.csv").write_bytes(b"quantity,estimate\n\xff\xfe\xfa,1\n")
    page = build_report(out).read_text(encoding="utf-8")
    card = section_html(page, "run-card")
    assert "Files that could not be read" in card and "<code>pool.csv</code>: unreadable" in card
    assert "No pool.csv in this directory (unreadable" in section_html(page, "pool")


def test_required_inputs(tmp_path):
    with pytest.raises(BundleError, match=r"leaderboard\.csv: missing"):
        build_report(tmp_path)
    (tmp_path / "leaderboard.csv").write_text("system,precision\nA,0.5\n")
    with pytest.raises(BundleError, match=r"run\.json: missing"):
        build_report(tmp_path)
    (tmp_path / "run.json").write_text('{\n  "task": "x",\n  oops\n}\n')
    with pytest.raises(BundleError, match=r"run\.json:3: not valid JSON"):
        build_report(tmp_path)
    (tmp_path / "run.json").write_text('{"task": "x"}')
    (tmp_path / "leaderboard.csv").write_text("name,precision\nA,0.5\n")
    with pytest.raises(BundleError, match=r"leaderboard\.csv:1: missing required column system"):
        build_report(tmp_path)
    assert not (tmp_path / "report.html").exists()
    # the least a leaderboard can be: one column, one system, an almost empty run.json
    (tmp_path / "leaderboard.csv").write_text("system\nA\n")
    page = build_report(tmp_path).read_text(encoding="utf-8")
    assert [c[1]["main"] for c in leaderboard_rows(page)] == ["A"]  # no rank interval, tier
    assert "run.json records no input checksums" in page


def test_date_from_created_else_run_json_mtime(scored_dir, tmp_path):
    out = copy_dir(scored_dir, tmp_path / "out", keep={"leaderboard.csv", "run.json"})
    run = json.loads((out / "run.json").read_text())
    assert f"<td>{run['created']} (run.json created)</td>" in build_report(out).read_text(
        encoding="utf-8"
    )
    del run["created"]
    (out / "run.json").write_text(json.dumps(run))
    import os

    os.utime(out / "run.json", (1_700_000_000, 1_700_000_000))
    page = build_report(out).read_text(encoding="utf-8")
    assert "2023-11-14T22:13:20+00:00 (modification time of run.json" in page


# --------------------------------------------------------------------------- size and thinning


@pytest.mark.slow  # end to end on the 70-system task; CI runs it with the slow tests
def test_seventy_systems_stay_under_three_megabytes(scored_dir, tmp_path):
    """70 systems, each with a dense rank-only PAULA curve (thousands of knots) *and* a Dimm
    extrapolation (the two-panel figure, the largest there is)."""
    from report_outputs import method_curve

    src = read_report_inputs(scored_dir)
    out = tmp_path / "seventy"
    (out / "curves").mkdir(parents=True)
    base = src.leaderboard.iloc[0]
    rows = []
    run = src.run.to_json()
    dimm = next(v for v in run["target"]["systems"].values() if v["method"] == "dimm")
    frame, record = method_curve("paula", 200_000, seed=3)
    assert len(frame) > 3 * MAX_CURVE_POINTS
    run["curves"], run["target"] = {}, dict(run["target"], systems={})
    for i in range(70):
        name = f"team{i // 4:02d}_system{i:02d}"
        rows.append(
            base.to_dict()
            | {
                "system": name,
                "team": f"team{i // 4:02d}",
                "rank": i + 1,
                "precision_at_target_method": "dimm",
            }
        )
        frame.to_csv(out / "curves" / f"{name}.csv", index=False, float_format="%.6g")
        run["curves"][name] = record
        run["target"]["systems"][name] = dimm
    pd.DataFrame(rows).to_csv(out / "leaderboard.csv", index=False)
    (out / "run.json").write_text(json.dumps(run))
    page = build_report(out).read_text(encoding="utf-8")
    size = len(page.encode())
    print(f"\nreport.html for 70 systems with dense curves: {size / 1e6:.2f} MB")
    assert len(re.findall(r'data-figure="curve-\d+"', page)) == 70
    # curve by rank + Dimm panel
    assert len(re.findall(r'<details class="curve[^"]*\bwide\b', page)) == 70
    assert size < 3_000_000


def test_thin_curve_keeps_ends_and_queried_points():
    rng = np.random.default_rng(0)
    n = 5000
    ranks = np.unique(rng.integers(1, 10**6, n))
    queried = np.zeros(ranks.size, int)
    queried[rng.choice(ranks.size, 30, replace=False)] = 1
    curve = pd.DataFrame(
        {"rank": ranks, "precision": 0.5, "lower": 0.4, "upper": 0.6, "queried": queried}
    )
    thin = thin_curve(curve)
    assert len(thin) <= MAX_CURVE_POINTS
    assert thin["rank"].iloc[0] == ranks[0] and thin["rank"].iloc[-1] == ranks[-1]
    assert set(ranks[queried == 1]) <= set(thin["rank"])
    assert thin["rank"].is_monotonic_increasing and thin["rank"].is_unique
    # short curves are left alone
    assert thin_curve(curve.head(50)).equals(curve.head(50).reset_index(drop=True))
    # more queried points than half the budget: an even subset of them
    curve["queried"] = 1
    assert len(thin_curve(curve)) <= MAX_CURVE_POINTS


def test_render_report_is_pure(full_output_dir):
    inputs = read_report_inputs(full_output_dir)
    assert render_report(inputs) == render_report(inputs)


def test_per_query_top_by_conflicts_then_split(scored_dir, tmp_path):
    out = copy_dir(scored_dir, tmp_path / "out", keep={"leaderboard.csv", "run.json"})
    queries = pd.DataFrame(
        {
            "query_id": [f"q{i:02d}" for i in range(40)],
            "outputs": 100,
            "systems": 5,
            "judged": 20,
            "judged_correct": [float(i % 21) for i in range(40)],
            "conflicts": [0] * 38 + [2, 1],
            "exhaustive_facts": 0,
        }
    )
    queries.to_csv(out / "per_query.csv", index=False)
    page = build_report(out).read_text(encoding="utf-8")
    section = section_html(page, "per-query")
    shown = re.findall(r'<tr><td class="" data-v="(q\d\d)">', section)
    assert len(shown) == 25
    # conflicts first (q38: 2, q39: 1), then the most even split (10 of 20 correct: q10, q31)
    assert shown[:4] == ["q38", "q39", "q10", "q31"]
    p = queries["judged_correct"] / 20
    split = (20 * p * (1 - p)).to_numpy()
    ranked = [f"q{i:02d}" for i in np.argsort(-split[:38], kind="stable")]
    assert shown[2:] == ranked[:23]
    assert "(no query has annotator conflicts in this run)" not in section
    queries["conflicts"] = 0
    queries.to_csv(out / "per_query.csv", index=False)
    page = build_report(out).read_text(encoding="utf-8")
    assert "(no query has annotator conflicts in this run)" in section_html(page, "per-query")


# --------------------------------------------------------------------------- issue 14


def test_svg_compaction_rounds_coordinates_never_styles():
    """Every style matplotlib wrote (opacities, colours, widths) survives inline_svg unchanged;
    coordinates are rounded to 0.1 pt; scale() in a transform is kept."""
    import io

    from matplotlib.figure import Figure

    from receval.report.plots import inline_svg

    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.axhspan(0.123456, 0.654321, color="#000000", alpha=0.07, lw=0)
    ax.fill_between([0.0, 1.0], [0.1, 0.2], [0.3, 0.4], alpha=0.45, color="#56B4E9")
    ax.plot([0.0, 1.0], [0.33333, 0.66666], lw=1.234, ls="--")
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    raw = buf.getvalue()
    compact = inline_svg(raw + '<g transform="scale(0.015625)"/>', "t", "test")
    styles = sorted(re.findall(r'style="([^"]*)"', raw))
    kept = [v for v in re.findall(r'style="([^"]*)"', compact) if not v.startswith("max-width")]
    assert sorted(kept) == styles
    assert "opacity: 0.07" in compact and "fill-opacity: 0.45" in compact
    assert 'transform="scale(0.015625)"' in compact
    coordinates = re.findall(r'\s(?:d|x|y|width|height)="([^"]*)"', compact)
    assert coordinates and not any(re.search(r"\d\.\d\d", c) for c in coordinates)


def test_tier_legend_swatch_is_what_the_bands_draw():
    from receval.report import plots

    board = pd.DataFrame(
        {
            "system": [f"s{i}" for i in range(6)],
            "tier": ["1", "1", "2", "2", "3", "3"],
            "precision": np.linspace(0.9, 0.4, 6),
            "recall": np.linspace(0.5, 0.2, 6),
        }
    )
    panels = [plots.ForestPanel("precision", "P", "p"), plots.ForestPanel("recall", "R", "r")]
    svg = plots.forest_plot(board, panels, interval_label=None)
    shaded = re.findall(rf'style="[^"]*\bopacity: {plots.TIER_ALPHA}\b[^"]*"', svg)
    # tiers 1 and 3 shaded in each of 2 panels, and the legend swatch: same fill, same opacity
    assert len(shaded) == 2 * 2 + 1
    assert set(shaded) == {f'style="opacity: {plots.TIER_ALPHA}"'}  # black: SVG's default fill
    assert "tier (alternate tiers shaded)" in svg


def test_every_system_links_to_its_collapsed_curve(full_output_dir):
    page = build_report(full_output_dir).read_text(encoding="utf-8")
    board = pd.read_csv(full_output_dir / "leaderboard.csv", dtype={"system": str})
    rows = leaderboard_rows(page)
    links = re.findall(r'<td class="system"[^>]*><a href="#(curve-\d+)">([^<]*)</a>', page)
    assert [s for _, s in links] == list(board["system"]) and len(rows) == len(board)
    for anchor, system in links:
        block = re.search(
            rf'<details class="curve[^"]*">\s*<summary>.*?</summary>\s*<figure id="{anchor}">'
            r"\s*<svg[^>]*><title>([^<]*)</title>",
            page,
            flags=re.S,
        )
        assert block is not None, anchor
        assert block.group(1) == f"Precision curve of {system}"
    overview = re.search(r'<svg[^>]*data-figure="curves-overview".*?</svg>', page, flags=re.S)
    assert overview is not None
    # every overview panel links to its system's full figure
    hrefs = set(re.findall(r'<a xlink:href="#(curve-\d+)"|<a href="#(curve-\d+)"', overview[0]))
    assert {a or b for a, b in hrefs} == {anchor for anchor, _ in links}


def test_poor_dimm_fit_is_marked_in_figures_and_summary(scored_dir, tmp_path):
    out = copy_dir(scored_dir, tmp_path / "out")
    board = pd.read_csv(out / "leaderboard.csv", dtype={"system": str})
    dimm = board[board["precision_at_target_method"] == "dimm"].index
    assert len(dimm) >= 2
    # one extrapolation that fits, one that does not (values on both sides of the limit)
    board.loc[dimm[0], "precision_at_target_backtest"] = BACKTEST_LIMIT / 2
    board.loc[dimm[1], "precision_at_target_backtest"] = 0.357
    board.to_csv(out / "leaderboard.csv", index=False)
    page = build_report(out).read_text(encoding="utf-8")
    good, bad = board.loc[dimm[0], "system"], board.loc[dimm[1], "system"]

    def entry(system: str) -> str:
        match = re.search(
            rf"<details class=\"curve[^\"]*\">\s*<summary>(?:(?!</details>).)*?<strong>{system}</strong>"
            r"(?:(?!</details>).)*</details>",
            page,
            flags=re.S,
        )
        assert match is not None, system
        return match.group(0)

    assert "poorfit" in entry(bad).split(">", 1)[0]
    assert "does not fit (back-test 0.36)" in entry(bad)
    assert "DOES NOT FIT (back-test 0.36 &gt; 0.10)" in entry(bad)  # legend of the dotted curve
    assert "the model does not fit this system: back-test 0.36 &gt; 0.10" in entry(bad)
    assert "poorfit" not in entry(good).split(">", 1)[0]
    assert "DOES NOT FIT" not in entry(good) and "model does not fit" not in entry(good)
    forest = re.search(r'<svg[^>]*data-figure="forest".*?</svg>', page, flags=re.S).group(0)
    assert "does not fit (back-test &gt; 0.10)" in forest


def test_counts_are_integers_and_pooling_caption_matches_the_code(full_output_dir):
    page = build_report(full_output_dir).read_text(encoding="utf-8")
    per_query = section_html(page, "per-query")
    cells = re.findall(r'<td class="num" data-v="[^"]*">([^<]*)</td>', per_query)
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", per_query)
    counts = len(heads) - 3  # query, then counts, then p and the split
    rows = [cells[i : i + len(heads) - 1] for i in range(0, len(cells), len(heads) - 1)]
    assert rows
    for row in rows:
        for value in row[:counts]:
            assert re.fullmatch(r"\d+(\.5)?|—", value), row  # half labels of ties only
    bias = section_html(page, "pool")
    assert "ignored for precision" in bias and "as wrong" not in bias


def test_hostile_and_long_system_names_in_the_report(tmp_path):
    """Participants name their systems: a 120-character name made the annotation figure's
    margin wider than the figure (matplotlib: 'left cannot be >= right', a traceback); markup
    in a name is shown as text, never run."""
    long_name, markup = "a" * 120, "<script>alert(1)</script>"
    runs = (
        "system\tteam\tquery_id\tanswer\tscore\n"
        f"{long_name}\tT1\tq1\tParis\t0.9\n{long_name}\tT1\tq2\tRome\t0.8\n"
        f"{long_name}\tT1\tq3\tBarcelona\t0.3\n{markup}\tT2&<b>\tq1\t Paris \t0.7\n"
        f"{markup}\tT2&<b>\tq2\tMilan\t0.6\n{markup}\tT2&<b>\tq3\tMadrid\t0.5\n"
    )
    samples = (
        "sample\tsystem\tquery_id\tanswer\tprob\n"
        f"s1\t{long_name}\tq1\tParis\t0.3333333333\n"
        f"s1\t{long_name}\tq3\tBarcelona\t0.3333333333\n"
        f"s1\t{markup}\tq2\tMilan\t0.3333333333\n"
    )
    bundle = make_bundle(tmp_path, runs=runs, samples=samples)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["score", str(bundle), "--out", str(out), "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
    html = (out / "report.html").read_text()
    assert markup not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert long_name in html and "T2&amp;&lt;b&gt;" in html


@pytest.mark.parametrize(
    ("file", "edit", "words"),
    [
        ("leaderboard.csv", lambda t: "", "leaderboard.csv: cannot read the table"),
        (
            "leaderboard.csv",
            lambda t: "\n".join(
                line + (",x,y,z" if i == 2 else "") for i, line in enumerate(t.split("\n"))
            ),
            "leaderboard.csv:3: cannot read the table: Expected",
        ),
        (
            "run.json",
            lambda t: t.replace('"warnings": [', '"warnings": 7, "w": ['),
            "'warnings' is 7",
        ),
        ("run.json", lambda t: t.replace('"ranking": {', '"ranking": 1, "r": {'), "'ranking' is 1"),
    ],
)
@pytest.mark.parametrize("command", ["leaderboard", "report"])
def test_a_hand_edited_output_folder_is_a_one_line_error(
    scored_dir, tmp_path, file, edit, words, command
):
    """``leaderboard`` and ``report`` read an output folder back: a table or run.json edited
    into another shape is exit 2 with one line naming the file (was a pandas or AttributeError
    traceback)."""
    if command == "leaderboard" and file == "run.json":
        pytest.skip("leaderboard reads leaderboard.csv only")
    out = tmp_path / "out"
    shutil.copytree(scored_dir, out)
    (out / file).write_text(edit((out / file).read_text()))
    result = CliRunner().invoke(cli, [command, str(out)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], lines
