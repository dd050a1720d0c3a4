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
from typing import Annotated, NoReturn

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

        check_output_path(output)
        canary = compile_trace(
            str(trace),
            timing_sample_limit=timing_sample_limit,
            max_events=max_events,
            budgets={k: v for k, v in budgets.items() if v is not None},
            lossless_timing=lossless_timing,
            sequence_motifs=not disable_sequence_motifs,
        )
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
