"""``commcanary steps``: iteration boundaries recovered from the collective
sequence alone (no ``ProfilerStep`` markers needed), and their agreement
with the markers when the traces have some. The ``commcanary.steps.v1``
document goes to ``-o``. Exit 0 when steps were recovered, 3 on bad input
(no trace, no collective, no repeating pattern).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import errors_exit
from commcanary.cli._cluster import ClusterAddress, WorkerMemory, Workers
from commcanary.cli.diagnose import Traces, run_on_traces
from commcanary.cli.import_ import CacheDir, NoCache

__all__ = ["steps_command"]

StepsOutput = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", metavar="OUT.json", help="Where to write the commcanary.steps.v1 document."
    ),
]


def steps_command(
    ctx: typer.Context,
    traces: Traces,
    output: StepsOutput = None,
    cache_dir: CacheDir = None,
    no_cache: NoCache = False,
    cluster: ClusterAddress = None,
    workers: Workers = None,
    worker_memory: WorkerMemory = None,
) -> None:
    """Recover iteration boundaries from the collective sequence; compare with ProfilerStep markers."""
    with errors_exit(ctx):
        from commcanary.analysis import recover_steps

        on = (cluster, workers, worker_memory)
        run_on_traces(ctx, recover_steps, traces, {"output": output}, cache_dir, no_cache, on)
