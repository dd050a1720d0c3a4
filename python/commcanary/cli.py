"""The ``commcanary`` command line.

Conventions: human lines on stdout, diagnostics on stderr, artifacts only where
``-o/--output`` says. Exit status 0 success (also ``pass``/``warn``), 1 a valid
negative result, 2 usage errors, 3 any input, validation, budget or I/O error
(one line ``commcanary: <message>`` on stderr, no output written), 4 a captured
child failed, 130 interrupted.

Heavy modules are imported inside commands so ``commcanary --help`` stays fast.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2
EXIT_ERROR = 3
EXIT_CHILD = 4
EXIT_INTERRUPTED = 130

app = typer.Typer(
    name="commcanary",
    help="Compile collective-communication traces into small, verifiable canaries.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def fail(message: str) -> NoReturn:
    """Print ``commcanary: message`` on stderr and exit with status 3."""
    typer.echo(f"commcanary: {message}", err=True)
    raise typer.Exit(EXIT_ERROR)


@contextmanager
def errors_exit() -> Iterator[None]:
    """Turn package errors into the one-line, exit-3 contract."""
    from commcanary.errors import CommCanaryError

    try:
        yield
    except CommCanaryError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        typer.echo("commcanary: interrupted", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except MemoryError:
        fail("out of memory")


def version_text() -> str:
    """The multi-line capability block printed by ``--version``."""
    from commcanary import __version__, formats

    lines = [
        f"commcanary {__version__}",
        f"canonicalization: {formats.CANONICAL_JSON}",
        f"replay-model: {formats.REPLAY_MODEL}",
        "formats:",
    ]
    lines += [f"  {name}: {value}" for name, value in formats.FORMATS.items()]
    return "\n".join(lines)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Show versions and formats, then exit.",
            callback=_version_callback,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Compile collective-communication traces into small, verifiable canaries."""


def _fmt(x: float) -> str:
    return repr(float(x))


@app.command("compile")
def compile_command(
    trace: Annotated[Path, typer.Argument(help="Trace file (commcanary.trace.v1, plain or .gz).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the canary.")],
    max_events: Annotated[
        int | None, typer.Option("--max-events", help="Keep only the first N events after ordering.")
    ] = None,
    timing_sample_limit: Annotated[
        int, typer.Option("--timing-sample-limit", help="Maximum timing records per signature group (>= 2).")
    ] = 128,
    max_gap_error_us: Annotated[float | None, typer.Option("--max-gap-error-us")] = None,
    max_skew_error_us: Annotated[float | None, typer.Option("--max-skew-error-us")] = None,
    max_arrival_offset_error_us: Annotated[
        float | None, typer.Option("--max-arrival-offset-error-us")
    ] = None,
    max_compute_before_error_us: Annotated[
        float | None, typer.Option("--max-compute-before-error-us")
    ] = None,
    max_overlap_error_us: Annotated[float | None, typer.Option("--max-overlap-error-us")] = None,
    max_pressure_error: Annotated[float | None, typer.Option("--max-pressure-error")] = None,
    max_observed_exposed_error_us: Annotated[
        float | None, typer.Option("--max-observed-exposed-error-us")
    ] = None,
    max_prefix_gap_error_us: Annotated[float | None, typer.Option("--max-prefix-gap-error-us")] = None,
    lossless_timing: Annotated[
        bool, typer.Option("--lossless-timing", help="Fail if any bounded approximation would be needed.")
    ] = False,
    disable_sequence_motifs: Annotated[
        bool, typer.Option("--disable-sequence-motifs", help="Emit flat events only.")
    ] = False,
    require_behavior_verification: Annotated[
        bool,
        typer.Option(
            "--require-behavior-verification",
            help="Fail unless the canary passes source, behavioural and ranking verification.",
        ),
    ] = False,
    reference_trace: Annotated[
        Path | None,
        typer.Option(
            "--reference-trace",
            help="With --require-behavior-verification: verify against this original workload "
            "(for a trace that is a subset or reduction of it).",
        ),
    ] = None,
    allow_partial_source: Annotated[
        bool,
        typer.Option(
            "--allow-partial-source",
            help="With --require-behavior-verification: accept a partial source, verified against "
            "itself, and label the canary partial_source.",
        ),
    ] = False,
    behavior_search: Annotated[
        bool,
        typer.Option(
            "--behavior-search",
            help="Search timing sample limits for the smallest behaviourally verified canary.",
        ),
    ] = False,
    behavior_search_min_sample_limit: Annotated[
        int, typer.Option("--behavior-search-min-sample-limit", help="Lowest limit searched (>= 2).")
    ] = 2,
    search_evidence_output: Annotated[
        Path | None,
        typer.Option(
            "--search-evidence-output",
            help="Where to write the search ledger (default: beside the canary, *.search-evidence.json).",
        ),
    ] = None,
) -> None:
    """Compile a trace into a canary."""
    budgets = {
        "max_gap_error_us": max_gap_error_us,
        "max_skew_error_us": max_skew_error_us,
        "max_arrival_offset_error_us": max_arrival_offset_error_us,
        "max_compute_before_error_us": max_compute_before_error_us,
        "max_overlap_error_us": max_overlap_error_us,
        "max_pressure_error": max_pressure_error,
        "max_observed_exposed_error_us": max_observed_exposed_error_us,
        "max_prefix_gap_error_us": max_prefix_gap_error_us,
    }
    with errors_exit():
        if timing_sample_limit < 2:
            fail("timing_sample_limit must be at least 2")
        if max_events is not None and max_events < 0:
            fail("max_events must be non-negative")
        for name, value in budgets.items():
            if value is not None and not value >= 0:
                fail(f"{name} must be non-negative")
        from commcanary.compiler import compile as compile_trace
        from commcanary.io import check_output_path

        if behavior_search_min_sample_limit < 2:
            fail("behavior_search_min_sample_limit must be at least 2")
        if not behavior_search and search_evidence_output is not None:
            fail("--search-evidence-output needs --behavior-search")
        if not require_behavior_verification and (reference_trace is not None or allow_partial_source):
            fail("--reference-trace and --allow-partial-source need --require-behavior-verification")
        if reference_trace is not None and allow_partial_source:
            fail("--reference-trace and --allow-partial-source are alternatives; give one")
        check_output_path(output)
        options: dict[str, Any] = {
            "max_events": max_events,
            "budgets": {k: v for k, v in budgets.items() if v is not None},
            "lossless_timing": lossless_timing,
            "sequence_motifs": not disable_sequence_motifs,
        }
        if behavior_search:
            if reference_trace is not None:
                fail(
                    "--reference-trace cannot be combined with --behavior-search: the search verifies against the input trace"
                )
            if require_behavior_verification and not allow_partial_source:
                # Every search candidate is verified, but only against the input
                # itself: the gate's refusal of partial sources still applies.
                probe = compile_trace(str(trace), timing_sample_limit=timing_sample_limit, **options)
                _refuse_partial_source(trace, probe.summary)
            canary = _compile_with_search(
                trace,
                output,
                search_evidence_output,
                behavior_search_min_sample_limit,
                timing_sample_limit,
                options,
            )
        elif require_behavior_verification:
            canary = _compile_strict(
                trace, output, reference_trace, allow_partial_source, timing_sample_limit, options
            )
        else:
            canary = compile_trace(str(trace), timing_sample_limit=timing_sample_limit, **options)
            canary.write(output)
        s = canary.summary
        typer.echo(
            f"compiled {s['source_events']} trace events into {s['canary_events']} canary events; "
            f"event ratio={_fmt(s['event_compression_ratio'])}x, "
            f"byte ratio={_fmt(s['byte_compression_ratio'])}x, timing={s['fidelity_mode']}"
        )
        if s["fidelity_mode"] == "bounded_approximate":
            b = s["bounds"]
            typer.echo(
                f"approximation: gap<={_fmt(b['max_gap_error_us'])} us, "
                f"skew<={_fmt(b['max_skew_error_us'])} us, "
                f"compute-before<={_fmt(b['max_compute_before_error_us'])} us, "
                f"pressure<={_fmt(b['max_pressure_error'])}, "
                f"prefix-gap<={_fmt(b['max_prefix_gap_error_us'])} us"
            )


def default_evidence_path(output: Path) -> Path:
    """``x.canary.json`` -> ``x.canary.search-evidence.json``, beside the canary."""
    name = output.name[:-5] if output.name.endswith(".json") else output.name
    return output.with_name(name + ".search-evidence.json")


def _compile_with_search(
    trace: Path, output: Path, evidence: Path | None, min_limit: int, max_limit: int, options: dict[str, Any]
) -> Any:
    from commcanary.behavior import search
    from commcanary.io import check_output_path, write_bytes_atomic

    evidence_path = evidence if evidence is not None else default_evidence_path(output)
    if evidence_path.resolve() == output.resolve():
        fail("--search-evidence-output must differ from --output")
    check_output_path(evidence_path)
    count = max(0, max_limit - min_limit + 1)
    typer.echo(
        f"behavior search: evaluating up to {count} uniform candidates plus per-group refinement", err=True
    )
    result = search(str(trace), min_limit=min_limit, max_limit=max_limit, **options)
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
    return result.canary


def _refuse_partial_source(trace: Path, summary: dict[str, Any]) -> None:
    """The strict gate's refusal of a trace that is itself a subset of a workload."""
    if summary["source_coverage_status"] == "partial_source":
        reason = summary.get("source_coverage_reason") or "it is partial"
        fail(
            f"--require-behavior-verification refuses {trace}: it is a partial source ({reason}); "
            "pass --reference-trace ORIGINAL to verify against the workload it came from, "
            "or --allow-partial-source to accept it labelled partial_source"
        )


def _compile_strict(
    trace: Path,
    output: Path,
    reference: Path | None,
    allow_partial: bool,
    limit: int,
    options: dict[str, Any],
) -> Any:
    from commcanary.behavior import verify_canary_bytes
    from commcanary.compiler import compile as compile_trace
    from commcanary.compiler import load_trace

    loaded = load_trace(str(trace))
    canary = compile_trace(loaded, timing_sample_limit=limit, **options)
    if reference is None and not allow_partial:
        _refuse_partial_source(trace, canary.summary)
    against = reference if reference is not None else trace
    result = verify_canary_bytes(str(against), canary.to_bytes(), f"{output} (compiled canary)")
    if result["status"] != "behaviorally_verified":
        for line in _behavior_lines(result):
            typer.echo(line)
        fail(
            f"compiled canary failed required behavior verification against {against}: "
            f"status {result['status']}, source verified: {result['source_verified_status']}, "
            f"behavioral fidelity: {result['behavioral_fidelity_status']}, "
            f"configuration ranking: {result['configuration_ranking_status']}"
        )
    members = {
        "behavior_verification_status": result["status"],
        "behavioral_fidelity_status": result["behavioral_fidelity_status"],
        "configuration_ranking_status": result["configuration_ranking_status"],
        "source_verified_status": result["source_verified_status"],
        "behavior_verification_reference": "reference_trace" if reference is not None else "input_trace",
    }
    final = compile_trace(loaded, timing_sample_limit=limit, compiler_members=members, **options)
    final.write(output)
    return final


def _write_json(path: Path, document: object) -> None:
    import json

    from commcanary.io import write_bytes_atomic

    data = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    write_bytes_atomic(path, data.encode())


def _write_text(path: Path, text: str) -> None:
    from commcanary.io import write_bytes_atomic

    write_bytes_atomic(path, text.encode("utf-8"))


@app.command("replay")
def replay_command(
    canary: Annotated[Path, typer.Argument(help="Canary file.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the report.")],
    html: Annotated[Path | None, typer.Option("--html", help="Also write an HTML report.")] = None,
    backend_label: Annotated[str, typer.Option("--backend-label")] = "simulated-nccl",
    bandwidth_gbps: Annotated[float, typer.Option("--bandwidth-gbps")] = 55.0,
    latency_floor_us: Annotated[float, typer.Option("--latency-floor-us")] = 7.5,
    compute_pressure: Annotated[float, typer.Option("--compute-pressure")] = 0.55,
    overlap_efficiency: Annotated[float, typer.Option("--overlap-efficiency")] = 0.72,
    iterations: Annotated[int, typer.Option("--iterations")] = 1,
    seed: Annotated[int, typer.Option("--seed")] = 7,
    include_samples: Annotated[
        bool, typer.Option("--include-samples", help="Embed one sample per replayed occurrence.")
    ] = False,
    max_replay_events: Annotated[int, typer.Option("--max-replay-events")] = 1_000_000,
    ablate: Annotated[
        list[str] | None, typer.Option("--ablate", help="Ablation (repeatable or comma-separated).")
    ] = None,
) -> None:
    """Replay a canary in the deterministic scheduler model."""
    with errors_exit():
        from commcanary.io import check_output_path
        from commcanary.replay import Backend, replay

        check_output_path(output)
        if html is not None:
            check_output_path(html)
        ablations = [a.strip() for item in ablate or [] for a in item.split(",") if a.strip()]
        report = replay(
            canary,
            backend=Backend(
                backend_label, bandwidth_gbps, latency_floor_us, compute_pressure, overlap_efficiency
            ),
            iterations=iterations,
            seed=seed,
            ablations=ablations,
            include_samples=include_samples,
            max_replay_events=max_replay_events,
        )
        page = None
        if html is not None:
            from commcanary.html import render_report

            page = render_report(report)
        report.write(output)
        if html is not None and page is not None:
            _write_text(html, page)
        typer.echo(report.summary_line())


@app.command("compare")
def compare_command(
    baseline: Annotated[Path, typer.Argument(help="Baseline report.")],
    candidate: Annotated[Path, typer.Argument(help="Candidate report.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the comparison.")],
    html: Annotated[Path | None, typer.Option("--html", help="Also write an HTML comparison.")] = None,
    p99_threshold_pct: Annotated[float, typer.Option("--p99-threshold-pct")] = 15.0,
    p95_threshold_pct: Annotated[float, typer.Option("--p95-threshold-pct")] = 10.0,
    median_threshold_pct: Annotated[float, typer.Option("--median-threshold-pct")] = 8.0,
    p99_absolute_threshold_us: Annotated[float, typer.Option("--p99-absolute-threshold-us")] = 1.0,
    p95_absolute_threshold_us: Annotated[float, typer.Option("--p95-absolute-threshold-us")] = 1.0,
    median_absolute_threshold_us: Annotated[float, typer.Option("--median-absolute-threshold-us")] = 1.0,
    hidden_drop_threshold_points: Annotated[float, typer.Option("--hidden-drop-threshold-points")] = 5.0,
    breakdown_threshold_pct: Annotated[
        float | None, typer.Option("--breakdown-threshold-pct", help="Default: the p99 percentage threshold.")
    ] = None,
    breakdown_absolute_threshold_us: Annotated[
        float | None,
        typer.Option("--breakdown-absolute-threshold-us", help="Default: the p99 absolute threshold."),
    ] = None,
    allow_mismatch: Annotated[
        bool, typer.Option("--allow-mismatch", help="Compare incompatible reports (verdict at least warn).")
    ] = False,
) -> None:
    """Compare two reports; exit 1 when the verdict is fail."""
    with errors_exit():
        from commcanary.compare import Thresholds, compare
        from commcanary.io import check_output_path
        from commcanary.replay import Report

        thresholds = Thresholds(
            p99_threshold_pct,
            p95_threshold_pct,
            median_threshold_pct,
            p99_absolute_threshold_us,
            p95_absolute_threshold_us,
            median_absolute_threshold_us,
            hidden_drop_threshold_points,
            breakdown_threshold_pct,
            breakdown_absolute_threshold_us,
        )
        thresholds.resolved()
        check_output_path(output)
        if html is not None:
            check_output_path(html)
        want_samples = html is not None
        base = Report.from_file(baseline, samples=want_samples)
        cand = Report.from_file(candidate, samples=want_samples)
        result = compare(base, cand, thresholds, allow_mismatch=allow_mismatch)
        page = None
        if html is not None:
            from commcanary.html import render_comparison

            page = render_comparison(result, base, cand)
        _write_json(output, result)
        if html is not None and page is not None:
            _write_text(html, page)
        typer.echo(f"comparison verdict: {result['verdict']}")
        for reason in result["reasons"]:
            typer.echo(f"- {reason['message']}")
    if result["verdict"] == "fail":
        raise typer.Exit(EXIT_NEGATIVE)


def _echo_checks(title: str, result: dict[str, Any]) -> None:
    """``{title}: {status}`` then one ``- {check}: {status}`` line per check."""
    typer.echo(f"{title}: {result['status']}")
    for check in result["checks"]:
        typer.echo(f"- {check['name']}: {check['status']}")


@app.command("verify-report")
def verify_report_command(
    report: Annotated[Path, typer.Argument(help="Report to verify.")],
    canary: Annotated[Path, typer.Argument(help="The canary the report claims to describe.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the verification.")],
) -> None:
    """Recompute a report from its canary; exit 1 when anything differs."""
    with errors_exit():
        from commcanary.io import check_output_path
        from commcanary.verify import verify_report

        check_output_path(output)
        result = verify_report(report, canary)
        _write_json(output, result)
        _echo_checks("report verification", result)
    if result["status"] != "model_recomputed":
        raise typer.Exit(EXIT_NEGATIVE)


@app.command("verify-fidelity")
def verify_fidelity_command(
    trace: Annotated[Path, typer.Argument(help="The source trace.")],
    canary: Annotated[Path, typer.Argument(help="The canary compiled from it.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the verification.")],
) -> None:
    """Recompute every commitment and error bound of a canary from its trace; exit 1 on any mismatch."""
    with errors_exit():
        from commcanary.behavior import verify_fidelity_files
        from commcanary.io import check_output_path

        check_output_path(output)
        result = verify_fidelity_files(trace, canary)
        _write_json(output, result)
        _echo_checks("fidelity verification", result)
    if result["status"] != "source_verified":
        raise typer.Exit(EXIT_NEGATIVE)


def _behavior_lines(result: dict[str, object]) -> list[str]:
    lines = [
        f"behavior verification: {result['status']}",
        f"- representation fidelity: {result['representation_fidelity_status']}",
        f"- source verified: {result['source_verified_status']}",
        f"- behavioral fidelity: {result['behavioral_fidelity_status']}",
        f"- configuration ranking: {result['configuration_ranking_status']}",
    ]
    rows = result["configurations"]
    assert isinstance(rows, list)
    lines += [f"- {row['name']}: {row['status']}" for row in rows]
    ranking = result["ranking"]
    assert isinstance(ranking, dict)
    lines.append(f"- ranking: {ranking['status']}")
    return lines


def _tolerances(relative: float, absolute: float, hidden: float, recall: float, tie: float) -> Any:
    from commcanary.behavior import Tolerances

    t = Tolerances(relative, absolute, hidden, recall, tie)
    t.validate()
    return t


@app.command("verify-behavior")
def verify_behavior_command(
    trace: Annotated[Path, typer.Argument(help="The source trace.")],
    canary: Annotated[Path, typer.Argument(help="The canary to check against it.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the verification.")],
    relative_tolerance_pct: Annotated[float, typer.Option("--relative-tolerance-pct")] = 10.0,
    absolute_tolerance_us: Annotated[float, typer.Option("--absolute-tolerance-us")] = 1.0,
    hidden_tolerance_points: Annotated[float, typer.Option("--hidden-tolerance-points")] = 5.0,
    tail_recall_threshold: Annotated[float, typer.Option("--tail-recall-threshold")] = 0.80,
    ranking_tie_tolerance_us: Annotated[float, typer.Option("--ranking-tie-tolerance-us")] = 0.001,
    configurations: Annotated[
        Path | None,
        typer.Option(
            "--configurations", help="JSON list of replay configurations (default: the five built in)."
        ),
    ] = None,
) -> None:
    """Check that a canary makes the model behave like its whole source trace; exit 1 unless verified."""
    with errors_exit():
        from commcanary.behavior import load_configurations, verify_behavior
        from commcanary.io import check_output_path

        tolerances = _tolerances(
            relative_tolerance_pct,
            absolute_tolerance_us,
            hidden_tolerance_points,
            tail_recall_threshold,
            ranking_tie_tolerance_us,
        )
        configs = load_configurations(configurations) if configurations is not None else None
        check_output_path(output)
        result = verify_behavior(trace, canary, configurations=configs, tolerances=tolerances)
        _write_json(output, result)
        for line in _behavior_lines(result):
            typer.echo(line)
    if result["status"] != "behaviorally_verified":
        raise typer.Exit(EXIT_NEGATIVE)


@app.command("render-html")
def render_html_command(
    report: Annotated[Path, typer.Argument(help="Report to render.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the HTML file.")],
) -> None:
    """Render a report as a self-contained HTML page."""
    with errors_exit():
        from commcanary.html import render_report
        from commcanary.io import check_output_path
        from commcanary.replay import Report

        check_output_path(output)
        page = render_report(Report.from_file(report))
        _write_text(output, page)
        typer.echo(f"wrote HTML report: {output}")


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the process exit status."""
    try:
        app(args=argv, prog_name="commcanary")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return EXIT_OK
        return code if isinstance(code, int) else EXIT_ERROR
    except KeyboardInterrupt:
        typer.echo("commcanary: interrupted", err=True)
        return EXIT_INTERRUPTED
    except Exception as exc:
        typer.echo(f"commcanary: internal error: {type(exc).__name__}: {exc}", err=True)
        return EXIT_ERROR
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
