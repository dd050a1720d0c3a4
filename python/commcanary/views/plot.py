"""The latency histogram as drawing primitives: shared bins, both axes,
quantile markers with labels placed in rows so they never overlap, and a
legend wrapped to the plot's width. Every coordinate and label is formatted
here; ``components.html.j2`` (``histogram``) only places them in SVG.

Two layouts are drawn (wide and narrow); the stylesheet shows one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["LAYOUTS", "Histogram", "Layout", "Series", "histogram"]


@dataclass(frozen=True)
class Series:
    """One distribution to draw: samples, quantile markers, bar and marker colours."""

    name: str
    values: npt.NDArray[Any]
    quantiles: tuple[tuple[str, float], ...]
    colour: str
    marker_colour: str


def _nice_step(span: float, target: int) -> tuple[float, int]:
    """A 1-2-2.5-5 step giving about ``target`` intervals, and the decimals its labels need."""
    raw = span / target
    exponent = math.floor(math.log10(raw))
    for mantissa, extra in ((1.0, 0), (2.0, 0), (2.5, 1), (5.0, 0), (10.0, 0)):
        if raw <= mantissa * 10.0**exponent * (1 + 1e-9):
            step = mantissa * 10.0**exponent
            decimals = max(0, -exponent + extra - (1 if mantissa == 10.0 else 0))
            return step, decimals
    return 10.0 ** (exponent + 1), max(0, -exponent - 1)  # pragma: no cover - the loop always returns


def _text_width(text: str, size: float = 13.0) -> float:
    return len(text) * size * 0.58


@dataclass(frozen=True)
class Layout:
    """One drawing of the plot: a wide one, and a narrow one for small windows (CSS picks)."""

    name: str
    width: int
    x_ticks: int
    bins: int
    plot_h: int


LAYOUTS = (Layout("wide", 900, 6, 32, 240), Layout("narrow", 440, 4, 20, 200))


@dataclass(frozen=True)
class _Geometry:
    """One drawing's shared bins, axis ranges and plot box, and the maps from values to coordinates.

    ``label_rows`` (the rows of marker labels above the plot) is known only once the labels are
    placed; the horizontal map the placement uses does not depend on it.
    """

    width: int
    plot_h: int
    x_lo: float
    x_hi: float
    x_step: float
    x_decimals: int
    intervals: int
    buckets: int
    bin_w: float
    y_step: int
    y_hi: int
    label_rows: int = 1
    left: int = 64
    right: int = 16

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def top_pad(self) -> int:
        return 14 + 17 * self.label_rows

    @property
    def plot_top(self) -> int:
        return self.top_pad

    @property
    def plot_bottom(self) -> int:
        return self.top_pad + self.plot_h

    @property
    def legend_top(self) -> int:
        return self.plot_bottom + 62

    def sx(self, value: float) -> float:
        return self.left + (value - self.x_lo) / (self.x_hi - self.x_lo) * self.plot_w

    def sy(self, count: float) -> float:
        return self.plot_bottom - count / self.y_hi * self.plot_h


#: A placed marker label: marker x, label x, label row, text, series, quantile name.
_Placed = tuple[float, float, int, str, Series, str]
#: A legend entry: x, kind ("bar" or "line"), colour, text.
_LegendEntry = tuple[float, str, str, str]


def _x_range(drawn: list[Series], x_ticks: int) -> tuple[float, float, float, int]:
    """The latency axis: low and high ends on whole steps, covering every value and marker."""
    import numpy as np

    everything = np.concatenate([np.asarray(s.values, dtype=np.float64) for s in drawn])
    lo, hi = float(everything.min()), float(everything.max())
    for s in drawn:
        for _, q in s.quantiles:
            lo, hi = min(lo, q), max(hi, q)
    span = hi - lo if hi > lo else max(abs(hi) * 0.1, 1.0)
    x_step, x_decimals = _nice_step(span, x_ticks)
    x_lo = math.floor(lo / x_step + 1e-9) * x_step
    x_hi = math.ceil(hi / x_step - 1e-9) * x_step
    if x_hi <= x_lo or x_hi < hi:
        x_hi = x_lo + x_step * max(1, math.ceil((hi - x_lo) / x_step))
    return x_lo, x_hi, x_step, x_decimals


def _scales(drawn: list[Series], layout: Layout) -> tuple[_Geometry, list[list[int]]]:
    """Shared bins (whole per tick interval), every series' counts in them, and both axes."""
    import numpy as np

    x_lo, x_hi, x_step, x_decimals = _x_range(drawn, layout.x_ticks)
    intervals = max(1, round((x_hi - x_lo) / x_step))
    per_interval = max(1, round(layout.bins / intervals))
    buckets = intervals * per_interval
    bin_w = (x_hi - x_lo) / buckets
    counts = []
    for s in drawn:
        v = np.asarray(s.values, dtype=np.float64)
        idx = np.clip(np.floor((v - x_lo) / bin_w).astype(np.int64), 0, buckets - 1)
        counts.append(np.bincount(idx, minlength=buckets).tolist())
    top = max(max(c) for c in counts) or 1
    y_step_f, _ = _nice_step(float(top), 5)
    y_step = max(1, math.ceil(y_step_f))
    y_hi = y_step * math.ceil(top / y_step)
    geometry = _Geometry(
        width=layout.width,
        plot_h=layout.plot_h,
        x_lo=x_lo,
        x_hi=x_hi,
        x_step=x_step,
        x_decimals=x_decimals,
        intervals=intervals,
        buckets=buckets,
        bin_w=bin_w,
        y_step=y_step,
        y_hi=y_hi,
    )
    return geometry, counts


def _place_labels(drawn: list[Series], g: _Geometry, named: bool) -> tuple[list[_Placed], int]:
    """Marker labels above the plot, in as many rows as they need not to overlap; and the row count."""
    labels = []
    for s in drawn:
        for q_name, q in s.quantiles:
            prefix = f"{s.name} " if named else ""
            text = f"{prefix}{q_name} {q:.1f} µs"
            labels.append((g.sx(q), text, s, q_name))
    labels.sort(key=lambda item: (item[0], item[1]))
    rows_end: list[float] = []
    placed: list[_Placed] = []
    for x, text, s, q_name in labels:
        w = _text_width(text, 12)
        x0 = min(max(x - w / 2, g.left - 40), g.width - 4 - w)
        row = next((r for r, end in enumerate(rows_end) if x0 >= end + 8), len(rows_end))
        if row == len(rows_end):
            rows_end.append(0.0)
        rows_end[row] = x0 + w
        placed.append((x, x0, row, text, s, q_name))
    return placed, max(1, len(rows_end))


def _legend_rows(drawn: list[Series], g: _Geometry, named: bool) -> list[list[_LegendEntry]]:
    """Legend entries (every bar colour, then every marker colour), wrapped to the plot's width."""
    legend: list[tuple[str, str, str]] = []
    for s in drawn:
        legend.append(("bar", s.colour, f"{s.name} ({len(s.values)} events)"))
    for s in drawn:
        prefix = f"{s.name} " if named else ""
        legend.append(("line", s.marker_colour, f"{prefix}p50 / p95 / p99 markers"))
    rows: list[list[_LegendEntry]] = [[]]
    cursor: float = g.left
    for kind, colour, text in legend:
        w = 22 + _text_width(text) + 22
        if cursor + w > g.width - g.right and rows[-1]:
            rows.append([])
            cursor = g.left
        rows[-1].append((cursor, kind, colour, text))
        cursor += w
    return rows


#: Stroke pattern of each quantile's marker line (``stroke-dasharray``; empty: solid).
DASHES = {"p50": "", "p95": "7 4", "p99": "2 3"}


@dataclass(frozen=True)
class Tick:
    """A gridline or axis tick at ``at`` (a formatted coordinate) labelled ``label``."""

    at: str
    label: str
    label_at: str


@dataclass(frozen=True)
class Bar:
    x: str
    y: str
    width: str
    height: str
    fill: str
    title: str


@dataclass(frozen=True)
class Marker:
    series: str
    quantile: str
    x: str
    label_x: str
    label_y: int
    colour: str
    dashes: str
    text: str


@dataclass(frozen=True)
class LegendItem:
    kind: str
    colour: str
    x: float
    y: int
    text: str


@dataclass(frozen=True)
class Histogram:
    """One drawing: its box, axes, bars, markers and legend (coordinates as SVG text)."""

    layout: str
    title: str
    width: int
    height: int
    left: int
    right_x: int
    plot_top: int
    plot_bottom: int
    y_ticks: list[Tick]
    y_title_at: str
    bars: list[Bar]
    x_ticks: list[Tick]
    x_title_at: str
    markers: list[Marker]
    marker_top: int
    legend: list[LegendItem]


def _y_ticks(g: _Geometry) -> list[Tick]:
    ticks = []
    for k in range(g.y_hi // g.y_step + 1):
        c = k * g.y_step
        y = g.sy(c)
        ticks.append(Tick(f"{y:.1f}", str(c), f"{y + 4:.1f}"))
    return ticks


def _x_ticks(g: _Geometry) -> list[Tick]:
    ticks = []
    for k in range(g.intervals + 1):
        value = g.x_lo + k * g.x_step
        ticks.append(Tick(f"{g.sx(value):.1f}", f"{value:.{g.x_decimals}f}", ""))
    return ticks


def _bars(drawn: list[Series], counts: list[list[int]], g: _Geometry) -> list[Bar]:
    """Every series' bars, side by side within each bin, each titled with its count and range."""
    group_w = g.plot_w / g.buckets
    bar_w = group_w / len(drawn)
    decimals = g.x_decimals + 1
    bars = []
    for s_index, (s, c) in enumerate(zip(drawn, counts, strict=True)):
        for b, n in enumerate(c):
            if n == 0:
                continue
            x = g.left + b * group_w + s_index * bar_w
            y = g.sy(n)
            b_lo, b_hi = g.x_lo + b * g.bin_w, g.x_lo + (b + 1) * g.bin_w
            title = f"{s.name}: {n} events in {b_lo:.{decimals}f} to {b_hi:.{decimals}f} µs"
            bars.append(
                Bar(
                    f"{x + 0.5:.1f}",
                    f"{y:.1f}",
                    f"{max(bar_w - 1, 0.8):.1f}",
                    f"{g.plot_bottom - y:.1f}",
                    s.colour,
                    title,
                )
            )
    return bars


def _markers(placed: list[_Placed], g: _Geometry) -> list[Marker]:
    return [
        Marker(
            s.name,
            q_name,
            f"{x:.1f}",
            f"{x0:.1f}",
            g.top_pad - 8 - 17 * row,
            s.marker_colour,
            DASHES.get(q_name, ""),
            text,
        )
        for x, x0, row, text, s, q_name in placed
    ]


def _legend(rows: list[list[_LegendEntry]], g: _Geometry) -> list[LegendItem]:
    return [
        LegendItem(kind, colour, x, g.legend_top + 20 * r, text)
        for r, entries in enumerate(rows)
        for x, kind, colour, text in entries
    ]


def histogram(series: list[Series], title: str, layout: Layout, named: bool) -> Histogram | None:
    """The series' histograms on shared bins, with quantile markers, axes and legend
    (``None`` when no series has a value). ``named`` prefixes marker labels and legend
    entries with the series' names."""
    drawn = [s for s in series if len(s.values)]
    if not drawn:
        return None
    geometry, counts = _scales(drawn, layout)
    placed, label_rows = _place_labels(drawn, geometry, named)
    g = replace(geometry, label_rows=label_rows)
    legend_rows = _legend_rows(drawn, g, named)
    return Histogram(
        layout=layout.name,
        title=title,
        width=g.width,
        height=g.legend_top + 20 * len(legend_rows) + 4,
        left=g.left,
        right_x=g.width - g.right,
        plot_top=g.plot_top,
        plot_bottom=g.plot_bottom,
        y_ticks=_y_ticks(g),
        y_title_at=f"{(g.plot_top + g.plot_bottom) / 2:.1f}",
        bars=_bars(drawn, counts, g),
        x_ticks=_x_ticks(g),
        x_title_at=f"{g.left + g.plot_w / 2:.1f}",
        markers=_markers(placed, g),
        marker_top=g.plot_top - 4,
        legend=_legend(legend_rows, g),
    )
