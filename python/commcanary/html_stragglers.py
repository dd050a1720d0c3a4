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
from dataclasses import dataclass
from typing import Any

from commcanary.errors import InputError
from commcanary.formats import STRAGGLERS_FORMAT
from commcanary.views import render, stylesheet
from commcanary.views.palette import INSIDE_COLOUR, MARK_COLOURS, WAIT_COLOUR

__all__ = ["MARK_COLOURS", "MAX_DRAWN", "render_stragglers"]

#: The most calls (rank, instance) the timeline draws.
MAX_DRAWN = 6000
LEFT, PLOT_W, TOP = 64, 920, 28


def _ms(us: Any) -> str:
    return f"{float(us) / 1000:.1f} ms" if isinstance(us, int | float) else "n/a"


def _t(value: Any) -> str:
    """A value as text; ``n/a`` when missing."""
    return str(value) if value is not None else "n/a"


def _group(g: Any) -> str:
    if not isinstance(g, Mapping):
        return "n/a"
    desc, name = g.get("desc"), g.get("name")
    return f"{desc} (pg {name})" if desc else f"pg {name}"


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


@dataclass(frozen=True)
class _Timeline:
    """The per-rank timeline as drawing primitives (coordinates as SVG text)."""

    width: int
    height: str
    left: int
    plot_w: int
    top: int
    rows: list[tuple[str, int, str, str, str | None]]
    bars: list[tuple[str, str, str, str, str]]
    steps: list[tuple[int, str, str, str | None]]
    marks: list[tuple[int, int, str, str, str, str, str, str, str]]
    span: str
    text_y: str
    note: str | None


def _timeline(doc: Mapping[str, Any], members: Mapping[str, Sequence[Any]]) -> _Timeline | None:
    """Rows per rank, each call's waiting and inside time, step boundaries and the findings' marks."""
    import numpy as np

    steps = np.asarray(members.get("step", []), dtype=np.int64)
    if not len(steps):
        return None
    shown, whole = _window(doc, steps.tolist())
    keep = set(shown)
    rows = np.flatnonzero(np.isin(steps, shown))
    arrival = np.asarray(members["arrival_us"], dtype=np.float64)[rows]
    end = np.asarray(members["end_us"], dtype=np.float64)[rows]
    inside = np.asarray(members["inside_us"], dtype=np.float64)[rows]
    rank_col = np.asarray(members["rank"], dtype=np.int64)[rows]
    ranks = sorted(
        {int(r["rank"]) for r in doc.get("ranks", []) if isinstance(r, Mapping)} | set(rank_col.tolist())
    )
    row_of = {r: k for k, r in enumerate(ranks)}
    h = max(4.0, min(22.0, 640.0 / max(1, len(ranks))))
    t0, t1 = float(arrival.min()), float(end.max())
    span = max(t1 - t0, 1.0)

    def x(t: float) -> float:
        return LEFT + (t - t0) / span * PLOT_W

    height = TOP + h * len(ranks) + 24
    drawn_rows = []
    for k, r in enumerate(ranks):
        y = TOP + k * h
        label = f"{y + h * 0.75:.2f}" if h >= 9 or k % max(1, int(10 / h)) == 0 else None
        drawn_rows.append((" odd" if k % 2 else "", r, f"{y:.2f}", f"{h:.2f}", label))
    # The calls, as columns: where each waits (light) and is inside (dark).
    call_y = (
        TOP + np.fromiter((row_of[int(r)] for r in rank_col), dtype=np.float64, count=len(rank_col)) * h + 1
    )
    split = np.maximum(arrival, end - inside)
    xa, xs, xe = (LEFT + (c - t0) / span * PLOT_W for c in (arrival, split, end))
    bar_h = f"{h - 2:.2f}"
    bars = []
    for a, sp, xa_i, xs_i, xe_i, y_i in zip(
        arrival.tolist(), split.tolist(), xa.tolist(), xs.tolist(), xe.tolist(), call_y.tolist(), strict=True
    ):
        if sp > a:
            bars.append((f"{xa_i:.2f}", f"{y_i:.2f}", f"{max(xs_i - xa_i, 0.5):.2f}", bar_h, WAIT_COLOUR))
        bars.append((f"{xs_i:.2f}", f"{y_i:.2f}", f"{max(xe_i - xs_i, 0.5):.2f}", bar_h, INSIDE_COLOUR))
    starts: dict[int, float] = {}
    for step, t in zip(steps[rows].tolist(), arrival.tolist(), strict=True):
        starts[step] = min(starts.get(step, float("inf")), t)
    label_every = max(1, len(starts) // 20)
    step_lines = [
        (
            step,
            f"{x(t):.2f}",
            f"{TOP + h * len(ranks):.2f}",
            f"{x(t) + 2:.2f}" if n % label_every == 0 else None,
        )
        for n, (step, t) in enumerate(sorted(starts.items()))
    ]
    marks = []
    for f in doc.get("findings", []):
        if not isinstance(f, Mapping) or f.get("step") not in keep or f.get("rank") not in row_of:
            continue
        kind = str(f.get("kind"))
        at, lag = float(f.get("at_us", t0)), float(f.get("lag_us", 0.0))
        lo, hi = (at - lag, at) if kind == "late_arrival" else (at, at + lag)
        left, right = x(lo), x(hi)
        if right - left < 6:
            left, right = (left + right) / 2 - 3, (left + right) / 2 + 3
        title = (
            f"rank {f['rank']}, step {f['step']}: {kind.replace('_', ' ')}, lag {_ms(lag)}, "
            f"cost {_ms(f.get('estimated_cost_us'))}"
        )
        top = TOP + row_of[int(f["rank"])] * h
        fill = MARK_COLOURS.get(kind, MARK_COLOURS["late_arrival"])
        marks.append(
            (
                int(f["rank"]),
                int(f["step"]),
                kind,
                f"{left:.2f}",
                f"{top:.2f}",
                f"{right - left:.2f}",
                f"{h:.2f}",
                fill,
                title,
            )
        )
    note = (
        None
        if whole
        else f"Steps {shown[0]} to {shown[-1]} of {len(set(steps.tolist()))} are drawn (around the costliest "
        f"finding; at most {MAX_DRAWN} calls)."
    )
    return _Timeline(
        width=LEFT + PLOT_W + 16,
        height=f"{height:.0f}",
        left=LEFT,
        plot_w=PLOT_W,
        top=TOP,
        rows=drawn_rows,
        bars=bars,
        steps=step_lines,
        marks=marks,
        span=f"{span / 1000:.1f}",
        text_y=f"{height - 6:.0f}",
        note=note,
    )


class _Table:
    """One table section: its class, title, headers, rows and how they show."""

    def __init__(
        self,
        cls: str,
        title: str,
        headers: list[str],
        rows: list[list[str]],
        numeric_from: int = 1,
        row_classes: list[str] | None = None,
        always: bool = False,
    ) -> None:
        self.cls, self.title, self.headers, self.rows = cls, title, headers, rows
        self.numeric_from, self.row_classes = numeric_from, row_classes
        #: Drawn (headers alone) even without rows; otherwise the section says "None."
        self.always = always


def _tables(doc: Mapping[str, Any]) -> list[_Table]:
    blame = [r for r in doc.get("ranks", []) if isinstance(r, Mapping) and r.get("straggler_steps")]
    out = [
        _Table(
            "blame",
            "Blame (by estimated cost)",
            ["Rank", "Steps", "Total cost"],
            [[_t(r["rank"]), _t(r["straggler_steps"]), _ms(r.get("total_estimated_cost_us"))] for r in blame],
        )
    ]
    findings = [f for f in doc.get("findings", []) if isinstance(f, Mapping)]
    rows = [
        [
            _t(f.get("step")),
            _t(f.get("rank")),
            str(f.get("kind")).replace("_", " "),
            _t(f.get("op")),
            _group(f.get("group")),
            _ms(f.get("lag_us")),
            _ms(f.get("gap_before_us")),
            _ms(f.get("usual_gap_before_us")),
            _ms(f.get("estimated_cost_us")),
        ]
        for f in findings
    ]
    headers = ["Step", "Rank", "Kind", "Op", "Group", "Lag", "Gap before", "Usually", "Cost"]
    out.append(_Table("findings", "Findings", headers, rows, numeric_from=5))
    steps = [s for s in doc.get("steps", []) if isinstance(s, Mapping)]
    rows = [
        [
            _t(s.get("step")),
            _ms(s.get("duration_us")),
            _t(s.get("last_rank")),
            _ms(s.get("lag_us")),
            ", ".join(map(str, s.get("straggler_ranks", []))) or "-",
        ]
        for s in steps
    ]
    headers = ["Step", "Duration", "Last rank", "Its excess", "Stragglers"]
    out.append(_Table("steps", "Steps", headers, rows, always=True))
    comm = [c for c in doc.get("communication", []) if isinstance(c, Mapping)]
    rows = [
        [
            _group(c.get("group")),
            _t(c.get("op")),
            _t(c.get("bucket_bytes")),
            _t(c.get("count")),
            _t(c.get("algorithm") or "-"),
            f"{float(c.get('median_time_us', 0)):.1f}",
            _t(c.get("median_algbw_gbps")),
            _t(c.get("median_busbw_gbps")),
            _t(c.get("flagged_count")),
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
    out.append(_Table("communication", "Communication performance", headers, rows, 2, classes, always=True))
    return out


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
    steps = len(document.get("steps", []))
    summary = (
        f"rank(s) {', '.join(map(str, blamed))} slowed {len({f['step'] for f in findings})} of "
        f"{steps} steps, costing {_ms(sum(float(f.get('estimated_cost_us', 0)) for f in findings))}"
        if findings
        else f"{steps} steps on {_t(document.get('world'))} ranks, all within the job's noise"
    )
    detector = document.get("detector", {}) if isinstance(document.get("detector"), Mapping) else {}
    return render(
        "stragglers.html.j2",
        title=f"commcanary straggler diagnosis - {title}",
        style=stylesheet("base", "stragglers"),
        verdict=verdict,
        heading=title,
        summary=summary,
        card_items=[
            ("Ranks", str(document.get("world"))),
            ("Steps", str(steps)),
            ("Findings", str(len(findings))),
            ("Threshold", _ms(detector.get("threshold_us"))),
            ("Steps from", str(document.get("step_source"))),
        ],
        timeline=_timeline(document, members),
        tables=_tables(document),
        colours={"wait": WAIT_COLOUR, "inside": INSIDE_COLOUR, **MARK_COLOURS},
    )
