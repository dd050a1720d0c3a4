"""``commcanary diagnose``: diagnoses of a job's evidence.

``diagnose stragglers`` reads each rank's profiler trace and says which rank
slowed which steps, whether it arrived late or was slow inside the
collective, and what each cost (a what-if replay of the step). The
``commcanary.stragglers.v1`` document goes to ``-o``. Exit 1 when
stragglers are found, 0 when none are, 3 on bad input.

``diagnose hang`` reads any mix of Flight Recorder dumps, profiler traces,
stack dumps and exception texts (files or directories) and prints the few
lines a person needs at 3 a.m.: the verdict and the root, the wait-for
chain, where the root is. The ``commcanary.hang.v1`` document goes to
``-o``, the HTML view to ``--html``. Exit 1 when a hang is found, 0 when
none is (or the evidence is inconclusive: the first line says so), 3 on bad
evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Protocol

import typer

from commcanary.cli import EXIT_NEGATIVE, EXIT_USAGE, Command, check_paths, errors_exit, fail
from commcanary.cli._cluster import ClusterAddress, WorkerMemory, Workers, client_for
from commcanary.cli._output import write_text
from commcanary.cli.import_ import CacheDir, NoCache

__all__ = ["diagnose_app", "hang_command", "stragglers_command"]

diagnose_app: typer.Typer = typer.Typer(
    name="diagnose",
    help="Diagnose a job from its evidence: who hung, and where; who is slow, and what it costs.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

Evidence = Annotated[
    list[Path],
    typer.Argument(
        metavar="EVIDENCE...",
        help="Flight Recorder dumps (pickle or JSON), profiler traces (windowed or not), stack dumps and "
        "exception texts, or directories of them (walked recursively; other files are skipped).",
    ),
]
Output = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", metavar="OUT.json", help="Where to write the commcanary.hang.v1 document."
    ),
]
Html = Annotated[
    Path | None,
    typer.Option("--html", metavar="OUT.html", help="Where to write the self-contained HTML view."),
]


class _Diagnosis(Protocol):
    @property
    def lines(self) -> tuple[str, ...]: ...
    @property
    def document(self) -> dict[str, Any]: ...
    def write(self, path: Path) -> Path: ...


def print_and_write(report: _Diagnosis, output: Path | None) -> None:
    """The lines a person reads, then the document to ``output`` (if given)."""
    for line in report.lines:
        typer.echo(line)
    if output is not None:
        report.write(output)
        typer.echo(f"wrote {report.document['format']}: {output}")


@diagnose_app.command("hang", cls=Command)
def hang_command(
    ctx: typer.Context,
    evidence: Evidence,
    output: Output = None,
    html: Html = None,
    cache_dir: CacheDir = None,
    no_cache: NoCache = False,
    cluster: ClusterAddress = None,
    workers: Workers = None,
    worker_memory: WorkerMemory = None,
) -> None:
    """Who hung, and where: partial collectives, mismatches, the wait-for graph and its root."""
    with errors_exit(ctx):
        from commcanary.analysis import diagnose_hang
        from commcanary.importers import default_cache_dir

        for path in evidence:
            check_paths(ctx, inputs={"evidence": path}, outputs={"output": output, "html": html})
        cache = None if no_cache else (cache_dir or default_cache_dir())
        with client_for(cluster, workers, worker_memory) as client:
            report = diagnose_hang(evidence, cache_dir=cache, client=client)
        page = report.render_html() if html is not None else None
        print_and_write(report, output)
        if html is not None and page is not None:
            write_text(html, page)
            typer.echo(f"wrote HTML view: {html}")
    if report.hung:
        raise typer.Exit(EXIT_NEGATIVE)


Traces = Annotated[
    list[Path],
    typer.Argument(
        metavar="TRACE...",
        help=(
            "Each rank's PyTorch profiler (Kineto) trace, or directories of them (walked recursively),"
            " or one merged commcanary.trace.v1 (from import-kineto of several ranks, or capture)."
        ),
    ),
]
StragglersOutput = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", metavar="OUT.json", help="Where to write the commcanary.stragglers.v1 document."
    ),
]


def run_on_traces(
    ctx: typer.Context,
    analyse: Any,
    traces: list[Path],
    outputs: dict[str, Path | None],
    cache_dir: Path | None,
    no_cache: bool,
    cluster: tuple[str | None, int | None, str | None] = (None, None, None),
    write: bool = True,
) -> Any:
    """Checks the paths, runs ``analyse(traces, cache_dir=..., client=...)``
    (inside the caller's error boundary; on Dask when ``cluster``, the
    ``--cluster``, ``--workers`` and ``--worker-memory`` values, asks),
    prints its lines and writes ``-o`` (unless ``write`` is false)."""
    from commcanary.importers import default_cache_dir

    for path in traces:
        check_paths(ctx, inputs={"traces": path}, outputs=outputs)
    cache = None if no_cache else (cache_dir or default_cache_dir())
    with client_for(*cluster) as client:
        report = analyse(traces, cache_dir=cache, client=client)
    print_and_write(report, outputs["output"] if write else None)
    return report


StragglersFormat = Annotated[
    str,
    typer.Option(
        "--format",
        metavar="FORMAT",
        help="What -o holds: json (the commcanary.stragglers.v1 document, default) or parquet (the "
        "per-instance member table, one row per rank of every collective; needs commcanary[arrow]).",
    ),
]


@diagnose_app.command("stragglers", cls=Command)
def stragglers_command(
    ctx: typer.Context,
    traces: Traces,
    output: StragglersOutput = None,
    html: Html = None,
    cache_dir: CacheDir = None,
    no_cache: NoCache = False,
    cluster: ClusterAddress = None,
    workers: Workers = None,
    worker_memory: WorkerMemory = None,
    output_format: StragglersFormat = "json",
) -> None:
    """Who is slow, and what it costs: late arrivals and slow collectives per step, ranked by cost."""
    with errors_exit(ctx):
        from commcanary.analysis import diagnose_stragglers

        if output_format not in ("json", "parquet"):
            fail("--format must be json or parquet", EXIT_USAGE)
        parquet = output_format == "parquet"
        if parquet:
            from commcanary.arrow import require_arrow

            require_arrow()
        outputs = {"output": output, "html": html}
        on = (cluster, workers, worker_memory)
        report = run_on_traces(
            ctx, diagnose_stragglers, traces, outputs, cache_dir, no_cache, on, write=not parquet
        )
        if parquet and output is not None:
            from commcanary.arrow import straggler_table, write_parquet

            table = straggler_table(report, "members")
            write_parquet(table, output)
            typer.echo(f"wrote the member table ({table.num_rows} rows, Parquet): {output}")
        if html is not None:
            write_text(html, report.render_html())
            typer.echo(f"wrote HTML view: {html}")
    if report.found:
        raise typer.Exit(EXIT_NEGATIVE)
