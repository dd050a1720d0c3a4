"""``commcanary compare``: the CI gate between two reports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from commcanary.cli import EXIT_NEGATIVE, check_paths, errors_exit
from commcanary.cli._output import write_json, write_text
from commcanary.cli.sign import TrustedKeys, check_trusted
from commcanary.compare import Thresholds

__all__ = ["compare_command"]

#: The threshold defaults, from the library.
DEFAULT = Thresholds()


def _pct(flag: str, metric: str) -> Any:
    return typer.Option(
        flag,
        metavar="PCT",
        help=f"The {metric} fails when the candidate is slower by more than PCT percent and by more than "
        "the absolute threshold; it warns above half of both.",
    )


def _abs(flag: str, metric: str) -> Any:
    return typer.Option(
        flag,
        metavar="US",
        help=f"Absolute floor for the {metric}: a slowdown of US microseconds or less never fails.",
    )


Baseline = Annotated[Path, typer.Argument(metavar="BASELINE", help="Baseline report.")]
Candidate = Annotated[Path, typer.Argument(metavar="CANDIDATE", help="Candidate report.")]
Output = Annotated[Path, typer.Option("--output", "-o", metavar="OUT", help="Where to write the comparison.")]
Html = Annotated[
    Path | None, typer.Option("--html", metavar="PAGE", help="Also write the comparison as an HTML page.")
]
P99Pct = Annotated[float, _pct("--p99-threshold-pct", "p99 latency")]
P95Pct = Annotated[float, _pct("--p95-threshold-pct", "p95 latency")]
MedianPct = Annotated[float, _pct("--median-threshold-pct", "median latency")]
P99Abs = Annotated[float, _abs("--p99-absolute-threshold-us", "p99 latency")]
P95Abs = Annotated[float, _abs("--p95-absolute-threshold-us", "p95 latency")]
MedianAbs = Annotated[float, _abs("--median-absolute-threshold-us", "median latency")]
HiddenDrop = Annotated[
    float,
    typer.Option(
        "--hidden-drop-threshold-points",
        metavar="POINTS",
        help="Fail when the share of hidden communication drops by more than POINTS percentage points; "
        "warn above half.",
    ),
]
BreakdownPct = Annotated[
    float | None,
    typer.Option(
        "--breakdown-threshold-pct",
        metavar="PCT",
        help="Percentage threshold for per-phase and per-operation rows (default: the p99 one).",
    ),
]
BreakdownAbs = Annotated[
    float | None,
    typer.Option(
        "--breakdown-absolute-threshold-us",
        metavar="US",
        help="Absolute threshold for per-phase and per-operation rows (default: the p99 one).",
    ),
]
AllowMismatch = Annotated[
    bool,
    typer.Option(
        "--allow-mismatch",
        help="Compare reports of different canaries, models or replay protocols (verdict at least warn).",
    ),
]


def compare_command(
    ctx: typer.Context,
    baseline: Baseline,
    candidate: Candidate,
    output: Output,
    html: Html = None,
    p99_threshold_pct: P99Pct = DEFAULT.p99_threshold_pct,
    p95_threshold_pct: P95Pct = DEFAULT.p95_threshold_pct,
    median_threshold_pct: MedianPct = DEFAULT.median_threshold_pct,
    p99_absolute_threshold_us: P99Abs = DEFAULT.p99_absolute_threshold_us,
    p95_absolute_threshold_us: P95Abs = DEFAULT.p95_absolute_threshold_us,
    median_absolute_threshold_us: MedianAbs = DEFAULT.median_absolute_threshold_us,
    hidden_drop_threshold_points: HiddenDrop = DEFAULT.hidden_drop_threshold_points,
    breakdown_threshold_pct: BreakdownPct = None,
    breakdown_absolute_threshold_us: BreakdownAbs = None,
    allow_mismatch: AllowMismatch = False,
    trusted_keys: TrustedKeys = None,
) -> None:
    """Compare two reports; exit 1 when the verdict is fail."""
    with errors_exit(ctx):
        from commcanary.compare import compare
        from commcanary.replay import Report

        thresholds = Thresholds(
            p99_threshold_pct,
            p95_threshold_pct,
            median_threshold_pct,
            p99_absolute_threshold_us,
            p95_absolute_threshold_us,
            median_absolute_threshold_us,
            hidden_drop_threshold_points,
            breakdown_threshold_pct,
            breakdown_absolute_threshold_us,
        )
        check_paths(
            ctx,
            inputs={"baseline": baseline, "candidate": candidate, "trusted_keys": trusted_keys},
            outputs={"output": output, "html": html},
        )
        check_trusted(
            trusted_keys, {"baseline": baseline, "candidate": candidate}, {"output": output, "html": html}
        )
        want_samples = html is not None
        base = Report.from_file(baseline, samples=want_samples)
        cand = Report.from_file(candidate, samples=want_samples)
        result = compare(base, cand, thresholds, allow_mismatch=allow_mismatch)
        page = None
        if html is not None:
            from commcanary.html import render_comparison

            page = render_comparison(result, base, cand)
        write_json(output, result)
        if html is not None and page is not None:
            write_text(html, page)
        typer.echo(f"comparison verdict: {result['verdict']}")
        for reason in result["reasons"]:
            typer.echo(f"- {reason['message']}")
    if result["verdict"] == "fail":
        raise typer.Exit(EXIT_NEGATIVE)
