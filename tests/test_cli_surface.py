"""What a person meets: help text, usage lines, ``--version``, the error
boundary's exit statuses, messages naming files, progress on a terminal."""

from __future__ import annotations

import importlib
import io
import json
import os
import re
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import commcanary
from commcanary import formats
from commcanary.cli import EXIT_INTERNAL, app, main
from commcanary.cli._output import progress
from commcanary.errors import InternalError
from conftest import EXAMPLES

runner = CliRunner()
DEMO = EXAMPLES / "llama70b_tp8_trace.json"
LONG = EXAMPLES / "llama70b_tp8_trace_long.json"
USAGE = {
    "compile": "TRACE",
    "compile-many": "TRACE...",
    "replay": "CANARY",
    "compare": "[BASELINE] [CANDIDATE]",
    "verify-report": "REPORT CANARY",
    "verify-fidelity": "TRACE CANARY",
    "verify-behavior": "TRACE CANARY",
    "render-html": "REPORT",
    "import-kineto": "TRACE...",
    "import-nccl-profiler": "DIR",
    "comm-perf": "[INSPECTOR...]",
    "export-param": "CANARY",
    "capture": "[-- CMD...]",
    "baseline": "TRACE",
    "calibrate": "MEASURED_REPORT...",
    "validate-model": "CANARY",
    "reduce": "TRACE",
    "diagnose hang": "EVIDENCE...",
    "diagnose stragglers": "TRACE...",
    "gate calibrate": "RUNS...",
    "gate run": "CANARY",
    "steps": "TRACE...",
    "timeline": "TRACE...",
    "keygen": "",
    "sign": "ARTIFACT",
    "serve": "",
    "push": "ARTIFACT...",
    "agent": "",
}


def commands() -> dict[str, typer.core.TyperCommand]:
    """Every command, a group's as ``group sub``."""
    group = typer.main.get_command(app)
    found = group.commands  # type: ignore[attr-defined]
    assert isinstance(found, dict)
    flat: dict[str, typer.core.TyperCommand] = {}
    for name, command in found.items():
        subcommands = getattr(command, "commands", None)
        if subcommands:
            flat.update({f"{name} {sub}": c for sub, c in subcommands.items()})
        else:
            flat[name] = command
    return flat


def test_every_parameter_has_help() -> None:
    missing = [
        f"{name} {param.name}"
        for name, command in commands().items()
        for param in command.params
        if not (getattr(param, "help", None) or "").strip()
    ]
    assert missing == []
    assert set(commands()) == set(USAGE)


@pytest.mark.parametrize("command", USAGE)
def test_usage_names_arguments_in_capitals(command: str) -> None:
    result = runner.invoke(app, [*command.split(), "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == f"Usage: commcanary {command} [OPTIONS] {USAGE[command]}".rstrip()
    assert "{" not in result.stdout


def test_version_lists_every_format() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"commcanary {commcanary.__version__}"
    for role, value in formats.FORMATS.items():
        assert f"  {role}: {value}" in lines
    # Every format a schema describes, and every format a module writes, is listed.
    listed = set(formats.FORMATS.values())
    for schema in files("commcanary").joinpath("schemas").iterdir():
        if schema.name.endswith(".schema.json"):
            fmt = json.loads(schema.read_text())["properties"]["format"]
            assert set(fmt.get("enum", [fmt.get("const")])) <= listed, schema.name
    module = importlib.import_module
    written = {
        module("commcanary.behavior").BEHAVIOR_FORMAT,
        module("commcanary.behavior").EVIDENCE_FORMAT,
        module("commcanary.compare").COMPARISON_FORMAT,
        module("commcanary.fidelity").FIDELITY_FORMAT,
        module("commcanary.verify").REPORT_VERIFICATION_FORMAT,
    }
    assert written <= listed


def test_compare_of_different_canaries_names_both_reports(tmp_path: Path) -> None:
    a, b = tmp_path / "a.report.json", tmp_path / "b.report.json"
    commcanary.replay(commcanary.compile(DEMO)).write(a)
    commcanary.replay(commcanary.compile(LONG)).write(b)
    out = tmp_path / "cmp.json"
    result = runner.invoke(app, ["compare", str(a), str(b), "-o", str(out)])
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(
        f"commcanary: {a} and {b} replay different canaries (execution_semantic_sha256 "
    )
    assert len(result.stderr.splitlines()) == 1
    assert not out.exists()
    # With --allow-mismatch the verdict is at least warn and the reasons say why.
    result = runner.invoke(app, ["compare", str(a), str(b), "-o", str(out), "--allow-mismatch"])
    assert result.exit_code in (0, 1), result.output
    document = json.loads(out.read_bytes())
    assert document["verdict"] in ("warn", "fail")
    assert (
        "reports were produced from different executable canary fingerprints"
        in document["compatibility"]["reasons"]
    )


HINT = "(please report this; rerun with --debug for the traceback)"


def test_internal_error_is_exit_70(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def panics(*args: object, **kwargs: object) -> None:
        raise InternalError("a worker thread panicked in compile")

    monkeypatch.setattr("commcanary.compiler.compile", panics)
    result = runner.invoke(app, ["compile", str(DEMO), "-o", str(tmp_path / "c.json")])
    assert result.exit_code == EXIT_INTERNAL == 70
    assert result.stderr == f"commcanary: internal error: a worker thread panicked in compile {HINT}\n"


@pytest.mark.parametrize(
    ("raised", "code", "line"),
    [
        (MemoryError(), 3, "commcanary: out of memory"),
        (KeyboardInterrupt(), 130, "commcanary: interrupted"),
    ],
)
def test_boundary_statuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: BaseException, code: int, line: str
) -> None:
    def fails(*args: object, **kwargs: object) -> None:
        raise raised

    monkeypatch.setattr("commcanary.compiler.compile", fails)
    result = runner.invoke(app, ["compile", str(DEMO), "-o", str(tmp_path / "c.json")])
    assert result.exit_code == code
    assert result.stderr == line + "\n"


def test_main_maps_a_bug_to_70(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def bug(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("commcanary.compiler.compile", bug)
    assert main(["compile", str(DEMO), "-o", str(tmp_path / "c.json")]) == 70
    assert capsys.readouterr().err == (
        f"commcanary: internal error: ZeroDivisionError: division by zero {HINT}\n"
    )
    monkeypatch.setenv("COMMCANARY_DEBUG", "")  # restored after the test: --debug sets it
    assert main(["--debug", "compile", str(DEMO), "-o", str(tmp_path / "c.json")]) == 70
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "ZeroDivisionError" in err
    assert err.splitlines()[-1] == (
        "commcanary: internal error: ZeroDivisionError: division by zero (please report this)"
    )


def test_progress_only_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    with progress("working"):
        pass
    assert capsys.readouterr() == ("", "")

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress("behavior search: working"):
        pass
    assert "behavior search: working" in terminal.getvalue()
    assert capsys.readouterr().out == ""


def test_help_does_not_import_heavy_modules() -> None:
    code = (
        "import sys, commcanary.cli; "
        "print(sorted(m for m in ('commcanary.html', 'commcanary.fidelity', 'numpy', 'rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_python_dash_m_and_the_console_script_agree(tmp_path: Path) -> None:
    dash_m = subprocess.run(
        [sys.executable, "-m", "commcanary", "--version"], capture_output=True, text=True, check=False
    )
    assert dash_m.returncode == 0
    assert dash_m.stdout.splitlines()[0] == f"commcanary {commcanary.__version__}"
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "commcanary"]
    assert script.value == "commcanary.cli:main"
    assert script.load() is main


def _expand(text: str) -> str:
    """``--{a,b}-x`` -> ``--a-x --b-x`` (the README's shorthand for option families)."""
    pattern = re.compile(r"(--[\w-]*)\{([\w,-]+)\}([\w-]*)")
    while match := pattern.search(text):
        words = " ".join(f"{match[1]}{word}{match[3]}" for word in match[2].split(","))
        text = text[: match.start()] + words + text[match.end() :]
    return text


def test_readme_lists_every_command_and_option() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = _expand(readme.split("## Command line", 1)[1].split("\n## ", 1)[0])
    flags = set(re.findall(r"--[a-z][\w-]*", section))
    for name, command in commands().items():
        assert f"| `commcanary {name} {USAGE[name]}" in section, name
        for param in command.params:
            spelled = {opt for opt in param.opts if opt.startswith("--")} | ({"-o"} & set(param.opts))
            assert not spelled or spelled & (flags | {"-o"}), (name, spelled)
    assert "`commcanary --version`" in section


def test_a_panicking_worker_is_an_internal_error(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    env = {**os.environ, "COMMCANARY_INJECT_PANIC": "compile-digest", "RUST_BACKTRACE": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "commcanary", "compile", str(DEMO), "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 70, proc.stderr
    # One line: the panic's own report is printed only with --debug.
    (last,) = proc.stderr.splitlines()
    assert last.startswith("commcanary: internal error: ") and last.endswith(HINT)
    assert "compile-digest" in last
    assert proc.stdout == "" and not out.exists()


def test_a_refusal_quoting_control_characters_stays_one_line(tmp_path: Path) -> None:
    # Found by the CLI fuzz target: a key with a newline split the message in two.
    configs = tmp_path / "configs.json"
    configs.write_text('[{"name":"a"},{"b\\ndwidth\\u001b[31m":50.0}]')
    out = tmp_path / "v.json"
    result = runner.invoke(
        app, ["verify-behavior", str(DEMO), str(DEMO), "--configurations", str(configs), "-o", str(out)]
    )
    assert result.exit_code == 3
    (line,) = result.stderr.splitlines()
    assert "unknown key 'b\\ndwidth\\x1b[31m'" in line, line
    assert "\x1b" not in result.stderr
    assert not out.exists()
