"""``commcanary compare``: the CI gate between two reports, or between repeated
runs of each side (``--baseline R... --candidate R...``, reports or
directories of them)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any

import typer

from commcanary.cli import EXIT_INCONCLUSIVE, EXIT_NEGATIVE, EXIT_USAGE, check_paths, errors_exit, fail
from commcanary.cli._output import write_json, write_text
from commcanary.cli.sign import TrustedKeys, check_trusted
from commcanary.compare import Thresholds

__all__ = ["compare_command"]

#: The threshold defaults, from the library.
DEFAULT = Thresholds()


def _pct(flag: str, metric: str) -> Any:
    return typer.Option(
        flag,
        metavar="PCT",
        help=f"The {metric} fails when the candidate is slower by more than PCT percent and by more than "
        "the absolute threshold; it warns above half of both.",
    )


def _abs(flag: str, metric: str) -> Any:
    return typer.Option(
        flag,
        metavar="US",
        help=f"Absolute floor for the {metric}: a slowdown of US microseconds or less never fails.",
    )


Baseline = Annotated[Path | None, typer.Argument(metavar="BASELINE", help="Baseline report.")]
Candidate = Annotated[Path | None, typer.Argument(metavar="CANDIDATE", help="Candidate report.")]
Baselines = Annotated[
    list[Path] | None,
    typer.Option(
        "--baseline",
        metavar="REPORT",
        help="A baseline run's report, or a directory of them; repeat for repeated runs. Several runs per "
        "side are judged with confidence intervals.",
    ),
]
Candidates = Annotated[
    list[Path] | None,
    typer.Option(
        "--candidate",
        metavar="REPORT",
        help="A candidate run's report, or a directory of them; repeat for repeated runs.",
    ),
]
MinRuns = Annotated[
    int,
    typer.Option(
        "--min-runs",
        metavar="N",
        help="Repeated runs: a measured side with fewer runs is inconclusive.",
    ),
]
Confidence = Annotated[
    float, typer.Option("--confidence", metavar="C", help="Repeated runs: confidence level of each interval.")
]
Resamples = Annotated[
    int, typer.Option("--resamples", metavar="N", help="Repeated runs: bootstrap resamples.")
]
Seed = Annotated[int, typer.Option("--seed", metavar="SEED", help="Repeated runs: seed of the bootstrap.")]
Junit = Annotated[
    Path | None,
    typer.Option("--junit", metavar="FILE", help="Also write JUnit XML: one test case per gated statistic."),
]
Sarif = Annotated[
    Path | None,
    typer.Option("--sarif", metavar="FILE", help="Also write a SARIF 2.1.0 log: one result per regression."),
]
SummaryMd = Annotated[
    Path | None,
    typer.Option(
        "--summary-md",
        metavar="FILE",
        help="Also write a Markdown summary (for a pull-request comment); it is appended to "
        "$GITHUB_STEP_SUMMARY too when that variable is set.",
    ),
]
PolicyFile = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        metavar="POLICY",
        help="A gate policy (commcanary gate calibrate): its thresholds, runs per side, confidence, "
        "resamples and seed replace the options; the comparison records its SHA-256. With --trusted-keys "
        "the policy must be signed by a trusted key too.",
    ),
]
Output = Annotated[Path, typer.Option("--output", "-o", metavar="OUT", help="Where to write the comparison.")]
Html = Annotated[
    Path | None, typer.Option("--html", metavar="PAGE", help="Also write the comparison as an HTML page.")
]
P99Pct = Annotated[float, _pct("--p99-threshold-pct", "p99 latency")]
P95Pct = Annotated[float, _pct("--p95-threshold-pct", "p95 latency")]
MedianPct = Annotated[float, _pct("--median-threshold-pct", "median latency")]
P99Abs = Annotated[float, _abs("--p99-absolute-threshold-us", "p99 latency")]
P95Abs = Annotated[float, _abs("--p95-absolute-threshold-us", "p95 latency")]
MedianAbs = Annotated[float, _abs("--median-absolute-threshold-us", "median latency")]
HiddenDrop = Annotated[
    float,
    typer.Option(
        "--hidden-drop-threshold-points",
        metavar="POINTS",
        help="Fail when the share of hidden communication drops by more than POINTS percentage points; "
        "warn above half.",
    ),
]
BreakdownPct = Annotated[
    float | None,
    typer.Option(
        "--breakdown-threshold-pct",
        metavar="PCT",
        help="Percentage threshold for per-phase and per-operation rows (default: the p99 one).",
    ),
]
BreakdownAbs = Annotated[
    float | None,
    typer.Option(
        "--breakdown-absolute-threshold-us",
        metavar="US",
        help="Absolute threshold for per-phase and per-operation rows (default: the p99 one).",
    ),
]
AllowMismatch = Annotated[
    bool,
    typer.Option(
        "--allow-mismatch",
        help="Compare reports of different canaries, models or replay protocols (verdict at least warn).",
    ),
]


def _thresholds(ctx: typer.Context) -> Thresholds:
    """The thresholds the command line gives (checked by :class:`Thresholds`)."""
    names = (f.name for f in fields(Thresholds))
    return Thresholds(**{name: ctx.params[name] for name in names})


def _reports(given: list[Path]) -> list[Path]:
    """The report files: each path, or the ``*.json`` files of a directory, sorted."""
    out: list[Path] = []
    for path in given:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".json")
            if not found:
                fail(f"{path} is a directory with no .json report in it")
            out.extend(found)
        else:
            out.append(path)
    return out


def compare_command(
    ctx: typer.Context,
    output: Output,
    baseline: Baseline = None,
    candidate: Candidate = None,
    baselines: Baselines = None,
    candidates: Candidates = None,
    html: Html = None,
    p99_threshold_pct: P99Pct = DEFAULT.p99_threshold_pct,
    p95_threshold_pct: P95Pct = DEFAULT.p95_threshold_pct,
    median_threshold_pct: MedianPct = DEFAULT.median_threshold_pct,
    p99_absolute_threshold_us: P99Abs = DEFAULT.p99_absolute_threshold_us,
    p95_absolute_threshold_us: P95Abs = DEFAULT.p95_absolute_threshold_us,
    median_absolute_threshold_us: MedianAbs = DEFAULT.median_absolute_threshold_us,
    hidden_drop_threshold_points: HiddenDrop = DEFAULT.hidden_drop_threshold_points,
    breakdown_threshold_pct: BreakdownPct = None,
    breakdown_absolute_threshold_us: BreakdownAbs = None,
    allow_mismatch: AllowMismatch = False,
    min_runs: MinRuns = 3,
    confidence: Confidence = 0.95,
    resamples: Resamples = 2000,
    seed: Seed = 0,
    policy: PolicyFile = None,
    junit: Junit = None,
    sarif: Sarif = None,
    summary_md: SummaryMd = None,
    trusted_keys: TrustedKeys = None,
) -> None:
    """Compare two reports, or repeated runs of each side; exit 1 when the verdict
    is fail, 5 when it is inconclusive."""
    base_paths = _reports(([baseline] if baseline else []) + list(baselines or []))
    cand_paths = _reports(([candidate] if candidate else []) + list(candidates or []))
    if not base_paths or not cand_paths:
        fail(
            "give a baseline and a candidate: BASELINE CANDIDATE, or --baseline R... --candidate R...",
            EXIT_USAGE,
        )
    if len(base_paths) > 1 or len(cand_paths) > 1 or policy is not None:
        verdict = _compare_runs(
            ctx,
            base_paths,
            cand_paths,
            output,
            html,
            allow_mismatch,
            (min_runs, confidence, resamples, seed),
            policy,
            trusted_keys,
            (junit, sarif, summary_md),
        )
        raise typer.Exit(
            EXIT_NEGATIVE if verdict == "fail" else EXIT_INCONCLUSIVE if verdict == "inconclusive" else 0
        )
    baseline, candidate = base_paths[0], cand_paths[0]
    with errors_exit(ctx):
        from commcanary.compare import compare
        from commcanary.replay import Report

        thresholds = _thresholds(ctx)
        check_paths(
            ctx,
            inputs={"baseline": baseline, "candidate": candidate, "trusted_keys": trusted_keys},
            outputs={
                "output": output,
                "html": html,
                "junit": junit,
                "sarif": sarif,
                "summary_md": summary_md,
            },
        )
        check_trusted(
            trusted_keys, {"baseline": baseline, "candidate": candidate}, {"output": output, "html": html}
        )
        want_samples = html is not None
        base = Report.from_file(baseline, samples=want_samples)
        cand = Report.from_file(candidate, samples=want_samples)
        result = compare(base, cand, thresholds, allow_mismatch=allow_mismatch)
        page = None
        if html is not None:
            from commcanary.html import render_comparison

            page = render_comparison(result, base, cand)
        write_json(output, result)
        if html is not None and page is not None:
            write_text(html, page)
        ci_outputs(result, junit, sarif, summary_md)
        typer.echo(f"comparison verdict: {result['verdict']}")
        for reason in result["reasons"]:
            typer.echo(f"- {reason['message']}")
    if result["verdict"] == "fail":
        raise typer.Exit(EXIT_NEGATIVE)


def _compare_runs(
    ctx: typer.Context,
    base_paths: list[Path],
    cand_paths: list[Path],
    output: Path,
    html: Path | None,
    allow_mismatch: bool,
    options: tuple[int, float, int, int],
    policy_path: Path | None,
    trusted_keys: Path | None,
    ci: tuple[Path | None, Path | None, Path | None],
) -> str:
    """The repeated-runs gate; returns the verdict."""
    with errors_exit(ctx):
        from commcanary.compare_runs import compare_runs
        from commcanary.gate_policy import Policy
        from commcanary.replay import Report

        inputs: dict[str, Path | None] = {f"baseline {i + 1}": p for i, p in enumerate(base_paths)}
        inputs.update({f"candidate {i + 1}": p for i, p in enumerate(cand_paths)})
        inputs["policy"] = policy_path
        outputs = {"output": output, "html": html, "junit": ci[0], "sarif": ci[1], "summary_md": ci[2]}
        for name, paths in (("baselines", base_paths), ("candidates", cand_paths)):
            for path in paths:
                check_paths(ctx, inputs={name: path}, outputs=outputs)
        check_paths(ctx, inputs={"policy": policy_path, "trusted_keys": trusted_keys}, outputs=outputs)
        check_trusted(trusted_keys, inputs, outputs)
        thresholds = _thresholds(ctx)
        policy = None if policy_path is None else Policy.read(policy_path)
        base = [Report.from_file(p) for p in base_paths]
        cand = [Report.from_file(p) for p in cand_paths]
        min_runs, confidence, resamples, seed = options
        result = compare_runs(
            base,
            cand,
            thresholds,
            allow_mismatch=allow_mismatch,
            min_runs=min_runs,
            confidence=confidence,
            resamples=resamples,
            seed=seed,
            policy=policy,
        )
        page = None
        if html is not None:
            from commcanary.html import render_comparison

            page = render_comparison(result, base[0], cand[0])
        write_json(output, result)
        if page is not None and html is not None:
            write_text(html, page)
        ci_outputs(result, *ci)
        typer.echo(
            f"comparison verdict: {result['verdict']} ({len(base)} baseline runs, {len(cand)} candidate runs)"
        )
        for reason in result["reasons"]:
            typer.echo(f"- {reason['message']}")
    return str(result["verdict"])


def ci_outputs(
    result: dict[str, object], junit: Path | None, sarif: Path | None, summary_md: Path | None
) -> None:
    """Writes the CI views of a comparison that were asked for, and appends the
    Markdown summary to ``$GITHUB_STEP_SUMMARY`` when it is set."""
    import os

    from commcanary.gate_outputs import junit_xml, sarif_log, summary_markdown

    doc: dict[str, Any] = dict(result)
    if junit is not None:
        write_text(junit, junit_xml(doc))
    if sarif is not None:
        write_json(sarif, sarif_log(doc))
    summary = summary_markdown(doc)
    if summary_md is not None:
        write_text(summary_md, summary)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write(summary)
