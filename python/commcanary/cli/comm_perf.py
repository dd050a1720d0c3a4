"""``commcanary comm-perf``: NCCL Inspector's per-collective records as the
communication-performance table, against what nccl-tests measured.

The rules live in ``rust/commcanary-core/src/analysis/comm_perf.rs``; this
module checks the paths, prints the lines and writes the document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import EXIT_USAGE, check_paths, errors_exit, fail

InspectorPaths = Annotated[
    list[Path] | None,
    typer.Argument(
        metavar="INSPECTOR...",
        help="NCCL Inspector output files (NCCL_INSPECTOR_DUMP_DIR), or directories of them.",
    ),
]
Traces = Annotated[
    list[Path] | None,
    typer.Option(
        "--trace",
        metavar="TRACE",
        help="Instead of Inspector files: a job's traces (each rank's Kineto trace, or one merged trace such as "
        "import-nccl-profiler writes), files or directories. Repeatable.",
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
    inspector: InspectorPaths = None,
    trace: Traces = None,
    nccl_tests: NcclTests = None,
    output: Output = None,
) -> None:
    """Communication performance per (communicator, op, size) from NCCL Inspector or a job's traces, against nccl-tests."""
    with errors_exit(ctx):
        from commcanary import _core
        from commcanary.io import write_bytes_atomic

        runs = list(nccl_tests or [])
        given, traces = list(inspector or []), list(trace or [])
        if not given and not traces:
            fail("give NCCL Inspector files (INSPECTOR...) or a job's traces (--trace)", EXIT_USAGE)
        outputs = {"output": output}
        for p in given:
            check_paths(ctx, inputs={"inspector": p}, outputs=outputs)
        for p in traces:
            check_paths(ctx, inputs={"trace": p}, outputs=outputs)
        for p in runs:
            check_paths(ctx, inputs={"nccl_tests": p}, outputs=outputs)
        document, lines = _core.comm_perf(
            [str(p) for p in given], traces=[str(p) for p in traces], nccl_tests=[str(p) for p in runs]
        )
        for line in lines:
            typer.echo(line)
        if output is not None:
            write_bytes_atomic(output, document)
            typer.echo(f"wrote {output}")
