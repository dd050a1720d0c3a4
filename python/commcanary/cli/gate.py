"""``commcanary gate``: the gate's policy.

``gate calibrate RUNS... -o POLICY`` measures the run-to-run noise of
repeated measured runs of one configuration (A/A) and writes a
``commcanary.gate_policy.v1`` policy: thresholds at a multiple of each
statistic's worst drift (never below the floors), the runs each side needs,
the confidence level. It prints, per statistic, the drift, the threshold and
the smallest regression the gate can then detect. ``compare --policy POLICY``
applies it.

``gate run CANARY --policy POLICY --physical ENGINE -o OBS_DIR`` measures
the canary as the policy demands (at least its runs per side, each after its
warm-up), one measured report per run: a policy handed to a lab with a
signed canary is the portable request, and ``compare --policy`` judges two
such directories.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import Command, check_paths, errors_exit

__all__ = ["calibrate_command", "gate_app", "run_command"]

gate_app: typer.Typer = typer.Typer(
    name="gate",
    help="The gate over repeated runs: calibrate a policy on the noise of A/A runs, and measure runs as it demands.",
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


Canary = Annotated[Path, typer.Argument(metavar="CANARY", help="The canary to measure.")]
PolicyArg = Annotated[
    Path,
    typer.Option("--policy", metavar="POLICY", help="The gate policy whose runs per side this measures."),
]
Engine = Annotated[
    str, typer.Option("--physical", metavar="ENGINE", help="The engine: gloo (CPU) or nccl (GPUs).")
]
RunCount = Annotated[
    int | None,
    typer.Option(
        "--runs", metavar="N", help="Runs to measure (default, and at least: the policy's runs per side)."
    ),
]
OutDir = Annotated[
    Path,
    typer.Option(
        "--output", "-o", metavar="OBS_DIR", help="Directory the measured reports are written into."
    ),
]
Nproc = Annotated[
    int | None, typer.Option("--nproc", metavar="N", help="Local processes (default: world size).")
]
Iterations = Annotated[int, typer.Option("--iterations", metavar="N", help="Measured iterations per run.")]
Warmup = Annotated[
    int, typer.Option("--warmup", metavar="N", help="Unmeasured iterations first, in every run.")
]
BytesScale = Annotated[
    float, typer.Option("--bytes-scale", metavar="K", help="Multiply every message's size by K (a what-if).")
]
TimeoutS = Annotated[
    float, typer.Option("--timeout-s", metavar="S", help="End every process after S seconds.")
]


@gate_app.command("run", cls=Command)
def run_command(
    ctx: typer.Context,
    canary: Canary,
    policy: PolicyArg,
    physical: Engine,
    output: OutDir,
    runs: RunCount = None,
    nproc: Nproc = None,
    iterations: Iterations = 1,
    warmup: Warmup = 1,
    bytes_scale: BytesScale = 1.0,
    timeout_s: TimeoutS = 600.0,
) -> None:
    """Measure a canary as a gate policy demands: N runs on real process groups,
    one measured report each in OBS_DIR, for compare --policy."""
    with errors_exit(ctx):
        from commcanary.errors import OptionError
        from commcanary.gate_policy import Policy
        from commcanary.physical import replay_physical

        check_paths(ctx, inputs={"canary": canary, "policy": policy}, outputs={})
        demanded = Policy.read(policy).min_runs
        count = demanded if runs is None else runs
        if count < demanded:
            raise OptionError("runs", f"must be at least the policy's {demanded} runs per side")
        if output.exists() and not output.is_dir():
            raise OptionError("output", f"{output} exists and is not a directory")
        if output.is_dir() and any(output.glob("run-*.json")):
            raise OptionError("output", f"{output} already holds runs; give an empty or new directory")
        output.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            run = replay_physical(
                canary,
                engine=physical,
                nproc=nproc,
                iterations=iterations,
                warmup=warmup,
                bytes_scale=bytes_scale,
                timeout_s=timeout_s,
            )
            path = run.report.write(output / f"run-{i + 1:03d}.json")
            typer.echo(f"run {i + 1}/{count}: {run.report.summary_line()} -> {path}", err=True)
        typer.echo(f"measured {count} runs into {output}; gate them with compare --policy {policy}")
