"""The verifiers: ``verify-report``, ``verify-fidelity`` and ``verify-behavior``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.behavior import Tolerances
from commcanary.cli import EXIT_NEGATIVE, check_paths, errors_exit
from commcanary.cli._output import behavior_lines, echo_checks, write_json
from commcanary.cli.sign import TrustedKeys, check_trusted

__all__ = ["verify_behavior_command", "verify_fidelity_command", "verify_report_command"]

#: The tolerance defaults, from the library.
DEFAULT = Tolerances()

Report = Annotated[Path, typer.Argument(metavar="REPORT", help="Report to verify.")]
ReportCanary = Annotated[
    Path, typer.Argument(metavar="CANARY", help="The canary the report claims to describe.")
]
Trace = Annotated[Path, typer.Argument(metavar="TRACE", help="The source trace.")]
SourceCanary = Annotated[Path, typer.Argument(metavar="CANARY", help="The canary compiled from it.")]
Output = Annotated[
    Path, typer.Option("--output", "-o", metavar="OUT", help="Where to write the verification.")
]
RelativeTolerance = Annotated[
    float,
    typer.Option(
        "--relative-tolerance-pct",
        metavar="PCT",
        help="A latency agrees when within PCT percent of the trace's (or within the absolute tolerance).",
    ),
]
AbsoluteTolerance = Annotated[
    float,
    typer.Option(
        "--absolute-tolerance-us",
        metavar="US",
        help="A latency agrees when within US microseconds of the trace's (or within the relative tolerance).",
    ),
]
HiddenTolerance = Annotated[
    float,
    typer.Option(
        "--hidden-tolerance-points",
        metavar="POINTS",
        help="The hidden-communication share agrees when within POINTS percentage points.",
    ),
]
TailRecall = Annotated[
    float,
    typer.Option(
        "--tail-recall-threshold",
        metavar="R",
        help="Least share (between 0 and 1) of the trace's slowest events the canary's tail must recall.",
    ),
]
RankingTie = Annotated[
    float,
    typer.Option(
        "--ranking-tie-tolerance-us",
        metavar="US",
        help="Two configurations closer than US microseconds count as tied when ranking them.",
    ),
]
Configurations = Annotated[
    Path | None,
    typer.Option(
        "--configurations",
        metavar="FILE",
        help="JSON list of replay configurations (default: the five built in).",
    ),
]


def verify_report_command(
    ctx: typer.Context, report: Report, canary: ReportCanary, output: Output, trusted_keys: TrustedKeys = None
) -> None:
    """Recompute a report from its canary; exit 1 when anything differs."""
    with errors_exit(ctx):
        from commcanary.verify import verify_report

        check_paths(
            ctx,
            inputs={"report": report, "canary": canary, "trusted_keys": trusted_keys},
            outputs={"output": output},
        )
        check_trusted(trusted_keys, {"report": report, "canary": canary}, {"output": output})
        result = verify_report(report, canary)
        write_json(output, result)
        echo_checks("report verification", result)
        if "note" in result:
            typer.echo(f"- note: {result['note']}")
    if result["status"] not in ("model_recomputed", "measured_reconciled"):
        raise typer.Exit(EXIT_NEGATIVE)


def verify_fidelity_command(
    ctx: typer.Context, trace: Trace, canary: SourceCanary, output: Output, trusted_keys: TrustedKeys = None
) -> None:
    """Recompute every commitment and error bound of a canary from its trace; exit 1 on any mismatch."""
    with errors_exit(ctx):
        from commcanary.behavior import verify_fidelity_files

        check_paths(
            ctx,
            inputs={"trace": trace, "canary": canary, "trusted_keys": trusted_keys},
            outputs={"output": output},
        )
        check_trusted(trusted_keys, {"canary": canary}, {"output": output})
        result = verify_fidelity_files(trace, canary)
        write_json(output, result)
        echo_checks("fidelity verification", result)
    if result["status"] != "source_verified":
        raise typer.Exit(EXIT_NEGATIVE)


def verify_behavior_command(
    ctx: typer.Context,
    trace: Trace,
    canary: Annotated[Path, typer.Argument(metavar="CANARY", help="The canary to check against it.")],
    output: Output,
    relative_tolerance_pct: RelativeTolerance = DEFAULT.relative_tolerance_pct,
    absolute_tolerance_us: AbsoluteTolerance = DEFAULT.absolute_tolerance_us,
    hidden_tolerance_points: HiddenTolerance = DEFAULT.hidden_tolerance_points,
    tail_recall_threshold: TailRecall = DEFAULT.tail_recall_threshold,
    ranking_tie_tolerance_us: RankingTie = DEFAULT.ranking_tie_tolerance_us,
    configurations: Configurations = None,
    trusted_keys: TrustedKeys = None,
) -> None:
    """Check that a canary makes the model behave like its whole source trace; exit 1 unless verified."""
    with errors_exit(ctx):
        from commcanary.behavior import load_configurations, verify_behavior

        tolerances = Tolerances(
            relative_tolerance_pct,
            absolute_tolerance_us,
            hidden_tolerance_points,
            tail_recall_threshold,
            ranking_tie_tolerance_us,
        )
        tolerances.validate()
        check_paths(
            ctx,
            inputs={
                "trace": trace,
                "canary": canary,
                "configurations": configurations,
                "trusted_keys": trusted_keys,
            },
            outputs={"output": output},
        )
        check_trusted(trusted_keys, {"canary": canary}, {"output": output})
        configs = load_configurations(configurations) if configurations is not None else None
        result = verify_behavior(trace, canary, configurations=configs, tolerances=tolerances)
        write_json(output, result)
        for line in behavior_lines(result):
            typer.echo(line)
    if result["status"] != "behaviorally_verified":
        raise typer.Exit(EXIT_NEGATIVE)
