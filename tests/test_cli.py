"""The command line through Typer's runner: output lines, exit codes, files."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from commcanary.cli import app, main

runner = CliRunner()


def test_compile_demo_prints_the_summary_line(tmp_path: Path, demo_trace: Path) -> None:
    out = tmp_path / "workload.canary.json"
    result = runner.invoke(app, ["compile", str(demo_trace), "--output", str(out)])
    assert result.exit_code == 0, result.output
    line = result.stdout.strip()
    canary = json.loads(out.read_bytes())
    ratio = canary["compiler"]["byte_compression_ratio"]
    assert line == (
        f"compiled 10 trace events into 5 canary events; event ratio=2.0x, byte ratio={ratio!r}x, timing=lossless_timing"
    )
    # The file on disk is exactly the canonical bytes the ratio is computed over.
    assert out.stat().st_size == canary["compiler"]["canary_bytes"]


def test_compile_bounded_prints_unrounded_bounds(tmp_path: Path, long_trace: Path) -> None:
    out = tmp_path / "c.json"
    result = runner.invoke(app, ["compile", str(long_trace), "-o", str(out), "--timing-sample-limit", "2"])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1] == (
        "approximation: gap<=3.731571429 us, skew<=3.187 us, compute-before<=3.643 us, "
        "pressure<=0.0, prefix-gap<=4.666714286 us"
    )


def test_budget_refusal_writes_nothing(tmp_path: Path, long_trace: Path) -> None:
    out = tmp_path / "tight.canary.json"
    result = runner.invoke(
        app,
        [
            "compile",
            str(long_trace),
            "-o",
            str(out),
            "--timing-sample-limit",
            "4",
            "--max-skew-error-us",
            "0.1",
            "--max-overlap-error-us",
            "0.1",
        ],
    )
    assert result.exit_code == 3
    assert (
        result.stderr.strip()
        == "commcanary: timing fidelity max_skew_error_us=2.779 us exceeds budget 0.1 us"
    )
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_option_errors(tmp_path: Path, demo_trace: Path) -> None:
    out = tmp_path / "x.json"
    for args, message in [
        (["--timing-sample-limit", "1"], "--timing-sample-limit must be at least 2"),
        (["--max-events", "-1"], "--max-events must be non-negative"),
        (["--max-gap-error-us", "-0.5"], "--max-gap-error-us must be non-negative"),
    ]:
        result = runner.invoke(app, ["compile", str(demo_trace), "-o", str(out), *args])
        assert result.exit_code == 2, args
        assert result.stderr.strip() == f"commcanary: {message}"
    assert (
        runner.invoke(
            app, ["compile", str(demo_trace), "-o", str(out), "--timing-sample-limit", "x"]
        ).exit_code
        == 2
    )
    assert runner.invoke(app, ["compile", str(demo_trace)]).exit_code == 2
    assert not out.exists()


def test_missing_output_directory(tmp_path: Path, demo_trace: Path) -> None:
    result = runner.invoke(app, ["compile", str(demo_trace), "-o", str(tmp_path / "nope" / "x.json")])
    assert result.exit_code == 3
    assert "does not exist" in result.stderr


def test_version_lists_formats() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("commcanary ")
    assert "  canary: commcanary.canary.v3" in result.stdout


def test_main_returns_exit_codes(tmp_path: Path, demo_trace: Path, capsys: object) -> None:
    assert main(["compile", str(demo_trace), "-o", str(tmp_path / "a.json")]) == 0
    assert main(["compile", str(tmp_path / "missing.json"), "-o", str(tmp_path / "b.json")]) == 3
    assert main(["nonsense-command"]) == 2
    assert main(["--version"]) == 0


def test_compile_of_a_profiler_trace_points_to_the_importer(tmp_path: Path) -> None:
    kineto = Path(__file__).parent / "data" / "fixtures" / "kineto" / "gloo_w4_ddp_straggler" / "markers"
    out = tmp_path / "c.json"
    result = runner.invoke(app, ["compile", str(kineto / "rank0.json.gz"), "-o", str(out)])
    assert result.exit_code == 3
    line = result.output.strip()
    assert len(line.splitlines()) == 1 and "rank0.json.gz" in line
    assert "PyTorch profiler (Kineto) trace" in line and "commcanary import-kineto" in line
    assert not out.exists()
