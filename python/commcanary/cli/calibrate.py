"""``commcanary calibrate``: the model's backend fitted to measured runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import check_paths, errors_exit

__all__ = ["calibrate_command"]

Reports = Annotated[
    list[Path],
    typer.Argument(
        metavar="MEASURED_REPORT...", help="Reports of replay --physical runs (with their samples)."
    ),
]
Canaries = Annotated[
    list[Path],
    typer.Option("--canary", metavar="CANARY", help="The canary each report was measured on (repeatable)."),
]
Output = Annotated[
    Path, typer.Option("--output", "-o", metavar="BACKEND.json", help="Where to write the backend file.")
]
Label = Annotated[str | None, typer.Option("--label", metavar="NAME", help="The calibrated backend's label.")]


def calibrate_command(
    ctx: typer.Context, reports: Reports, canary: Canaries, output: Output, label: Label = None
) -> None:
    """Fit the model's latency floor, bandwidth and host stalls to measured reports; print the error before and after."""
    with errors_exit(ctx):
        from commcanary.calibrate import calibrate
        from commcanary.io import check_distinct_paths

        inputs = [("the input MEASURED_REPORT...", p) for p in reports] + [
            ("the --canary file", p) for p in canary
        ]
        check_distinct_paths([("output", "the --output file", output)], inputs)
        check_paths(ctx, inputs={}, outputs={"output": output})
        result = calibrate(reports, canary, label=label)
        result.write(output)
        for line in result.lines():
            typer.echo(line)
        typer.echo(f"wrote {output}")
