"""The ``commcanary`` command line.

Conventions: human lines on stdout, diagnostics (and, on a terminal, progress)
on stderr, artifacts only where ``-o/--output`` and the other output options
say. Exit status:

* 0 success (also a comparison verdict of ``pass`` or ``warn``);
* 1 a valid negative result (a failed verification, a ``fail`` verdict);
* 2 a usage error: an unknown option, a value out of range (``commcanary:
  --timing-sample-limit must be at least 2``), an output that would overwrite
  an input;
* 3 any input, validation, budget or I/O error (one line ``commcanary:
  <message>`` on stderr, nothing written);
* 4 a captured child failed;
* 70 an internal error (a bug: please report it; rerun with ``--debug``
  for its traceback);
* 130 interrupted.

This module holds the application, the exit codes and the error boundary;
each command group lives in its own module (:mod:`.compile`, :mod:`.compile_many`, :mod:`.replay`,
:mod:`.compare`, :mod:`.calibrate`, :mod:`.validate`, :mod:`.verify`, :mod:`.render`, :mod:`.import_`,
:mod:`.export`, :mod:`.capture`, :mod:`.research`, :mod:`.diagnose`, :mod:`.steps`, :mod:`.timeline`, :mod:`.sign`, :mod:`.serve`). Command modules parse
options and print; the library validates values and raises the errors the
boundary maps. Heavy modules are imported inside commands so
``commcanary --help`` stays fast.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperCommand

__all__ = [
    "EXIT_CHILD",
    "EXIT_ERROR",
    "EXIT_INCONCLUSIVE",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_NEGATIVE",
    "EXIT_OK",
    "EXIT_USAGE",
    "app",
    "errors_exit",
    "main",
]

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2
EXIT_ERROR = 3
EXIT_CHILD = 4
#: A gate over repeated runs that cannot tell a regression from noise.
EXIT_INCONCLUSIVE = 5
EXIT_INTERNAL = 70
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


class Command(TyperCommand):
    """A command whose usage line names required arguments by their metavar
    (``commcanary compile [OPTIONS] TRACE``)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument" and param.metavar:
                pieces.append(param.metavar if param.required else f"[{param.metavar}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``commcanary: message`` on stderr, on one line, and exit (status
    3 unless told)."""
    typer.echo(f"commcanary: {one_line(message)}", err=True)
    raise typer.Exit(code)


def one_line(message: str) -> str:
    """``message`` with every control character escaped as Python writes it
    (``\\n``, ``\\x1b``): a message quoting hostile input stays one line and
    cannot drive the terminal."""
    if message.isprintable():
        return message
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def flag_for(ctx: typer.Context | None, option: str) -> str:
    """The command-line spelling of an API argument name: the long flag of the
    current command's parameter called ``option`` (``timing_sample_limit`` ->
    ``--timing-sample-limit``, ``label`` -> ``--backend-label``), an argument's
    metavar (``TRACE``), else ``--`` and the name with dashes."""
    if ctx is not None:
        for param in ctx.command.params:
            if param.name != option:
                continue
            longs = [opt for opt in param.opts if opt.startswith("--")]
            if longs:
                return longs[0]
            if param.metavar:
                return param.metavar
    return "--" + option.replace("_", "-")


def describe(ctx: typer.Context | None, name: str) -> str:
    """How a file parameter is named in a message: ``the input TRACE`` for an
    argument, ``the --output file`` for an option."""
    flag = flag_for(ctx, name)
    return f"the {flag} file" if flag.startswith("--") else f"the input {flag}"


def check_paths(
    ctx: typer.Context,
    inputs: Mapping[str, str | os.PathLike[str] | None],
    outputs: Mapping[str, str | os.PathLike[str] | None],
) -> None:
    """Before any work: refuse an output that is one of the inputs or another
    output (usage error, naming both), then check each output can be written.

    Both mappings are keyed by parameter name; ``None`` values are skipped.
    """
    from commcanary.io import check_distinct_paths, check_output_path

    check_distinct_paths(
        [(name, describe(ctx, name), path) for name, path in outputs.items()],
        [(describe(ctx, name), path) for name, path in inputs.items()],
    )
    for path in outputs.values():
        if path is not None:
            check_output_path(path)


@contextmanager
def errors_exit(ctx: typer.Context | None = None) -> Iterator[None]:
    """The error boundary: package errors become one ``commcanary: ...`` line
    on stderr and an exit status.

    :class:`~commcanary.errors.OptionError` is a usage error (2) and names the
    flag as typed; :class:`~commcanary.errors.InternalError` is 70; every other
    :class:`~commcanary.errors.CommCanaryError` is 3, as is running out of
    memory; an interrupt is 130.
    """
    from commcanary.errors import CommCanaryError, InternalError, OptionError

    try:
        yield
    except OptionError as exc:
        fail(f"{flag_for(ctx, exc.option)} {exc.rule}", EXIT_USAGE)
    except InternalError as exc:
        if _debug:
            import traceback

            traceback.print_exc()
        hint = "" if _debug else "; rerun with --debug for the traceback"
        fail(f"internal error: {exc} (please report this{hint})", EXIT_INTERNAL)
    except CommCanaryError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted", EXIT_INTERRUPTED)
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


#: Set by ``--debug``: an internal error prints its traceback.
_debug = False

_LIMIT_HELP = {
    "max_input_bytes": "Largest input file, in bytes after decompression (resource limit).",
    "max_decompression_ratio": "Largest decompressed/compressed ratio of a gzip input past 64 MiB (resource limit).",
    "max_json_depth": "Deepest JSON nesting accepted (resource limit).",
    "max_json_items": "Most JSON object members plus array elements in one document (resource limit).",
    "max_json_string_bytes": "Longest JSON string or key, in UTF-8 bytes (resource limit).",
    "max_json_number_chars": "Longest JSON number, in characters (resource limit).",
    "max_trace_events": "Most events in one trace (resource limit).",
    "max_ranks": "Most ranks in one event or group (resource limit).",
    "max_field_items": "Most JSON items in one field of a trace event (resource limit).",
    "max_expanded_occurrences": "Most occurrences a canary may expand to (resource limit).",
    "max_text_bytes": "Largest text evidence file (a stack dump, an exception text), in bytes (resource limit).",
}


def _limit_option(name: str) -> Any:
    return typer.Option("--" + name.replace("_", "-"), help=_LIMIT_HELP[name], metavar="N", min=1)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Show the version and every format this version reads and writes, then exit.",
            callback=_version_callback,
            is_eager=True,
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="On an internal error, print its traceback (for a bug report).")
    ] = False,
    max_input_bytes: Annotated[int | None, _limit_option("max_input_bytes")] = None,
    max_decompression_ratio: Annotated[int | None, _limit_option("max_decompression_ratio")] = None,
    max_json_depth: Annotated[int | None, _limit_option("max_json_depth")] = None,
    max_json_items: Annotated[int | None, _limit_option("max_json_items")] = None,
    max_json_string_bytes: Annotated[int | None, _limit_option("max_json_string_bytes")] = None,
    max_json_number_chars: Annotated[int | None, _limit_option("max_json_number_chars")] = None,
    max_trace_events: Annotated[int | None, _limit_option("max_trace_events")] = None,
    max_ranks: Annotated[int | None, _limit_option("max_ranks")] = None,
    max_field_items: Annotated[int | None, _limit_option("max_field_items")] = None,
    max_expanded_occurrences: Annotated[int | None, _limit_option("max_expanded_occurrences")] = None,
    max_text_bytes: Annotated[int | None, _limit_option("max_text_bytes")] = None,
) -> None:
    """Compile collective-communication traces into small, verifiable canaries.

    The resource limits apply to every input of the command that follows
    (docs/resource-limits.md lists each, its default and why).
    """
    global _debug
    _debug = debug
    if debug:
        os.environ["COMMCANARY_DEBUG"] = "1"
    given = {k: v for k, v in locals().items() if k.startswith("max_") and v is not None}
    from commcanary.limits import DEFAULTS, set_limits

    # Each invocation starts from the defaults (one process may run many).
    with errors_exit():
        set_limits(**(DEFAULTS | given))


@functools.cache
def _command() -> Any:
    """The application as a click command, built once (building it is most
    of the cost of a call, for callers that run many)."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the process exit status."""
    try:
        _command().main(args=argv, prog_name="commcanary")
    except SystemExit as exc:
        code: Any = exc.code
        if code is None:
            return EXIT_OK
        return code if isinstance(code, int) else EXIT_ERROR
    except KeyboardInterrupt:
        typer.echo("commcanary: interrupted", err=True)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if _debug:
            import traceback

            traceback.print_exc()
        hint = "" if _debug else "; rerun with --debug for the traceback"
        line = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
        typer.echo(f"commcanary: internal error: {one_line(line)} (please report this{hint})", err=True)
        return EXIT_INTERNAL
    return EXIT_OK


# The commands, in the order ``--help`` lists them. Their modules import this
# one, so they are imported after everything above is defined.
import commcanary.cli.agent as _agent  # noqa: E402
import commcanary.cli.calibrate as _calibrate  # noqa: E402
import commcanary.cli.capture as _capture  # noqa: E402
import commcanary.cli.comm_perf as _comm_perf  # noqa: E402
import commcanary.cli.compare as _compare  # noqa: E402
import commcanary.cli.compile as _compile  # noqa: E402
import commcanary.cli.compile_many as _compile_many  # noqa: E402
import commcanary.cli.diagnose as _diagnose  # noqa: E402
import commcanary.cli.export as _export  # noqa: E402
import commcanary.cli.gate as _gate  # noqa: E402
import commcanary.cli.import_ as _import  # noqa: E402
import commcanary.cli.render as _render  # noqa: E402
import commcanary.cli.replay as _replay  # noqa: E402
import commcanary.cli.research as _research  # noqa: E402
import commcanary.cli.serve as _serve  # noqa: E402
import commcanary.cli.sign as _sign  # noqa: E402
import commcanary.cli.steps as _steps  # noqa: E402
import commcanary.cli.timeline as _timeline  # noqa: E402
import commcanary.cli.validate as _validate  # noqa: E402
import commcanary.cli.verify as _verify  # noqa: E402

app.command("compile", cls=Command)(_compile.compile_command)
app.command("compile-many", cls=Command)(_compile_many.compile_many_command)
app.command("replay", cls=Command)(_replay.replay_command)
app.command("compare", cls=Command)(_compare.compare_command)
app.command("calibrate", cls=Command)(_calibrate.calibrate_command)
app.command("validate-model", cls=Command)(_validate.validate_model_command)
app.command("verify-report", cls=Command)(_verify.verify_report_command)
app.command("verify-fidelity", cls=Command)(_verify.verify_fidelity_command)
app.command("verify-behavior", cls=Command)(_verify.verify_behavior_command)
app.command("render-html", cls=Command)(_render.render_html_command)
app.command("import-kineto", cls=Command)(_import.import_kineto_command)
app.command("import-nccl-profiler", cls=Command)(_import.import_nccl_profiler_command)
app.command("comm-perf", cls=Command)(_comm_perf.comm_perf_command)
app.command("export-param", cls=Command)(_export.export_param_command)
app.command("capture", cls=Command)(_capture.capture_command)
app.command("baseline", cls=Command)(_research.baseline_command)
app.command("reduce", cls=Command)(_research.reduce_command)
app.add_typer(_diagnose.diagnose_app, name="diagnose")
app.add_typer(_gate.gate_app, name="gate")
app.command("steps", cls=Command)(_steps.steps_command)
app.command("keygen", cls=Command)(_sign.keygen_command)
app.command("sign", cls=Command)(_sign.sign_command)
app.command("timeline", cls=Command)(_timeline.timeline_command)
app.command("serve", cls=Command)(_serve.serve_command)
app.command("push", cls=Command)(_serve.push_command)
app.command("agent", cls=Command)(_agent.agent_command)
