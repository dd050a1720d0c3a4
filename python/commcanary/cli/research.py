"""The research controls: ``commcanary baseline`` and ``commcanary reduce``."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import check_paths, errors_exit, fail, flag_for

__all__ = ["baseline_command", "reduce_command"]


class BaselineMethod(str, Enum):
    """The baseline methods (spec §7.2)."""

    isolated = "isolated"
    random = "random"
    frequency = "frequency"
    cluster = "cluster"
    stratified = "stratified"


class GapSource(str, Enum):
    """Where a baseline event's gap comes from."""

    reference = "reference"
    observed = "observed"


Trace = Annotated[Path, typer.Argument(metavar="TRACE", help="The workload trace.")]
Output = Annotated[Path, typer.Option("--output", "-o", metavar="OUT", help="Where to write the new trace.")]
Method = Annotated[BaselineMethod, typer.Option("--method", help="Which baseline to build.")]
SampleCount = Annotated[
    int | None, typer.Option("--sample-count", metavar="N", help="random: events sampled (default 8).")
]
ClusterCount = Annotated[
    int | None,
    typer.Option(
        "--cluster-count", metavar="K", help="cluster: representatives per operation shape (default 8)."
    ),
]
Strata = Annotated[
    int | None,
    typer.Option(
        "--strata-per-group", metavar="S", help="stratified: strata per operation shape (default 4)."
    ),
]
Seed = Annotated[
    int | None, typer.Option("--seed", help="random, stratified: seed of Python's random.Random (default 0).")
]
Partial = Annotated[
    bool, typer.Option("--partial", help="random: write only the sampled events, not the trace's length.")
]
Gaps = Annotated[
    GapSource,
    typer.Option(
        "--gaps",
        help=(
            "reference: each event's gap_us, else its compute_before_us (the reference tool's rule); "
            "observed: its real start-to-start gap, a stronger control for timestamped traces."
        ),
    ),
]

#: Which method takes which option.
_ACCEPTS = {
    "sample_count": ("random",),
    "partial": ("random",),
    "cluster_count": ("cluster",),
    "strata_per_group": ("stratified",),
    "seed": ("random", "stratified"),
}
_FLAGS = {
    "sample_count": "--sample-count",
    "partial": "--partial",
    "cluster_count": "--cluster-count",
    "strata_per_group": "--strata-per-group",
    "seed": "--seed",
}


def baseline_command(
    ctx: typer.Context,
    trace: Trace,
    output: Output,
    method: Method,
    sample_count: SampleCount = None,
    cluster_count: ClusterCount = None,
    strata_per_group: Strata = None,
    seed: Seed = None,
    partial: Partial = False,
    gaps: Gaps = GapSource.reference,
) -> None:
    """Write a baseline of TRACE: a stand-in the behaviour gate must refuse."""
    given = {
        "sample_count": sample_count,
        "partial": partial or None,
        "cluster_count": cluster_count,
        "strata_per_group": strata_per_group,
        "seed": seed,
    }
    for name, value in given.items():
        if value is not None and method.value not in _ACCEPTS[name]:
            fail(f"baseline method '{method.value}' does not accept {_FLAGS[name]}")
    for name in ("sample_count", "cluster_count", "strata_per_group"):
        value = given[name]
        if isinstance(value, int) and value < 1:
            fail(f"{_FLAGS[name]} must be at least 1, got {value}")
    with errors_exit(ctx):
        from commcanary.research import baseline

        check_paths(ctx, inputs={"trace": trace}, outputs={"output": output})
        result = baseline(
            trace,
            method.value,
            sample_count=8 if sample_count is None else sample_count,
            partial=partial,
            cluster_count=8 if cluster_count is None else cluster_count,
            strata_per_group=4 if strata_per_group is None else strata_per_group,
            seed=0 if seed is None else seed,
            gaps=gaps.value,
        )
        result.write(str(output))
    typer.echo(f"wrote {method.value} baseline trace with {result.event_count} events: {output}")


TieTolerance = Annotated[
    float,
    typer.Option(
        "--ranking-tie-tolerance-us",
        metavar="US",
        help="Two configurations closer than US microseconds count as tied when ranking them.",
    ),
]
Budget = Annotated[
    int,
    typer.Option(
        "--max-oracle-calls", metavar="N", help="Oracle calls allowed (1-10000; each compiles and replays)."
    ),
]
TimingLimit = Annotated[
    int | None,
    typer.Option(
        "--timing-sample-limit",
        metavar="N",
        help="Compile each subset with this timing limit (default: losslessly, a limit of the subset's size).",
    ),
]
Configurations = Annotated[
    Path | None,
    typer.Option(
        "--configurations",
        metavar="FILE",
        help="JSON list of replay configurations to rank (default: the five built in).",
    ),
]


def reduce_command(
    ctx: typer.Context,
    trace: Trace,
    output: Output,
    ranking_tie_tolerance_us: TieTolerance = 0.001,
    max_oracle_calls: Budget = 256,
    timing_sample_limit: TimingLimit = None,
    configurations: Configurations = None,
) -> None:
    """Reduce TRACE with ddmin to the fewest events that keep every pairwise ranking."""
    from commcanary import _core
    from commcanary.errors import OptionError
    from commcanary.research import reduce

    try:  # the core's rules, before any work; a bad value is exit 3 here, as reduce has always said
        _core.check_reduce_options(ranking_tie_tolerance_us, max_oracle_calls, timing_sample_limit)
    except OptionError as exc:
        given = {
            "max_oracle_calls": max_oracle_calls,
            "timing_sample_limit": timing_sample_limit,
            "ranking_tie_tolerance_us": ranking_tie_tolerance_us,
        }
        fail(f"{flag_for(ctx, exc.option)} {exc.rule}, got {given.get(exc.option)}")
    with errors_exit(ctx):
        check_paths(
            ctx, inputs={"trace": trace, "configurations": configurations}, outputs={"output": output}
        )
        configs = None
        if configurations is not None:
            from commcanary.behavior import load_configurations

            configs = load_configurations(configurations)
        result = reduce(
            trace,
            ranking_tie_tolerance_us=ranking_tie_tolerance_us,
            max_oracle_calls=max_oracle_calls,
            timing_sample_limit=timing_sample_limit,
            configurations=configs,
        )
        result.write(output)
    # Said once the reduction has run, so a refusal is the only line on stderr.
    typer.echo(f"reduction: oracle-call budget {max_oracle_calls}", err=True)
    typer.echo(
        f"ddmin reduced {result.original_events} -> {result.reduced_events} events "
        f"in {result.oracle_calls} oracle calls: {output}"
    )
    if result.budget_exhausted:
        typer.echo("warning: oracle call budget exhausted; result may not be 1-minimal", err=True)
