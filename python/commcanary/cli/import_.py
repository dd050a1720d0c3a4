"""``commcanary import-kineto``: a PyTorch profiler trace as a commcanary trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import check_paths, errors_exit

__all__ = ["import_kineto_command"]

Profile = Annotated[
    Path, typer.Argument(metavar="KINETO_JSON", help="One rank's PyTorch profiler trace (plain or .gz).")
]
Output = Annotated[
    Path,
    typer.Option("--output", "-o", metavar="TRACE", help="Where to write the commcanary.trace.v1 trace."),
]
WorkloadName = Annotated[str, typer.Option("--workload-name", help="workload.name of the imported trace.")]
Phase = Annotated[str | None, typer.Option("--phase", help="Phase to give every imported event.")]
ProcessGroup = Annotated[
    str | None,
    typer.Option("--process-group", help="Import only this Process Group Name (an empty name is 'default')."),
]
MaxInputBytes = Annotated[
    int | None,
    typer.Option("--max-input-bytes", help="Raise the input size limit (bytes, >= 1) for this run."),
]
MaxJsonItems = Annotated[
    int | None,
    typer.Option(
        "--max-json-items", help="Raise the JSON item limit (members + elements, >= 1) for this run."
    ),
]


def import_kineto_command(
    ctx: typer.Context,
    kineto_json: Profile,
    output: Output,
    workload_name: WorkloadName = "kineto-import",
    phase: Phase = None,
    process_group: ProcessGroup = None,
    max_input_bytes: MaxInputBytes = None,
    max_json_items: MaxJsonItems = None,
) -> None:
    """Import one rank's PyTorch profiler (Kineto) trace as a commcanary.trace.v1 trace."""
    with errors_exit(ctx):
        from commcanary.importers import import_kineto

        check_paths(ctx, inputs={"kineto_json": kineto_json}, outputs={"output": output})
        imported = import_kineto(
            kineto_json,
            workload_name=workload_name,
            phase=phase,
            process_group=process_group,
            max_input_bytes=max_input_bytes,
            max_json_items=max_json_items,
        )
        imported.write(output)
        typer.echo(
            f"imported {imported.imported} collective events "
            f"(skipped {imported.control} control, {imported.empty} empty): {output}"
        )
