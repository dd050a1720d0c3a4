"""Self-contained HTML for a straggler diagnosis (``commcanary.stragglers.v1``).

:func:`render_stragglers` turns the document and its per-instance member
table into one page: no scripts, no network, inline CSS and inline SVG, the
strict Content-Security-Policy of :mod:`commcanary.html`, every value taken
from the inputs HTML-escaped. The same inputs render to the same bytes.

The page shows: the verdict banner (red when stragglers were found, green
when not); cards; the per-rank timeline (``svg.timeline``): one row per rank
(``rect.row`` with ``data-rank``), each call as the time it waited for the
others (light) and its time inside (dark), dashed step boundaries
(``line.step`` with ``data-step``), and each finding as a mark
(``rect.straggler-mark`` with ``data-rank``, ``data-step``, ``data-kind``):
red over the time the others waited for a late arrival, orange over the
extra time inside of a slow collective; then the blame table, the findings,
the steps, communication performance (flagged classes highlighted) and the
detector. A job too large to draw whole is drawn over the steps around its
costliest finding (at most :data:`MAX_DRAWN` calls), and the page says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from commcanary.errors import InputError
from commcanary.formats import STRAGGLERS_FORMAT
from commcanary.views import Markup, components, render, stylesheet
from commcanary.views import escape_text as escape
from commcanary.views.palette import INSIDE_COLOUR, MARK_COLOURS, WAIT_COLOUR

__all__ = ["MARK_COLOURS", "MAX_DRAWN", "render_stragglers"]

#: The most calls (rank, instance) the timeline draws.
MAX_DRAWN = 6000
LEFT, PLOT_W, TOP = 64, 920, 28


def _cards(items: list[tuple[str, str]]) -> str:
    return str(components().cards(items))


def _table(
    headers: list[str], rows: list[list[str]], numeric_from: int = 1, row_classes: list[str] | None = None
) -> str:
    """The components' table; cells here are escaped fragments already."""
    cells = [[Markup(c) for c in row] for row in rows]
    return str(components().table(headers, cells, numeric_from, row_classes))


def _ms(us: Any) -> str:
    return f"{float(us) / 1000:.1f} ms" if isinstance(us, int | float) else "n/a"


def _e(value: Any) -> str:
    return escape(str(value)) if value is not None else "n/a"


def _group(g: Any) -> str:
    if not isinstance(g, Mapping):
        return "n/a"
    desc, name = g.get("desc"), g.get("name")
    return escape(f"{desc} (pg {name})" if desc else f"pg {name}")


def _window(doc: Mapping[str, Any], steps: Sequence[int]) -> tuple[list[int], bool]:
    """The steps to draw, and whether that is all of them."""
    per_step: dict[int, int] = {}
    for s in steps:
        per_step[s] = per_step.get(s, 0) + 1
    order = sorted(per_step)
    if sum(per_step.values()) <= MAX_DRAWN:
        return order, True
    findings = [f for f in doc.get("findings", []) if isinstance(f, Mapping)]
    worst = max(findings, key=lambda f: f.get("estimated_cost_us", 0), default=None)
    centre = order.index(worst["step"]) if worst and worst.get("step") in per_step else 0
    lo = hi = centre
    drawn = per_step[order[centre]]
    while True:
        grown = False
        for k in (hi + 1, lo - 1):
            if 0 <= k < len(order) and drawn + per_step[order[k]] <= MAX_DRAWN:
                drawn += per_step[order[k]]
                lo, hi = min(lo, k), max(hi, k)
                grown = True
        if not grown:
            return order[lo : hi + 1], False


def _timeline(doc: Mapping[str, Any], members: Mapping[str, Sequence[Any]]) -> str:
    steps = [int(s) for s in members.get("step", [])]
    if not steps:
        return '<section class="timeline"><h2>Timeline</h2><p class="empty">No calls to draw.</p></section>'
    shown, whole = _window(doc, steps)
    keep = set(shown)
    rows = [i for i, s in enumerate(steps) if s in keep]
    arrival, end = members["arrival_us"], members["end_us"]
    inside, rank_col = members["inside_us"], members["rank"]
    ranks = sorted(
        {int(r["rank"]) for r in doc.get("ranks", []) if isinstance(r, Mapping)}
        | {int(rank_col[i]) for i in rows}
    )
    row_of = {r: k for k, r in enumerate(ranks)}
    h = max(4.0, min(22.0, 640.0 / max(1, len(ranks))))
    t0 = min(float(arrival[i]) for i in rows)
    t1 = max(float(end[i]) for i in rows)
    span = max(t1 - t0, 1.0)

    def x(t: float) -> float:
        return LEFT + (t - t0) / span * PLOT_W

    height = TOP + h * len(ranks) + 24
    parts = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {LEFT + PLOT_W + 16} {height:.0f}" '
        f'width="{LEFT + PLOT_W + 16}" height="{height:.0f}" role="img" aria-label="per-rank timeline">'
    ]
    for k, r in enumerate(ranks):
        y = TOP + k * h
        odd = " odd" if k % 2 else ""
        parts.append(
            f'<rect class="row{odd}" data-rank="{r}" x="{LEFT}" y="{y:.2f}" width="{PLOT_W}" height="{h:.2f}"/>'
        )
        if h >= 9 or k % max(1, int(10 / h)) == 0:
            parts.append(f'<text x="{LEFT - 6}" y="{y + h * 0.75:.2f}" text-anchor="end">rank {r}</text>')
    for i in rows:
        y = TOP + row_of[int(rank_col[i])] * h + 1
        a, e, inner = float(arrival[i]), float(end[i]), float(inside[i])
        split = max(a, e - inner)
        if split > a:
            parts.append(
                f'<rect x="{x(a):.2f}" y="{y:.2f}" width="{max(x(split) - x(a), 0.5):.2f}" height="{h - 2:.2f}" fill="{WAIT_COLOUR}"/>'
            )
        parts.append(
            f'<rect x="{x(split):.2f}" y="{y:.2f}" width="{max(x(e) - x(split), 0.5):.2f}" height="{h - 2:.2f}" fill="{INSIDE_COLOUR}"/>'
        )
    starts: dict[int, float] = {}
    for i in rows:
        starts[steps[i]] = min(starts.get(steps[i], float("inf")), float(arrival[i]))
    label_every = max(1, len(starts) // 20)
    for n, (step, t) in enumerate(sorted(starts.items())):
        parts.append(
            f'<line class="step" data-step="{step}" x1="{x(t):.2f}" y1="{TOP - 4}" x2="{x(t):.2f}" y2="{TOP + h * len(ranks):.2f}"/>'
        )
        if n % label_every == 0:
            parts.append(f'<text x="{x(t) + 2:.2f}" y="{TOP - 8}">{step}</text>')
    for f in doc.get("findings", []):
        if not isinstance(f, Mapping) or f.get("step") not in keep or f.get("rank") not in row_of:
            continue
        kind = str(f.get("kind"))
        at, lag = float(f.get("at_us", t0)), float(f.get("lag_us", 0.0))
        lo, hi = (at - lag, at) if kind == "late_arrival" else (at, at + lag)
        left, right = x(lo), x(hi)
        if right - left < 6:
            left, right = (left + right) / 2 - 3, (left + right) / 2 + 3
        y = TOP + row_of[int(f["rank"])] * h
        title = f"rank {f['rank']}, step {f['step']}: {kind.replace('_', ' ')}, lag {_ms(lag)}, cost {_ms(f.get('estimated_cost_us'))}"
        parts.append(
            f'<rect class="straggler-mark" data-rank="{int(f["rank"])}" data-step="{int(f["step"])}" data-kind="{escape(kind)}" '
            f'x="{left:.2f}" y="{y:.2f}" width="{right - left:.2f}" height="{h:.2f}" fill="{MARK_COLOURS.get(kind, "#d62728")}">'
            f"<title>{escape(title)}</title></rect>"
        )
    parts.append(f'<text x="{LEFT}" y="{height - 6:.0f}">0 ms</text>')
    parts.append(
        f'<text x="{LEFT + PLOT_W}" y="{height - 6:.0f}" text-anchor="end">{span / 1000:.1f} ms</text>'
    )
    parts.append("</svg>")
    legend = (
        '<p class="legend">'
        f'<span><i style="background:{WAIT_COLOUR}"></i>waiting for the others</span>'
        f'<span><i style="background:{INSIDE_COLOUR}"></i>inside the collective</span>'
        f'<span><i style="background:{MARK_COLOURS["late_arrival"]}"></i>late arrival (what the others waited)</span>'
        f'<span><i style="background:{MARK_COLOURS["slow_collective"]}"></i>slow collective (extra time inside)</span></p>'
    )
    note = (
        ""
        if whole
        else f'<p class="note">Steps {shown[0]} to {shown[-1]} of {len(set(steps))} are drawn (around the costliest finding; at most {MAX_DRAWN} calls).</p>'
    )
    return f'<section class="timeline"><h2>Timeline</h2>{note}{"".join(parts)}{legend}</section>'


def _tables(doc: Mapping[str, Any]) -> str:
    blame = [r for r in doc.get("ranks", []) if isinstance(r, Mapping) and r.get("straggler_steps")]
    out = []
    rows = [[_e(r["rank"]), _e(r["straggler_steps"]), _ms(r.get("total_estimated_cost_us"))] for r in blame]
    out.append(
        ("blame", "Blame (by estimated cost)", _table(["Rank", "Steps", "Total cost"], rows) if rows else "")
    )
    findings = [f for f in doc.get("findings", []) if isinstance(f, Mapping)]
    rows = [
        [
            _e(f.get("step")),
            _e(f.get("rank")),
            _e(str(f.get("kind")).replace("_", " ")),
            _e(f.get("op")),
            _group(f.get("group")),
            _ms(f.get("lag_us")),
            _ms(f.get("gap_before_us")),
            _ms(f.get("usual_gap_before_us")),
            _ms(f.get("estimated_cost_us")),
        ]
        for f in findings
    ]
    headers = ["Step", "Rank", "Kind", "Op", "Group", "Lag", "Gap before", "Usually", "Cost"]
    out.append(("findings", "Findings", _table(headers, rows, numeric_from=5) if rows else ""))
    steps = [s for s in doc.get("steps", []) if isinstance(s, Mapping)]
    rows = [
        [
            _e(s.get("step")),
            _ms(s.get("duration_us")),
            _e(s.get("last_rank")),
            _ms(s.get("lag_us")),
            _e(", ".join(map(str, s.get("straggler_ranks", []))) or "-"),
        ]
        for s in steps
    ]
    out.append(
        (
            "steps",
            "Steps",
            _table(["Step", "Duration", "Last rank", "Its excess", "Stragglers"], rows, numeric_from=1),
        )
    )
    comm = [c for c in doc.get("communication", []) if isinstance(c, Mapping)]
    rows = [
        [
            _group(c.get("group")),
            _e(c.get("op")),
            _e(c.get("bucket_bytes")),
            _e(c.get("count")),
            _e(c.get("algorithm") or "-"),
            _e(f"{float(c.get('median_time_us', 0)):.1f}"),
            _e(c.get("median_algbw_gbps")),
            _e(c.get("median_busbw_gbps")),
            _e(c.get("flagged_count")),
        ]
        for c in comm
    ]
    classes = ["flagged" if c.get("flagged_count") else "" for c in comm]
    headers = [
        "Group",
        "Op",
        "Bucket (bytes)",
        "Count",
        "Algorithm",
        "Median µs",
        "algbw GB/s",
        "busbw GB/s",
        "Far below",
    ]
    out.append(
        (
            "communication",
            "Communication performance",
            _table(headers, rows, numeric_from=2, row_classes=classes),
        )
    )
    html = []
    for cls, title, body in out:
        html.append(f'<section class="{cls}"><h2>{escape(title)}</h2>{body or "<p>None.</p>"}</section>')
    return "".join(html)


def render_stragglers(document: Mapping[str, Any], members: Mapping[str, Sequence[Any]]) -> str:
    """HTML for one straggler diagnosis: the document (parsed) and its member
    table (columns as sequences: ``step``, ``rank``, ``arrival_us``,
    ``end_us``, ``inside_us``)."""
    if not isinstance(document, Mapping) or document.get("format") != STRAGGLERS_FORMAT:
        found = document.get("format") if isinstance(document, Mapping) else type(document).__name__
        raise InputError(f"not a {STRAGGLERS_FORMAT} document (format {found!r})")
    verdict = "stragglers" if document.get("verdict") == "stragglers" else "none"
    findings = [f for f in document.get("findings", []) if isinstance(f, Mapping)]
    blamed = sorted({int(f["rank"]) for f in findings})
    title = "Stragglers" if verdict == "stragglers" else "No stragglers"
    summary = (
        f"rank(s) {', '.join(map(str, blamed))} slowed {len({f['step'] for f in findings})} of "
        f"{len(document.get('steps', []))} steps, costing {_ms(sum(float(f.get('estimated_cost_us', 0)) for f in findings))}"
        if findings
        else f"{len(document.get('steps', []))} steps on {_e(document.get('world'))} ranks, all within the job's noise"
    )
    detector = document.get("detector", {}) if isinstance(document.get("detector"), Mapping) else {}
    hero = f'<header class="hero verdict verdict-{verdict}"><h1>{title}</h1><p class="summary">{escape(summary)}</p></header>'
    cards = _cards(
        [
            ("Ranks", str(document.get("world"))),
            ("Steps", str(len(document.get("steps", [])))),
            ("Findings", str(len(findings))),
            ("Threshold", _ms(detector.get("threshold_us"))),
            ("Steps from", str(document.get("step_source"))),
        ]
    )
    terms = components().terms(["lag", "threshold", "busbw"])
    fragments = [Markup(f) for f in (hero, cards, _timeline(document, members), _tables(document), terms)]
    return render(
        "diagnosis.html.j2",
        title=f"commcanary straggler diagnosis - {title}",
        style=stylesheet("base", "stragglers"),
        fragments=fragments,
    )
