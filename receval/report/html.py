"""The organiser's report: one self-contained HTML file built from a score output directory.

:func:`build_report` is a pure function of the directory written by ``receval score``: it reads
``leaderboard.csv`` and ``run.json`` (required) and, when present, ``pool.csv``,
``conflicts.csv``, ``per_query.csv``, ``annotation.csv``, ``pooling_bias.csv``,
``truth_check.csv`` and ``curves/<system>.csv``, and writes ``report.html`` atomically.  Nothing
is recomputed (Dimm's reference curves are only *drawn* from the β recorded in ``run.json``), so
``receval report DIR`` rebuilds the very same page.

The page opens offline: inline CSS, inline SVG figures (matplotlib, see
:mod:`receval.report.plots`), a few lines of inline JavaScript that make tables sortable (the
static table, in rank order, is what shows without it), no external resource of any kind.  A
missing optional input renders its section as one sentence saying why it is absent; a missing
number shows "—" with the row's ``note``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from receval import __version__
from receval.errors import BundleError
from receval.formats.tables import write_text_atomic
from receval.report import plots
from receval.report.writers import curve_file_stem, read_leaderboard, read_output_csv
from receval.run_record import (
    CurveRecord,
    OptionsBlock,
    RankingBlock,
    RunRecord,
    SystemTarget,
    TargetBlock,
)

__all__ = ["ReportInputs", "build_report", "read_report_inputs", "render_report"]

#: Optional tables of an output directory, by attribute of :class:`ReportInputs`.
OPTIONAL_TABLES = {
    "pool": "pool.csv",
    "conflicts": "conflicts.csv",
    "per_query": "per_query.csv",
    "annotation": "annotation.csv",
    "pooling_bias": "pooling_bias.csv",
    "truth_check": "truth_check.csv",
    "agreement": "agreement.csv",
}

TOP_QUERIES = 25
TOP_CONFLICTS = 15


@dataclass(frozen=True)
class ReportInputs:
    """Everything the report shows, as read from one output directory.

    ``absent`` maps each optional file that could not be used to the reason (missing, or the
    read error); ``curves`` maps a system to its curve table.
    """

    out_dir: Path
    run: RunRecord
    leaderboard: pd.DataFrame
    pool: pd.DataFrame | None = None
    conflicts: pd.DataFrame | None = None
    per_query: pd.DataFrame | None = None
    annotation: pd.DataFrame | None = None
    pooling_bias: pd.DataFrame | None = None
    truth_check: pd.DataFrame | None = None
    agreement: pd.DataFrame | None = None
    curves: dict[str, pd.DataFrame] = field(default_factory=dict)
    absent: dict[str, str] = field(default_factory=dict)
    created: str = ""
    created_source: str = ""
    files: tuple[str, ...] = ()


# --------------------------------------------------------------------------- reading


def read_report_inputs(out_dir: Path) -> ReportInputs:
    """Read an output directory of ``receval score`` (see the module docstring).

    Raises :class:`~receval.errors.BundleError` when ``leaderboard.csv`` or ``run.json`` is
    missing or unreadable; every other file is optional.
    """
    out_dir = Path(out_dir)
    run_path = out_dir / "run.json"
    board_path = out_dir / "leaderboard.csv"
    for path in (board_path, run_path):
        if not path.is_file():
            raise BundleError(path, None, "missing: is this an output directory of receval score?")
    run = RunRecord.from_json(_read_run(run_path))
    board = _read_board(board_path)
    tables, absent = _read_optional_tables(out_dir)
    curves = _read_curves(out_dir / "curves", _curve_systems(board, run), absent)
    created, source = _created(run, run_path)
    return ReportInputs(
        out_dir=out_dir,
        run=run,
        leaderboard=board,
        curves=curves,
        absent=absent,
        created=created,
        created_source=source,
        files=_output_files(out_dir),
        **tables,
    )


def _read_run(path: Path) -> dict[str, Any]:
    """``run.json``: a JSON object, else a :class:`BundleError` naming the file (and line)."""
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise BundleError(path, line, f"not valid JSON: {exc}") from None
    if not isinstance(run, dict):
        raise BundleError(path, None, "not a JSON object")
    wrong = RunRecord.misshapen(run)
    if wrong is not None:
        key, kind = wrong
        text = path.read_text(encoding="utf-8")
        at = re.search(rf'^\s*"{re.escape(key)}"\s*:', text, re.MULTILINE)
        line = text[: at.start()].count("\n") + 1 if at else None
        shown = json.dumps(run[key])[:40]
        raise BundleError(path, line, f"{key!r} is {shown}, not a JSON {kind} (edited by hand?)")
    return run


def _read_board(path: Path) -> pd.DataFrame:
    """``leaderboard.csv`` with its ``system`` column as text."""
    board = read_leaderboard(path)
    board["system"] = board["system"].fillna("").astype(str)
    return board


def _read_optional_tables(out_dir: Path) -> tuple[dict[str, pd.DataFrame | None], dict[str, str]]:
    """The optional tables (None where missing or unreadable) and why each absent one is."""
    tables: dict[str, pd.DataFrame | None] = {}
    absent: dict[str, str] = {}
    for attr, name in OPTIONAL_TABLES.items():
        path = out_dir / name
        tables[attr] = None
        if not path.is_file():
            absent[name] = "missing"
            continue
        try:
            tables[attr] = read_output_csv(path)
        except BundleError as exc:
            absent[name] = f"unreadable ({exc.message})"
    return tables, absent


def _curve_systems(board: pd.DataFrame, run: RunRecord) -> list[str]:
    """The systems whose curve file is looked for: the leaderboard's, then run.json's others."""
    on_board = set(board["system"])
    recorded = run.curves or {}
    return list(board["system"]) + [s for s in recorded if s not in on_board]


def _read_curves(
    curve_dir: Path, systems: list[str], absent: dict[str, str]
) -> dict[str, pd.DataFrame]:
    """Each system's ``curves/<system>.csv`` that holds a curve; the others go to ``absent``."""
    if not curve_dir.is_dir():
        return {}
    by_stem = {p.stem: p for p in sorted(curve_dir.glob("*.csv"))}
    curves: dict[str, pd.DataFrame] = {}
    for system in systems:
        path = by_stem.get(system) or by_stem.get(curve_file_stem(system))
        if path is None:
            continue
        try:
            frame = read_output_csv(path)
        except BundleError as exc:
            absent[f"curves/{path.name}"] = f"unreadable ({exc.message})"
            continue
        if {"rank", "precision"} <= set(frame.columns):
            curves[system] = frame
        else:
            absent[f"curves/{path.name}"] = "has no rank and precision columns"
    return curves


def _created(run: RunRecord, run_path: Path) -> tuple[str, str]:
    """When the run was made and where that time comes from (run.json, else its mtime)."""
    created = str(run.created or "")
    if created:
        return created, "run.json created"
    mtime = datetime.fromtimestamp(run_path.stat().st_mtime, tz=timezone.utc)
    return (
        mtime.isoformat(timespec="seconds"),
        "modification time of run.json (run.json has no created field)",
    )


def _output_files(out_dir: Path) -> tuple[str, ...]:
    """The CSV, JSON and NPZ files of the output directory (hidden files left out)."""
    return tuple(
        sorted(
            p.name
            for p in out_dir.iterdir()
            if p.is_file() and p.suffix in {".csv", ".json", ".npz"} and not p.name.startswith(".")
        )
    )


# --------------------------------------------------------------------------- formatting


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float | np.floating):
        return math.isnan(value)
    if isinstance(value, str):
        return value.strip() == ""
    return bool(pd.isna(value)) if np.isscalar(value) else False


def _num(value: Any, digits: int = 3) -> str:
    """A number for display: ``digits`` decimals (one from 100 up), "—" when missing."""
    if _is_missing(value):
        return "—"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    text = f"{v:.{1 if abs(v) >= 100 else digits}f}"
    return _unsigned_zero(text).replace("-", "−")


def _unsigned_zero(text: str) -> str:
    """``text`` without the minus of a value that rounds to zero ("-0.000" -> "0.000")."""
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def _count(value: Any) -> str:
    """A count for display: an integer ("76", never "76.0"); a fractional count (half labels
    of tied votes) keeps one decimal; "—" when missing."""
    if _is_missing(value):
        return "—"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(v):
        return _num(v)
    return f"{v:.0f}" if v == round(v) else f"{v:.1f}"


def _sort_value(value: Any) -> str:
    if _is_missing(value):
        return ""
    try:
        return repr(float(value))
    except (TypeError, ValueError):
        return str(value)


def _text(value: Any) -> str:
    return "" if _is_missing(value) else str(value)


def _interval(lo: Any, hi: Any) -> str:
    if _is_missing(lo) or _is_missing(hi):
        return ""
    return f"[{_num(lo)}, {_num(hi)}]"


def _level_text(run: RunRecord) -> str:
    level = run.level
    try:
        return f"{float(level):.0%}"
    except (TypeError, ValueError):
        return ""


@dataclass(frozen=True)
class Cell:
    """One table cell: display text, optional interval text and note, sort key, CSS class."""

    text: str
    sort: str = ""
    sub: str = ""
    title: str = ""
    css: str = ""
    tag: str = ""
    href: str = ""


def _value_cell(row: pd.Series, column: str, note: str) -> Cell:
    value = row.get(column)
    sub = _interval(row.get(f"{column}_lo"), row.get(f"{column}_hi"))
    missing = _is_missing(value)
    return Cell(
        text=_num(value),
        sort=_sort_value(value),
        sub=sub,
        title=note if missing and note else "",
        css="num missing" if missing else "num",
    )


def backtest_limit(run: RunRecord) -> float:
    """The back-test deviation above which a Dimm extrapolation is marked as not fitting: the
    value recorded in ``run.json`` (``target.backtest_limit``) or
    :data:`receval.estimators.target.BACKTEST_LIMIT` for runs that did not record one."""
    from receval.estimators.target import BACKTEST_LIMIT

    value = None if run.target is None else run.target.backtest_limit
    return BACKTEST_LIMIT if _is_missing(value) else float(value)


def _backtest(run: RunRecord, row: pd.Series | None, system: str) -> float:
    """A system's Dimm back-test deviation (leaderboard column, else run.json); NaN if none."""
    if row is not None and not _is_missing(row.get("precision_at_target_backtest")):
        return float(row.get("precision_at_target_backtest"))
    value = run.system_target(system).backtest_max_dev
    return math.nan if _is_missing(value) else float(value)


def curve_anchors(inputs: ReportInputs) -> dict[str, str]:
    """Page anchor (``curve-<k>``) of every system that has a curve figure, in figure order
    (leaderboard order, then curves of systems not on the leaderboard)."""
    run = inputs.run
    rows = {str(r["system"]): r for _, r in inputs.leaderboard.iterrows()}
    order = list(inputs.leaderboard["system"]) + [s for s in inputs.curves if s not in rows]
    todo = [s for s in order if s in inputs.curves or _dimm_point(run, rows.get(s), s) is not None]
    return {system: f"curve-{k + 1}" for k, system in enumerate(todo)}


def _target_source(method: str, info: CurveRecord | None, backtest: float, limit: float) -> Cell:
    """The "from" cell of precision at R_T: curve (method) or model, marked where it fails."""
    if method == "dimm":
        if math.isfinite(backtest) and backtest > limit:
            return Cell(
                f"model (Dimm) ⚠ does not fit (back-test {backtest:.2f})",
                "2",
                css="source poorfit",
                title="Dimm's reference curve, carried along the system's own estimated curve "
                "over the distance it extrapolates, misses the curve's end by "
                f"{backtest:.3f} in precision beyond the curve's sampling noise",
            )
        text = "model (Dimm)" + (f", back-test {backtest:.2f}" if math.isfinite(backtest) else "")
        return Cell(text, "1", css="source extrapolated")
    if method == "curve":
        label = f"curve ({plots.method_label(info.method)})" if info is not None else "curve"
        return Cell(label, "0", css="source")
    return Cell(method or "—", "", css="source")


# --------------------------------------------------------------------------- sections


def _run_card(inputs: ReportInputs) -> dict[str, Any]:
    run = inputs.run
    rows = [
        *_identity_rows(inputs, run),
        *_interval_rows(run),
        *_target_rows(run),
        *_data_rows(run),
    ]
    return {
        "rows": rows,
        "task_path": _text(run.inputs.task),
        "checksums": sorted((run.inputs.checksums or {}).items()),
        "warnings": list(run.warnings),
        "truth": _truth_summary(inputs.truth_check),
    }


def _identity_rows(inputs: ReportInputs, run: RunRecord) -> list[tuple[str, str]]:
    """Task, date, version, estimator and ranking key of the run card."""
    version = _text(run.receval_version) or "—"
    return [
        ("task", _text(run.task) or "—"),
        ("date", f"{inputs.created} ({inputs.created_source})"),
        ("receval version", f"{version} (report built by {__version__})"),
        ("estimator", _estimator_text(run.options)),
        ("ranked by", _text(_ranked_by(run)) or "—"),
    ]


def _ranked_by(run: RunRecord) -> Any:
    """The ranking key: ``ranking.by``, else ``options.rank_by``."""
    return (run.ranking.by if run.ranking is not None else None) or run.options.rank_by


def _interval_rows(run: RunRecord) -> list[tuple[str, str]]:
    """The bootstrap's seed, B and interval method, or why the run has no interval; tiers."""
    boot = run.bootstrap
    if boot is not None:
        seed = boot.seed if boot.seed is not None else run.options.seed
        rows = [
            ("bootstrap seed", _text(seed)),
            ("bootstrap replicates B", _text(boot.B)),
            ("interval", f"{_text(boot.method)} bootstrap, {_level_text(run)} two-sided"),
        ]
        if boot.labels:  # what the intervals are about with respect to the labels
            rows.append(("labels", f"Intervals are {_text(boot.labels)}."))
    else:
        rows = [
            (
                "interval",
                "none: this estimator has no sampling uncertainty to resample "
                "(no bootstrap in this run)",
            )
        ]
    ranking = run.ranking or RankingBlock()
    if ranking.tiers:
        rows.append(("tiers", _text(ranking.tiers)))
    if ranking.small_sample:
        rows.append(("tiers at small n", _text(ranking.small_sample)))
    return rows


def _target_rows(run: RunRecord) -> list[tuple[str, str]]:
    """The target recall and where the prevalence came from (none without a target)."""
    rt = run.target_recall
    if _is_missing(rt):
        return []
    detail = f"R_T = {_num(rt)}"
    target = run.target or TargetBlock()
    if target.prevalence_source:
        detail += f"; prevalence ρ from {target.prevalence_source}"
        if target.universe_size:
            detail += f" (universe size {target.universe_size})"
    return [("target recall", detail)]


def _data_rows(run: RunRecord) -> list[tuple[str, str]]:
    """The label merge, the sampling design and the saved replicates (where recorded)."""
    rows = []
    merge, design = run.merge, run.design
    if merge is not None:
        rows.append(
            (
                "label merge",
                f"rule {_text(merge.rule) or '—'}, ties: {_text(merge.tie) or '—'}; "
                f"{_count(merge.conflicts)} annotator conflicts (conflicts.csv)",
            )
        )
    if design is not None:
        designs = ", ".join(map(str, design.designs or [])) or "—"
        rows.append(
            (
                "sampling design",
                f"{_count(design.samplers)} samplers ({designs}), "
                f"{_count(design.draws_judged)} judged draws "
                f"({_count(design.draws_unjudged)} unjudged), "
                f"{_count(design.drawn_facts)} distinct drawn facts, "
                f"{_count(design.exhaustive_units)} exhaustive units",
            )
        )
    if run.replicates_file:
        rows.append(("saved replicates", _text(run.replicates_file)))
    return rows


def _estimator_text(options: OptionsBlock) -> str:
    """The estimator's name, what it is (its registered summary) and the options it reads."""
    from receval.estimators.registry import estimator_class

    est = _text(options.estimator) or "—"
    parts = [est]
    try:
        chosen = estimator_class(est)
    except (ValueError, ImportError, AttributeError):  # written by an estimator not installed
        chosen = None
    if chosen is not None:
        parts.append(chosen.summary)
        if chosen.mixture_weights:
            parts.append(f"weighting {_text(options.weighting)}")
    if options.target:
        parts.append(f"{options.target} average")
    return "; ".join(parts)


def _truth_summary(truth: pd.DataFrame | None) -> list[str]:
    if truth is None or not {"metric", "covered"} <= set(truth.columns):
        return []
    out = []
    covered = truth["covered"].astype(str).str.lower().isin(["true", "1", "1.0"])
    for metric, group in truth.groupby("metric", sort=False, observed=True):
        hits = int(covered[group.index].sum())
        err = pd.to_numeric(group.get("error"), errors="coerce")
        mean_abs = (
            float(np.nanmean(np.abs(err))) if err is not None and err.notna().any() else math.nan
        )
        out.append(
            f"{metric}: the interval covered the true value for {hits} of {len(group)} systems"
            + (f"; mean absolute error {mean_abs:.3f}" if math.isfinite(mean_abs) else "")
        )
    return out


@dataclass(frozen=True)
class _BoardContext:
    """What every leaderboard row's cells need besides the row itself."""

    run: RunRecord
    systems: int
    has_target: bool
    show_interval: bool
    anchors: dict[str, str]
    limit: float


def _leaderboard(inputs: ReportInputs) -> dict[str, Any]:
    board = inputs.leaderboard
    run = inputs.run
    intervals = sorted(
        {_text(v) for v in board.get("interval", pd.Series(dtype=object)) if _text(v)}
    )
    rt = run.target_recall
    ctx = _BoardContext(
        run=run,
        systems=len(board),
        has_target="precision_at_target" in board.columns,
        show_interval=len(intervals) > 1,
        anchors=curve_anchors(inputs),
        limit=backtest_limit(run),
    )
    notes, marks = _note_marks(board)
    rows = [
        _board_row(row, note, mark, ctx)
        for (_, row), note, mark in zip(board.iterrows(), _notes_of(board), marks, strict=True)
    ]
    heads = _board_heads(ctx, rt)
    heads, rows = _without_empty_columns(heads, rows, _board_flags(board))
    return {
        "heads": heads,
        "rows": rows,
        "notes": notes,
        "intervals": intervals,
        "level": _level_text(run),
        "tiers": _text(run.ranking.tiers if run.ranking is not None else None),
        **_board_flags(board),
        "has_target": ctx.has_target,
        "backtest_limit": f"{ctx.limit:.2f}",
        "target_recall": _num(rt) if not _is_missing(rt) else "",
        "estimator": ", ".join(sorted({_text(v) for v in board.get("estimator", []) if _text(v)})),
        "official": _is_official(run),
        "rank_sets": _rank_sets_text(run),
    }


def _without_empty_columns(heads: list, rows: list[list], flags: dict[str, bool]):
    """The heads and rows without the rank interval and tier columns when no row has one (a
    census): an empty column says nothing the caption does not."""
    gone = set()
    if not flags["any_rank_interval"]:
        gone.add("rank interval")
    if not flags["any_tier"]:
        gone.add("tier")
    keep = [i for i, (head, _) in enumerate(heads) if head not in gone]
    return [heads[i] for i in keep], [[row[i] for i in keep] for row in rows]


def _board_heads(ctx: _BoardContext, rt: Any) -> list[tuple[str, str]]:
    """The leaderboard's column heads and their kind (``num`` or ``text``, for sorting); with
    a cutoff K, precision and recall are headed P@K and R@K."""
    from receval.report.terminal import metric_heads

    named = metric_heads(ctx.run)
    recall = "recall (pooled, closed-world)" if _is_official(ctx.run) else "recall (true)"
    if "recall" in named:
        recall = f"{named['recall']}, {recall}"
    heads = [
        ("rank", "num"),
        ("rank interval", "num"),
        ("tier", "num"),
        ("system", "text"),
        ("team", "text"),
        (named.get("precision", "precision"), "num"),
        (recall, "num"),
        ("F1", "num"),
    ]
    if ctx.has_target:
        at = f"precision at R_T = {_num(rt)}" if not _is_missing(rt) else "precision at target"
        heads += [(at, "num"), ("at R_T from", "text")]
    if ctx.show_interval:
        heads.append(("interval", "text"))
    return heads


def _notes_of(board: pd.DataFrame) -> list[str]:
    return [_text(note) for note in board.get("note", pd.Series([None] * len(board)))]


def _note_marks(board: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The distinct notes in order of first use, and each row's footnote mark ("" if none)."""
    notes: list[str] = []
    marks = []
    for note in _notes_of(board):
        if note and note not in notes:
            notes.append(note)
        marks.append(str(notes.index(note) + 1) if note else "")
    return notes, marks


def _board_row(row: pd.Series, note: str, mark: str, ctx: _BoardContext) -> list[Cell]:
    """One leaderboard row: rank, rank interval, tier, system, team, P, R, F1 (+ target)."""
    lo, hi = row.get("rank_lo"), row.get("rank_hi")
    rank_int = "—" if _is_missing(lo) or _is_missing(hi) else f"{_count(lo)}–{_count(hi)}"
    system = _text(row.get("system"))
    cells = [
        Cell(_count(row.get("rank")), _sort_value(row.get("rank")), css="num"),
        Cell(rank_int, _rank_interval_key(lo, hi, ctx.systems), css="num"),
        Cell(_text(row.get("tier")) or "—", _sort_value(row.get("tier")), css="num"),
        Cell(system, system, css="system", tag=mark, href=ctx.anchors.get(system, "")),
        Cell(_text(row.get("team")) or "—", _text(row.get("team"))),
        _value_cell(row, "precision", note),
        _value_cell(row, "recall", note),
        _value_cell(row, "f1", note),
    ]
    if ctx.has_target:
        cells += _target_cells(row, note, ctx)
    if ctx.show_interval:
        cells.append(Cell(_text(row.get("interval"))))
    return cells


def _target_cells(row: pd.Series, note: str, ctx: _BoardContext) -> list[Cell]:
    """Precision at R_T (marked when extrapolated or not fitting) and where it comes from."""
    system = _text(row.get("system"))
    cell = _value_cell(row, "precision_at_target", note)
    method = _text(row.get("precision_at_target_method"))
    source = _target_source(
        method, (ctx.run.curves or {}).get(system), _backtest(ctx.run, row, system), ctx.limit
    )
    css = cell.css + {"source extrapolated": " extrapolated", "source poorfit": " poorfit"}.get(
        source.css, ""
    )
    return [Cell(cell.text, cell.sort, cell.sub, cell.title, css), source]


def _board_flags(board: pd.DataFrame) -> dict[str, bool]:
    """Whether any row has a tier, a metric interval, a rank interval."""

    def numbers(column: str) -> pd.Series:
        return pd.to_numeric(board.get(column, pd.Series(dtype=float)), errors="coerce")

    return {
        "any_tier": bool(board.get("tier", pd.Series(dtype=object)).map(_text).any()),
        "any_interval": any(
            numbers(f"{c}_lo").notna().any()
            for c in ("precision", "recall", "f1", "precision_at_target")
        ),
        "any_rank_interval": bool(numbers("rank_lo").notna().any()),
    }


def _is_official(run: RunRecord) -> bool:
    """Whether the run is a closed-world census (its recall is pooled recall): its record has
    the census block (``official``)."""
    return run.official is not None


def _rank_interval_key(lo: Any, hi: Any, systems: int) -> str:
    """Sort key of a rank interval: by its lower end, then its upper end (one number)."""
    if _is_missing(lo) or _is_missing(hi):
        return ""
    return repr(float(lo) * (systems + 1) + float(hi))


def _rank_sets_text(run: RunRecord) -> str:
    """What rank_lo–rank_hi are (run.json ``ranking.rank_sets``, else the default procedure's
    description), with the level."""
    text = _text(run.ranking.rank_sets if run.ranking is not None else None) or (
        "simultaneous rank confidence sets from the pairwise tests behind the tiers: "
        "rank_lo = 1 + #systems significantly better, rank_hi = S - #systems significantly worse"
    )
    text = text.replace(" - #", " − #").replace(
        "from the same pairwise comparisons", "from the pairwise tests behind the tiers"
    )
    level = _level_text(run)
    return text + (f", at confidence {level}" if level else "")


def _interval_label(inputs: ReportInputs) -> str | None:
    intervals = sorted({_text(v) for v in inputs.leaderboard.get("interval", []) if _text(v)})
    if len(intervals) == 1:
        return intervals[0] + " interval" if "bootstrap" in intervals[0] else intervals[0]
    return "interval (method and level per system in leaderboard.csv)" if intervals else None


def _forest(inputs: ReportInputs) -> dict[str, Any]:
    board = inputs.leaderboard
    run = inputs.run
    by = _text(_ranked_by(run))
    panels, absent = _forest_panels(board, run, by)
    if len(board) == 0:
        return {"svg": None, "absent_all": "The leaderboard has no systems.", "absent": absent}
    methods = list(board.get("precision_at_target_method", pd.Series([""] * len(board))).map(_text))
    limit = backtest_limit(run)
    poor = [
        m == "dimm" and _backtest(run, row, _text(row.get("system"))) > limit
        for m, (_, row) in zip(methods, board.iterrows(), strict=True)
    ]
    svg = plots.forest_plot(
        board,
        panels,
        interval_label=_interval_label(inputs),
        methods=methods,
        poor_fit=poor,
        backtest_limit=limit,
    )
    no_interval = not any(
        pd.to_numeric(board.get(f"{p.column}_lo", pd.Series(dtype=float)), errors="coerce")
        .notna()
        .any()
        for p in panels
    )
    return {
        "svg": svg,
        "absent": absent,
        "absent_all": None,
        "ranked_by": by,
        "no_interval": no_interval,
        "any_poor": any(poor),
        "backtest_limit": f"{limit:.2f}",
    }


def _forest_panels(
    board: pd.DataFrame, run: RunRecord, by: str
) -> tuple[list[plots.ForestPanel], str | None]:
    """The forest plot's panels: precision, recall (true, or pooled for the official census),
    F1, pooled recall when it ranks, precision at R_T when the run has it (else why not)."""
    recall_title = "Pooled recall (closed-world)" if _is_official(run) else "True recall θ̂·ν̂"
    panels = [
        plots.ForestPanel("precision", "Precision", "precision"),
        plots.ForestPanel("recall", recall_title, "recall"),
        plots.ForestPanel("f1", "F1", "F1"),
    ]
    if by == "pooled_recall" and "pooled_recall" in board.columns:
        panels.append(plots.ForestPanel("pooled_recall", "Pooled recall ν̂", "pooled recall"))
    at_target = board.get("precision_at_target", pd.Series(dtype=float))
    if not pd.to_numeric(at_target, errors="coerce").notna().any():
        return panels, (
            "No precision at a target recall in this run: run `receval score --target-recall R` "
            "to compare systems at one shared recall."
        )
    rt = run.target_recall
    title = f"Precision at R_T = {_num(rt)}" if not _is_missing(rt) else "Precision at target"
    return [*panels, plots.ForestPanel("precision_at_target", title, "precision")], None


def _dimm_point(run: RunRecord, row: pd.Series | None, system: str) -> plots.DimmPoint | None:
    info = run.system_target(system)
    if run.target is None or info.method != "dimm":
        return None
    try:
        values = [float(v) for v in (info.recall, info.precision, info.prevalence, info.beta)]
        rt = float(run.target.recall)
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(v) for v in values) or not math.isfinite(rt):
        return None

    def get(col: str) -> float:
        if row is None or _is_missing(row.get(col)):
            return math.nan
        return float(row.get(col))

    return plots.DimmPoint(
        *values,
        target=rt,
        at_target=get("precision_at_target"),
        at_target_lo=get("precision_at_target_lo"),
        at_target_hi=get("precision_at_target_hi"),
        backtest=_backtest(run, row, system),
        backtest_limit=backtest_limit(run),
    )


def _at_target(row: pd.Series | None) -> tuple[float, float, float] | None:
    if row is None or "precision_at_target" not in row.index:
        return None
    if _is_missing(row.get("precision_at_target")):
        return None
    return tuple(
        math.nan if _is_missing(row.get(c)) else float(row.get(c))
        for c in ("precision_at_target", "precision_at_target_lo", "precision_at_target_hi")
    )


def _curve_facts(
    inputs: ReportInputs, system: str, curve: pd.DataFrame | None, dimm: plots.DimmPoint | None
) -> list[str]:
    """The sentences under a system's curve figure: what was drawn, from which file, flags."""
    run = inputs.run
    facts: list[str] = []
    if curve is not None:
        facts += _curve_lines((run.curves or {}).get(system), system, curve)
    if dimm is not None:
        facts += _dimm_lines(run.system_target(system), dimm)
    return facts


def _curve_lines(info: CurveRecord | None, system: str, curve: pd.DataFrame) -> list[str]:
    """What the curve is (method, outputs, labels, knots, file), what its band means, flags."""
    where = f"curves/{curve_file_stem(system)}.csv"
    if info is not None:
        label = plots.method_label(info.method)
        first = (
            f"{label} curve over {_count(info.size)} ranked outputs from "
            f"{_count(info.annotations)} labels; {len(curve)} knots ({where})"
        )
    else:
        info = CurveRecord()
        first = f"{len(curve)} knots ({where}); run.json has no curve record"
    lines = [first]
    if info.guarantee:
        lines.append(f"What the band means: {info.guarantee}")
    return lines + [f"flag: {f}" for f in info.flags or []]


def _dimm_lines(tinfo: SystemTarget, dimm: plots.DimmPoint) -> list[str]:
    """Dimm's extrapolation in words (its point, ρ, β, X(R_T), back-test) and its own flags."""
    text = (
        f"Model extrapolation (Dimm 2015): reference curve X(R; ρ, β) through the system's "
        f"point (R = {dimm.recall:.3f}, P = {dimm.precision:.3f}) with ρ = {dimm.prevalence:.4g}, "
        f"β = {dimm.beta:.4g}; X(R_T) = {_num(dimm.at_target)}"
    )
    if math.isfinite(dimm.backtest):
        text += (
            "; back-test: the reference curve carried along the system's own curve over "
            "the distance it extrapolates misses the curve's end by "
            f"{dimm.backtest:.3g} beyond the curve's 95% sampling noise (backtest_max_dev)"
        )
    if math.isfinite(dimm.backtest) and dimm.poor_fit:
        text += (
            f", above {dimm.backtest_limit:.2f}: the model does not describe this "
            "system's curve, so the extrapolated number is not supported by its data"
        )
    flags = [
        f"flag: {f}"
        for f in tinfo.flags or []
        if "model extrapolation" not in str(f) and "back-test" not in str(f)
    ]
    return [text, *flags]


def _curve_summary(row: pd.Series | None, dimm: plots.DimmPoint | None, rt: str) -> str:
    """One line for a system's collapsed curve entry: its precision at R_T and where it is from."""
    at = _at_target(row)
    if at is None:
        return "no precision at R_T" if rt else ""
    text = f"P@R_T {_num(at[0])}"
    if math.isfinite(at[1]) and math.isfinite(at[2]):
        text += f" [{_num(at[1])}, {_num(at[2])}]"
    if dimm is not None:
        text += " model (Dimm)"
        if dimm.poor_fit:
            text += f" ⚠ does not fit (back-test {dimm.backtest:.2f})"
    else:
        text += " from the curve"
    return text


def _curves(inputs: ReportInputs, quiet: bool) -> dict[str, Any]:
    from receval.progress import progress

    run = inputs.run
    board = inputs.leaderboard
    rt = run.target.recall if run.target is not None else run.options.target_recall
    rt_value = None if _is_missing(rt) else float(rt)
    rt_text = _num(rt_value) if rt_value is not None else ""
    rows = {str(r["system"]): r for _, r in board.iterrows()}
    ranks = {str(r["system"]): _count(r.get("rank")) for _, r in board.iterrows()}
    anchors = curve_anchors(inputs)
    figures = []
    items = []
    with progress(list(anchors), "report figures", quiet) as systems:
        for system in systems:
            figure, item = _curve_entry(
                inputs, system, rows.get(system), ranks.get(system, "—"), anchors[system], rt_value
            )
            figure["summary"] = _curve_summary(rows.get(system), item.dimm, rt_text)
            figures.append(figure)
            items.append(item)
    limit = backtest_limit(run)
    overview = (
        plots.curve_overview(items, target_recall=rt_value, backtest_limit=limit) if items else None
    )
    return {
        "figures": figures,
        "svg": overview,
        "absent": None if figures else NO_CURVES,
        "without": [s for s in board["system"] if s not in anchors],
        "missing_files": [s for s in run.curves or {} if s not in inputs.curves],
        "target_recall": rt_text,
        "backtest_limit": f"{limit:.2f}",
        "any_poor": any(f["poor_fit"] for f in figures),
        "unreadable": {k: v for k, v in inputs.absent.items() if k.startswith("curves/")},
    }


#: The curves section of a run without curves.
NO_CURVES = (
    "No precision curves in this run: `receval score TASK --out DIR --target-recall R` adds "
    "each system's sample-based curve (and Dimm's extrapolation where a list ends short of "
    "R); `receval curve plan/estimate` builds one system's curve from its ranked list."
)


def _curve_entry(
    inputs: ReportInputs,
    system: str,
    row: pd.Series | None,
    rank: str,
    anchor: str,
    rt_value: float | None,
) -> tuple[dict[str, Any], plots.OverviewItem]:
    """A system's full curve figure (with its facts) and its panel of the overview."""
    info = inputs.run.system_curve(system)
    dimm = _dimm_point(inputs.run, row, system)
    at_target = _at_target(row)
    curve = inputs.curves.get(system)
    svg = plots.curve_plot(
        system,
        curve,
        method=_text(info.method),
        kind=_text(info.kind),
        target_recall=rt_value,
        dimm=dimm,
        at_target=at_target,
        name=anchor,
    )
    item = plots.OverviewItem(
        system=system,
        label=f"{rank}. {system}" if rank != "—" else system,
        href=f"#{anchor}",
        curve=curve,
        dimm=dimm,
        at_target=at_target[0] if at_target else math.nan,
        method=_text(row.get("precision_at_target_method")) if row is not None else "",
    )
    figure = {
        "system": system,
        "anchor": anchor,
        "rank": rank,
        "svg": svg,
        "facts": _curve_facts(inputs, system, curve, dimm),
        "poor_fit": dimm is not None and dimm.poor_fit,
        "wide": plots.curve_panels(curve, dimm is not None) == 2,
    }
    return figure, item


def _pool(inputs: ReportInputs) -> dict[str, Any]:
    pool = inputs.pool
    if pool is None:
        return {
            "absent": f"No pool.csv in this directory ({inputs.absent.get('pool.csv', 'missing')}): "
            "pool coverage θ̂ is estimated by `receval score` from exhaustively annotated units."
        }
    if "quantity" not in pool.columns:
        return {"absent": "pool.csv has no quantity column: pool coverage cannot be shown."}
    rows = []
    for _, r in pool.iterrows():
        rows.append(
            {
                "quantity": _text(r.get("quantity")),
                "description": _text(r.get("description")),
                "estimate": _count(r.get("estimate"))
                if _text(r.get("kind")) == "count"
                else _num(r.get("estimate")),
                "interval": _interval(r.get("lower"), r.get("upper"))
                if _text(r.get("kind")) != "count"
                else "",
                "kind": _text(r.get("kind")),
                "method": _text(r.get("interval")),
                "note": _text(r.get("note")),
            }
        )
    by = pool.set_index("quantity")
    svg = None
    absent = None
    if "pool_coverage" in by.index and not _is_missing(by.loc["pool_coverage", "estimate"]):
        cov = by.loc["pool_coverage"]

        def val(q: str) -> float:
            return (
                float(by.loc[q, "estimate"])
                if q in by.index and not _is_missing(by.loc[q, "estimate"])
                else math.nan
            )

        found = None
        inside, total = val("exhaustive_facts_in_pool"), val("exhaustive_facts")
        if math.isfinite(inside) and math.isfinite(total):
            found = (int(inside), int(total))
        method = _text(cov.get("interval"))
        svg = plots.pool_coverage_plot(
            float(cov["estimate"]),
            math.nan if _is_missing(cov.get("lower")) else float(cov["lower"]),
            math.nan if _is_missing(cov.get("upper")) else float(cov["upper"]),
            interval_label=(method + " interval") if method else None,
            found=found,
        )
    else:
        est = _text(inputs.run.options.estimator)
        absent = (
            "No pool coverage estimate in this run"
            + (
                f" (estimator {est}: a closed-world census of the assessed pool)"
                if _is_official(inputs.run)
                else ""
            )
            + ": θ̂ needs exhaustively annotated units and a sample-based estimator."
        )
    return {"rows": rows, "svg": svg, "absent": None, "coverage_absent": absent}


def _pooling_bias(inputs: ReportInputs) -> dict[str, Any]:
    bias = inputs.pooling_bias
    if bias is None:
        return {
            "absent": f"No pooling-bias diagnostic in this run (pooling_bias.csv "
            f"{inputs.absent.get('pooling_bias.csv', 'missing')}): it compares each team's official "
            "closed-world scores with the scores it would get had its unique facts not been pooled."
        }
    if "team" not in bias.columns or len(bias) == 0:
        return {"absent": "pooling_bias.csv has no teams: nothing to compare."}
    rows = []
    for _, r in bias.iterrows():
        rows.append(
            [
                Cell(_text(r.get("team")), _text(r.get("team"))),
                Cell(_count(r.get("systems")), _sort_value(r.get("systems")), css="num"),
                Cell(_count(r.get("unique_facts")), _sort_value(r.get("unique_facts")), css="num"),
                Cell(
                    _num(r.get("official_f1")),
                    _sort_value(r.get("official_f1")),
                    css="num",
                    title=_text(r.get("note")),
                ),
                Cell(
                    _num(r.get("official_f1_lto")),
                    _sort_value(r.get("official_f1_lto")),
                    css="num",
                    title=_text(r.get("note")),
                ),
                Cell(
                    _signed(r.get("delta_f1")),
                    _sort_value(r.get("delta_f1")),
                    css="num",
                    title=_text(r.get("note")),
                ),
                Cell(_num(r.get("joint_f1")), _sort_value(r.get("joint_f1")), css="num"),
                Cell(_text(r.get("note"))),
            ]
        )
    delta = pd.to_numeric(bias.get("delta_f1"), errors="coerce")
    summary = ""
    if delta is not None and delta.notna().any():
        summary = (
            f"Δ F1 over {int(delta.notna().sum())} teams: median {_signed(float(delta.median()))}, "
            f"from {_signed(float(delta.min()))} to {_signed(float(delta.max()))}."
        )
    return {
        "rows": rows,
        "svg": plots.pooling_bias_plot(bias),
        "absent": None,
        "summary": summary,
        "unjudged": _pooling_bias_rule(inputs.run),
    }


def _pooling_bias_rule(run: RunRecord) -> str:
    """How the official scores of pooling_bias.csv count an unjudged response: ``wrong``
    (trec_eval) or ``ignore`` (TAC's CS-Score), as run.json records it."""
    for block in (run.pooling_bias, run.official):
        rule = _text(block.unjudged if block is not None else None)
        if rule:
            return rule
    return "ignore"


def _signed(value: Any) -> str:
    """A difference with its sign ("+0.012", "−0.004"); one that rounds to zero is "0.000"; a
    value that is not a number (a hand-edited table) is shown missing."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—"
    if _is_missing(number):
        return "—"
    text = f"{number:+.3f}"
    return ("0.000" if not text.strip("+-0.") else text).replace("-", "−")


def _agreement_lines(agreement: pd.DataFrame | None) -> list[str]:
    """Inter-annotator agreement per round (agreement.csv), one sentence each."""
    if agreement is None or "alpha" not in agreement.columns:
        return []
    if agreement.empty:
        return [
            "Inter-annotator agreement: no fact was labelled by two annotators, so none is measured."
        ]
    lines = []
    for _, row in agreement.iterrows():
        alpha = pd.to_numeric(pd.Series([row.get("alpha")]), errors="coerce").iloc[0]
        value = "undefined" if pd.isna(alpha) else f"{alpha:.3f}"
        lines.append(
            f"Inter-annotator agreement, round {_text(row.get('round'))}: Krippendorff's α "
            f"{value} ({_count(row.get('annotators'))} annotators, "
            f"{_count(row.get('facts_multiply_labelled'))} facts labelled by two or more)."
        )
    return lines


def _annotation(inputs: ReportInputs) -> dict[str, Any]:
    summary = _annotation_summary(inputs)
    svg, absent, reuse = _spend_figure(inputs)
    return {
        "svg": svg,
        "absent": absent,
        "summary": [*summary, *reuse, *_agreement_lines(inputs.agreement)],
        **_conflicts_table(inputs),
    }


def _annotation_summary(inputs: ReportInputs) -> list[str]:
    """The judged draws of the design and what the exhaustive units found."""
    design = inputs.run.design
    lines = []
    if design is not None:
        lines.append(
            f"{_count(design.draws_judged)} judged draws ({_count(design.draws_unjudged)} "
            f"still unjudged) over {_count(design.drawn_facts)} distinct facts; "
            f"{_count(design.exhaustive_units)} units annotated exhaustively."
        )
    if inputs.pool is None or "quantity" not in inputs.pool.columns:
        return lines
    by = inputs.pool.set_index("quantity")
    if "exhaustive_units" in by.index and "exhaustive_facts" in by.index:
        in_pool = (
            f", {_count(by.loc['exhaustive_facts_in_pool', 'estimate'])} of them output by some system."
            if "exhaustive_facts_in_pool" in by.index
            else "."
        )
        lines.append(
            f"Exhaustive annotation: {_count(by.loc['exhaustive_units', 'estimate'])} units, "
            f"{_count(by.loc['exhaustive_facts', 'estimate'])} correct facts found" + in_pool
        )
    return lines


def _spend_figure(inputs: ReportInputs) -> tuple[str | None, str | None, list[str]]:
    """The per-system spend figure, or why there is none; the label-reuse sentence."""
    spend = inputs.annotation
    if spend is None or not {"system", "drawn_facts"} <= set(spend.columns):
        return (
            None,
            f"No per-system annotation spend in this run (annotation.csv "
            f"{inputs.absent.get('annotation.csv', 'lacks the system and drawn_facts columns')}).",
            [],
        )
    if not len(spend):
        return None, "annotation.csv lists no system.", []
    if not _any_draw(spend):
        return (
            None,
            "No sample round drawn: every label came from outside receval's rounds (e.g. "
            "TREC qrels or TAC assessments of the pooled responses), so there is no "
            "per-system annotation spend to show.",
            [],
        )
    order = {s: i for i, s in enumerate(inputs.leaderboard["system"])}
    spend = spend.assign(_o=spend["system"].map(order).fillna(len(order))).sort_values(
        "_o", kind="stable"
    )
    facts = pd.to_numeric(spend["drawn_facts"], errors="coerce").sum()
    shared = pd.to_numeric(spend.get("drawn_facts_shared"), errors="coerce")
    reuse = []
    if shared is not None and facts > 0:
        reuse.append(
            f"Label reuse: {int(shared.sum())} of {int(facts)} per-system drawn facts "
            f"({shared.sum() / facts:.0%}) were also output by another system, so one label "
            "served several systems."
        )
    return plots.annotation_plot(spend.drop(columns="_o")), None, reuse


def _conflicts_table(inputs: ReportInputs) -> dict[str, Any]:
    """The first annotator conflicts (conflicts.csv), or why there is no table."""
    conflicts = inputs.conflicts
    if conflicts is None:
        return {
            "conflicts_absent": f"conflicts.csv {inputs.absent.get('conflicts.csv', 'missing')}.",
            "conflicts": [],
        }
    cols = [
        c for c in ("query_id", "answer", "kind", "votes", "decision") if c in conflicts.columns
    ]
    return {
        "conflicts_absent": None,
        "conflicts_total": len(conflicts),
        "conflict_columns": cols,
        "conflicts": [
            [_text(r.get(c)) for c in cols] for _, r in conflicts.head(TOP_CONFLICTS).iterrows()
        ],
    }


def _any_draw(spend: pd.DataFrame) -> bool:
    """Whether annotation.csv records any draw or drawn fact."""
    columns = [c for c in ("draws", "drawn_facts") if c in spend.columns]
    values = spend[columns].apply(pd.to_numeric, errors="coerce").fillna(0).to_numpy()
    return bool((values != 0).any())


def _per_query(inputs: ReportInputs) -> dict[str, Any]:
    """Top queries by disagreement: annotator conflicts first, then how evenly the judged
    answers split between correct and wrong (``judged · p(1 − p)``, p = share judged correct:
    the queries on which systems' answers disagree most)."""
    pq = inputs.per_query
    if pq is None or "query_id" not in pq.columns:
        return {
            "absent": f"No per-query breakdown in this run (per_query.csv "
            f"{inputs.absent.get('per_query.csv', 'has no query_id column')})."
        }
    frame, numeric = _per_query_numbers(pq)
    has_split = {"judged", "judged_correct"} <= set(frame.columns)
    frame, order = _disagreement_order(frame, has_split)
    rows = [_per_query_row(r, numeric, has_split) for _, r in frame.head(TOP_QUERIES).iterrows()]
    heads = ["query", *[c.replace("_", " ") for c in numeric]]
    if has_split:
        heads += ["p (share judged correct)", "split: judged × p(1 − p)"]
    conflicts = frame["conflicts"].sum() if "conflicts" in frame.columns else 0
    return {
        "absent": None,
        "heads": heads,
        "rows": rows,
        "total": len(frame),
        "order": ", then by ".join(order) if order else "file order",
        "no_conflicts": "conflicts" in frame.columns and conflicts == 0,
    }


def _per_query_numbers(pq: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """per_query.csv with its count columns as numbers, and the names of those columns."""
    frame = pq.copy()
    numeric = [
        c
        for c in ("outputs", "systems", "judged", "judged_correct", "conflicts", "exhaustive_facts")
        if c in frame.columns
    ]
    for c in numeric:
        frame[c] = pd.to_numeric(frame[c], errors="coerce")
    return frame, numeric


def _disagreement_order(frame: pd.DataFrame, has_split: bool) -> tuple[pd.DataFrame, list[str]]:
    """The queries sorted by conflicts, then by the split of the judged answers (``_share``,
    ``_split`` added); the sort keys in words."""
    keys, order = [], []
    if "conflicts" in frame.columns:
        keys.append("conflicts")
        order.append("annotator conflicts")
    if has_split:
        judged = frame["judged"].to_numpy(dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(
                judged > 0, frame["judged_correct"].to_numpy(dtype=float) / judged, np.nan
            )
        frame["_share"] = share
        frame["_split"] = np.nan_to_num(judged * share * (1.0 - share))
        keys.append("_split")
        order.append("split of the judged answers, judged × p(1 − p) with p the share correct")
    if keys:
        frame = frame.sort_values(keys, ascending=False, kind="stable", na_position="last")
    return frame, order


def _per_query_row(r: pd.Series, numeric: list[str], has_split: bool) -> list[Cell]:
    cells = [Cell(_text(r.get("query_id")), _text(r.get("query_id")))]
    cells += [Cell(_count(r.get(c)), _sort_value(r.get(c)), css="num") for c in numeric]
    if has_split:
        cells.append(Cell(_num(r["_share"]), _sort_value(r["_share"]), css="num"))
        cells.append(Cell(_num(r["_split"], 1), _sort_value(r["_split"]), css="num"))
    return cells


def _judge(inputs: ReportInputs) -> dict[str, Any] | None:
    """The judge audit of a prediction-powered run (run.json ``judge``), or None."""
    judge = inputs.run.judge
    if judge is None:
        return None
    names = ", ".join(judge.judges or []) or "unnamed judge"
    scored, unscored = judge.labelled_scored_facts, judge.labelled_unscored_facts
    summary = (
        f"{names}: {scored if scored is not None else 0} human-labelled facts scored by the "
        f"judge ({unscored if unscored is not None else 0} unscored); correlation with the labels "
        f"{_num(judge.correlation)}, mean absolute error {_num(judge.mean_abs_error)}. "
        "The estimates stay unbiased whatever the judge; a better judge only narrows them."
    )
    bins = [
        {
            "bin": f"[{b.lo:.1f}, {b.hi:.1f})",
            "facts": b.facts,
            "mean_score": _num(b.mean_score),
            "share_correct": _num(b.share_correct),
        }
        for b in judge.calibration
    ]
    heads = ["system", "λ precision", "λ pooled recall", "judge precision", "labelled facts"]
    heads += ["correlation", "mean |s − f|", "extra labels worth"]
    rows = [
        [
            name,
            _num(v.lambda_precision),
            _num(v.lambda_pooled_recall),
            _num(v.judge_precision),
            _count(v.labelled_facts),
            _num(v.correlation),
            _num(v.mean_abs_error),
            _num(v.effective_extra_labels),
        ]
        for name, v in judge.systems.items()
    ]
    return {"summary": summary, "bins": bins, "heads": heads, "rows": rows}


def _judge_audit(inputs: ReportInputs) -> dict[str, Any] | None:
    """The judge audit (run.json ``judge_audit``, :mod:`receval.judge_audit`), or None."""
    from receval.judge_audit import report_section

    return report_section(inputs.run.judge_audit)


def _files(inputs: ReportInputs) -> dict[str, Any]:
    described = {
        "leaderboard.csv": "one row per system: estimates, intervals, ranks, tiers",
        "run.json": "every parameter, version and input checksum of the run",
        "pool.csv": "pool coverage θ̂, estimated correct facts, pool counts",
        "conflicts.csv": "every annotator disagreement and its decision",
        "per_query.csv": "outputs, judged facts and conflicts per query",
        "annotation.csv": "labels drawn per system and their reuse",
        "agreement.csv": "inter-annotator agreement (Krippendorff's α) per annotation round",
        "judge.csv": "the judge audit: per judge and system, implied precision, favour test, κ, α",
        "pooling_bias.csv": "official scores with each team left out of the pool",
        "truth_check.csv": "estimates against the ground truth (simulated tasks)",
        "replicates.npz": "the bootstrap resampling counts (--save-replicates)",
    }
    files = [(name, described.get(name, "")) for name in inputs.files]
    curves_dir = inputs.out_dir / "curves"
    curve_files = sorted(p.name for p in curves_dir.glob("*.csv")) if curves_dir.is_dir() else []
    return {"files": files, "curve_files": curve_files}


# --------------------------------------------------------------------------- rendering


def _environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("receval.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"], default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md_code"] = _md_code
    return env


def _md_code(text: str):
    """Escape ``text`` and turn `back-quoted` spans into <code> elements."""
    from markupsafe import Markup, escape

    parts = re.split(r"`([^`]+)`", str(text))
    out = [
        escape(p) if i % 2 == 0 else Markup("<code>") + escape(p) + Markup("</code>")
        for i, p in enumerate(parts)
    ]
    return Markup("").join(out)


def render_report(inputs: ReportInputs, *, quiet: bool = True) -> str:
    """The report page (HTML text) for ``inputs``; a pure function of them."""
    from markupsafe import Markup

    def safe(section: dict[str, Any]) -> dict[str, Any]:
        if section.get("svg"):
            section["svg"] = Markup(section["svg"])
        for fig in section.get("figures", []):
            fig["svg"] = Markup(fig["svg"])
        return section

    task = _text(inputs.run.task) or inputs.out_dir.name
    context = {
        "task": task,
        "card": _run_card(inputs),
        "board": _leaderboard(inputs),
        "forest": safe(_forest(inputs)),
        "curves": safe(_curves(inputs, quiet)),
        "pool": safe(_pool(inputs)),
        "bias": safe(_pooling_bias(inputs)),
        "annotation": safe(_annotation(inputs)),
        "per_query": _per_query(inputs),
        "judge": _judge(inputs),
        "judge_audit": _judge_audit(inputs),
        "files": _files(inputs),
        "unreadable": {
            k: v for k, v in inputs.absent.items() if v != "missing" and not k.startswith("curves/")
        },
    }
    return _environment().get_template("report.html.j2").render(**context)


def build_report(out_dir: Path, *, quiet: bool = True) -> Path:
    """Read the output directory ``out_dir`` and write ``out_dir/report.html`` atomically.

    A pure function of the files in ``out_dir`` (``receval report DIR`` and ``receval score``
    produce identical pages from identical files).  Raises
    :class:`~receval.errors.BundleError` when ``leaderboard.csv`` or ``run.json`` is missing
    or unreadable.  ``quiet=False`` shows a progress bar on a terminal while figures are drawn.
    """
    inputs = read_report_inputs(Path(out_dir))
    path = Path(out_dir) / "report.html"
    write_text_atomic(path, render_report(inputs, quiet=quiet))
    return path


def section_html(page: str, section_id: str) -> str:
    """The ``<section id=...>`` element of a rendered page (for tests and comparisons)."""
    match = re.search(rf'<section id="{re.escape(section_id)}".*?</section>', page, flags=re.S)
    if match is None:
        raise KeyError(section_id)
    return match.group(0)
