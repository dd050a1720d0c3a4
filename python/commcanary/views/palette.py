"""The colours every page shares, defined once: the templates' stylesheets
and the drawings read them from here."""

from __future__ import annotations

__all__ = [
    "BAND_COLOURS",
    "HANG_VERDICT_COLOURS",
    "MARK_COLOURS",
    "NODE_COLOURS",
    "SERIES_COLOURS",
    "VERDICT_COLOURS",
    "palette",
]

#: Background of the verdict banner and badge, by verdict (text is white).
VERDICT_COLOURS = {"pass": "#1e7b45", "warn": "#8f5a00", "fail": "#a32424", "inconclusive": "#4a5a7a"}

#: The threshold band of an interval: within half the threshold, between half and
#: the threshold, beyond it (light tints of the verdict colours).
BAND_COLOURS = {"pass": "#d3ecdc", "warn": "#f6e3bf", "fail": "#f4cccc"}

#: Series colours (bars, markers): a single report, then a comparison's two sides.
SERIES_COLOURS = {
    "report": ("#2e86c1", "#1d2430"),
    "baseline": ("#2e86c1", "#1b4f72"),
    "candidate": ("#e67e22", "#9c4a06"),
}

#: Background of the hang verdict banner: the report palette's fail, pass and warn.
HANG_VERDICT_COLOURS = {
    "hang": VERDICT_COLOURS["fail"],
    "no_hang": VERDICT_COLOURS["pass"],
    "inconclusive": VERDICT_COLOURS["warn"],
}
#: Wait-for graph nodes by rank state.
NODE_COLOURS = {"blocked": "#34495e", "not_blocked": "#1e7b45", "no_evidence": "#9aa3ad"}

#: Straggler marks by finding kind, and a call's waiting and inside time.
MARK_COLOURS = {"late_arrival": "#d62728", "slow_collective": "#ff7f0e"}
WAIT_COLOUR, INSIDE_COLOUR = "#aed6f1", "#2e86c1"


def palette() -> dict[str, object]:
    """What the stylesheet templates read, by name."""
    return {"verdict": VERDICT_COLOURS, "hang_verdict": HANG_VERDICT_COLOURS, "band": BAND_COLOURS}
