"""``commcanary gate``: the gate's policy.

``gate calibrate RUNS... -o POLICY`` measures the run-to-run noise of
repeated measured runs of one configuration (A/A) and writes a
``commcanary.gate_policy.v1`` policy: thresholds at a multiple of each
statistic's worst drift (never below the floors), the runs each side needs,
the confidence level. It prints, per statistic, the drift, the threshold and
the smallest regression the gate can then detect. ``compare --policy POLICY``
applies it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import Command, check_paths, errors_exit

__all__ = ["calibrate_command", "gate_app"]

gate_app: typer.Typer = typer.Typer(
    name="gate",
    help="The gate over repeated runs: calibrate a policy on the noise of A/A runs.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

Runs = Annotated[
    list[Path],
    typer.Argument(
        metavar="RUNS...",
        help="Measured reports of repeated runs of one configuration, in the order they were made, or "
        "directories of them.",
    ),
]
Output = Annotated[Path, typer.Option("--output", "-o", metavar="POLICY", help="Where to write the policy.")]
RunsPerSide = Annotated[
    int, typer.Option("--runs-per-side", metavar="N", help="Runs each side of a comparison will have.")
]
Confidence = Annotated[
    float, typer.Option("--confidence", metavar="C", help="Confidence level of each interval.")
]
Multiple = Annotated[
    float,
    typer.Option("--multiple", metavar="X", help="Each threshold is X times the statistic's worst drift."),
]
FloorPct = Annotated[float, typer.Option("--floor-pct", metavar="PCT", help="Lowest percentage threshold.")]
FloorUs = Annotated[
    float, typer.Option("--floor-us", metavar="US", help="Lowest absolute latency threshold.")
]
FloorPoints = Annotated[
    float, typer.Option("--floor-points", metavar="POINTS", help="Lowest hidden-share drop threshold.")
]


def _fmt(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:.2f}{unit}"


@gate_app.command("calibrate", cls=Command)
def calibrate_command(
    ctx: typer.Context,
    runs: Runs,
    output: Output,
    runs_per_side: RunsPerSide = 5,
    confidence: Confidence = 0.95,
    multiple: Multiple = 1.5,
    floor_pct: FloorPct = 1.0,
    floor_us: FloorUs = 1.0,
    floor_points: FloorPoints = 1.0,
) -> None:
    """Calibrate a gate policy on repeated measured runs of one configuration."""
    with errors_exit(ctx):
        from commcanary.cli.compare import _reports
        from commcanary.gate_policy import calibrate_policy
        from commcanary.replay import Report

        paths = _reports(runs)
        for path in paths:
            check_paths(ctx, inputs={"runs": path}, outputs={"output": output})
        reports = [Report.from_file(p, samples=False) for p in paths]
        policy = calibrate_policy(
            reports,
            runs_per_side=runs_per_side,
            confidence=confidence,
            multiple=multiple,
            floor_pct=floor_pct,
            floor_us=floor_us,
            floor_points=floor_points,
        )
        written = policy.write(output)
        t = policy.thresholds
        typer.echo(
            f"calibrated on {len(reports)} runs: fail above median {t.median_threshold_pct:.2f}%, "
            f"p95 {t.p95_threshold_pct:.2f}%, p99 {t.p99_threshold_pct:.2f}%, hidden drop "
            f"{t.hidden_drop_threshold_points:.2f} points; {runs_per_side} runs per side"
        )
        typer.echo(f"{'statistic':36} {'drift':>9} {'threshold':>10} {'detectable':>11}")
        stats = (policy.calibration or {}).get("statistics", [])
        for s in stats[:4]:
            unit = " pt" if s["statistic"].endswith("hidden_pct") else "%"
            threshold = s["threshold_abs"] if unit == " pt" else s["threshold_pct"]
            typer.echo(
                f"{s['statistic']:36} {_fmt(s['drift_pct'], '%'):>9} {_fmt(threshold, unit):>10} "
                f"{_fmt(s['detectable_pct'], '%'):>11}"
            )
        typer.echo(f"wrote gate policy: {output} (sha256 {written.sha256})")
