"""Self-contained HTML for reports and comparisons.

One file, no scripts, no network: inline CSS, inline SVG plots, a strict
Content-Security-Policy, and every value from an artifact HTML-escaped. The
latency distribution is drawn only from embedded samples; without samples the
page says so instead of inventing a distribution. The output is a pure
function of its inputs (same report or comparison, same bytes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from html import escape
from typing import TYPE_CHECKING, Any

from commcanary.replay import Report

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["VERDICT_COLOURS", "render_comparison", "render_report"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

#: Background of the verdict banner and badge, by verdict (text is white).
VERDICT_COLOURS = {"pass": "#1e7b45", "warn": "#8f5a00", "fail": "#a32424"}

#: Series colours: a single report, then a comparison's two sides.
REPORT_COLOUR = ("#2e86c1", "#1d2430")
BASELINE_COLOUR = ("#2e86c1", "#1b4f72")
CANDIDATE_COLOUR = ("#e67e22", "#9c4a06")

STYLE = (
    """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2430;background:#f6f7f9;
line-height:1.4}
main{max-width:1100px;margin:0 auto;padding:24px}
header.hero{padding:20px 24px;border-radius:10px;color:#fff;background:#34495e;margin-bottom:20px}
header.hero h1{margin:0 0 6px;font-size:26px;overflow-wrap:anywhere}
header.hero p{margin:0;opacity:.92;overflow-wrap:anywhere}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;color:#fff;background:#5b6573;font-weight:700}
"""
    # Verdict colours: as specific as `header.hero` (and later), so they win.
    + "".join(
        f"header.hero.verdict-{v},.badge.verdict-{v}{{background:{c};color:#fff}}"
        for v, c in VERDICT_COLOURS.items()
    )
    + """
.cards{display:flex;flex-wrap:wrap;gap:12px;margin-bottom:20px}
.card{background:#fff;border-radius:8px;padding:12px 16px;min-width:130px;flex:1 1 130px;
box-shadow:0 1px 2px rgba(0,0,0,.08)}
.card .label{font-size:12px;text-transform:uppercase;color:#5b6573}.card .value{font-size:22px;font-weight:600}
section{background:#fff;border-radius:8px;padding:16px 20px;margin-bottom:18px;box-shadow:0 1px 2px rgba(0,0,0,.08)}
h2{font-size:18px;margin:0 0 10px}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:14px}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e6e8eb;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.differs td{background:#fff6d6}
table.kv td+td{overflow-wrap:anywhere}
.tag{font-size:11px;font-weight:600;color:#7a5a00;background:#ffe9a8;border-radius:8px;padding:1px 6px;
margin-left:6px;white-space:nowrap}
ul.reasons{margin:0;padding-left:0;list-style:none}
ul.reasons li{padding:6px 10px;margin:4px 0;border-left:4px solid #888;background:#fafafa;overflow-wrap:anywhere}
"""
    + "".join(f"ul.reasons li.{v}{{border-color:{c}}}" for v, c in VERDICT_COLOURS.items())
    + """
.code{font-family:ui-monospace,monospace;font-size:12px;color:#5b6573;overflow-wrap:anywhere}
.note{color:#5b6573}
code.flag{font-family:ui-monospace,monospace;font-size:.92em;white-space:nowrap}
p.no-samples{margin:8px 0;padding:10px 12px;border-left:4px solid #8f5a00;background:#fff8e8;color:#4a3a10}
.plot svg{display:block;width:100%;height:auto}
.plot svg.narrow{display:none}
@media (max-width:640px){.plot svg.wide{display:none}.plot svg.narrow{display:block}}
svg text{font-size:13px;fill:#3d4652}
svg text.tick{font-size:12px;fill:#5b6573}
svg text.axis-title{font-size:13px;font-weight:600;fill:#1d2430}
@media (min-width:641px){section.settings td:first-child{white-space:nowrap}}
@media (max-width:640px){main{padding:10px}section{padding:12px}header.hero{padding:14px 16px}
header.hero h1{font-size:21px}.card{min-width:110px;padding:10px 12px}.card .value{font-size:18px}}
"""
)

NO_SAMPLES = (
    "has no embedded samples (it was written without --include-samples), "
    "so its latency distribution cannot be drawn."
)


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return escape(str(value))
    return f"{value:.{digits}f}"


def _plain(value: Any) -> str:
    """A setting's value as text (escaped): floats round-trip, lists joined."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | tuple):
        return escape(", ".join(str(v) for v in value)) if value else "none"
    return escape(str(value))


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f"<body><main>{body}</main></body></html>\n"
    )


def _cards(items: list[tuple[str, str]]) -> str:
    cards = "".join(
        f'<div class="card"><div class="label">{escape(label)}</div><div class="value">{escape(value)}</div></div>'
        for label, value in items
    )
    return f'<div class="cards">{cards}</div>'


def _table(
    headers: list[str],
    rows: list[list[str]],
    numeric_from: int = 1,
    row_classes: list[str] | None = None,
    table_class: str = "",
) -> str:
    """A table; ``headers`` are escaped here, cells must be escaped already."""
    head = "".join(
        f'<th class="num">{escape(h)}</th>' if i >= numeric_from else f"<th>{escape(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = []
    for r, row in enumerate(rows):
        cls = row_classes[r] if row_classes else ""
        cells = "".join(
            f'<td class="num">{c}</td>' if i >= numeric_from else f"<td>{c}</td>" for i, c in enumerate(row)
        )
        body.append(f'<tr class="{cls}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    attr = f' class="{table_class}"' if table_class else ""
    return f'<div class="scroll"><table{attr}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


# --- the latency plot ------------------------------------------------------------------------


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


def _count_axis(g: _Geometry) -> str:
    """Count axis: gridlines, ticks, labels, title."""
    left, right = g.left, g.right
    out = ['<g class="y-axis">']
    for k in range(g.y_hi // g.y_step + 1):
        c = k * g.y_step
        y = g.sy(c)
        out.append(
            f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{g.width - right}" y2="{y:.1f}" stroke="#e6e8eb"/>'
            f'<line x1="{left - 5}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="#9aa3ad"/>'
            f'<text class="tick" x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{c}</text>'
        )
    out.append(f'<line x1="{left}" y1="{g.plot_top}" x2="{left}" y2="{g.plot_bottom}" stroke="#9aa3ad"/>')
    mid = (g.plot_top + g.plot_bottom) / 2
    out.append(
        f'<text class="axis-title" x="16" y="{mid:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {mid:.1f})">Events (count)</text></g>'
    )
    return "".join(out)


def _bars(drawn: list[Series], counts: list[list[int]], g: _Geometry) -> str:
    """Every series' bars, side by side within each bin, each titled with its count and range."""
    group_w = g.plot_w / g.buckets
    bar_w = group_w / len(drawn)
    decimals = g.x_decimals + 1
    out = ['<g class="bars">']
    for s_index, (s, c) in enumerate(zip(drawn, counts, strict=True)):
        for b, n in enumerate(c):
            if n == 0:
                continue
            x = g.left + b * group_w + s_index * bar_w
            y = g.sy(n)
            b_lo, b_hi = g.x_lo + b * g.bin_w, g.x_lo + (b + 1) * g.bin_w
            out.append(
                f'<rect class="bar" x="{x + 0.5:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 0.8):.1f}" '
                f'height="{g.plot_bottom - y:.1f}" fill="{s.colour}"><title>{escape(s.name)}: {n} events in '
                f"{b_lo:.{decimals}f} to {b_hi:.{decimals}f} µs</title></rect>"
            )
    out.append("</g>")
    return "".join(out)


def _latency_axis(g: _Geometry) -> str:
    """Latency axis: baseline, ticks on whole steps, labels, title."""
    bottom = g.plot_bottom
    out = [
        '<g class="x-axis">',
        f'<line x1="{g.left}" y1="{bottom}" x2="{g.width - g.right}" y2="{bottom}" stroke="#9aa3ad"/>',
    ]
    for k in range(g.intervals + 1):
        value = g.x_lo + k * g.x_step
        x = g.sx(value)
        out.append(
            f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 5}" stroke="#9aa3ad"/>'
            f'<text class="tick" x="{x:.1f}" y="{bottom + 19}" text-anchor="middle">'
            f"{value:.{g.x_decimals}f}</text>"
        )
    out.append(
        f'<text class="axis-title" x="{g.left + g.plot_w / 2:.1f}" y="{bottom + 42}" '
        'text-anchor="middle">Exposed latency (µs)</text></g>'
    )
    return "".join(out)


#: Stroke pattern of each quantile's marker line.
_DASHES = {"p50": "", "p95": ' stroke-dasharray="7 4"', "p99": ' stroke-dasharray="2 3"'}


def _markers(placed: list[_Placed], g: _Geometry) -> str:
    """Quantile markers across the plot, and their labels in the rows above it."""
    out = ['<g class="markers">']
    for x, x0, row, text, s, q_name in placed:
        label_y = g.top_pad - 8 - 17 * row
        out.append(
            f'<line class="marker" data-series="{escape(s.name)}" data-quantile="{q_name}" x1="{x:.1f}" '
            f'y1="{g.plot_top - 4}" x2="{x:.1f}" y2="{g.plot_bottom}" stroke="{s.marker_colour}" '
            f'stroke-width="1.6"{_DASHES.get(q_name, "")}/>'
            f'<text class="marker-label" data-series="{escape(s.name)}" data-quantile="{q_name}" '
            f'x="{x0:.1f}" y="{label_y}" style="fill:{s.marker_colour}">'
            f"{escape(text)}</text>"
        )
    out.append("</g>")
    return "".join(out)


def _legend(rows: list[list[_LegendEntry]], g: _Geometry) -> str:
    """The legend below the latency axis: a swatch (bar or line) and a text per entry."""
    out = ['<g class="legend">']
    for r, entries in enumerate(rows):
        y = g.legend_top + 20 * r
        for x, kind, colour, text in entries:
            if kind == "bar":
                swatch = (
                    f'<rect class="swatch" x="{x:.1f}" y="{y - 6}" width="14" height="12" fill="{colour}"/>'
                )
            else:
                swatch = (
                    f'<line class="swatch" x1="{x:.1f}" y1="{y}" x2="{x + 16:.1f}" y2="{y}" '
                    f'stroke="{colour}" stroke-width="2.5"/>'
                )
            out.append(
                f'<g class="legend-item" data-colour="{colour}">{swatch}'
                f'<text x="{x + 22:.1f}" y="{y + 4}">{escape(text)}</text></g>'
            )
    out.append("</g>")
    return "".join(out)


def _histogram(series: list[Series], title: str, layout: Layout, named: bool) -> str:
    """Inline, responsive SVG: the series' histograms on shared bins, quantile markers, axes, legend.

    ``named`` prefixes marker labels and legend entries with the series' names.
    """
    drawn = [s for s in series if len(s.values)]
    if not drawn:
        return ""
    geometry, counts = _scales(drawn, layout)
    placed, label_rows = _place_labels(drawn, geometry, named)
    g = replace(geometry, label_rows=label_rows)
    legend_rows = _legend_rows(drawn, g, named)
    height = g.legend_top + 20 * len(legend_rows) + 4
    return "".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {g.width} {height}" width="100%" '
            f'preserveAspectRatio="xMidYMid meet" role="img" aria-label="{escape(title)}" '
            f'class="histogram {layout.name}">',
            f"<title>{escape(title)}</title>",
            _count_axis(g),
            _bars(drawn, counts, g),
            _latency_axis(g),
            _markers(placed, g),
            _legend(legend_rows, g),
            "</svg>",
        ]
    )


def _exposed(report: Report) -> npt.NDArray[Any] | None:
    samples = report.samples
    if samples is None:
        return None
    import numpy as np

    return np.asarray(samples["exposed_us"], dtype=np.float64)


def _quantiles(report: Report) -> tuple[tuple[str, float], ...]:
    m = report.metrics
    return (("p50", float(m["median_us"])), ("p95", float(m["p95_us"])), ("p99", float(m["p99_us"])))


def _no_samples_text(subject: str, report: Report) -> str:
    if report.has_samples:
        return f"{subject}'s samples were not loaded, so its latency distribution cannot be drawn."
    return f"{subject} {NO_SAMPLES}"


def _plot_section(title: str, sides: list[tuple[str, Report, tuple[str, str]]]) -> str:
    """The plot card: the histogram of every side with samples, and a plain note for each side without."""
    notes = []
    series = []
    for name, report, (colour, marker) in sides:
        subject = "This report" if len(sides) == 1 else f"The {name} report"
        values = _exposed(report)
        if values is None:
            text = _no_samples_text(subject, report)
        elif not len(values):
            text = f"{subject} has no replayed events."
        else:
            series.append(Series(name, values, _quantiles(report), colour, marker))
            continue
        flag = '<code class="flag">--include-samples</code>'
        shown = escape(text).replace("--include-samples", flag)
        notes.append(f'<p class="no-samples" data-side="{escape(name)}">{shown}</p>')
    if series and len(series) < len(sides):
        drawn = " and ".join(s.name for s in series)
        notes.append(f'<p class="note">Only the {escape(drawn)} distribution is drawn.</p>')
    drawings = "".join(_histogram(series, title, layout, len(sides) > 1) for layout in LAYOUTS)
    plot = f'<div class="plot">{drawings}</div>' if series else ""
    return f'<section class="plot-card"><h2>{escape(title)}</h2>{"".join(notes)}{plot}</section>'


# --- settings ----------------------------------------------------------------------------------

BACKEND_FIELDS = (
    ("label", "Backend label"),
    ("mode", "Mode"),
    ("bandwidth_gbps", "Bandwidth"),
    ("latency_floor_us", "Latency floor (µs)"),
    ("compute_pressure", "Compute pressure"),
    ("overlap_efficiency", "Overlap efficiency"),
)
PROTOCOL_FIELDS = (
    ("iterations", "Iterations"),
    ("seed", "Seed"),
    ("ablations", "Ablations"),
    ("max_replay_events", "Max replay events"),
    ("quantile_method", "Quantile method"),
)


def _settings(report: Report) -> list[tuple[str, str]]:
    """(label, escaped value) for every setting the report's sections carry, in a fixed order."""
    backend = dict(report.backend)
    protocol = dict(report.section("replay_protocol") or {})
    out = []
    for key, label in BACKEND_FIELDS:
        if key not in backend:
            continue
        value = _plain(backend.pop(key))
        if key == "bandwidth_gbps":
            value += f" {_plain(backend.get('bandwidth_unit', 'Gbit/s'))}"
        out.append((label, value))
    backend.pop("bandwidth_unit", None)
    for key in sorted(backend):
        out.append((key.replace("_", " ").capitalize(), _plain(backend[key])))
    for key, label in PROTOCOL_FIELDS:
        if key in protocol:
            out.append((label, _plain(protocol.pop(key))))
    model = report.section("simulation_model") or {}
    if model:
        out.append(("Simulation model", f"{_plain(model.get('name'))} {_plain(model.get('version'))}"))
    for key in ("model_name", "model_version", "bandwidth_unit", "sha256"):
        protocol.pop(key, None)
    for key in sorted(protocol):
        out.append((key.replace("_", " ").capitalize(), _plain(protocol[key])))
    canary = report.section("canary") or {}
    if canary.get("sha256"):
        out.append(("Canary sha256", f'<span class="code">{_plain(canary["sha256"])}</span>'))
    if report.samples is not None:
        out.append(("Samples embedded", f"yes ({len(report.samples['exposed_us'])})"))
    elif report.has_samples:
        out.append(("Samples embedded", "yes (not loaded)"))
    else:
        out.append(("Samples embedded", "no (written without --include-samples)"))
    return out


def _kv_table(rows: list[tuple[str, str]]) -> str:
    return _table(["Setting", "Value"], [[escape(k), v] for k, v in rows], numeric_from=2, table_class="kv")


def render_report(report: Report) -> str:
    """HTML for one replay report."""
    m = report.metrics
    name = str(report.workload.get("name", "unnamed workload"))
    backend = report.backend
    body = [
        f'<header class="hero"><h1>{escape(name)}</h1>'
        f"<p>{escape(str(backend.get('label')))} · {escape(str(backend.get('mode')))}</p></header>",
        _cards(
            [
                ("Median", f"{_num(m['median_us'])} µs"),
                ("P95", f"{_num(m['p95_us'])} µs"),
                ("P99", f"{_num(m['p99_us'])} µs"),
                ("Hidden", f"{_num(m['communication_hidden_pct'])}%"),
                ("Skew P95", f"{_num(m['arrival_skew_p95_us'])} µs"),
                ("Events", str(m["count"])),
            ]
        ),
        _plot_section("Exposed latency distribution", [("exposed latency", report, REPORT_COLOUR)]),
    ]
    for title, rows in (("By phase", report.by_phase), ("By operation", report.by_op)):
        table = _table(
            ["Name", "Count", "Median µs", "P95 µs", "P99 µs"],
            [
                [
                    escape(str(r["name"])),
                    str(r["count"]),
                    _num(r["median_us"]),
                    _num(r["p95_us"]),
                    _num(r["p99_us"]),
                ]
                for r in rows
            ],
        )
        body.append(f"<section><h2>{title}</h2>{table}</section>")
    body.append(f'<section class="settings"><h2>Replay settings</h2>{_kv_table(_settings(report))}</section>')
    fidelity = (report.section("canary_summary") or {}).get("fidelity", {})
    fid = _table(
        ["Field", "Value"],
        [[escape(str(k)), _plain(v)] for k, v in sorted(fidelity.items())],
        2,
        table_class="kv",
    )
    body.append(f"<section><h2>Canary fidelity</h2>{fid}</section>")
    calibration = report.calibration
    if calibration:
        cal = _table(
            ["Field", "Value"],
            [[escape(str(k)), _plain(v)] for k, v in sorted(calibration.items())],
            2,
            table_class="kv",
        )
        body.append(f"<section><h2>Model calibration</h2>{cal}</section>")
    else:
        body.append(
            '<section><h2>Model calibration</h2><p class="note">The canary carries no observed latency, '
            "so the model is not calibrated against measurements.</p></section>"
        )
    return _page(f"commcanary report - {name}", "".join(body))


def _delta_text(pct: float | None, status: str) -> str:
    if pct is None:
        return "new nonzero" if status == "new_nonzero_regression" else "undefined"
    return f"{pct:+.1f}%"


def _settings_comparison(baseline: Report, candidate: Report) -> str:
    b, c = _settings(baseline), _settings(candidate)
    labels = [label for label, _ in b] + [label for label, _ in c if label not in dict(b)]
    bd, cd = dict(b), dict(c)
    rows, classes = [], []
    for label in labels:
        bv, cv = bd.get(label, "n/a"), cd.get(label, "n/a")
        differs = bv != cv
        tag = '<span class="tag">differs</span>' if differs else ""
        rows.append([escape(label) + tag, bv, cv])
        classes.append("differs" if differs else "")
    table = _table(
        ["Setting", "Baseline", "Candidate"], rows, numeric_from=3, row_classes=classes, table_class="kv"
    )
    return f'<section class="settings"><h2>Replay settings: baseline vs candidate</h2>{table}</section>'


def _thresholds(comparison: dict[str, Any]) -> str:
    t = dict(comparison.get("thresholds") or {})
    if not t:
        return '<section class="thresholds"><h2>Thresholds</h2><p class="note">The comparison records no thresholds.</p></section>'
    rows = []

    def pair(pct_key: str, abs_key: str, label: str) -> None:
        if pct_key not in t or abs_key not in t:
            return
        pct, ab = float(t.pop(pct_key)), float(t.pop(abs_key))
        rows.append(
            [
                escape(label),
                f"{pct:.2f}% and {ab:.3f} µs",
                f"{pct / 2:.2f}% and {ab / 2:.3f} µs",
            ]
        )

    for m, label in (("median", "Median"), ("p95", "P95"), ("p99", "P99")):
        pair(f"{m}_threshold_pct", f"{m}_absolute_threshold_us", f"{label} exposed latency")
    pair(
        "breakdown_threshold_pct", "breakdown_absolute_threshold_us", "Each phase and operation (p50/p95/p99)"
    )
    if "hidden_drop_threshold_points" in t:
        h = float(t.pop("hidden_drop_threshold_points"))
        rows.append([escape("Hidden communication drop"), f"{h:.2f} points", f"{h / 2:.2f} points"])
    for key in sorted(t):
        rows.append([escape(key), _plain(t[key]), ""])
    table = _table(
        ["Check", "Fails when the candidate is worse by more than", "Warns when worse by more than"],
        rows,
        numeric_from=1,
        table_class="kv",
    )
    return (
        f'<section class="thresholds"><h2>Thresholds</h2>{table}<p class="note">A latency check trips only '
        "when the candidate exceeds both its relative and its absolute threshold.</p></section>"
    )


def render_comparison(comparison: dict[str, Any], baseline: Report, candidate: Report) -> str:
    """HTML for a comparison of two reports."""
    verdict = str(comparison["verdict"])
    v = escape(verdict)
    delta = comparison["delta"]
    bm, cm = comparison["baseline"]["metrics"], comparison["candidate"]["metrics"]
    name = str(candidate.workload.get("name", baseline.workload.get("name", "unnamed workload")))
    body = [
        f'<header class="hero verdict verdict-{v}"><h1>Comparison {escape(verdict.upper())}</h1>'
        f"<p>{escape(name)} · baseline {escape(str(baseline.backend.get('label')))} vs candidate "
        f"{escape(str(candidate.backend.get('label')))}</p></header>",
    ]
    cards = _cards(
        [
            ("Verdict", verdict.upper()),
            ("Median delta", _delta_text(delta["median_pct"], delta["median_relative_status"])),
            ("P95 delta", _delta_text(delta["p95_pct"], delta["p95_relative_status"])),
            ("P99 delta", _delta_text(delta["p99_pct"], delta["p99_relative_status"])),
            ("Hidden delta", f"{delta['communication_hidden_pct_points']:+.2f} pts"),
        ]
    )
    badge = f'<div class="value"><span class="badge verdict-{v}">{escape(verdict.upper())}</span></div>'
    body.append(cards.replace(f'<div class="value">{escape(verdict.upper())}</div>', badge, 1))
    reasons = "".join(
        f'<li class="{escape(r["level"])}">{escape(r["message"])} <span class="code">[{escape(r["code"])}]</span></li>'
        for r in comparison["reasons"]
    )
    body.append(f'<section><h2>Reasons</h2><ul class="reasons">{reasons}</ul></section>')
    rows = []
    for label, key, digits in (
        ("Median µs", "median_us", 3),
        ("P95 µs", "p95_us", 3),
        ("P99 µs", "p99_us", 3),
        ("Hidden %", "communication_hidden_pct", 2),
        ("Arrival skew p95 µs", "arrival_skew_p95_us", 3),
    ):
        b, c = float(bm[key]), float(cm[key])
        rows.append([escape(label), _num(b, digits), _num(c, digits), f"{c - b:+.{digits}f}"])
    body.append(
        "<section><h2>Metrics</h2>"
        + _table(["Metric", "Baseline", "Candidate", "Delta"], rows)
        + "</section>"
    )
    body.append(
        _plot_section(
            "Exposed latency: baseline vs candidate",
            [("baseline", baseline, BASELINE_COLOUR), ("candidate", candidate, CANDIDATE_COLOUR)],
        )
    )
    body.append(_settings_comparison(baseline, candidate))
    body.append(_thresholds(comparison))
    for title, key in (("Phase regressions", "by_phase"), ("Operation regressions", "by_op")):
        table = _table(
            [
                "Name",
                "Status",
                "Median delta",
                "P95 delta",
                "P99 delta",
                "P99 baseline µs",
                "P99 candidate µs",
            ],
            [
                [
                    escape(str(r["name"])),
                    escape(str(r["status"])),
                    _delta_text(r["median_pct"], r["median_relative_status"]),
                    _delta_text(r["p95_pct"], r["p95_relative_status"]),
                    _delta_text(r["p99_pct"], r["p99_relative_status"]),
                    _num(r["baseline_p99_us"], 3),
                    _num(r["candidate_p99_us"], 3),
                ]
                for r in comparison["breakdown_delta"][key]
            ],
            numeric_from=2,
        )
        body.append(f"<section><h2>{title}</h2>{table}</section>")
    return _page(f"commcanary comparison - {verdict}", "".join(body))
