"""``commcanary comm-perf``: NCCL Inspector's per-collective records as the
communication-performance table, against what nccl-tests measured.

The rules live in ``rust/commcanary-core/src/analysis/comm_perf.rs``; this
module checks the paths, prints the lines and writes the document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import check_paths, errors_exit

InspectorPaths = Annotated[
    list[Path],
    typer.Argument(
        metavar="INSPECTOR...",
        help="NCCL Inspector output files (NCCL_INSPECTOR_DUMP_DIR), or directories of them.",
    ),
]
NcclTests = Annotated[
    list[Path] | None,
    typer.Option(
        "--nccl-tests",
        metavar="RUN.json",
        help="nccl-tests JSON output (all_reduce_perf ... -J RUN.json) from the same nodes: each row of the "
        "same op and rank count is compared with its bus bandwidth at that size. Repeatable.",
    ),
]
Output = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", metavar="OUT.json", help="Where to write the commcanary.comm_perf.v1 document."
    ),
]


def comm_perf_command(
    ctx: typer.Context,
    inspector: InspectorPaths,
    nccl_tests: NcclTests = None,
    output: Output = None,
) -> None:
    """Communication performance per (communicator, op, size) from NCCL Inspector, against nccl-tests."""
    with errors_exit(ctx):
        from commcanary import _core
        from commcanary.io import write_bytes_atomic

        runs = list(nccl_tests or [])
        outputs = {"output": output}
        for p in inspector:
            check_paths(ctx, inputs={"inspector": p}, outputs=outputs)
        for p in runs:
            check_paths(ctx, inputs={"nccl_tests": p}, outputs=outputs)
        document, lines = _core.comm_perf([str(p) for p in inspector], nccl_tests=[str(p) for p in runs])
        for line in lines:
            typer.echo(line)
        if output is not None:
            write_bytes_atomic(output, document)
            typer.echo(f"wrote {output}")
