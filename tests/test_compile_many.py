"""``compile-many`` in this process: one canary per trace, each the bytes
``compile`` writes, a summary that matches its schema, failures listed, and
refusals before any work."""

from __future__ import annotations

import json
import shutil
from importlib.resources import files
from pathlib import Path

import jsonschema
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from commcanary.compile_many import SUMMARY_NAME, canary_name, compile_many
from conftest import EXAMPLES

runner = CliRunner()
TRACES = [EXAMPLES / "llama70b_tp8_trace.json", EXAMPLES / "llama70b_tp8_trace_long.json"]


def test_canary_names() -> None:
    assert canary_name("a/job.trace.json.gz") == "job.canary.json"
    assert canary_name("job.json") == "job.canary.json"
    assert canary_name("x.canary.json") == "x.canary.canary.json"
    assert canary_name(".json") == ".json.canary.json"


def test_each_canary_is_the_single_compile(tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text("{")
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["compile-many", *map(str, TRACES), str(bad), "-o", str(out), "--timing-sample-limit", "4"]
    )
    assert result.exit_code == 3, result.output
    assert "compiled 2 of 3 traces" in result.stdout
    assert f"{bad}  FAILED: " in result.stdout
    for t in TRACES:
        expected = commcanary.compile(t, timing_sample_limit=4).to_bytes()
        assert (out / canary_name(t)).read_bytes() == expected
    assert sorted(p.name for p in out.iterdir()) == sorted([SUMMARY_NAME, *map(canary_name, TRACES)])
    summary = json.loads((out / SUMMARY_NAME).read_bytes())
    schema = json.loads((files("commcanary") / "schemas" / "compile_many.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(summary)
    assert (summary["compiled"], summary["failed"]) == (2, 1)
    assert summary["options"]["timing_sample_limit"] == 4
    assert summary["traces"][2]["error"].startswith(str(bad))


def test_a_trace_that_no_longer_compiles_leaves_no_stale_canary(tmp_path: Path) -> None:
    trace, out = tmp_path / "job.trace.json", tmp_path / "out"
    shutil.copy(TRACES[0], trace)
    assert compile_many([trace], out)[0].ok
    assert (out / "job.canary.json").exists()
    trace.write_text("{")
    outcome = compile_many([trace], out)[0]
    assert not outcome.ok
    assert not (out / "job.canary.json").exists()
    assert sorted(p.name for p in out.iterdir()) == [SUMMARY_NAME]


def test_the_api_returns_outcomes_in_input_order(tmp_path: Path) -> None:
    outcomes = compile_many(list(reversed(TRACES)), tmp_path / "o", threads=1, lossless_timing=True)
    assert [o.trace for o in outcomes] == list(reversed(TRACES))
    assert all(
        o.ok and o.summary is not None and o.summary["fidelity_mode"] == "lossless_timing" for o in outcomes
    )


def test_refusals_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    twin = tmp_path / "twin"
    twin.mkdir()
    shutil.copyfile(TRACES[0], twin / TRACES[0].name)
    cases = [
        (
            [str(TRACES[0]), str(twin / TRACES[0].name)],
            3,
            "would both be compiled to llama70b_tp8_trace.canary.json",
        ),
        ([str(TRACES[0]), "--timing-sample-limit", "1"], 2, "--timing-sample-limit must be at least 2"),
        ([str(tmp_path / "missing.json")], 3, "does not exist"),
        ([str(TRACES[0]), "--workers", "0"], 2, "--workers must be at least 1"),
    ]
    for args, code, text in cases:
        result = runner.invoke(app, ["compile-many", *args, "-o", str(out)])
        assert result.exit_code == code, (args, result.output)
        assert text in result.output
        assert not out.exists()


def test_an_out_dir_that_is_a_file_is_refused_before_any_compile(tmp_path: Path) -> None:
    occupied = tmp_path / "occupied"
    occupied.write_text("x")
    result = runner.invoke(app, ["compile-many", str(TRACES[0]), "-o", str(occupied)])
    assert result.exit_code == 3, result.output
    assert "cannot create" in result.output or "not a directory" in result.output
    assert occupied.read_text() == "x"


def test_the_summary_may_not_overwrite_a_trace(tmp_path: Path) -> None:
    trace = tmp_path / "compile-many.summary.json"
    shutil.copyfile(TRACES[0], trace)
    before = trace.read_bytes()
    result = runner.invoke(app, ["compile-many", str(trace), "-o", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "is the input TRACE..." in result.output
    assert trace.read_bytes() == before
