"""The gate history chart: each comparison of a branch, oldest first, its
p99 latency change against the baseline, coloured by verdict, with the
threshold and the first failing commit marked. Inline SVG (no scripts); a
person reads the table beside it for exact values."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup, escape

__all__ = ["chart", "first_failing"]

_W, _H = 900.0, 320.0
_LEFT, _RIGHT, _TOP, _BOTTOM = 60.0, 20.0, 20.0, 60.0


def first_failing(points: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The comparison the branch started failing at: the first of the
    trailing run of ``fail`` verdicts, or (when the branch passes now) the
    first ``fail`` there was; ``None`` without a failure."""
    run_start: Mapping[str, Any] | None = None
    for p in points:
        failing = p["verdict"] == "fail"
        run_start = (run_start or p) if failing else None
    if run_start is not None:
        return run_start
    return next((p for p in points if p["verdict"] == "fail"), None)


def _num(text: Any) -> float | None:
    try:
        x = float(text)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def chart(points: Sequence[Mapping[str, Any]], first: Mapping[str, Any] | None) -> Markup:
    if not points:
        return Markup('<p class="note" id="no-comparisons">No comparison pushed on this branch yet.</p>')
    values = [_num(p["p99"]) for p in points]
    thresholds = [t for t in (_num(p["threshold"]) for p in points) if t is not None]
    known = [v for v in values if v is not None] + thresholds + [0.0]
    lo, hi = min(known), max(known)
    if hi - lo < 1e-9:
        lo, hi = lo - 1.0, hi + 1.0
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(i: int) -> float:
        return _LEFT + (plot_w * (i + 0.5) / len(points))

    def y(v: float) -> float:
        return _TOP + plot_h * (hi - v) / (hi - lo)

    parts = [
        f'<svg class="gate" id="gate-chart" viewBox="0 0 {_W:.0f} {_H:.0f}" role="img" aria-label="gate history">'
    ]
    parts.append(f'<line class="axis" x1="{_LEFT}" y1="{y(0.0):.1f}" x2="{_W - _RIGHT}" y2="{y(0.0):.1f}"/>')
    parts.append(f'<line class="axis" x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_H - _BOTTOM}"/>')
    for t in sorted(set(thresholds)):
        parts.append(
            f'<line class="threshold" x1="{_LEFT}" y1="{y(t):.1f}" x2="{_W - _RIGHT}" y2="{y(t):.1f}"/>'
            f'<text x="{_W - _RIGHT - 4}" y="{y(t) - 4:.1f}" text-anchor="end">threshold {escape(_fmt(t))}%</text>'
        )
    for tick in (lo + pad, (lo + hi) / 2, hi - pad):
        parts.append(
            f'<text x="{_LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{escape(_fmt(tick))}</text>'
        )
    drawn = [(x(i), y(v)) for i, v in enumerate(values) if v is not None]
    if len(drawn) > 1:
        parts.append('<polyline points="' + " ".join(f"{a:.1f},{b:.1f}" for a, b in drawn) + '"/>')
    if first is not None:
        fx = x(int(first["index"]))
        parts.append(
            f'<line class="first-fail" id="first-fail" x1="{fx:.1f}" y1="{_TOP}" x2="{fx:.1f}" y2="{_H - _BOTTOM}"/>'
            f'<text x="{fx + 4:.1f}" y="{_TOP + 12}">failing since {escape(str(first["commit"])[:12])}</text>'
        )
    step = max(1, len(points) // 12)
    for i, (p, v) in enumerate(zip(points, values, strict=True)):
        cy = y(v) if v is not None else y(0.0)
        parts.append(
            f'<circle class="{escape(p["verdict_class"])}" data-index="{i}" data-verdict="{escape(p["verdict"])}"'
            f' cx="{x(i):.1f}" cy="{cy:.1f}" r="5"><title>{escape(str(p["commit"]))}: {escape(p["verdict"])}'
            f"{'' if v is None else ', p99 ' + _fmt(v) + '%'}</title></circle>"
        )
        if i % step == 0:
            parts.append(
                f'<text x="{x(i):.1f}" y="{_H - _BOTTOM + 18}" text-anchor="middle">{escape(str(p["commit"])[:8])}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def _fmt(v: float) -> str:
    return f"{v:.1f}" if abs(v) < 1000 else f"{v:.0f}"
