"""The report and comparison pages: their view models, rendered by the
templates of :mod:`commcanary.views` (``report.html.j2``,
``comparison.html.j2``).

One file, no scripts, no network: inline CSS, inline SVG plots, a strict
Content-Security-Policy, and every value from an artifact HTML-escaped (by
the templates' autoescape). The latency distribution is drawn only from
embedded samples; without samples the page says so instead of inventing a
distribution. The output is a pure function of its inputs (same report or
comparison, same bytes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from commcanary.formats import MEASURED_MODE
from commcanary.replay import Report
from commcanary.views import Markup, components, escape, render, stylesheet
from commcanary.views.palette import SERIES_COLOURS, VERDICT_COLOURS
from commcanary.views.plot import LAYOUTS, Histogram, Layout, Series, histogram

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["VERDICT_COLOURS", "render_comparison", "render_report"]

NO_SAMPLES = (
    "has no embedded samples (it was written without --include-samples), "
    "so its latency distribution cannot be drawn."
)


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:.{digits}f}"


def _plain(value: Any) -> str:
    """A setting's value as text: floats round-trip, lists joined."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) if value else "none"
    return str(value)


class _Note(NamedTuple):
    """A note above the plot: ``side`` set for a side without samples."""

    side: str | None
    text: str | Markup


class _Plot(NamedTuple):
    title: str
    notes: list[_Note]
    drawings: list[Histogram]


def _exposed(report: Report) -> npt.NDArray[Any] | None:
    values = report.exposed_us()
    if values is None:
        return None
    import numpy as np

    return np.asarray(values, dtype=np.float64)


def _quantiles(report: Report) -> tuple[tuple[str, float], ...]:
    m = report.metrics
    return (("p50", float(m["median_us"])), ("p95", float(m["p95_us"])), ("p99", float(m["p99_us"])))


def _no_samples_text(subject: str, report: Report, alone: bool) -> str:
    if report.has_samples:
        return f"{subject}'s samples were not loaded, so its latency distribution cannot be drawn."
    if alone and (report.section("backend") or {}).get("mode") != MEASURED_MODE:
        return f"{subject} {NO_SAMPLES} Give render-html its canary (--canary) to recompute it."
    return f"{subject} {NO_SAMPLES}"


def _histogram(series: list[Series], title: str, layout: Layout, named: bool) -> str:
    """One drawing of the histogram as SVG text (empty when nothing is drawn)."""
    drawing = histogram(series, title, layout, named)
    return "" if drawing is None else str(components().histogram(drawing))


def _plot(title: str, sides: list[tuple[str, Report, tuple[str, str]]]) -> _Plot:
    """The plot card: the histogram of every side with samples, and a plain note for each side without."""
    notes = []
    series = []
    for name, report, (colour, marker) in sides:
        subject = "This report" if len(sides) == 1 else f"The {name} report"
        values = _exposed(report)
        if values is None:
            text = _no_samples_text(subject, report, len(sides) == 1)
        elif not len(values):
            text = f"{subject} has no replayed events."
        else:
            series.append(Series(name, values, _quantiles(report), colour, marker))
            if report.samples is None:
                origin = (
                    "recomputed from its canary (the model's replay is deterministic)"
                    if report.exposed_recomputed
                    else "drawn from the run that made it"
                )
                notes.append(_Note(None, f"{subject} carries no samples; its distribution is {origin}."))
            continue
        flag = Markup('<code class="flag">--include-samples</code>')
        notes.append(_Note(name, Markup(escape(text).replace("--include-samples", flag))))
    if series and len(series) < len(sides):
        drawn = " and ".join(s.name for s in series)
        notes.append(_Note(None, f"Only the {drawn} distribution is drawn."))
    named = len(sides) > 1
    drawings = [d for layout in LAYOUTS if (d := histogram(series, title, layout, named)) is not None]
    return _Plot(title, notes, drawings)


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
    """(label, value) for every setting the report's sections carry, in a fixed order."""
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
        out.append(("Canary sha256", Markup('<span class="code">{}</span>').format(_plain(canary["sha256"]))))
    if report.samples is not None:
        out.append(("Samples embedded", f"yes ({len(report.samples['exposed_us'])})"))
    elif report.has_samples:
        out.append(("Samples embedded", "yes (not loaded)"))
    else:
        out.append(("Samples embedded", "no (written without --include-samples)"))
    return out


def _page(template: str, title: str, style: str, **model: Any) -> str:
    return render(template, title=title, style=stylesheet(style), **model)


def _breakdown_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [str(r["name"]), str(r["count"]), _num(r["median_us"]), _num(r["p95_us"]), _num(r["p99_us"])]
        for r in rows
    ]


def _kv(items: dict[str, Any]) -> list[list[str]]:
    return [[str(k), _plain(v)] for k, v in sorted(items.items())]


def render_report(report: Report) -> str:
    """HTML for one replay report."""
    m = report.metrics
    name = str(report.workload.get("name", "unnamed workload"))
    backend = report.backend
    fidelity = (report.section("canary_summary") or {}).get("fidelity", {})
    return _page(
        "report.html.j2",
        f"commcanary report - {name}",
        "base",
        name=name,
        label=str(backend.get("label")),
        mode=str(backend.get("mode")),
        card_items=[
            ("Median", f"{_num(m['median_us'])} µs"),
            ("P95", f"{_num(m['p95_us'])} µs"),
            ("P99", f"{_num(m['p99_us'])} µs"),
            ("Hidden", f"{_num(m['communication_hidden_pct'])}%"),
            ("Skew P95", f"{_num(m['arrival_skew_p95_us'])} µs"),
            ("Events", str(m["count"])),
        ],
        plot=_plot("Exposed latency distribution", [("exposed latency", report, SERIES_COLOURS["report"])]),
        breakdowns=[
            ("By phase", _breakdown_rows(report.by_phase)),
            ("By operation", _breakdown_rows(report.by_op)),
        ],
        settings=_settings(report),
        fidelity=_kv(fidelity),
        calibration=_kv(report.calibration or {}),
    )


def _delta_text(pct: float | None, status: str) -> str:
    if pct is None:
        return "new nonzero" if status == "new_nonzero_regression" else "undefined"
    return f"{pct:+.1f}%"


class _SettingsComparison(NamedTuple):
    rows: list[list[str | Markup]]
    classes: list[str]


def _settings_comparison(baseline: Report, candidate: Report) -> _SettingsComparison:
    b, c = _settings(baseline), _settings(candidate)
    labels = [label for label, _ in b] + [label for label, _ in c if label not in dict(b)]
    bd, cd = dict(b), dict(c)
    rows: list[list[str | Markup]] = []
    classes = []
    for label in labels:
        bv, cv = bd.get(label, "n/a"), cd.get(label, "n/a")
        differs = bv != cv
        shown = Markup('{}<span class="tag">differs</span>').format(label) if differs else label
        rows.append([shown, bv, cv])
        classes.append("differs" if differs else "")
    return _SettingsComparison(rows, classes)


def _thresholds(comparison: dict[str, Any]) -> list[list[str]]:
    t = dict(comparison.get("thresholds") or {})
    rows: list[list[str]] = []

    def pair(pct_key: str, abs_key: str, label: str) -> None:
        if pct_key not in t or abs_key not in t:
            return
        pct, ab = float(t.pop(pct_key)), float(t.pop(abs_key))
        rows.append([label, f"{pct:.2f}% and {ab:.3f} µs", f"{pct / 2:.2f}% and {ab / 2:.3f} µs"])

    for m, label in (("median", "Median"), ("p95", "P95"), ("p99", "P99")):
        pair(f"{m}_threshold_pct", f"{m}_absolute_threshold_us", f"{label} exposed latency")
    pair(
        "breakdown_threshold_pct", "breakdown_absolute_threshold_us", "Each phase and operation (p50/p95/p99)"
    )
    if "hidden_drop_threshold_points" in t:
        h = float(t.pop("hidden_drop_threshold_points"))
        rows.append(["Hidden communication drop", f"{h:.2f} points", f"{h / 2:.2f} points"])
    for key in sorted(t):
        rows.append([key, _plain(t[key]), ""])
    return rows


class _IntervalRow(NamedTuple):
    """One statistic of a comparison over repeated runs, drawn against its threshold band."""

    label: str
    estimate: str
    interval: str
    threshold: str
    result: str
    #: x of the band's warn start and fail start, the interval's ends and the estimate (0..1).
    warn_x: float
    fail_x: float
    low_x: float
    high_x: float
    estimate_x: float
    zero_x: float


def _interval_rows(comparison: dict[str, Any]) -> list[_IntervalRow]:
    """Every gated statistic with an interval, on a common scale per row: the
    threshold (percent, or points for the hidden share) at 60% of the width."""
    rows = []
    for e in comparison["evaluations"]:
        iv = e.get("interval")
        if iv is None:
            continue
        drop = "drop_points" in e
        if drop:
            # A drop is the negated change of the hidden share, in points.
            est, low, high = -(e["candidate"] - e["baseline"]), -iv["high"], -iv["low"]
            limit, unit = float(e["threshold_points"]), " pt"
        else:
            est, low, high = e.get("relative_delta_pct"), iv.get("low_pct"), iv.get("high_pct")
            limit, unit = float(e["threshold_pct"]), "%"
        if est is None or low is None or high is None:
            continue
        span = max(limit / 0.6, abs(low), abs(high), 1e-9)
        lo, hi = -span * 0.4 / 0.6 if span == limit / 0.6 else -span, span

        def x(v: float, lo: float = lo, hi: float = hi) -> float:
            return round(min(1.0, max(0.0, (v - lo) / (hi - lo))), 4)

        label = f"{e['metric']} · {e['name']}" if "name" in e else str(e["metric"])
        rows.append(
            _IntervalRow(
                label,
                f"{est:+.2f}{unit}",
                f"[{low:+.2f}{unit}, {high:+.2f}{unit}]",
                f"{limit:.2f}{unit}",
                str(e["threshold_result"]),
                x(limit / 2),
                x(limit),
                x(low),
                x(high),
                x(est),
                x(0.0),
            )
        )
    return rows


def render_comparison(comparison: dict[str, Any], baseline: Report, candidate: Report) -> str:
    """HTML for a comparison of two reports."""
    verdict = str(comparison["verdict"])
    delta = comparison["delta"]
    bm, cm = comparison["baseline"]["metrics"], comparison["candidate"]["metrics"]
    name = str(candidate.workload.get("name", baseline.workload.get("name", "unnamed workload")))
    badge = Markup('<span class="badge verdict-{}">{}</span>').format(verdict, verdict.upper())
    metrics = []
    for label, key, digits in (
        ("Median µs", "median_us", 3),
        ("P95 µs", "p95_us", 3),
        ("P99 µs", "p99_us", 3),
        ("Hidden %", "communication_hidden_pct", 2),
        ("Arrival skew p95 µs", "arrival_skew_p95_us", 3),
    ):
        b, c = float(bm[key]), float(cm[key])
        metrics.append([label, _num(b, digits), _num(c, digits), f"{c - b:+.{digits}f}"])
    breakdowns = [
        (
            title,
            [
                [
                    str(r["name"]),
                    str(r["status"]),
                    _delta_text(r["median_pct"], r["median_relative_status"]),
                    _delta_text(r["p95_pct"], r["p95_relative_status"]),
                    _delta_text(r["p99_pct"], r["p99_relative_status"]),
                    _num(r["baseline_p99_us"], 3),
                    _num(r["candidate_p99_us"], 3),
                ]
                for r in comparison["breakdown_delta"][key]
            ],
        )
        for title, key in (("Phase regressions", "by_phase"), ("Operation regressions", "by_op"))
    ]
    sides = [
        ("baseline", baseline, SERIES_COLOURS["baseline"]),
        ("candidate", candidate, SERIES_COLOURS["candidate"]),
    ]
    return _page(
        "comparison.html.j2",
        f"commcanary comparison - {verdict}",
        "base",
        verdict=verdict,
        name=name,
        baseline_label=str(baseline.backend.get("label")),
        candidate_label=str(candidate.backend.get("label")),
        card_items=[
            ("Verdict", badge),
            ("Median delta", _delta_text(delta["median_pct"], delta["median_relative_status"])),
            ("P95 delta", _delta_text(delta["p95_pct"], delta["p95_relative_status"])),
            ("P99 delta", _delta_text(delta["p99_pct"], delta["p99_relative_status"])),
            ("Hidden delta", f"{delta['communication_hidden_pct_points']:+.2f} pts"),
        ],
        reasons=comparison["reasons"],
        metrics=metrics,
        plot=_plot("Exposed latency: baseline vs candidate", sides),
        settings=_settings_comparison(baseline, candidate),
        thresholds=_thresholds(comparison),
        breakdowns=breakdowns,
        runs=comparison.get("runs"),
        intervals=_interval_rows(comparison),
    )
