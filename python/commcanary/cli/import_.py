"""``commcanary import-kineto``: PyTorch profiler traces as a commcanary trace."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from commcanary.cli import EXIT_USAGE, check_paths, errors_exit, fail
from commcanary.cli._cluster import ClusterAddress, WorkerMemory, Workers, client_for

if TYPE_CHECKING:
    from commcanary.importers.kineto import KinetoImport

__all__ = ["import_kineto_command"]

Profiles = Annotated[
    list[str],
    typer.Argument(
        metavar="TRACE...",
        help="PyTorch profiler traces (plain or .gz), one or more per rank, or directories of them. "
        "One file is a single-rank import; several are merged into one trace with measured cross-rank timing. "
        "With --cluster or --workers, also URLs that fsspec opens (s3://bucket/job/, https://host/job/*.json): "
        "the workers read them.",
    ),
]
Output = Annotated[
    Path,
    typer.Option("--output", "-o", metavar="TRACE", help="Where to write the commcanary.trace.v1 trace."),
]
WorkloadName = Annotated[str, typer.Option("--workload-name", help="workload.name of the imported trace.")]
Phase = Annotated[
    str | None,
    typer.Option(
        "--phase", help="Phase of every event (one file) or of events outside any user annotation (several)."
    ),
]
Rank = Annotated[
    int | None,
    typer.Option("--rank", help="Rank of a single file whose distributedInfo has none."),
]
ClockOffsets = Annotated[
    Path | None,
    typer.Option(
        "--clock-offsets",
        metavar="FILE",
        help="JSON object mapping each rank to microseconds added to its clock, for captures on several hosts.",
    ),
]
Strict = Annotated[
    bool,
    typer.Option("--strict", help="Refuse a job with collectives seen on some member ranks only."),
]
CacheDir = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        metavar="DIR",
        help="Where parsed per-rank profiles are cached by content (default: $COMMCANARY_CACHE_DIR, "
        "else $XDG_CACHE_HOME/commcanary, else ~/.cache/commcanary).",
    ),
]
NoCache = Annotated[
    bool, typer.Option("--no-cache", help="Parse every file; neither read nor fill the cache.")
]
ProcessGroup = Annotated[
    str | None,
    typer.Option(
        "--process-group",
        help="Single file: import only this Process Group Name (an empty name is 'default').",
    ),
]
MaxInputBytes = Annotated[
    int | None,
    typer.Option("--max-input-bytes", help="Single file: raise the input size limit (bytes, >= 1)."),
]
MaxJsonItems = Annotated[
    int | None,
    typer.Option(
        "--max-json-items", help="Single file: raise the JSON item limit (members + elements, >= 1)."
    ),
]


Format = Annotated[
    str,
    typer.Option(
        "--format",
        metavar="FORMAT",
        help="json (the commcanary.trace.v1 trace, default) or parquet (one row per event: the trace's "
        "columns, for Polars, DuckDB and pandas; needs commcanary[arrow]).",
    ),
]


def _read_offsets(path: Path) -> dict[int, float]:
    """``{"rank": us}`` from a JSON file, read by the core (exit 3 on anything else)."""
    from commcanary import _core

    return _core.read_clock_offsets(str(path))


def _echo_partial(imported: KinetoImport) -> None:
    """The line naming the collectives seen on some member ranks only, if any."""
    if imported.partial:
        typer.echo(
            f"partial: {len(imported.partial)} collective(s) seen on some member ranks only, "
            f"not imported; first: {imported.partial[0].text}"
        )


def import_kineto_command(
    ctx: typer.Context,
    traces: Profiles,
    output: Output,
    workload_name: WorkloadName = "kineto-import",
    phase: Phase = None,
    rank: Rank = None,
    clock_offsets: ClockOffsets = None,
    strict: Strict = False,
    cache_dir: CacheDir = None,
    no_cache: NoCache = False,
    process_group: ProcessGroup = None,
    max_input_bytes: MaxInputBytes = None,
    max_json_items: MaxJsonItems = None,
    cluster: ClusterAddress = None,
    workers: Workers = None,
    worker_memory: WorkerMemory = None,
    output_format: Format = "json",
) -> None:
    """Import PyTorch profiler (Kineto) traces of one rank or a whole job as a commcanary.trace.v1 trace."""
    with errors_exit(ctx):
        from commcanary.importers import default_cache_dir, import_kineto, kineto_files

        if output_format not in ("json", "parquet"):
            fail("--format must be json or parquet", EXIT_USAGE)
        if output_format == "parquet":
            from commcanary.arrow import require_arrow

            require_arrow()

        from commcanary.distributed.storage import is_url

        on_cluster = cluster is not None or workers is not None
        urls = [t for t in traces if is_url(t)]
        if urls and not on_cluster:
            fail(
                f"{urls[0]} is a URL: URL inputs are read by Dask workers (add --cluster or --workers)",
                EXIT_USAGE,
            )
        local = [Path(t) for t in traces if not is_url(t)]
        files = kineto_files(local) if local else []
        check_paths(ctx, inputs={"clock_offsets": clock_offsets}, outputs={"output": output})
        for f in files:
            check_paths(ctx, inputs={"traces": f}, outputs={"output": output})
        offsets = _read_offsets(clock_offsets) if clock_offsets is not None else None
        cache = None if no_cache else (cache_dir or default_cache_dir())
        spread = on_cluster and (len(files) > 1 or bool(urls))
        if spread and len(files) + len(urls) > 1:
            # What the single-process import refuses first, refused before a cluster is reached.
            if process_group is not None:
                fail("--process-group applies to a single-file import only", EXIT_USAGE)
            from commcanary import _core

            _core.check_kineto_job_options(
                len(files) + len(urls),
                workload_name=workload_name,
                phase=phase,
                rank=rank,
                clock_offsets=offsets,
                strict=strict,
            )
        with client_for(cluster, workers, worker_memory) as client:
            if client is not None and spread:
                from commcanary.distributed import import_kineto as import_on

                imported = import_on(
                    client,
                    [t if is_url(t) else Path(t) for t in traces],
                    rank=rank,
                    workload_name=workload_name,
                    phase=phase,
                    clock_offsets=offsets,
                    strict=strict,
                    cache_dir=cache,
                )
            else:
                imported = import_kineto(
                    files,
                    rank=rank,
                    workload_name=workload_name,
                    phase=phase,
                    process_group=process_group,
                    clock_offsets=offsets,
                    strict=strict,
                    cache_dir=cache,
                    max_input_bytes=max_input_bytes,
                    max_json_items=max_json_items,
                )
        if output_format == "parquet":
            from commcanary.arrow import trace_table, write_parquet

            write_parquet(trace_table(imported.trace), output)
        else:
            imported.write(output)
        if len(files) == 1:
            typer.echo(
                f"imported {imported.imported} collective events "
                f"(skipped {imported.control} control, {imported.empty} empty): {output}"
            )
            return
        typer.echo(
            f"imported {imported.imported} collective events from {imported.ranks} ranks "
            f"({imported.files} files; skipped {imported.control} control, {imported.empty} empty): {output}"
        )
        _echo_partial(imported)


NcclLogDir = Annotated[
    Path,
    typer.Argument(
        metavar="DIR",
        help="The NCCL profiler plugin's log directory (COMMCANARY_NCCL_DIR of the job): "
        "every process's *.ccnl segments.",
    ),
]


def import_nccl_profiler_command(
    ctx: typer.Context,
    directory: NcclLogDir,
    output: Output,
    workload_name: WorkloadName = "nccl-profiler-import",
    strict: Strict = False,
) -> None:
    """Import the logs of libnccl-profiler-commcanary.so (one directory per job) as a commcanary.trace.v1 trace."""
    with errors_exit(ctx):
        from commcanary.importers.nccl_profiler import import_nccl_profiler

        check_paths(ctx, inputs={"directory": directory}, outputs={"output": output})
        if not directory.is_dir():
            fail(f"{directory}: not a directory (give the plugin's COMMCANARY_NCCL_DIR)")
        imported = import_nccl_profiler(directory, workload_name=workload_name, strict=strict)
        imported.write(output)
        job = imported.job
        typer.echo(
            f"imported {job.imported} collective events from {job.ranks} ranks "
            f"({len(imported.processes)} processes' NCCL profiler logs): {output}"
        )
        lost = [p for p in imported.processes if p.dropped or p.torn or p.orphans]
        for p in lost:
            typer.echo(
                f"rank {p.rank} ({p.label}): {p.dropped} records dropped by full rings, "
                f"{p.torn} in a cut last frame, {p.orphans} stops without their start"
            )
        _echo_partial(job)
