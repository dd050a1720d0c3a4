"""Self-contained HTML for reports and comparisons.

One file, no scripts, no network: inline CSS, inline SVG plots, a strict
Content-Security-Policy, and every value from an artifact HTML-escaped. The
latency distribution is drawn only from embedded samples; without samples the
page says so instead of inventing a distribution.
"""

from __future__ import annotations

from html import escape
from typing import Any

from commcanary.replay import Report

__all__ = ["render_comparison", "render_report"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:24px}
header.hero{padding:20px 24px;border-radius:10px;color:#fff;background:#34495e;margin-bottom:20px}
header.hero h1{margin:0 0 6px;font-size:26px} header.hero p{margin:0;opacity:.9}
.verdict-pass{background:#1e7b45}.verdict-warn{background:#a86a00}.verdict-fail{background:#a32424}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin-bottom:20px}
.card{background:#fff;border-radius:8px;padding:12px 16px;min-width:130px;box-shadow:0 1px 2px rgba(0,0,0,.08)}
.card .label{font-size:12px;text-transform:uppercase;color:#5b6573}.card .value{font-size:22px;font-weight:600}
section{background:#fff;border-radius:8px;padding:16px 20px;margin-bottom:18px;box-shadow:0 1px 2px rgba(0,0,0,.08)}
h2{font-size:18px;margin:0 0 10px}
table{border-collapse:collapse;width:100%;font-size:14px}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e6e8eb}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
ul.reasons{margin:0;padding-left:0;list-style:none}
ul.reasons li{padding:6px 10px;margin:4px 0;border-left:4px solid #888;background:#fafafa}
ul.reasons li.fail{border-color:#a32424}ul.reasons li.warn{border-color:#a86a00}ul.reasons li.pass{border-color:#1e7b45}
.code{font-family:ui-monospace,monospace;font-size:12px;color:#5b6573}
.note{color:#5b6573}
svg text{font-size:11px;fill:#5b6573}
"""


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return escape(str(value))
    return f"{value:.{digits}f}"


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


def _table(headers: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    head = "".join(
        f'<th class="num">{escape(h)}</th>' if i >= numeric_from else f"<th>{escape(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{c}</td>' if i >= numeric_from else f"<td>{c}</td>" for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _histogram(series: list[tuple[str, list[float], str]], buckets: int = 28) -> str:
    """Inline SVG of one or more exposed-latency distributions on shared bins."""
    values = [v for _, vs, _ in series for v in vs]
    if not values:
        return '<p class="note">No samples are embedded; the latency distribution cannot be drawn.</p>'
    lo, hi = min(values), max(values)
    span = max(hi - lo, 0.001)
    width, height, pad = 760, 220, 30
    plot_w, plot_h = width - 2 * pad, height - 2 * pad
    counts = []
    for _, vs, _ in series:
        c = [0] * buckets
        for v in vs:
            c[min(buckets - 1, int((v - lo) / span * buckets))] += 1
        counts.append(c)
    top = max(max(c) for c in counts) or 1
    bar_w = plot_w / buckets / len(series)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    parts.append(
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#9aa3ad"/>'
    )
    for s, ((name, _, colour), c) in enumerate(zip(series, counts, strict=True)):
        for b, n in enumerate(c):
            if n == 0:
                continue
            h = n / top * plot_h
            x = pad + b * plot_w / buckets + s * bar_w
            tail = b >= buckets * 3 // 4
            fill = colour if not tail or len(series) > 1 else "#c0392b"
            parts.append(
                f'<rect x="{x:.1f}" y="{height - pad - h:.1f}" width="{max(bar_w - 1, 1):.1f}" '
                f'height="{h:.1f}" fill="{fill}"><title>{escape(name)}: {n}</title></rect>'
            )
        parts.append(
            f'<rect x="{width - pad - 150}" y="{8 + 16 * s}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{width - pad - 134}" y="{17 + 16 * s}">{escape(name)}</text>'
        )
    parts.append(f'<text x="{pad}" y="{height - 8}">{lo:.1f} us</text>')
    parts.append(f'<text x="{width - pad}" y="{height - 8}" text-anchor="end">{hi:.1f} us</text>')
    parts.append("</svg>")
    return "".join(parts)


def _exposed(report: Report) -> list[float]:
    samples = report.samples
    return [] if samples is None else [float(v) for v in samples["exposed_us"]]


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
                ("Median", f"{_num(m['median_us'])} us"),
                ("P95", f"{_num(m['p95_us'])} us"),
                ("P99", f"{_num(m['p99_us'])} us"),
                ("Hidden", f"{_num(m['communication_hidden_pct'])}%"),
                ("Skew P95", f"{_num(m['arrival_skew_p95_us'])} us"),
                ("Events", str(m["count"])),
            ]
        ),
        "<section><h2>Exposed latency distribution</h2>"
        + _histogram([("exposed", _exposed(report), "#2e86c1")])
        + "</section>",
    ]
    for title, rows in (("By phase", report.by_phase), ("By operation", report.by_op)):
        table = _table(
            ["Name", "Count", "Median us", "P95 us", "P99 us"],
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
    settings = _table(
        ["Setting", "Value"], [[escape(str(k)), escape(str(v))] for k, v in sorted(backend.items())]
    )
    body.append(f"<section><h2>Replay settings</h2>{settings}</section>")
    fidelity = (report.section("canary_summary") or {}).get("fidelity", {})
    fid = _table(["Field", "Value"], [[escape(str(k)), escape(str(v))] for k, v in sorted(fidelity.items())])
    body.append(f"<section><h2>Canary fidelity</h2>{fid}</section>")
    calibration = report.calibration
    if calibration:
        cal = _table(
            ["Field", "Value"], [[escape(str(k)), escape(str(v))] for k, v in sorted(calibration.items())]
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


def render_comparison(comparison: dict[str, Any], baseline: Report, candidate: Report) -> str:
    """HTML for a comparison of two reports."""
    verdict = str(comparison["verdict"])
    delta = comparison["delta"]
    bm, cm = comparison["baseline"]["metrics"], comparison["candidate"]["metrics"]
    name = str(candidate.workload.get("name", baseline.workload.get("name", "unnamed workload")))
    body = [
        f'<header class="hero verdict-{escape(verdict)}"><h1>Comparison {escape(verdict.upper())}</h1>'
        f"<p>{escape(name)} · baseline {escape(str(baseline.backend.get('label')))} vs candidate "
        f"{escape(str(candidate.backend.get('label')))}</p></header>",
        _cards(
            [
                ("Verdict", verdict.upper()),
                ("Median delta", _delta_text(delta["median_pct"], delta["median_relative_status"])),
                ("P95 delta", _delta_text(delta["p95_pct"], delta["p95_relative_status"])),
                ("P99 delta", _delta_text(delta["p99_pct"], delta["p99_relative_status"])),
                ("Hidden delta", f"{delta['communication_hidden_pct_points']:+.2f} pts"),
            ]
        ),
    ]
    reasons = "".join(
        f'<li class="{escape(r["level"])}">{escape(r["message"])} <span class="code">[{escape(r["code"])}]</span></li>'
        for r in comparison["reasons"]
    )
    body.append(f'<section><h2>Reasons</h2><ul class="reasons">{reasons}</ul></section>')
    rows = []
    for label, key, digits in (
        ("Median us", "median_us", 3),
        ("P95 us", "p95_us", 3),
        ("P99 us", "p99_us", 3),
        ("Hidden %", "communication_hidden_pct", 2),
        ("Arrival skew p95 us", "arrival_skew_p95_us", 3),
    ):
        b, c = float(bm[key]), float(cm[key])
        rows.append([escape(label), _num(b, digits), _num(c, digits), f"{c - b:+.{digits}f}"])
    body.append(
        "<section><h2>Metrics</h2>"
        + _table(["Metric", "Baseline", "Candidate", "Delta"], rows)
        + "</section>"
    )
    body.append(
        "<section><h2>Exposed latency: baseline vs candidate</h2>"
        + _histogram(
            [("baseline", _exposed(baseline), "#2e86c1"), ("candidate", _exposed(candidate), "#e67e22")]
        )
        + "</section>"
    )
    for title, key in (("Phase regressions", "by_phase"), ("Operation regressions", "by_op")):
        table = _table(
            [
                "Name",
                "Status",
                "Median delta",
                "P95 delta",
                "P99 delta",
                "P99 baseline us",
                "P99 candidate us",
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
