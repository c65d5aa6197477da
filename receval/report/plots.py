"""Figures of the HTML report, inlined in the page as SVG.

The forest plot and the pooling-bias figure (dots and intervals on one linear axis, the figures of
every run, the official census included) are written by hand with :mod:`receval.report.svg`; the
others (curves, pool coverage, annotation spend) are drawn with matplotlib's SVG backend, which
is imported only when one of them is drawn.

Every figure has a title, axis labels and a legend, uses the Okabe–Ito colour-blind-safe palette
(with marker shapes and line styles as a second cue), and is returned as a compact ``<svg>``
element ready to be placed in an HTML document: no XML prologue, no external references, ids
prefixed per figure so several figures can share one page, coordinates rounded to 0.1 pt
(styles, so opacities and colours, are kept exactly as matplotlib wrote them).

The figures only *show* numbers that the CSV/JSON outputs hold; nothing is estimated here except
Dimm's reference curve X(R; ρ, β), which is evaluated from the fitted β in ``run.json`` with
:func:`receval.extrapolation.reference_precision` (a model curve, labelled as such).
"""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ParamSpec

import numpy as np
import pandas as pd

from receval.report import svg

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Okabe & Ito's colour-blind-safe palette (Color Universal Design, 2008).
PALETTE = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}

#: Opacity of the shaded tier bands of the forest plot (and of their legend swatch).
TIER_ALPHA = 0.1

#: Most points drawn per curve series (the CSV keeps every knot).
MAX_CURVE_POINTS = 120

_RC = {
    "svg.fonttype": "none",  # text stays text: small files, selectable, printable
    "svg.hashsalt": "receval-report",  # deterministic clip-path ids
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.0,
    "legend.fontsize": 8.0,
    "legend.framealpha": 0.9,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "path.simplify": True,
}

_NUMBER = re.compile(r"(-?\d+\.\d)\d+")
_ATTRIBUTE = re.compile(r'(\s[\w:-]+=")([^"]*)(")')

#: Attributes holding only coordinates or lengths (in points), whose numbers are rounded to
#: 0.1 pt.  Nothing else is touched: ``style`` holds opacities, colours, line widths and dash
#: patterns, where a rounded number would change what is drawn (``opacity: 0.07`` -> ``0.0``).
COORDINATE_ATTRIBUTES = frozenset(
    {
        "d",
        "x",
        "y",
        "x1",
        "y1",
        "x2",
        "y2",
        "cx",
        "cy",
        "r",
        "rx",
        "ry",
        "width",
        "height",
        "points",
        "viewBox",
    }
)
#: In ``transform``, only these functions take coordinates (``scale``/``matrix`` keep theirs).
_TRANSFORM_COORDINATES = re.compile(r"\b(translate|rotate)\(([^)]*)\)")


P = ParamSpec("P")


def _styled(func: Callable[P, str]) -> Callable[P, str]:
    """Run a figure function inside the report's matplotlib style (fonts, palette, SVG text);
    matplotlib is imported only when such a figure is drawn."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> str:
        import matplotlib

        cycle = matplotlib.cycler(color=list(PALETTE.values()))
        with matplotlib.rc_context({**_RC, "axes.prop_cycle": cycle}):
            return func(*args, **kwargs)

    return wrapper


@dataclass(frozen=True)
class ForestPanel:
    """One panel of :func:`forest_plot`: the leaderboard column, its title and x label."""

    column: str
    title: str
    xlabel: str


def _figure(width: float, height: float, **kwargs: object) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), **kwargs)


def _legend_below(
    fig: Figure,
    *,
    width: float,
    axes_height: float,
    left: float,
    ncol: int = 1,
    top: float = 0.32,
    bottom: float = 0.52,
    gap: float = 0.0,
) -> None:
    """Size the figure (inches) for its axes plus a legend of all their artists below them.

    A fixed layout computed from the number of legend rows: much cheaper than matplotlib's
    constrained layout, which draws every figure twice.
    """
    handles, labels = [], []
    for ax in fig.axes:
        h, t = ax.get_legend_handles_labels()
        handles += h
        labels += t
    rows = math.ceil(len(labels) / ncol) if labels else 0
    legend = rows * 0.17 + (0.08 if rows else 0.0)
    height = top + axes_height + bottom + legend
    fig.set_size_inches(width, height)
    panels = max(len(fig.axes), 1)
    axes_width = (width - left - 0.2 - gap * (panels - 1)) / panels
    fig.subplots_adjust(
        left=left / width,
        right=1 - 0.2 / width,
        top=1 - top / height,
        bottom=(bottom + legend) / height,
        wspace=gap / axes_width if panels > 1 else 0.2,
    )
    if labels:
        fig.legend(
            handles,
            labels,
            loc="lower left",
            bbox_to_anchor=(0.5 * left / width, 0.04 / height),
            ncol=ncol,
            fontsize=7,
            frameon=False,
        )


def _render(fig: Figure, name: str, title: str) -> str:
    """The figure as a compact inline ``<svg>`` element (see the module docstring)."""
    buf = io.StringIO()
    fig.savefig(
        buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None}
    )
    return inline_svg(buf.getvalue(), name, title)


def _round_transform(match: re.Match[str]) -> str:
    return match.group(1) + "(" + _NUMBER.sub(r"\1", match.group(2)) + ")"


def inline_svg(svg: str, name: str, title: str) -> str:
    """Turn a standalone SVG document written by matplotlib into an inline ``<svg>`` element.

    Drops the XML prologue, metadata, namespace declarations (the HTML parser supplies them)
    and the document-wide ``<style>`` (the page's CSS has it); removes ids nobody refers to and
    prefixes the others with ``name``; rounds coordinates (:data:`COORDINATE_ATTRIBUTES`, and
    ``translate``/``rotate`` in ``transform``) to one decimal, never a style (opacities, colours); makes the
    element scale to its container (``viewBox`` kept, natural width as ``max-width``).
    """
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r"<style[^>]*>.*?</style>", "", svg, flags=re.S)
    svg = re.sub(r'\s(xmlns(:\w+)?|version)="[^"]*"', "", svg)
    svg = re.sub(r'\stransform="rotate\(-0 [^)]*\)"', "", svg)
    defined = set(re.findall(r'\sid="([^"]+)"', svg))
    used = set(re.findall(r"url\(#([^)]+)\)", svg)) | set(re.findall(r'href="#([^"]+)"', svg))
    used &= defined  # a link to the page (an artist's url, e.g. "#curve-3") is not renamed

    def rename_id(match: re.Match[str]) -> str:
        ident = match.group(1)
        return f' id="{name}-{ident}"' if ident in used else ""

    svg = re.sub(r'\sid="([^"]+)"', rename_id, svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{name}-{m.group(1)})", svg)
    svg = re.sub(
        r'href="#([^"]+)"',
        lambda m: f'href="#{name}-{m.group(1)}"' if m.group(1) in used else m.group(0),
        svg,
    )

    def compact(match: re.Match[str]) -> str:
        attribute = match.group(1).strip()[:-2]
        value = match.group(2)
        if attribute in COORDINATE_ATTRIBUTES:
            value = _NUMBER.sub(r"\1", value)
        elif attribute == "transform":
            value = _TRANSFORM_COORDINATES.sub(_round_transform, value)
        if attribute == "d":
            value = re.sub(r"\s+", " ", value).strip()
            value = re.sub(r" ?([MLZCQz]) ?", r"\1", value)
        return match.group(1) + value + match.group(3)

    svg = _ATTRIBUTE.sub(compact, svg)
    svg = re.sub(r">\s+<", "><", svg)
    svg = re.sub(r"<defs></defs>", "", svg)
    width = re.search(r'<svg[^>]*\swidth="([\d.]+)pt"', svg)
    svg = re.sub(r'(<svg[^>]*?)\s(width|height)="[^"]*"', r"\1", svg, count=1)
    svg = re.sub(r'(<svg[^>]*?)\s(width|height)="[^"]*"', r"\1", svg, count=1)
    max_width = f' style="max-width:{width.group(1)}pt"' if width else ""
    text = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    attr = text.replace('"', "&quot;")
    head = f'<svg class="plot" role="img" aria-label="{attr}" data-figure="{name}"{max_width}'
    svg = svg.replace("<svg", head, 1)
    return svg.replace(">", f"><title>{text}</title>", 1)


def _finite(values: object) -> np.ndarray:
    return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=np.float64)


# --------------------------------------------------------------------------- forest plots

#: Marks of the forest plot (matplotlib's marker sizes: diameter in points).
_ESTIMATE = svg.Mark("o", 3.5, PALETTE["black"])
_INTERVAL = svg.Mark("-", 16.0, "none", PALETTE["blue"], 1.6)
_DIMM = svg.Mark("D", 4.0, "#ffffff", PALETTE["vermillion"], 1.2)
_POOR_FIT = svg.Mark("X", 5.5, PALETTE["vermillion"])


def tier_runs(tiers: Sequence[object]) -> list[tuple[int, int]]:
    """The shaded tier bands: (first row, end row) of every other run of consecutive rows of one
    tier (the first, third, ...); none when no row has a tier."""
    values = [
        "" if t is None or (isinstance(t, float) and math.isnan(t)) else str(t) for t in tiers
    ]
    if not any(values):
        return []
    runs, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            runs.append((start, i))
            start = i
    return runs[::2]


@dataclass(frozen=True)
class _Rows:
    """Where the rows of a dot-and-interval figure are: ``n`` rows between ``top`` and
    ``bottom`` (points), the first at the top."""

    n: int
    top: float
    bottom: float

    def y(self, row: float) -> float:
        return self.top + (row + 0.5) * (self.bottom - self.top) / max(self.n, 1)


def forest_plot(
    board: pd.DataFrame,
    panels: Sequence[ForestPanel],
    *,
    interval_label: str | None,
    name: str = "forest",
    methods: Sequence[str] | None = None,
    poor_fit: Sequence[bool] | None = None,
    backtest_limit: float = math.nan,
) -> str:
    """Forest plot: one row per system in leaderboard (rank) order, one panel per metric.

    Each panel shows the point estimate and the ``_lo``–``_hi`` interval of its column; tiers
    (systems not distinguishable at the chosen level) are shaded as alternating bands.  For the
    precision-at-target column, ``methods`` (one per row: ``curve`` or ``dimm``) picks the
    marker, so model extrapolations are visibly different from curve estimates; ``poor_fit``
    (one per row) marks the extrapolations whose back-test deviation exceeds
    ``backtest_limit`` with a filled cross (the model does not fit the system's own curve).
    Drawn as hand-written SVG (:mod:`receval.report.svg`).
    """
    n = len(board)
    labels = [str(s) for s in board["system"]]
    size = 7.0 if n > 30 else 8.0
    left = max(1.3 * svg.PT, max(map(len, labels), default=0) * size * svg.CHAR_EM + 30)
    width = left - 1.3 * svg.PT + (1.4 + (2.9 if len(panels) <= 3 else 2.5) * len(panels)) * svg.PT
    poor = np.zeros(n, bool) if poor_fit is None else np.asarray(poor_fit, bool)
    dimm = np.zeros(n, bool)
    if methods is not None:
        dimm = np.array([str(m) == "dimm" for m in methods], bool)
    drawn = {"tiers"} if tier_runs(list(board.get("tier", [None] * n))) else set()
    for panel in panels:
        drawn |= _forest_marks(board, panel, dimm, poor)
    entries = _forest_legend(drawn, interval_label, backtest_limit)
    columns = svg.legend_columns(entries, 3, width - 20)
    axes = max(2.6, (0.16 if n <= 40 else 0.14) * n + 1.6) * svg.PT - 0.85 * svg.PT - 32.4
    rows = _Rows(n, 32.4, 32.4 + axes)
    canvas = svg.Canvas(width, rows.bottom + 46 + svg.legend_height(entries, columns))
    panel_width = (width - left - 0.02 * width) / (len(panels) + 0.08 * (len(panels) - 1))
    for i, panel in enumerate(panels):
        x0 = left + i * panel_width * 1.08
        _forest_panel(canvas, board, panel, rows, (x0, x0 + panel_width), dimm & poor, dimm)
    ylabel = "system (in rank order, best first)"
    canvas.y_labels(left, [rows.y(i) for i in range(n)], labels, size, ylabel)
    legend_width = sum(svg.column_widths(entries, columns))
    canvas.legend(entries, max(4.0, (width - legend_width) / 2), rows.bottom + 46, columns)
    return canvas.render(name, "Forest plot: " + ", ".join(p.title for p in panels))


def _forest_columns(board: pd.DataFrame, column: str) -> tuple[np.ndarray, ...]:
    n = len(board)
    return tuple(
        _finite(board.get(c, [math.nan] * n)) for c in (column, f"{column}_lo", f"{column}_hi")
    )


def _forest_marks(
    board: pd.DataFrame, panel: ForestPanel, dimm: np.ndarray, poor: np.ndarray
) -> set[str]:
    """What a panel of :func:`forest_plot` draws (``interval``, ``dimm``, ``poor``), for the
    legend."""
    est, lo, hi = _forest_columns(board, panel.column)
    drawn = set()
    if (np.isfinite(lo) & np.isfinite(hi) & np.isfinite(est)).any():
        drawn.add("interval")
    if panel.column == "precision_at_target":
        if (dimm & poor & np.isfinite(est)).any():
            drawn.add("poor")
        if (dimm & ~poor & np.isfinite(est)).any():
            drawn.add("dimm")
    return drawn


def _forest_panel(
    canvas: svg.Canvas,
    board: pd.DataFrame,
    panel: ForestPanel,
    rows: _Rows,
    span: tuple[float, float],
    poor: np.ndarray,
    dimm: np.ndarray,
) -> None:
    """Draw one panel of :func:`forest_plot` between x = ``span`` (points): tier bands, grid and
    x axis, intervals, then the estimates (Dimm extrapolations marked only in the
    precision-at-target panel)."""
    est, lo, hi = _forest_columns(board, panel.column)
    axis = svg.Axis(*svg.data_limits(np.concatenate([est, lo, hi])), *span)
    for start, end in tier_runs(list(board.get("tier", [None] * rows.n))):
        top = rows.y(start - 0.5)
        canvas.band(span[0], top, span[1] - span[0], rows.y(end - 0.5) - top, TIER_ALPHA)
    canvas.x_axis(axis, rows.top, rows.bottom, panel.xlabel, "#dddddd")
    canvas.segments([(span[0], rows.top, span[0], rows.bottom)], "#000000", 0.8)
    y = np.array([rows.y(i) for i in range(rows.n)])
    ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(est)
    canvas.segments(
        zip(map(axis, lo[ok]), y[ok], map(axis, hi[ok]), y[ok], strict=True),
        PALETTE["blue"],
        1.6,
    )
    if panel.column != "precision_at_target":
        dimm = np.zeros(rows.n, bool)
    finite = np.isfinite(est)
    for mark, sel in (
        (_ESTIMATE, finite & ~dimm),
        (_POOR_FIT, finite & dimm & poor),
        (_DIMM, finite & dimm & ~poor),
    ):
        canvas.series(mark, zip(map(axis, est[sel]), y[sel], strict=True))
    canvas.text((span[0] + span[1]) / 2, rows.top - 6, panel.title, 10)


def _forest_legend(
    drawn: set[str], interval_label: str | None, backtest_limit: float
) -> list[svg.LegendEntry]:
    """Legend entries of :func:`forest_plot` for what its panels drew."""
    entries = [svg.LegendEntry("estimate", _ESTIMATE)]
    if "interval" in drawn:
        entries.append(svg.LegendEntry(interval_label or "interval", _INTERVAL))
    if "dimm" in drawn:
        entries.append(svg.LegendEntry("model extrapolation (Dimm)", _DIMM))
    if "poor" in drawn:
        text = f"model extrapolation, does not fit (back-test > {backtest_limit:.2f})"
        entries.append(svg.LegendEntry(text, _POOR_FIT))
    if "tiers" in drawn:
        entries.append(svg.LegendEntry("tier (alternate tiers shaded)", opacity=TIER_ALPHA))
    return entries


# --------------------------------------------------------------------------- precision curves


def thin_curve(curve: pd.DataFrame, max_points: int = MAX_CURVE_POINTS) -> pd.DataFrame:
    """At most about ``max_points`` rows of a curve table, for drawing only.

    Keeps the first and last knots, every queried point (or an evenly spread subset of them
    when there are more than ``max_points // 2``), and the knots nearest to a grid that is half
    geometric in rank (the head, where precision changes fastest) and half uniform.  The CSV
    keeps every knot; this only bounds the size of the figure.
    """
    n = len(curve)
    if n <= max_points:
        return curve.reset_index(drop=True)
    ranks = _finite(curve["rank"]) if "rank" in curve else np.arange(1.0, n + 1.0)
    keep = {0, n - 1}
    if "queried" in curve:
        queried = np.flatnonzero(_finite(curve["queried"]) == 1)
        quota = max_points // 2
        if queried.size > quota:
            queried = queried[np.linspace(0, queried.size - 1, quota).round().astype(int)]
        keep.update(int(i) for i in queried)
    budget = max(max_points - len(keep), 2)
    lo, hi = max(np.nanmin(ranks), 1.0), max(np.nanmax(ranks), 1.0)
    grid = np.concatenate(
        [np.geomspace(lo, hi, budget // 2), np.linspace(lo, hi, budget - budget // 2)]
    )
    order = np.argsort(ranks, kind="stable")
    pos = np.clip(np.searchsorted(ranks[order], grid), 0, n - 1)
    keep.update(int(i) for i in order[pos])
    return curve.iloc[sorted(keep)].reset_index(drop=True)


def _rank_label(value: float, _pos: object = None) -> str:
    """Tick label of a rank axis: 1, 10, 100, 1k, 10k, 100k, 1M, ... (no mathtext: cheap)."""
    for factor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:g}{suffix}"
    return f"{value:g}"


_KIND_LABEL = {
    "bound": "guaranteed bounds",
    "interval": "interval",
    "envelope": "envelope [lb, ub]",
    "band": "band at every rank (prob. ≥ 1 − δ)",
    "approximation": "approximation (no coverage claim)",
    "exact": "exact",
}

_METHOD_LABEL = {
    "paula": "PAULA",
    "adastrat": "AdaStrat",
    "logstrat": "LogStrat",
    "random": "random sampling",
    "stratband": "StratBand",
    "tailband": "TailBand",
    "random_sampling": "random sampling",
    "sample": "precision samples",
}


def method_label(method: object) -> str:
    """Display name of a curve method (``paula`` -> ``PAULA``)."""
    text = str(method or "")
    return _METHOD_LABEL.get(text.lower(), text or "curve")


@dataclass(frozen=True)
class DimmPoint:
    """A system's Dimm extrapolation as recorded in ``run.json`` (a model extrapolation)."""

    recall: float
    precision: float
    prevalence: float
    beta: float
    target: float
    at_target: float = math.nan
    at_target_lo: float = math.nan
    at_target_hi: float = math.nan
    backtest: float = math.nan
    backtest_limit: float = math.nan

    @property
    def poor_fit(self) -> bool:
        """Whether the back-test says the reference curve does not fit the system's own curve
        (largest deviation above ``backtest_limit``)."""
        return math.isfinite(self.backtest) and self.backtest > self.backtest_limit


def _draw_dimm(ax, dimm: DimmPoint) -> None:
    """Dimm's reference curve through the system's point, and X(R_T) with its interval."""
    from receval.extrapolation import reference_precision

    top = max(1.0, dimm.target)
    r = np.linspace(0.0, top, 201)[1:]
    x = reference_precision(r, dimm.prevalence, dimm.beta)
    label = f"Dimm reference curve X(R; ρ={dimm.prevalence:.3g}, β={dimm.beta:.3g})"
    if dimm.poor_fit:
        label = (
            f"Dimm reference curve: DOES NOT FIT (back-test {dimm.backtest:.2f} > "
            f"{dimm.backtest_limit:.2f})"
        )
    ax.plot(
        r,
        x,
        ls=":" if dimm.poor_fit else "--",
        lw=1.3,
        color=PALETTE["vermillion"],
        label=label,
        zorder=3,
    )
    ax.plot(
        [dimm.recall],
        [dimm.precision],
        "o",
        ms=6,
        mfc=PALETTE["vermillion"],
        mec="black",
        label=f"system's point (R={dimm.recall:.3f}, P={dimm.precision:.3f})",
        zorder=5,
    )
    if math.isfinite(dimm.at_target):
        yerr = None
        if math.isfinite(dimm.at_target_lo) and math.isfinite(dimm.at_target_hi):
            yerr = [
                [max(dimm.at_target - dimm.at_target_lo, 0.0)],
                [max(dimm.at_target_hi - dimm.at_target, 0.0)],
            ]
        ax.errorbar(
            [dimm.target],
            [dimm.at_target],
            yerr=yerr,
            fmt="D",
            ms=6,
            mfc="white",
            mec=PALETTE["vermillion"],
            ecolor=PALETTE["vermillion"],
            capsize=3,
            label=f"extrapolated precision at R_T (model{', poor fit' if dimm.poor_fit else ''}, "
            f"{dimm.at_target:.3f})",
            zorder=6,
        )


def curve_panels(curve: pd.DataFrame | None, extrapolated: bool) -> int:
    """Panels of :func:`curve_plot`: 2 when Dimm's curve cannot share the curve's axes (the
    curve table has no recall to put it on), else 1."""
    if curve is None or len(curve) == 0:
        return 1
    recall = _finite(curve["recall"]) if "recall" in curve else np.array([np.nan])
    return 2 if extrapolated and not np.isfinite(recall).all() else 1


def _draw_queried(
    ax, x: np.ndarray, p: np.ndarray, thin: pd.DataFrame, curve: pd.DataFrame
) -> None:
    """The queried points: marked on the curve when there are few, ticks on the x axis else."""
    queried = _finite(thin["queried"]) == 1 if "queried" in thin else np.zeros(len(x), bool)
    count = int((_finite(curve["queried"]) == 1).sum()) if "queried" in curve else 0
    if not queried.any():
        return
    if queried.sum() <= 30:
        ax.plot(
            x[queried],
            p[queried],
            "x",
            color=PALETTE["blue"],
            ms=4.5,
            mew=1.1,
            label=f"queried points ({count})",
        )
        return
    xs = np.repeat(x[queried], 3)
    ys = np.tile([0.0, 0.035, np.nan], int(queried.sum()))
    xs[2::3] = np.nan
    ax.plot(
        xs, ys, color=PALETTE["blue"], lw=0.8, label=f"queried points ({count}; ticks on the axis)"
    )


def _draw_at_target(ax, target_recall: float, at_target: tuple[float, float, float]) -> None:
    """The leaderboard's precision at R_T from the curve, with its interval."""
    est, a, b = at_target
    if not math.isfinite(est):
        return
    yerr = None
    if math.isfinite(a) and math.isfinite(b):
        yerr = [[max(est - a, 0.0)], [max(b - est, 0.0)]]
    ax.errorbar(
        [target_recall],
        [est],
        yerr=yerr,
        fmt="s",
        ms=5,
        color=PALETTE["green"],
        capsize=3,
        label=f"precision at R_T from the curve ({est:.3f})",
        zorder=6,
    )


@_styled
def curve_plot(
    system: str,
    curve: pd.DataFrame | None,
    *,
    method: str = "",
    kind: str = "",
    target_recall: float | None = None,
    dimm: DimmPoint | None = None,
    at_target: tuple[float, float, float] | None = None,
    name: str = "curve",
) -> str:
    """A system's precision curve with its bounds/interval/envelope, queried points and target.

    The x axis is recall when the curve table has a recall for every drawn point (then the
    target recall line and, for an extrapolated system, Dimm's reference curve share the axes),
    otherwise rank (log scale) with Dimm's curve in a second panel.  ``at_target`` is the
    leaderboard's (estimate, lower, upper) precision at the target from the curve.  Queried
    points are marked on the curve when there are few, as ticks along the x axis otherwise.
    """
    have_curve = curve is not None and len(curve) > 0
    x_is_recall = have_curve and _has_recall(thin_curve(curve))
    panels = curve_panels(curve, dimm is not None)
    fig = _figure(4.4 * panels, 4.6)
    axes = fig.subplots(1, panels, squeeze=False)[0]
    target = target_recall if target_recall is not None and math.isfinite(target_recall) else None
    if have_curve:
        _curve_panel(axes[0], system, curve, method, kind, target, dimm, at_target)
    if dimm is not None and not x_is_recall:
        _dimm_panel(axes[1 if have_curve else 0], system, dimm, target)
    poor = dimm is not None and dimm.poor_fit
    _legend_below(
        fig,
        width=4.4 * panels,
        axes_height=2.9,
        left=0.6,
        ncol=panels,
        gap=0.65,
        top=0.55 if poor else 0.32,
    )
    if poor:
        fig.text(
            0.5,
            1 - 0.08 / fig.get_figheight(),
            f"⚠ the model does not fit this system: back-test {dimm.backtest:.2f} > "
            f"{dimm.backtest_limit:.2f}",
            ha="center",
            va="top",
            fontsize=8.5,
            fontweight="bold",
            color=PALETTE["vermillion"],
        )
    return _render(fig, name, f"Precision curve of {system}")


def _has_recall(thin: pd.DataFrame) -> bool:
    """Whether every drawn knot of a curve has a recall (then the x axis is recall)."""
    return "recall" in thin and bool(np.isfinite(_finite(thin["recall"])).all())


def _curve_panel(
    ax,
    system: str,
    curve: pd.DataFrame,
    method: str,
    kind: str,
    target: float | None,
    dimm: DimmPoint | None,
    at_target: tuple[float, float, float] | None,
) -> None:
    """The curve panel of :func:`curve_plot`: band, estimate, queried points, target, Dimm."""
    thin = thin_curve(curve)
    on_recall = _has_recall(thin)
    x = _finite(thin["recall"]) if on_recall else _finite(thin["rank"])
    p, lo, hi = (_finite(thin[c]) for c in ("precision", "lower", "upper"))
    label = method_label(method)
    band = np.isfinite(lo) & np.isfinite(hi)
    if band.any():
        ax.fill_between(
            x[band],
            lo[band],
            hi[band],
            step="post",
            color=PALETTE["sky"],
            alpha=0.45,
            lw=0,
            label=f"{label}: {_KIND_LABEL.get(kind, kind or 'bounds')}",
        )
    ax.step(x, p, where="post", color=PALETTE["black"], lw=1.2, label=f"{label}: estimate")
    _draw_queried(ax, x, p, thin, curve)
    if on_recall:
        _recall_axis(ax, x, target, dimm, at_target)
    else:
        _rank_axis(ax, target)
    ax.set_ylabel("precision")
    ax.set_ylim(0.0, 1.03)
    ax.set_title(f"{system}: precision curve ({label})", fontsize=9, y=1.0)
    ax.grid(color="#e5e5e5", lw=0.6)


def _target_line(ax, target: float) -> None:
    ax.axvline(
        target, color=PALETTE["green"], ls=":", lw=1.5, label=f"target recall R_T = {target:g}"
    )


def _recall_axis(
    ax,
    x: np.ndarray,
    target: float | None,
    dimm: DimmPoint | None,
    at_target: tuple[float, float, float] | None,
) -> None:
    """A recall x axis: Dimm's curve, the target line and the curve's value at the target."""
    ax.set_xlabel("recall (estimated, top-k of the ranked output)")
    if dimm is not None:
        _draw_dimm(ax, dimm)
    if target is not None:
        _target_line(ax, target)
    if target is not None and at_target is not None and dimm is None:
        _draw_at_target(ax, target, at_target)
    right = max(np.nanmax(x) * 1.05, (target or 0.0) * 1.1, 0.05)
    if dimm is not None:
        right = max(right, dimm.recall * 1.1)
    ax.set_xlim(0.0, right)


def _rank_axis(ax, target: float | None) -> None:
    """A log rank x axis (a curve without recall); the target cannot be placed on it."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(_rank_label))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("rank (log scale; no recall in this curve)")
    if target is not None:
        ax.plot(
            [], [], ls="", label=f"target recall R_T = {target:g}: not placeable on a rank axis"
        )


def _dimm_panel(ax, system: str, dimm: DimmPoint, target: float | None) -> None:
    """The panel of Dimm's extrapolation when the curve has no recall axis (or no curve)."""
    _draw_dimm(ax, dimm)
    if target is not None:
        _target_line(ax, target)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.03)
    ax.set_xlabel("recall R")
    ax.set_ylabel("precision")
    ax.set_title(f"{system}: model extrapolation (Dimm)", fontsize=9, y=1.0)
    ax.grid(color="#e5e5e5", lw=0.6)


# --------------------------------------------------------------------------- curves overview


@dataclass(frozen=True)
class OverviewItem:
    """One small panel of :func:`curve_overview`: a system's curve and/or Dimm extrapolation.

    ``at_target`` is the leaderboard's precision at R_T and ``method`` how it was obtained
    (``curve`` or ``dimm``); ``href`` the page anchor of the system's full figure.
    """

    system: str
    label: str
    href: str
    curve: pd.DataFrame | None = None
    dimm: DimmPoint | None = None
    at_target: float = math.nan
    method: str = ""


#: Panels per row of :func:`curve_overview` and the most knots drawn per small curve.
OVERVIEW_COLUMNS = 10
OVERVIEW_POINTS = 40
#: Font size (pt) of every text of :func:`curve_overview`: the 10-column figure (13.5 in wide)
#: drawn in a 1280 px window (1220 px of content) shows 7.5 pt at about 9.4 px.
OVERVIEW_FONT = 7.5


def _overview_panel(ax, item: OverviewItem, target: float | None, right: float) -> None:
    """Draw one small multiple: the curve on recall (or log rank), Dimm's curve, P at R_T."""
    on_recall = True
    if item.curve is not None and len(item.curve):
        on_recall = _overview_curve(ax, item.curve)
    if on_recall:
        _overview_recall(ax, item, target, right)
    if math.isfinite(item.at_target):
        poor = item.dimm is not None and item.dimm.poor_fit
        text = (
            f"{item.at_target:.3f}" + ("*" if item.method == "dimm" else "") + ("!" if poor else "")
        )
        ax.text(
            0.97,
            0.95,
            text,
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=OVERVIEW_FONT,
            color=PALETTE["vermillion"] if item.method == "dimm" else PALETTE["black"],
        )
    ax.set_ylim(0.0, 1.03)
    ax.set_yticks([0.0, 0.5, 1.0])
    if on_recall:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(3))
    # a fixed title position: matplotlib's automatic one measures every tick label (slow × 70)
    title = ax.set_title(item.label, fontsize=OVERVIEW_FONT, pad=2, loc="left", y=1.0)
    title.set_url(item.href)
    ax.patch.set_url(item.href)
    ax.grid(color="#eeeeee", lw=0.4)


def _overview_curve(ax, curve: pd.DataFrame) -> bool:
    """A small multiple's curve and band; True when drawn on recall, False on log rank."""
    thin = thin_curve(curve, OVERVIEW_POINTS)
    on_recall = _has_recall(thin)
    x = _finite(thin["recall"]) if on_recall else _finite(thin["rank"])
    lo, hi = _finite(thin["lower"]), _finite(thin["upper"])
    band = np.isfinite(lo) & np.isfinite(hi)
    if band.any():
        ax.fill_between(
            x[band], lo[band], hi[band], step="post", color=PALETTE["sky"], alpha=0.45, lw=0
        )
    ax.step(x, _finite(thin["precision"]), where="post", color=PALETTE["black"], lw=0.8)
    if not on_recall:
        from matplotlib.ticker import FuncFormatter, NullLocator

        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(_rank_label))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.tick_params(labelsize=OVERVIEW_FONT, pad=1)
        ax.text(
            0.03, 0.04, "x: rank", transform=ax.transAxes, fontsize=OVERVIEW_FONT, color="#555555"
        )
    return on_recall


def _overview_recall(ax, item: OverviewItem, target: float | None, right: float) -> None:
    """On the shared recall axis: Dimm's reference curve and point, R_T, the value at R_T."""
    from receval.extrapolation import reference_precision

    dimm = item.dimm
    ax.set_xlim(0.0, right)
    if dimm is not None:
        r = np.linspace(0.0, right, 61)[1:]
        ax.plot(
            r,
            reference_precision(r, dimm.prevalence, dimm.beta),
            ls=":" if dimm.poor_fit else "--",
            lw=0.9,
            color=PALETTE["vermillion"],
        )
        ax.plot([dimm.recall], [dimm.precision], "o", ms=2.5, color=PALETTE["vermillion"])
    if target is None:
        return
    ax.axvline(target, color=PALETTE["green"], ls=":", lw=0.9)
    if math.isfinite(item.at_target):
        ax.plot([target], [item.at_target], ls="", zorder=5, **_at_target_marker(item))


def _at_target_marker(item: OverviewItem) -> dict[str, object]:
    """The marker of a small multiple's value at R_T: from the curve, extrapolated, not fitting."""
    if item.dimm is not None and item.dimm.poor_fit:
        return {"marker": "X", "color": PALETTE["vermillion"], "ms": 4.5}
    if item.method == "dimm":
        return {"marker": "D", "mfc": "white", "mec": PALETTE["vermillion"], "ms": 3.5}
    return {"marker": "s", "color": PALETTE["green"], "ms": 3.5}


@_styled
def curve_overview(
    items: Sequence[OverviewItem],
    *,
    target_recall: float | None,
    backtest_limit: float = math.nan,
    name: str = "curves-overview",
    columns: int = OVERVIEW_COLUMNS,
) -> str:
    """Small multiples of every system's precision curve, in leaderboard order, on shared axes.

    Each panel shows the curve (step line) with its band, the target recall R_T, Dimm's
    reference curve where precision at R_T is extrapolated (dotted where its back-test says it
    does not fit), the value at R_T as a marker and as text (``*`` model extrapolation, ``!``
    back-test deviation above ``backtest_limit``).  Recall axes are shared (0 to the largest
    recall drawn), so panels compare at a glance; curves without recall use their own log-rank
    axis.  Every panel (background and title) links to ``item.href``, the full figure.
    """
    n = len(items)
    cols = max(1, min(columns, n))
    rows = max(1, math.ceil(n / cols))
    target = target_recall if target_recall is not None and math.isfinite(target_recall) else None
    right = _overview_right(items, target)
    width, panel_h = 1.3 * cols + 0.5, 1.05
    legend_h = 0.55
    height = rows * (panel_h + 0.28) + legend_h + 0.15
    fig = _figure(width, height)
    axes = fig.subplots(rows, cols, squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= n:
            ax.set_visible(False)
            continue
        _overview_panel(ax, items[k], target, right)
        ax.tick_params(labelsize=OVERVIEW_FONT, length=2, pad=1)
        if k % cols:
            ax.tick_params(labelleft=False)
        if k + cols < n:
            ax.tick_params(labelbottom=False)
    handles, texts = _overview_legend(items, target, backtest_limit)
    fig.legend(
        handles,
        texts,
        loc="lower left",
        ncol=min(4, len(texts)),
        frameon=False,
        fontsize=OVERVIEW_FONT,
        bbox_to_anchor=(0.3 / width, 0.02 / height),
    )
    fig.supxlabel("recall (shared axis)", fontsize=OVERVIEW_FONT, y=(legend_h + 0.02) / height)
    fig.supylabel("precision", fontsize=OVERVIEW_FONT, x=0.05 / width)
    fig.subplots_adjust(
        left=0.45 / width,
        right=1 - 0.1 / width,
        top=1 - 0.2 / height,
        bottom=(legend_h + 0.3) / height,
        hspace=0.28 / panel_h + 0.15,
        wspace=0.12,
    )
    return _render(fig, name, f"Precision curves of {n} systems (overview)")


def _overview_right(items: Sequence[OverviewItem], target: float | None) -> float:
    """The right end of the shared recall axis: the largest recall drawn (curve, Dimm point or
    target), with a margin, within [0.05, 1]."""
    right = 0.05
    for item in items:
        if item.curve is not None and "recall" in item.curve:
            rec = _finite(item.curve["recall"])
            if np.isfinite(rec).any():
                right = max(right, float(np.nanmax(rec)) * 1.05)
        if item.dimm is not None:
            right = max(right, item.dimm.recall * 1.1)
    if target is not None:
        right = max(right, target * 1.15)
    return min(right, 1.0)


def _overview_legend(
    items: Sequence[OverviewItem], target: float | None, backtest_limit: float
) -> tuple[list, list[str]]:
    """Legend handles and texts of :func:`curve_overview` for what its panels show."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list = [
        Line2D([], [], color=PALETTE["black"], lw=0.8),
        Patch(color=PALETTE["sky"], alpha=0.45, lw=0),
    ]
    texts = ["precision curve (estimate)", "its interval / bounds"]
    if target is not None:
        handles.append(Line2D([], [], color=PALETTE["green"], ls=":", lw=0.9))
        texts.append(f"target recall R_T = {target:g}")
        handles.append(Line2D([], [], ls="", marker="s", color=PALETTE["green"], ms=3.5))
        texts.append("precision at R_T from the curve")
    if any(item.dimm is not None and not item.dimm.poor_fit for item in items):
        handles += [
            Line2D([], [], color=PALETTE["vermillion"], ls="--", lw=0.9),
            Line2D([], [], ls="", marker="D", mfc="white", mec=PALETTE["vermillion"], ms=3.5),
        ]
        texts += ["Dimm reference curve (model)", "precision at R_T extrapolated (*)"]
    if any(item.dimm is not None and item.dimm.poor_fit for item in items):
        handles += [
            Line2D([], [], color=PALETTE["vermillion"], ls=":", lw=0.9),
            Line2D([], [], ls="", marker="X", color=PALETTE["vermillion"], ms=4.5),
        ]
        texts += [
            "Dimm curve that does not fit",
            f"extrapolated, back-test > {backtest_limit:.2f} (!)",
        ]
    return handles, texts


# --------------------------------------------------------------------------- pool and pooling bias


@_styled
def pool_coverage_plot(
    estimate: float,
    lower: float,
    upper: float,
    *,
    interval_label: str | None,
    found: tuple[int, int] | None = None,
    name: str = "pool-coverage",
) -> str:
    """θ̂ (share of correct facts some system output) with its interval on [0, 1].

    ``found`` = (exhaustively found correct facts that some system output, all exhaustively
    found correct facts): the raw share in the annotated units, shown for comparison.
    """
    fig = _figure(6.0, 2.3)
    ax = fig.subplots()
    if math.isfinite(lower) and math.isfinite(upper):
        ax.hlines([0], [lower], [upper], color=PALETTE["blue"], lw=3, label=interval_label)
    ax.plot([estimate], [0], "o", color=PALETTE["black"], ms=7, label=f"θ̂ = {estimate:.3f}")
    if found is not None and found[1] > 0:
        share = found[0] / found[1]
        ax.plot(
            [share],
            [0],
            "|",
            color=PALETTE["vermillion"],
            ms=16,
            mew=2,
            label=f"unweighted share in the exhaustive units ({found[0]}/{found[1]})",
        )
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(-1, 1)
    ax.set_yticks([])
    ax.spines["left"].set_visible(False)
    ax.set_xlabel("pool coverage θ (share of all correct facts that some system output)")
    ax.set_title("Pool coverage θ̂ with interval")
    _legend_below(fig, width=6.0, axes_height=0.6, left=0.3, ncol=2)
    return _render(fig, name, "Pool coverage with interval")


def pooling_bias_plot(bias: pd.DataFrame, *, name: str = "pooling-bias") -> str:
    """Per team: official closed-world F1 with the full pool, with the team left out, joint F1.

    Teams are sorted by ``delta_f1`` = leave-team-out minus full-pool official F1 (most negative
    first); a line joins each team's two official scores so the size of the pooling effect is
    read as its length.  Drawn as hand-written SVG (:mod:`receval.report.svg`).
    """
    frame = bias.copy()
    frame["_delta"] = _finite(frame.get("delta_f1", [math.nan] * len(frame)))
    frame = frame.sort_values("_delta", ascending=True, na_position="last", kind="stable")
    n = len(frame)
    series = [
        (_finite(frame.get(column, [math.nan] * n)), svg.LegendEntry(text, mark))
        for column, text, mark in (
            ("official_f1", "official F1, full pool", svg.Mark("o", 5, PALETTE["black"])),
            (
                "official_f1_lto",
                "official F1, team's unique facts left out of the pool",
                svg.Mark("s", 5, "#ffffff", PALETTE["orange"], 1.4),
            ),
            ("joint_f1", "joint F1 (sample-based, open-world)", svg.Mark("^", 5, PALETTE["blue"])),
        )
    ]
    series = series[:2] + [s for s in series[2:] if np.isfinite(s[0]).any()]
    teams = [str(t) for t in frame["team"]]
    width = 6.4 * svg.PT
    left = (0.55 + 0.065 * max(map(len, teams), default=4)) * svg.PT
    entries = [entry for _, entry in series]
    columns = svg.legend_columns(entries, 2, width - left / 2)
    rows = _Rows(n, 0.32 * svg.PT, (0.32 + max(1.2, 0.22 * n)) * svg.PT)
    canvas = svg.Canvas(width, rows.bottom + 46 + svg.legend_height(entries, columns))
    values = np.concatenate([values for values, _ in series])
    axis = svg.Axis(*svg.data_limits(values), left, width - 0.2 * svg.PT)
    canvas.x_axis(axis, rows.top, rows.bottom, "F1 (mean over the team's systems)", "#e5e5e5")
    canvas.segments([(left, rows.top, left, rows.bottom)], "#000000", 0.8)
    y = np.array([rows.y(i) for i in range(n)])
    (off, _), (lto, _) = series[:2]
    both = np.isfinite(off) & np.isfinite(lto)
    canvas.segments(
        zip(map(axis, off[both]), y[both], map(axis, lto[both]), y[both], strict=True),
        "#999999",
        1.2,
    )
    for values, entry in series:
        ok = np.isfinite(values)
        canvas.series(entry.mark, zip(map(axis, values[ok]), y[ok], strict=True))
    canvas.y_labels(left, list(y), teams, 8, "team (by Δ F1)")
    title = "Pooling bias: official closed-world F1 vs leave-team-out"
    canvas.text((left + axis.stop) / 2, rows.top - 6, title, 10)
    canvas.legend(entries, left / 2, rows.bottom + 46, columns)
    return canvas.render(name, "Pooling bias per team")


@_styled
def annotation_plot(spend: pd.DataFrame, *, name: str = "annotation") -> str:
    """Per system (leaderboard order): drawn facts split into labels shared with other systems'
    outputs (reused) and facts only this system output; the number of draws as a tick."""
    n = len(spend)
    fig = _figure(6.4, 4.0)
    ax = fig.subplots()
    y = np.arange(n)
    facts = _finite(spend["drawn_facts"])
    shared = _finite(spend.get("drawn_facts_shared", [0] * n))
    own = np.clip(np.nan_to_num(facts) - np.nan_to_num(shared), 0, None)
    ax.barh(y, own, color=PALETTE["blue"], height=0.72, label="drawn facts only this system output")
    ax.barh(
        y,
        np.nan_to_num(shared),
        left=own,
        color=PALETTE["orange"],
        height=0.72,
        hatch="///",
        edgecolor="white",
        lw=0,
        label="drawn facts other systems also output (label reused)",
    )
    if "draws" in spend:
        ax.plot(
            _finite(spend["draws"]),
            y,
            "|",
            color=PALETTE["black"],
            ms=7,
            mew=1.6,
            label="draws (with repeats)",
        )
    ax.set_yticks(y, [str(s) for s in spend["system"]], fontsize=7 if n > 30 else 8)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlabel("labelled facts drawn for the system")
    ax.set_ylabel("system (leaderboard order)")
    ax.set_title("Annotation spend per system")
    ax.grid(axis="x", color="#e5e5e5", lw=0.6)
    ax.set_axisbelow(True)
    longest = max((len(str(t)) for t in spend["system"]), default=4)
    left = 0.55 + (0.055 if n > 30 else 0.065) * longest
    _legend_below(
        fig,
        width=max(6.4, left + 3.6),  # long system names widen the figure, not squeeze the bars
        axes_height=max(1.2, (0.16 if n <= 40 else 0.14) * n),
        left=left,
        ncol=2,
    )
    return _render(fig, name, "Annotation spend per system")
