"""``commcanary timeline``: a job's per-rank timeline as Chrome-trace JSON
for Perfetto and ``chrome://tracing``: one process per rank, one track per
process group, flows joining each collective across ranks, step slices, and
marks for stragglers and (given ``--hang``) the hang; from the profiler
traces, or from the Flight Recorder dumps when there are none. Exit 0, or 3
on bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import check_paths, errors_exit
from commcanary.cli._cluster import ClusterAddress, WorkerMemory, Workers, client_for
from commcanary.cli.import_ import CacheDir, NoCache

__all__ = ["timeline_command"]

TimelineInputs = Annotated[
    list[Path],
    typer.Argument(
        metavar="TRACE...",
        help=(
            "Each rank's PyTorch profiler (Kineto) trace, or directories of them (walked recursively), or one"
            " merged commcanary.trace.v1; where there is no profiler trace, each rank's Flight Recorder dump."
        ),
    ),
]
TimelineOutput = Annotated[
    Path,
    typer.Option("--output", "-o", metavar="OUT.json", help="Where to write the Chrome-trace JSON."),
]
HangDocument = Annotated[
    Path | None,
    typer.Option(
        "--hang",
        metavar="HANG.json",
        help="A commcanary.hang.v1 document (from `diagnose hang -o`) whose roots and stuck ranks are marked.",
    ),
]


def timeline_command(
    ctx: typer.Context,
    traces: TimelineInputs,
    output: TimelineOutput,
    hang: HangDocument = None,
    cache_dir: CacheDir = None,
    no_cache: NoCache = False,
    cluster: ClusterAddress = None,
    workers: Workers = None,
    worker_memory: WorkerMemory = None,
) -> None:
    """Write the job's timeline for Perfetto: ranks, groups, collectives, steps, stragglers, the hang."""
    with errors_exit(ctx):
        from commcanary.exporters import timeline
        from commcanary.formats import TIMELINE_FORMAT
        from commcanary.importers import default_cache_dir

        for path in traces:
            check_paths(ctx, inputs={"traces": path, "hang": hang}, outputs={"output": output})
        cache = None if no_cache else (cache_dir or default_cache_dir())
        with client_for(cluster, workers, worker_memory) as client:
            made = timeline(traces, hang=hang, cache_dir=cache, client=client)
        for line in made.lines:
            typer.echo(line)
        made.write(output)
        typer.echo(f"wrote {TIMELINE_FORMAT}: {output}")
