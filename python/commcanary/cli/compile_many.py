"""``commcanary compile-many``: many traces into one canary each, here or on a
Dask cluster, with a summary table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary import _core
from commcanary.cli import EXIT_ERROR, EXIT_USAGE, check_paths, describe, errors_exit, fail
from commcanary.cli._cluster import ClusterAddress, WorkerMemory, Workers, client_for
from commcanary.cli._output import fmt, progress
from commcanary.cli.compile import (
    DisableSequenceMotifs,
    LosslessTiming,
    MaxArrivalOffset,
    MaxComputeBefore,
    MaxEvents,
    MaxGap,
    MaxObservedExposed,
    MaxOverlap,
    MaxPrefixGap,
    MaxPressure,
    MaxSkew,
    NoStepLoops,
    TimingSampleLimit,
    given_budgets,
)

__all__ = ["compile_many_command"]

Traces = Annotated[
    list[str],
    typer.Argument(
        metavar="TRACE...",
        help="Trace files (commcanary.trace.v1, plain or .gz). With --cluster or --workers, also URLs that "
        "fsspec opens, globs expanded on their storage (s3://bucket/traces/*.json): the workers read them.",
    ),
]
OutDir = Annotated[
    Path,
    typer.Option(
        "--out-dir",
        "-o",
        metavar="DIR",
        help="Where to write one NAME.canary.json per trace and compile-many.summary.json (created if missing).",
    ),
]


def compile_many_command(
    ctx: typer.Context,
    traces: Traces,
    out_dir: OutDir,
    max_events: MaxEvents = None,
    timing_sample_limit: TimingSampleLimit = _core.DEFAULT_TIMING_SAMPLE_LIMIT,
    max_gap_error_us: MaxGap = None,
    max_skew_error_us: MaxSkew = None,
    max_arrival_offset_error_us: MaxArrivalOffset = None,
    max_compute_before_error_us: MaxComputeBefore = None,
    max_overlap_error_us: MaxOverlap = None,
    max_pressure_error: MaxPressure = None,
    max_observed_exposed_error_us: MaxObservedExposed = None,
    max_prefix_gap_error_us: MaxPrefixGap = None,
    lossless_timing: LosslessTiming = False,
    disable_sequence_motifs: DisableSequenceMotifs = False,
    no_step_loops: NoStepLoops = False,
    cluster: ClusterAddress = None,
    workers: Workers = None,
    worker_memory: WorkerMemory = None,
) -> None:
    """Compile many traces into one canary each (exit 3 when any could not be compiled; the others are written)."""
    budgets = given_budgets(
        max_gap_error_us=max_gap_error_us,
        max_skew_error_us=max_skew_error_us,
        max_arrival_offset_error_us=max_arrival_offset_error_us,
        max_compute_before_error_us=max_compute_before_error_us,
        max_overlap_error_us=max_overlap_error_us,
        max_pressure_error=max_pressure_error,
        max_observed_exposed_error_us=max_observed_exposed_error_us,
        max_prefix_gap_error_us=max_prefix_gap_error_us,
    )
    with errors_exit(ctx):
        from commcanary.compile_many import (
            SUMMARY_NAME,
            canary_name,
            check_traces,
            compile_many,
            traces_named,
        )
        from commcanary.distributed.storage import is_url
        from commcanary.io import check_distinct_paths

        urls = [t for t in traces if is_url(t)]
        if urls and cluster is None and workers is None:
            fail(
                f"{urls[0]} is a URL: URL inputs are read by Dask workers (add --cluster or --workers)",
                EXIT_USAGE,
            )
        for t in traces:
            if not is_url(t):
                check_paths(ctx, inputs={"traces": Path(t)}, outputs={})
        named = traces_named(traces)
        check_traces(named)
        local = [t for t in named if isinstance(t, Path)]
        # A directory that does not exist yet is created; in one that does, no
        # canary and not the summary may overwrite a trace.
        if out_dir.is_dir():
            targets = [out_dir / canary_name(t) for t in named] + [out_dir / SUMMARY_NAME]
            check_distinct_paths(
                [("out_dir", "the --out-dir file", target) for target in targets],
                [(describe(ctx, "traces"), t) for t in local],
            )
        with (
            client_for(cluster, workers, worker_memory) as client,
            progress("compile-many: traces") as update,
        ):
            outcomes = compile_many(
                named,
                out_dir,
                client=client,
                progress=update,
                timing_sample_limit=timing_sample_limit,
                max_events=max_events,
                budgets=budgets,
                lossless_timing=lossless_timing,
                sequence_motifs=not disable_sequence_motifs,
                step_loops=not no_step_loops,
            )
        width = max(len(str(o.trace)) for o in outcomes)
        for o in outcomes:
            if o.ok:
                assert o.summary is not None and o.canary is not None
                s = o.summary
                typer.echo(
                    f"{o.trace!s:<{width}}  {o.canary.name}  {s['source_events']} -> {s['canary_events']} "
                    f"events, {fmt(s['byte_compression_ratio'])}x bytes, {s['fidelity_mode']}"
                )
            else:
                typer.echo(f"{o.trace!s:<{width}}  FAILED: {o.error}")
        failed = [o for o in outcomes if not o.ok]
        typer.echo(
            f"compiled {len(outcomes) - len(failed)} of {len(outcomes)} traces into {out_dir} "
            f"(summary: {out_dir / SUMMARY_NAME})"
        )
        if failed:
            fail(f"{len(failed)} trace(s) could not be compiled; the first: {failed[0].error}", EXIT_ERROR)
