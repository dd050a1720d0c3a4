"""Every command refuses an output that would overwrite one of its inputs or
another of its outputs: a usage error (exit 2) naming both, nothing written,
the input untouched. Paths are compared after resolving links, and hard links
to the same file count as the same file."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from conftest import EXAMPLES

runner = CliRunner()
DEMO = EXAMPLES / "llama70b_tp8_trace.json"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A trace, its canary, two reports of it and a configuration file, in one directory."""
    d = tmp_path_factory.mktemp("inputs")
    trace = d / "t.json"
    shutil.copyfile(DEMO, trace)
    canary = d / "c.canary.json"
    commcanary.compile(trace).write(canary)
    base, cand = d / "a.report.json", d / "b.report.json"
    commcanary.replay(canary).write(base)
    commcanary.replay(canary, backend=commcanary.Backend(latency_floor_us=9.0)).write(cand)
    configs = d / "configs.json"
    configs.write_text(json.dumps([{"name": "one"}, {"name": "two", "latency_floor_us": 3.5}]))
    return {"trace": trace, "canary": canary, "base": base, "cand": cand, "configs": configs}


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def assert_refused(
    args: list[str], files: dict[str, Path], flag: str, target: Path, what: str, work: Path | None = None
) -> None:
    directories = {p.parent for p in files.values()} | ({work} if work else set())
    before = {d: snapshot(d) for d in directories}
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr == f"commcanary: {flag} {target} is {what}; choose another path\n"
    assert {d: snapshot(d) for d in directories} == before


# (command line, flag refused, the path given, what it is), built from the input files.
Case = Callable[[dict[str, Path], Path], tuple[list[str], str, Path, str]]
CASES: dict[str, Case] = {
    "compile -o TRACE": lambda f, w: (
        ["compile", str(f["trace"]), "-o", str(f["trace"])],
        "--output",
        f["trace"],
        "the input TRACE",
    ),
    "compile --search-evidence-output TRACE": lambda f, w: (
        [
            "compile",
            str(f["trace"]),
            "-o",
            str(w / "s.json"),
            "--behavior-search",
            "--search-evidence-output",
            str(f["trace"]),
        ],
        "--search-evidence-output",
        f["trace"],
        "the input TRACE",
    ),
    "compile --search-evidence-output CANARY": lambda f, w: (
        [
            "compile",
            str(f["trace"]),
            "-o",
            str(w / "s.json"),
            "--behavior-search",
            "--search-evidence-output",
            str(w / "s.json"),
        ],
        "--search-evidence-output",
        w / "s.json",
        "the --output file",
    ),
    "compile -o --reference-trace": lambda f, w: (
        [
            "compile",
            str(f["trace"]),
            "-o",
            str(f["configs"]),
            "--require-behavior-verification",
            "--reference-trace",
            str(f["configs"]),
        ],
        "--output",
        f["configs"],
        "the --reference-trace file",
    ),
    "replay -o CANARY": lambda f, w: (
        ["replay", str(f["canary"]), "-o", str(f["canary"])],
        "--output",
        f["canary"],
        "the input CANARY",
    ),
    "replay --html CANARY": lambda f, w: (
        ["replay", str(f["canary"]), "-o", str(w / "r.json"), "--html", str(f["canary"])],
        "--html",
        f["canary"],
        "the input CANARY",
    ),
    "replay --html REPORT": lambda f, w: (
        ["replay", str(f["canary"]), "-o", str(w / "r.json"), "--html", str(w / "r.json")],
        "--html",
        w / "r.json",
        "the --output file",
    ),
    "compare -o BASELINE": lambda f, w: (
        ["compare", str(f["base"]), str(f["cand"]), "-o", str(f["base"])],
        "--output",
        f["base"],
        "the input BASELINE",
    ),
    "compare -o CANDIDATE": lambda f, w: (
        ["compare", str(f["base"]), str(f["cand"]), "-o", str(f["cand"])],
        "--output",
        f["cand"],
        "the input CANDIDATE",
    ),
    "compare --html CANDIDATE": lambda f, w: (
        ["compare", str(f["base"]), str(f["cand"]), "-o", str(w / "x.json"), "--html", str(f["cand"])],
        "--html",
        f["cand"],
        "the input CANDIDATE",
    ),
    "compare --html OUT": lambda f, w: (
        ["compare", str(f["base"]), str(f["cand"]), "-o", str(w / "x.json"), "--html", str(w / "x.json")],
        "--html",
        w / "x.json",
        "the --output file",
    ),
    "verify-report -o REPORT": lambda f, w: (
        ["verify-report", str(f["base"]), str(f["canary"]), "-o", str(f["base"])],
        "--output",
        f["base"],
        "the input REPORT",
    ),
    "verify-report -o CANARY": lambda f, w: (
        ["verify-report", str(f["base"]), str(f["canary"]), "-o", str(f["canary"])],
        "--output",
        f["canary"],
        "the input CANARY",
    ),
    "verify-fidelity -o TRACE": lambda f, w: (
        ["verify-fidelity", str(f["trace"]), str(f["canary"]), "-o", str(f["trace"])],
        "--output",
        f["trace"],
        "the input TRACE",
    ),
    "verify-fidelity -o CANARY": lambda f, w: (
        ["verify-fidelity", str(f["trace"]), str(f["canary"]), "-o", str(f["canary"])],
        "--output",
        f["canary"],
        "the input CANARY",
    ),
    "verify-behavior -o CANARY": lambda f, w: (
        ["verify-behavior", str(f["trace"]), str(f["canary"]), "-o", str(f["canary"])],
        "--output",
        f["canary"],
        "the input CANARY",
    ),
    "verify-behavior -o --configurations": lambda f, w: (
        [
            "verify-behavior",
            str(f["trace"]),
            str(f["canary"]),
            "-o",
            str(f["configs"]),
            "--configurations",
            str(f["configs"]),
        ],
        "--output",
        f["configs"],
        "the --configurations file",
    ),
    "render-html -o REPORT": lambda f, w: (
        ["render-html", str(f["base"]), "-o", str(f["base"])],
        "--output",
        f["base"],
        "the input REPORT",
    ),
    "compile-many --out-dir TRACE...": lambda f, w: (
        (
            ["compile-many", str(f["trace"]), str(w / "t.canary.json"), "-o", str(w)],
            "--out-dir",
            w / "t.canary.json",
            "the input TRACE...",
        )
        if (w / "t.canary.json").write_bytes(f["trace"].read_bytes())
        else None
    ),
    "import-kineto -o TRACE...": lambda f, w: (
        ["import-kineto", str(f["trace"]), "-o", str(f["trace"])],
        "--output",
        f["trace"],
        "the input TRACE...",
    ),
    "import-nccl-profiler -o DIR": lambda f, w: (
        ["import-nccl-profiler", str(w), "-o", str(w)],
        "--output",
        w,
        "the input DIR",
    ),
    "comm-perf -o INSPECTOR...": lambda f, w: (
        ["comm-perf", str(f["trace"]), "-o", str(f["trace"])],
        "--output",
        f["trace"],
        "the input INSPECTOR...",
    ),
    "comm-perf -o --nccl-tests": lambda f, w: (
        ["comm-perf", str(f["trace"]), "--nccl-tests", str(f["configs"]), "-o", str(f["configs"])],
        "--output",
        f["configs"],
        "the --nccl-tests file",
    ),
    "diagnose -o EVIDENCE...": lambda f, w: (
        ["diagnose", "hang", str(f["trace"]), "-o", str(f["trace"])],
        "--output",
        f["trace"],
        "the input EVIDENCE...",
    ),
    "diagnose stragglers -o TRACE...": lambda f, w: (
        ["diagnose", "stragglers", str(f["trace"]), "-o", str(f["trace"])],
        "--output",
        f["trace"],
        "the input TRACE...",
    ),
    "gate -o RUNS...": lambda f, w: (
        ["gate", "calibrate", str(f["base"]), "-o", str(f["base"])],
        "--output",
        f["base"],
        "the input RUNS...",
    ),
    "steps -o TRACE...": lambda f, w: (
        ["steps", str(f["trace"]), "-o", str(f["trace"])],
        "--output",
        f["trace"],
        "the input TRACE...",
    ),
    "timeline -o TRACE...": lambda f, w: (
        ["timeline", str(f["trace"]), "-o", str(f["trace"])],
        "--output",
        f["trace"],
        "the input TRACE...",
    ),
    "baseline -o TRACE": lambda f, w: (
        ["baseline", str(f["trace"]), "-o", str(f["trace"]), "--method", "frequency"],
        "--output",
        f["trace"],
        "the input TRACE",
    ),
    "reduce -o TRACE": lambda f, w: (
        ["reduce", str(f["trace"]), "-o", str(f["trace"])],
        "--output",
        f["trace"],
        "the input TRACE",
    ),
    "reduce -o configurations": lambda f, w: (
        ["reduce", str(f["trace"]), "-o", str(f["configs"]), "--configurations", str(f["configs"])],
        "--output",
        f["configs"],
        "the --configurations file",
    ),
    "calibrate -o CANARY": lambda f, w: (
        ["calibrate", str(f["base"]), "--canary", str(f["canary"]), "-o", str(f["canary"])],
        "--output",
        f["canary"],
        "the --canary file",
    ),
    "validate-model -o CANARY": lambda f, w: (
        ["validate-model", str(f["canary"]), "--configurations", str(f["configs"]), "-o", str(f["canary"])],
        "--output",
        f["canary"],
        "the input CANARY",
    ),
    "replay -o --sign-key": lambda f, w: (
        ["replay", str(f["canary"]), "-o", str(f["configs"]), "--sign-key", str(f["configs"])],
        "--output",
        f["configs"],
        "the --sign-key file",
    ),
    "replay --sign-key OUT.sig": lambda f, w: (
        ["replay", str(f["canary"]), "-o", str(w / "r.json"), "--sign-key", str(w / "r.json.sig")],
        "--sign-key",
        w / "r.json.sig",
        "the --sign-key file",
    ),
    "sign ARTIFACT --key ARTIFACT.sig": lambda f, w: (
        ["sign", str(f["trace"]), "--key", str(f["trace"]) + ".sig"],
        "--key",
        Path(str(f["trace"]) + ".sig"),
        "the --key file",
    ),
    "export-param -o CANARY": lambda f, w: (
        ["export-param", str(f["canary"]), "-o", str(f["canary"])],
        "--output",
        f["canary"],
        "the input CANARY",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_output_that_is_an_input_is_refused(files: dict[str, Path], tmp_path: Path, case: str) -> None:
    args, flag, target, what = CASES[case](files, tmp_path)
    assert_refused(args, files, flag, target, what, tmp_path)


def test_every_command_is_covered() -> None:
    commands = {case.split()[0] for case in CASES}
    # capture reads no input file (its inputs are the shards it creates), nor does keygen;
    # serve, push and agent write no output file (the server keeps its data directory, the agent its archive).
    registered = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert commands == registered - {"capture", "keygen", "serve", "push", "agent"}


def test_a_symlink_to_the_input_is_the_input(files: dict[str, Path], tmp_path: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(files["trace"])
    assert_refused(
        ["compile", str(files["trace"]), "-o", str(link)],
        files,
        "--output",
        link,
        "the input TRACE",
        tmp_path,
    )
    # ... and so is a path through a symlinked directory.
    linked_dir = tmp_path / "dir"
    linked_dir.symlink_to(files["canary"].parent, target_is_directory=True)
    through = linked_dir / files["canary"].name
    assert_refused(
        ["replay", str(files["canary"]), "-o", str(through)], files, "--output", through, "the input CANARY"
    )


def test_a_hard_link_to_the_input_is_the_input(files: dict[str, Path], tmp_path: Path) -> None:
    hard = tmp_path / "hard.json"
    os.link(files["base"], hard)
    assert_refused(
        ["render-html", str(files["base"]), "-o", str(hard)],
        files,
        "--output",
        hard,
        "the input REPORT",
        tmp_path,
    )


def test_a_relative_spelling_of_the_input_is_the_input(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(files["trace"].parent)
    target = Path(".") / ".." / files["trace"].parent.name / "t.json"
    assert_refused(["compile", "t.json", "-o", str(target)], files, "--output", target, "the input TRACE")


def test_the_default_evidence_path_is_checked_too(tmp_path: Path) -> None:
    # x.canary.json's default ledger is x.canary.search-evidence.json: here, the input.
    trace = tmp_path / "x.canary.search-evidence.json"
    shutil.copyfile(DEMO, trace)
    before = trace.read_bytes()
    out = tmp_path / "x.canary.json"
    result = runner.invoke(app, ["compile", str(trace), "-o", str(out), "--behavior-search"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"commcanary: --search-evidence-output {trace} is the input TRACE; choose another path\n"
    )
    assert trace.read_bytes() == before and not out.exists()


def test_distinct_outputs_are_written(files: dict[str, Path], tmp_path: Path) -> None:
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    result = runner.invoke(app, ["replay", str(files["canary"]), "-o", str(out), "--html", str(page)])
    assert result.exit_code == 0, result.output
    assert out.is_file() and page.is_file()
