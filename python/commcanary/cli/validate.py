"""``commcanary validate-model``: the model's ranking of configurations
against real collectives'."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import EXIT_CHILD, check_paths, errors_exit, fail
from commcanary.cli._output import progress

__all__ = ["validate_model_command"]

Canary = Annotated[Path, typer.Argument(metavar="CANARY", help="The canary to run under each configuration.")]
Configurations = Annotated[
    Path,
    typer.Option(
        "--configurations",
        metavar="FILE",
        help="JSON list of configurations (name, bytes_scale, compute_fill_scale, compute_fill, concurrent_groups on or off): what-ifs a physical run realises.",
    ),
]
Physical = Annotated[str, typer.Option("--physical", metavar="ENGINE", help="gloo (CPU) or nccl (GPUs).")]
Runs = Annotated[
    int, typer.Option("--runs", metavar="N", help="Physical runs per configuration (at least 2).")
]
Iterations = Annotated[int, typer.Option("--iterations", metavar="N", help="Iterations of each run.")]
Warmup = Annotated[int, typer.Option("--warmup", metavar="N", help="Unmeasured iterations before each run.")]
BackendFile = Annotated[
    Path | None,
    typer.Option(
        "--backend-file", metavar="BACKEND.json", help="The model's backend (default: the built-in one)."
    ),
]
Output = Annotated[
    Path | None,
    typer.Option("--output", "-o", metavar="OUT.json", help="Where to write the validation document."),
]


def validate_model_command(
    ctx: typer.Context,
    canary: Canary,
    configurations: Configurations,
    physical: Physical = "gloo",
    runs: Runs = 3,
    iterations: Iterations = 1,
    warmup: Warmup = 1,
    backend_file: BackendFile = None,
    output: Output = None,
) -> None:
    """Rank configurations in the model and on real collectives; report how often they agree."""
    with errors_exit(ctx):
        from commcanary.physical import ChildFailed
        from commcanary.validate import load_physical_configurations, validate_model

        check_paths(
            ctx,
            inputs={"canary": canary, "configurations": configurations, "backend_file": backend_file},
            outputs={"output": output},
        )
        configs = load_physical_configurations(configurations)
        backend = None
        if backend_file is not None:
            from commcanary.calibrate import read_backend_file

            backend = read_backend_file(backend_file)
        try:
            with progress(f"validate-model: {physical} runs") as update:
                result = validate_model(
                    canary,
                    configs,
                    engine=physical,
                    backend=backend,
                    runs=runs,
                    iterations=iterations,
                    warmup=warmup,
                    progress=update,
                )
        except ChildFailed as exc:
            fail(str(exc), EXIT_CHILD)
        if output is not None:
            result.write(output)
    for line in result.lines():
        typer.echo(line)
    if output is not None:
        typer.echo(f"wrote {output}")
