"""``commcanary replay``: a canary through the deterministic scheduler model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from commcanary import _core
from commcanary.cli import check_paths, errors_exit, fail, flag_for
from commcanary.cli._output import write_text
from commcanary.cli.sign import SignKey, check_signing_key, sign_output
from commcanary.replay import DEFAULT_SETTINGS, Backend

T = TypeVar("T")

__all__ = ["ABLATION_NAMES", "replay_command"]


#: What ``--ablate`` accepts: the replay model's ablations.
ABLATION_NAMES: tuple[str, ...] = tuple(_core.ABLATIONS)
#: The backend defaults, from the library.
DEFAULT = Backend()


def _split_ablations(ctx: typer.Context, param: Any, values: list[str] | None) -> list[str]:
    """``--ablate a,b --ablate c`` -> ``[a, b, c]``; an unknown name is a usage error."""
    names = [name.strip() for item in values or [] for name in item.split(",") if name.strip()]
    for name in names:
        if name not in ABLATION_NAMES:
            raise typer.BadParameter(f"unknown ablation {name!r}; choose from: {', '.join(ABLATION_NAMES)}")
    return names


Canary = Annotated[Path, typer.Argument(metavar="CANARY", help="Canary file to replay.")]
Output = Annotated[Path, typer.Option("--output", "-o", metavar="REPORT", help="Where to write the report.")]
Html = Annotated[
    Path | None, typer.Option("--html", metavar="PAGE", help="Also write the report as an HTML page.")
]
Label = Annotated[
    str,
    typer.Option(
        "--backend-label",
        metavar="NAME",
        help="Name of the simulated backend, recorded in the report (default: simulated-nccl, or "
        "'simulated (the job ran on gloo)' for a canary of a job that ran on another backend).",
    ),
]
Bandwidth = Annotated[
    float,
    typer.Option("--bandwidth-gbps", metavar="GBPS", help="Modelled link bandwidth in Gbit/s (positive)."),
]
LatencyFloor = Annotated[
    float,
    typer.Option(
        "--latency-floor-us",
        metavar="US",
        help="Modelled fixed start-up latency of every collective, in microseconds (non-negative).",
    ),
]
ComputePressure = Annotated[
    float,
    typer.Option(
        "--compute-pressure",
        metavar="C",
        help="How strongly concurrent compute slows communication (non-negative; scaled by each "
        "record's pressure).",
    ),
]
OverlapEfficiency = Annotated[
    float,
    typer.Option(
        "--overlap-efficiency",
        metavar="ETA",
        help="Share of a collective's compute overlap that hides its latency (between 0 and 1).",
    ),
]
Iterations = Annotated[
    int, typer.Option("--iterations", metavar="N", help="Replay the canary N times (at least 1).")
]
Seed = Annotated[int, typer.Option("--seed", metavar="SEED", help="Seed of the model's deterministic noise.")]
IncludeSamples = Annotated[
    bool, typer.Option("--include-samples", help="Embed one sample per replayed occurrence.")
]
MaxReplayEvents = Annotated[
    int,
    typer.Option(
        "--max-replay-events",
        metavar="N",
        help="Refuse to replay more than N occurrences in all (occurrences times iterations).",
    ),
]
Ablations = Annotated[
    list[str] | None,
    typer.Option(
        "--ablate",
        metavar="NAME[,NAME...]",
        callback=_split_ablations,
        help="Switch off part of the model (repeatable or comma-separated): "
        + ", ".join(ABLATION_NAMES)
        + ".",
    ),
]


BackendFile = Annotated[
    Path | None,
    typer.Option(
        "--backend-file",
        metavar="BACKEND.json",
        help="Take the backend from a file (commcanary calibrate -o) instead of the backend options.",
    ),
]
Physical = Annotated[
    str | None,
    typer.Option(
        "--physical",
        metavar="ENGINE",
        help="Run the canary on real process groups instead of the model: gloo (CPU) or nccl (GPUs); "
        "needs torch. The report is measured (its samples always embedded).",
    ),
]
Nproc = Annotated[
    int | None,
    typer.Option(
        "--nproc", metavar="N", help="--physical: local processes (default: the canary's world size)."
    ),
]
Warmup = Annotated[
    int, typer.Option("--warmup", metavar="N", help="--physical: unmeasured iterations run first.")
]
ComputeFill = Annotated[
    str,
    typer.Option(
        "--compute-fill",
        metavar="MODE",
        help="--physical: how each gap is filled before a collective: sleep, or spin (a busy CPU).",
    ),
]
ComputeFillScale = Annotated[
    float,
    typer.Option(
        "--compute-fill-scale",
        metavar="X",
        help="--physical: multiply every gap (the compute between collectives) by X.",
    ),
]
BytesScale = Annotated[
    float,
    typer.Option(
        "--bytes-scale",
        metavar="K",
        help="--physical: multiply every message's size by K (0 < K <= 1e6); calibrating on one "
        "canary measured at several K reads each operation's bandwidth over the sizes they span.",
    ),
]
Timeout = Annotated[
    float,
    typer.Option("--timeout-s", metavar="S", help="--physical: end every process after S seconds."),
]

#: Options that only the model reads, by parameter name.
_MODEL_ONLY = (
    "label",
    "bandwidth_gbps",
    "latency_floor_us",
    "compute_pressure",
    "overlap_efficiency",
    "seed",
)
#: Options that only a physical run reads.
_PHYSICAL_ONLY = ("nproc", "warmup", "compute_fill", "compute_fill_scale", "bytes_scale", "timeout_s")


def replay_command(
    ctx: typer.Context,
    canary: Canary,
    output: Output,
    html: Html = None,
    label: Label = DEFAULT.label,
    bandwidth_gbps: Bandwidth = DEFAULT.bandwidth_gbps,
    latency_floor_us: LatencyFloor = DEFAULT.latency_floor_us,
    compute_pressure: ComputePressure = DEFAULT.compute_pressure,
    overlap_efficiency: OverlapEfficiency = DEFAULT.overlap_efficiency,
    iterations: Iterations = 1,
    seed: Seed = 7,
    include_samples: IncludeSamples = False,
    max_replay_events: MaxReplayEvents = DEFAULT_SETTINGS["max_replay_events"],
    ablations: Ablations = None,
    backend_file: BackendFile = None,
    physical: Physical = None,
    nproc: Nproc = None,
    warmup: Warmup = 1,
    compute_fill: ComputeFill = "sleep",
    compute_fill_scale: ComputeFillScale = 1.0,
    bytes_scale: BytesScale = 1.0,
    timeout_s: Timeout = 600.0,
    sign_key: SignKey = None,
) -> None:
    """Replay a canary in the deterministic scheduler model, or (--physical) on real collectives."""
    _check_mode(ctx, physical is not None, ablations)
    if physical is not None:
        _replay_physical(ctx, canary, output, html, physical, nproc, iterations, warmup, compute_fill,
                         compute_fill_scale, bytes_scale, timeout_s, sign_key)  # fmt: skip
        return
    with errors_exit(ctx):
        from commcanary.replay import replay

        inputs = {"canary": canary, "backend_file": backend_file, "sign_key": sign_key}
        check_paths(ctx, inputs=inputs, outputs={"output": output, "html": html})
        check_signing_key(ctx, sign_key, inputs, {"output": output, "html": html})
        backend = Backend(
            label=label,
            bandwidth_gbps=bandwidth_gbps,
            latency_floor_us=latency_floor_us,
            compute_pressure=compute_pressure,
            overlap_efficiency=overlap_efficiency,
        )
        if backend_file is not None:
            from commcanary.calibrate import read_backend_file

            backend = read_backend_file(backend_file)
        report = replay(
            canary,
            backend=backend,
            iterations=iterations,
            seed=seed,
            ablations=ablations or [],
            include_samples=include_samples,
            max_replay_events=max_replay_events,
        )
        page = None
        if html is not None:
            from commcanary.html import render_report

            page = render_report(report)
        report.write(output)
        if html is not None and page is not None:
            write_text(html, page)
        typer.echo(report.summary_line())
        sign_output(sign_key, output)


def _check_mode(ctx: typer.Context, physical: bool, ablations: list[str] | None) -> None:
    """Refuse an option of the other mode (model options with --physical, and the reverse)."""
    from commcanary.cli import fail, flag_for

    def typed(name: str) -> bool:
        source = ctx.get_parameter_source(name)
        return source is not None and source.name == "COMMANDLINE"

    names = (*_MODEL_ONLY, "include_samples", "max_replay_events", *_PHYSICAL_ONLY)
    given = [name for name in names if typed(name)]
    wrong = [n for n in given if (n in _PHYSICAL_ONLY) != physical]
    if not physical and typed("backend_file"):
        wrong += [n for n in given if n in _MODEL_ONLY and n != "seed"]
        if wrong:
            fail(
                f"{flag_for(ctx, wrong[0])} cannot be combined with --backend-file (the file gives the backend)"
            )
    if physical and typed("backend_file"):
        wrong.insert(0, "backend_file")
    if physical and ablations:
        wrong.insert(0, "ablations")
    if wrong:
        where = "a physical replay (--physical)" if physical else "the model (it needs --physical)"
        fail(f"{flag_for(ctx, wrong[0])} does not apply to {where}")


def _with_flags(ctx: typer.Context, call: Callable[..., T]) -> Callable[..., T]:
    """``call``, its out-of-range arguments refused in this command's flags
    (exit 3, as a physical replay's refusals have always been)."""

    def run(*args: Any, **kwargs: Any) -> T:
        from commcanary.errors import OptionError

        try:
            return call(*args, **kwargs)
        except OptionError as exc:
            flag = "--physical" if exc.option == "engine" else flag_for(ctx, exc.option)
            fail(f"{flag} {exc.rule}")

    return run


def _replay_physical(
    ctx: typer.Context,
    canary: Path,
    output: Path,
    html: Path | None,
    engine: str,
    nproc: int | None,
    iterations: int,
    warmup: int,
    compute_fill: str,
    compute_fill_scale: float,
    bytes_scale: float,
    timeout_s: float,
    sign_key: Path | None,
) -> None:
    from commcanary.cli import EXIT_CHILD, fail

    with errors_exit(ctx):
        from commcanary.physical import ChildFailed, replay_physical

        inputs = {"canary": canary, "sign_key": sign_key}
        check_paths(ctx, inputs=inputs, outputs={"output": output, "html": html})
        check_signing_key(ctx, sign_key, inputs, {"output": output, "html": html})
        try:
            run = _with_flags(ctx, replay_physical)(
                canary,
                engine=engine,
                nproc=nproc,
                iterations=iterations,
                warmup=warmup,
                compute_fill=compute_fill,
                compute_fill_scale=compute_fill_scale,
                bytes_scale=bytes_scale,
                timeout_s=timeout_s,
            )
        except ChildFailed as exc:
            fail(str(exc), EXIT_CHILD)
        page = None
        if html is not None:
            from commcanary.html import render_report

            page = render_report(run.report)
        run.report.write(output)
        if html is not None and page is not None:
            write_text(html, page)
        typer.echo(f"measured on {engine}: " + run.report.summary_line())
        sign_output(sign_key, output)
