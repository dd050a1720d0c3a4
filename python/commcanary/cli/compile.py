"""``commcanary compile``: a trace into a canary, plainly, through the strict
behaviour gate, or by behaviour search."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from commcanary import _core
from commcanary.cli import EXIT_USAGE, check_paths, errors_exit, fail
from commcanary.cli._output import behavior_lines, fmt, progress
from commcanary.cli.sign import SignKey, check_signing_key, sign_output

if TYPE_CHECKING:
    from commcanary.compiler import Canary
    from commcanary.gate import PartialSourceError

__all__ = ["compile_command", "default_evidence_path", "given_budgets"]


def _budget(flag: str, what: str, unit: str = " us") -> Any:
    return typer.Option(
        flag,
        metavar="MAX",
        help=f"Refuse the canary (nothing written, achieved bound reported) if its {what} error bound "
        f"exceeds MAX{unit}.",
    )


Trace = Annotated[
    Path, typer.Argument(metavar="TRACE", help="Trace file (commcanary.trace.v1, plain or .gz).")
]
Output = Annotated[Path, typer.Option("--output", "-o", metavar="CANARY", help="Where to write the canary.")]
MaxEvents = Annotated[
    int | None,
    typer.Option("--max-events", metavar="N", help="Keep only the first N events after ordering."),
]
TimingSampleLimit = Annotated[
    int,
    typer.Option(
        "--timing-sample-limit",
        metavar="N",
        help="Maximum timing records kept per signature group (at least 2); with --behavior-search, "
        "the largest limit searched.",
    ),
]
MaxGap = Annotated[float | None, _budget("--max-gap-error-us", "gap")]
MaxSkew = Annotated[float | None, _budget("--max-skew-error-us", "arrival-skew")]
MaxArrivalOffset = Annotated[float | None, _budget("--max-arrival-offset-error-us", "arrival-offset")]
MaxComputeBefore = Annotated[float | None, _budget("--max-compute-before-error-us", "compute-before")]
MaxOverlap = Annotated[float | None, _budget("--max-overlap-error-us", "compute-overlap")]
MaxPressure = Annotated[float | None, _budget("--max-pressure-error", "compute-pressure", "")]
MaxObservedExposed = Annotated[
    float | None, _budget("--max-observed-exposed-error-us", "observed-exposed-latency")
]
MaxPrefixGap = Annotated[float | None, _budget("--max-prefix-gap-error-us", "prefix-gap")]
LosslessTiming = Annotated[
    bool,
    typer.Option("--lossless-timing", help="Fail if any bounded approximation would be needed."),
]
DisableSequenceMotifs = Annotated[
    bool, typer.Option("--disable-sequence-motifs", help="Emit flat events only (no sequence motifs).")
]
NoStepLoops = Annotated[
    bool,
    typer.Option(
        "--no-step-loops",
        help="Keep a trace with iterations (a step column) flat instead of encoding it as one step loop.",
    ),
]
RequireBehaviorVerification = Annotated[
    bool,
    typer.Option(
        "--require-behavior-verification",
        help="Fail unless the canary passes source, behavioural and ranking verification.",
    ),
]
ReferenceTrace = Annotated[
    Path | None,
    typer.Option(
        "--reference-trace",
        metavar="ORIGINAL",
        help="With --require-behavior-verification: verify against this original workload "
        "(for a trace that is a subset or reduction of it).",
    ),
]
AllowPartialSource = Annotated[
    bool,
    typer.Option(
        "--allow-partial-source",
        help="With --require-behavior-verification: accept a partial source, verified against "
        "itself, and label the canary partial_source.",
    ),
]
BehaviorSearch = Annotated[
    bool,
    typer.Option(
        "--behavior-search",
        help="Search timing sample limits for the smallest behaviourally verified canary.",
    ),
]
BehaviorSearchMinSampleLimit = Annotated[
    int | None,
    typer.Option(
        "--behavior-search-min-sample-limit",
        metavar="N",
        help="With --behavior-search: the lowest limit searched (at least 2; default 2).",
    ),
]
SearchEvidenceOutput = Annotated[
    Path | None,
    typer.Option(
        "--search-evidence-output",
        metavar="EVIDENCE",
        help="Where to write the search ledger (default: beside the canary, *.search-evidence.json).",
    ),
]


def compile_command(
    ctx: typer.Context,
    trace: Trace,
    output: Output,
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
    require_behavior_verification: RequireBehaviorVerification = False,
    reference_trace: ReferenceTrace = None,
    allow_partial_source: AllowPartialSource = False,
    behavior_search: BehaviorSearch = False,
    behavior_search_min_sample_limit: BehaviorSearchMinSampleLimit = None,
    search_evidence_output: SearchEvidenceOutput = None,
    sign_key: SignKey = None,
) -> None:
    """Compile a trace into a canary."""
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
    options: dict[str, Any] = {
        "timing_sample_limit": timing_sample_limit,
        "max_events": max_events,
        "budgets": budgets,
        "lossless_timing": lossless_timing,
        "sequence_motifs": not disable_sequence_motifs,
        "step_loops": not no_step_loops,
    }
    with errors_exit(ctx):
        _check_flags(
            behavior_search,
            search_evidence_output,
            behavior_search_min_sample_limit,
            require_behavior_verification,
            reference_trace,
            allow_partial_source,
        )
        evidence = None
        if behavior_search:
            evidence = search_evidence_output or default_evidence_path(output)
        inputs = {"trace": trace, "reference_trace": reference_trace, "sign_key": sign_key}
        outputs = {"output": output, "search_evidence_output": evidence}
        check_paths(ctx, inputs=inputs, outputs=outputs)
        check_signing_key(ctx, sign_key, inputs, outputs)
        if evidence is not None:
            min_limit = 2 if behavior_search_min_sample_limit is None else behavior_search_min_sample_limit
            full = require_behavior_verification and not allow_partial_source
            canary = _compile_with_search(trace, output, evidence, min_limit, options, full)
        elif require_behavior_verification:
            canary = _compile_strict(trace, output, reference_trace, allow_partial_source, options)
        else:
            from commcanary.compiler import compile as compile_trace

            canary = compile_trace(str(trace), **options)
            canary.write(output)
        _echo_summary(canary.summary)
        sign_output(sign_key, *(p for p in (output, evidence) if p is not None))


def given_budgets(**budgets: float | None) -> dict[str, float]:
    """The error budgets given on the command line (``--max-*-error*``), by bound name."""
    return {k: v for k, v in budgets.items() if v is not None}


def _check_flags(
    behavior_search: bool,
    search_evidence_output: Path | None,
    min_sample_limit: int | None,
    require_behavior_verification: bool,
    reference_trace: Path | None,
    allow_partial_source: bool,
) -> None:
    """Flags that only make sense together (usage errors)."""
    if not behavior_search and search_evidence_output is not None:
        fail("--search-evidence-output needs --behavior-search", EXIT_USAGE)
    if not behavior_search and min_sample_limit is not None:
        fail("--behavior-search-min-sample-limit needs --behavior-search", EXIT_USAGE)
    if not require_behavior_verification and (reference_trace is not None or allow_partial_source):
        fail("--reference-trace and --allow-partial-source need --require-behavior-verification", EXIT_USAGE)
    if reference_trace is not None and allow_partial_source:
        fail("--reference-trace and --allow-partial-source are alternatives; give one", EXIT_USAGE)
    if behavior_search and reference_trace is not None:
        fail(
            "--reference-trace cannot be combined with --behavior-search: the search verifies against "
            "the input trace",
            EXIT_USAGE,
        )


def _echo_summary(s: dict[str, Any]) -> None:
    typer.echo(
        f"compiled {s['source_events']} trace events into {s['canary_events']} canary events; "
        f"event ratio={fmt(s['event_compression_ratio'])}x, "
        f"byte ratio={fmt(s['byte_compression_ratio'])}x, timing={s['fidelity_mode']}"
    )
    if s["fidelity_mode"] == "bounded_approximate":
        b = s["bounds"]
        typer.echo(
            f"approximation: gap<={fmt(b['max_gap_error_us'])} us, "
            f"skew<={fmt(b['max_skew_error_us'])} us, "
            f"compute-before<={fmt(b['max_compute_before_error_us'])} us, "
            f"pressure<={fmt(b['max_pressure_error'])}, "
            f"prefix-gap<={fmt(b['max_prefix_gap_error_us'])} us"
        )


def default_evidence_path(output: Path) -> Path:
    """``x.canary.json`` -> ``x.canary.search-evidence.json``, beside the canary."""
    name = output.name[:-5] if output.name.endswith(".json") else output.name
    return output.with_name(name + ".search-evidence.json")


def _refuse_partial_source(exc: PartialSourceError) -> NoReturn:
    """The strict gate's refusal of a trace that is itself a subset of a workload, in flags."""
    fail(
        f"--require-behavior-verification refuses {exc.trace}: it is a partial source ({exc.reason}); "
        "pass --reference-trace ORIGINAL to verify against the workload it came from, "
        "or --allow-partial-source to accept it labelled partial_source"
    )


def _compile_with_search(
    trace: Path, output: Path, evidence_path: Path, min_limit: int, options: dict[str, Any], full: bool
) -> Canary:
    from commcanary.behavior import search
    from commcanary.gate import PartialSourceError, check_full_source
    from commcanary.io import write_bytes_atomic

    if full:  # refused before the search is announced; search(require_full_source=True) for the API
        try:
            check_full_source(trace, max_events=options.get("max_events"))
        except PartialSourceError as exc:
            _refuse_partial_source(exc)

    max_limit = options["timing_sample_limit"]
    count = max(0, max_limit - min_limit + 1)
    announce = f"behavior search: evaluating up to {count} uniform candidates plus per-group refinement"
    typer.echo(announce, err=True)
    search_options = {k: v for k, v in options.items() if k != "timing_sample_limit"}
    with progress("behavior search: candidates") as update:
        result = search(
            str(trace), min_limit=min_limit, max_limit=max_limit, progress=update, **search_options
        )
    write_bytes_atomic(evidence_path, result.evidence_bytes)
    try:
        result.canary.write(output)
    except BaseException:
        evidence_path.unlink(missing_ok=True)
        raise
    selected = result.evidence["search"]["selected_candidate"]
    typer.echo(
        f"behavior search: selected timing_sample_limit={selected['timing_sample_limit']} "
        f"({selected['timing_sample_limit_mode']}) from {result.summary['accepted_candidates']} verified of "
        f"{result.summary['candidates']} candidates; evidence: {evidence_path} ({len(result.evidence_bytes)} bytes)",
        err=True,
    )
    canary: Canary = result.canary
    return canary


def _compile_strict(
    trace: Path,
    output: Path,
    reference: Path | None,
    allow_partial: bool,
    options: dict[str, Any],
) -> Canary:
    """The library's strict gate (:func:`commcanary.gate.compile_verified`), its refusals in flags."""
    from commcanary.gate import BehaviorVerificationError, PartialSourceError, compile_verified

    try:
        final = compile_verified(
            str(trace),
            reference_trace=reference,
            allow_partial_source=allow_partial,
            canary_name=f"{output} (compiled canary)",
            **options,
        )
    except PartialSourceError as exc:
        _refuse_partial_source(exc)
    except BehaviorVerificationError as exc:
        for line in behavior_lines(exc.verification):
            typer.echo(line)
        fail(str(exc))
    final.write(output)
    return final
