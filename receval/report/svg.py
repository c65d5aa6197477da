"""Hand-written SVG for the report's dot-and-interval figures (forest plot, pooling bias).

These figures are rows of markers and horizontal segments on a linear axis, which a few lines of
SVG draw exactly; writing them by hand keeps matplotlib (half a second to import, a few tenths to
draw) off every ``receval score`` whose report has no other figure (the official census of a TREC
import).  The output follows the conventions of the
matplotlib figures of :mod:`receval.report.plots`: an inline ``<svg class="plot">`` element with a
``<title>``, ``role="img"``, ``data-figure``, a ``viewBox`` in points (1/72 inch) and its natural
width as ``max-width``; coordinates rounded to 0.1 pt; text kept as text (DejaVu Sans, as the
matplotlib figures); shaded bands written with ``style="opacity: …"``, as matplotlib does.

Nothing here knows about receval's tables: :class:`Axis` maps values to points and picks tick
values as matplotlib's ``MaxNLocator`` does, :class:`Canvas` collects the elements, and the marker
functions return path data.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "CHAR_EM",
    "MARKERS",
    "PT",
    "Axis",
    "Canvas",
    "LegendEntry",
    "Mark",
    "column_widths",
    "data_limits",
    "escape",
    "legend_columns",
    "legend_height",
    "nice_ticks",
    "num",
    "text_width",
    "tick_labels",
]

#: Points per inch (the unit of the ``viewBox``).
PT = 72.0

#: The font of every text (the matplotlib figures use DejaVu Sans too).
FONT = "'DejaVu Sans', sans-serif"

#: Average advance of a DejaVu Sans character, in ems (for layout only: legends, margins).
CHAR_EM = 0.55

#: Tick steps tried per decade, as matplotlib's ``MaxNLocator(steps=[1, 2, 2.5, 5, 10])``.
STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)


def num(value: float) -> str:
    """A coordinate rounded to 0.1 pt, without a trailing ``.0`` (``12.0`` -> ``12``)."""
    text = f"{value:.1f}"
    if text.endswith(".0"):
        text = text[:-2]
    return "0" if text == "-0" else text


def escape(text: object) -> str:
    """``text`` safe in SVG character data and in a double-quoted attribute."""
    return (
        str(text)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
    )


def text_width(text: str, size: float) -> float:
    """Estimated width in points of ``text`` set at ``size`` points (layout only)."""
    return len(text) * size * CHAR_EM


def nice_ticks(low: float, high: float, bins: int) -> list[float]:
    """Tick values in [low, high]: the multiples of the smallest step among 1, 2, 2.5, 5 and 10
    times a power of ten that is at least (high − low) / ``bins`` (matplotlib's ``MaxNLocator``
    rule).  An empty or non-finite range gives no ticks."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return []
    raw = (high - low) / max(1, bins)
    decade = 10.0 ** math.floor(math.log10(raw))
    step = next(s * decade for s in STEPS if s * decade >= raw * (1 - 1e-9))
    first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)
    return [round(k * step, 12) + 0.0 for k in range(first, last + 1)]


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Tick values with as many decimals as their spacing needs (``0.0, 0.2`` or ``0.25``)."""
    if len(ticks) < 2:
        return [f"{t:g}" for t in ticks]
    step = ticks[1] - ticks[0]
    decimals = 0
    while decimals < 10 and abs(round(step, decimals) - step) > 1e-9 * max(abs(step), 1):
        decimals += 1
    decimals = max(decimals, 1 if any(t != 0 for t in ticks) and step < 1 else 0)
    return [f"{t:.{decimals}f}" for t in ticks]


@dataclass(frozen=True)
class Axis:
    """A linear map from data ``[low, high]`` to points ``[start, stop]``."""

    low: float
    high: float
    start: float
    stop: float

    def __call__(self, value: float) -> float:
        return self.start + (value - self.low) / (self.high - self.low) * (self.stop - self.start)

    def ticks(self, label_size: float = 8.0) -> list[float]:
        """Tick values, as many as fit at three label heights apart (as matplotlib's ``auto``)."""
        space = int(abs(self.stop - self.start) // (3 * label_size))
        return nice_ticks(self.low, self.high, min(9, max(1, space)))


def data_limits(values: Iterable[float], low: float = 0.0) -> tuple[float, float]:
    """Axis limits from ``low`` to the largest finite value plus 5 % of the values' range (as
    matplotlib's autoscaling margins); (low, 1) when there is no finite value above ``low``."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite or max(finite) <= low:
        return low, 1.0
    top, bottom = max(finite), min(finite)
    return low, top + 0.05 * (top - bottom if top > bottom else abs(top))


# --------------------------------------------------------------------------- markers


def circle(x: float, y: float, size: float) -> str:
    """Path data of a disc of diameter ``size`` centred on (x, y)."""
    r = size / 2
    return f"M{num(x - r)} {num(y)}a{num(r)} {num(r)} 0 1 0 {num(2 * r)} 0a{num(r)} {num(r)} 0 1 0 {num(-2 * r)} 0z"


def square(x: float, y: float, size: float) -> str:
    h = size / 2
    return f"M{num(x - h)} {num(y - h)}h{num(size)}v{num(size)}h{num(-size)}z"


def diamond(x: float, y: float, size: float) -> str:
    h = size / 2
    return f"M{num(x)} {num(y - h)}l{num(h)} {num(h)}l{num(-h)} {num(h)}l{num(-h)} {num(-h)}z"


def triangle(x: float, y: float, size: float) -> str:
    """An upward triangle (matplotlib's ``^``)."""
    h = size / 2
    return f"M{num(x)} {num(y - h)}l{num(h)} {num(2 * h)}h{num(-2 * h)}z"


def cross(x: float, y: float, size: float) -> str:
    """A filled diagonal cross (matplotlib's ``X``): arms of width ``size / 3``."""
    h, t = size / 2, size / 6
    points = [(-h, -h + t), (-h + t, -h), (0, -t), (h - t, -h), (h, -h + t), (t, 0)]
    points += [(-px, -py) for px, py in points]
    return "M" + "L".join(f"{num(x + px)} {num(y + py)}" for px, py in points) + "z"


#: Marker shapes by matplotlib's marker letter.
MARKERS = {"o": circle, "s": square, "D": diamond, "^": triangle, "X": cross}


@dataclass(frozen=True)
class Mark:
    """How a series is drawn: a marker (letter of :data:`MARKERS`) or a segment (``"-"``),
    its size in points, fill and stroke (``"none"`` for none) and stroke width."""

    shape: str
    size: float
    fill: str
    stroke: str = "none"
    width: float = 0.0

    def style(self) -> str:
        """The presentation attributes of the series' group."""
        if self.shape == "-":
            return f'fill="none" stroke="{self.stroke}" stroke-width="{self.width:g}"'
        stroke = f' stroke="{self.stroke}" stroke-width="{self.width:g}"' if self.width else ""
        return f'fill="{self.fill}"{stroke}'

    def path(self, x: float, y: float) -> str:
        """Path data of one marker at (x, y), or of a legend sample of a segment there."""
        if self.shape == "-":
            return f"M{num(x - self.size / 2)} {num(y)}h{num(self.size)}"
        return MARKERS[self.shape](x, y, self.size)


@dataclass(frozen=True)
class LegendEntry:
    """One legend entry: what its sample looks like and its text.  ``opacity`` marks a shaded
    band's swatch (drawn as a rectangle with that opacity)."""

    text: str
    mark: Mark | None = None
    opacity: float | None = None


# --------------------------------------------------------------------------- the canvas


@dataclass
class Canvas:
    """The elements of one figure, in drawing order, ``width`` × ``height`` points."""

    width: float
    height: float
    parts: list[str] = field(default_factory=list)

    def series(self, mark: Mark, points: Iterable[tuple[float, float]]) -> None:
        """One group of markers at the (x, y) points (in points)."""
        d = "".join(mark.path(x, y) for x, y in points)
        if d:
            self.parts.append(f'<path d="{d}" {mark.style()}/>')

    def segments(
        self, segments: Iterable[tuple[float, float, float, float]], stroke: str, width: float
    ) -> None:
        """Straight segments (x1, y1, x2, y2), one path."""
        d = "".join(f"M{num(a)} {num(b)}L{num(c)} {num(e)}" for a, b, c, e in segments)
        if d:
            self.parts.append(
                f'<path d="{d}" fill="none" stroke="{stroke}" stroke-width="{width:g}"/>'
            )

    def band(self, x: float, y: float, width: float, height: float, opacity: float) -> None:
        """A black rectangle with ``opacity`` (the style matplotlib writes for a shaded span)."""
        self.parts.append(
            f'<rect x="{num(x)}" y="{num(y)}" width="{num(width)}" height="{num(height)}" '
            f'style="opacity: {opacity:g}"/>'
        )

    def text(
        self,
        x: float,
        y: float,
        text: str,
        size: float,
        anchor: str = "middle",
        rotate: bool = False,
    ) -> None:
        """Text with its baseline at ``y`` (``rotate``: reading upwards, centred on (x, y))."""
        turn = f' transform="rotate(-90 {num(x)} {num(y)})"' if rotate else ""
        self.parts.append(
            f'<text x="{num(x)}" y="{num(y)}" font-size="{size:g}" text-anchor="{anchor}"{turn}>'
            f"{escape(text)}</text>"
        )

    def x_axis(self, axis: Axis, top: float, bottom: float, label: str, grid: str) -> None:
        """Grid lines at the ticks from ``top`` to ``bottom``, the axis line, ticks, tick labels
        (8 pt) and ``label`` (9 pt) below ``bottom``."""
        ticks = axis.ticks()
        xs = [axis(t) for t in ticks]
        self.segments(((x, bottom, x, top) for x in xs), grid, 0.6)
        self.segments([(axis.start, bottom, axis.stop, bottom)], "#000000", 0.8)
        self.segments(((x, bottom, x, bottom + 3.5) for x in xs), "#000000", 0.8)
        for x, text in zip(xs, tick_labels(ticks), strict=True):
            self.text(x, bottom + 13, text, 8)
        self.text((axis.start + axis.stop) / 2, bottom + 25.8, label, 9)

    def y_labels(
        self,
        left: float,
        rows: Sequence[float],
        labels: Sequence[str],
        size: float,
        title: str,
    ) -> None:
        """A tick left of ``left`` and a right-aligned label (``size`` pt) per row, and the axis
        ``title`` (9 pt, reading upwards) left of the longest label."""
        self.segments(((left, y, left - 3.5, y) for y in rows), "#000000", 0.8)
        for y, label in zip(rows, labels, strict=True):
            self.text(left - 5.5, y + size * 0.35, label, size, anchor="end")
        longest = max((text_width(label, size) for label in labels), default=0.0)
        x = max(10.0, left - 5.5 - longest - 8)
        self.text(x, (rows[0] + rows[-1]) / 2 if rows else 0.0, title, 9, rotate=True)

    def legend(self, entries: Sequence[LegendEntry], x: float, y: float, columns: int) -> None:
        """Entries in rows of ``columns`` (7 pt text after a 20 pt sample), from (x, y), the
        first row's centre line."""
        widths = column_widths(entries, columns)
        for i, entry in enumerate(entries):
            cx = x + sum(widths[: i % columns])
            cy = y + (i // columns) * LEGEND_ROW
            if entry.opacity is not None:
                self.band(cx + 2, cy - 3.5, 16, 7, entry.opacity)
            elif entry.mark is not None:
                sample = entry.mark if entry.mark.shape != "-" else _long(entry.mark)
                self.series(sample, [(cx + 10, cy)])
            self.text(cx + 22, cy + 2.5, entry.text, 7, anchor="start")

    def render(self, name: str, title: str) -> str:
        """The inline ``<svg>`` element (see the module docstring)."""
        label = escape(title)
        head = (
            f'<svg class="plot" role="img" aria-label="{label}" data-figure="{escape(name)}" '
            f'style="max-width:{num(self.width)}pt" viewBox="0 0 {num(self.width)} '
            f'{num(self.height)}" font-family="{escape(FONT)}">'
        )
        background = f'<rect width="{num(self.width)}" height="{num(self.height)}" fill="#ffffff"/>'
        body = background + "".join(self.parts)
        return head + f"<title>{label}</title>" + body + "</svg>\n"  # a line of its own, as before


#: Height of one legend row, in points.
LEGEND_ROW = 12.0


def _long(mark: Mark) -> Mark:
    """A segment's legend sample: 16 pt long."""
    return Mark("-", 16.0, mark.fill, mark.stroke, mark.width)


def column_widths(entries: Sequence[LegendEntry], columns: int) -> list[float]:
    """Width in points of each legend column: the sample, the widest text, a gap."""
    return [
        22 + max(text_width(e.text, 7) for e in entries[c::columns]) + 12
        for c in range(min(columns, len(entries)))
    ]


def legend_columns(entries: Sequence[LegendEntry], most: int, width: float) -> int:
    """The most columns (≤ ``most``) whose legend fits in ``width`` points (at least one)."""
    for columns in range(min(most, len(entries)), 1, -1):
        if sum(column_widths(entries, columns)) <= width:
            return columns
    return 1


def legend_height(entries: Sequence[LegendEntry], columns: int) -> float:
    """Height in points of the legend's rows."""
    return math.ceil(len(entries) / columns) * LEGEND_ROW if entries else 0.0
