"""``commcanary steps`` and :func:`commcanary.recover_steps`: steps recovered
from the collective sequence alone, checked against the real traces'
``ProfilerStep`` markers (and with the markers removed), and bad input
refused."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from conftest import FIXTURES
from test_diagnose_stragglers import DECODE, TRACES, no_markers, write_trace

NCCL = FIXTURES / "kineto" / "third_party_hta_nccl_allreduce_2rank" / "rank0.json.gz"
runner = CliRunner()


def check(report: commcanary.StepsReport) -> dict[str, Any]:
    schema = json.loads(files("commcanary").joinpath("schemas/steps.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report.document)
    return report.document


def test_the_gloo_steps_are_recovered_at_every_marker() -> None:
    report = commcanary.recover_steps(TRACES)
    doc = check(report)
    assert report.count == doc["step_count"] == 40
    assert doc["agreement_with_profiler_steps"] == {"markers": 160, "matched": 160, "fraction": 1.0}
    assert report.agreement == 1.0
    assert all(r["begins_with"]["op"] == "all_reduce" and r["first_step"] == 0 for r in doc["ranks"])
    cols = report.columns()
    assert cols["step"].dtype == np.int64 and list(cols["step"]) == list(range(40))
    assert np.all(np.diff(cols["start_us"]) > 0) and np.all(cols["duration_us"] > 0)
    assert report.lines[-1].endswith("160 of 160 step boundaries at the same collective (100.0%)")


def test_without_markers_the_same_boundaries_come_back(tmp_path: Path) -> None:
    marked = commcanary.recover_steps(TRACES)
    bare = commcanary.recover_steps([write_trace(tmp_path / t.name, t, no_markers) for t in TRACES])
    assert bare.agreement is None and "no ProfilerStep markers" in bare.lines[-1]
    assert bare.steps == marked.steps


def test_a_real_nccl_ddp_trace_steps_start_at_the_buffer_broadcast() -> None:
    doc = check(commcanary.recover_steps(NCCL))
    assert doc["step_count"] == 3
    assert doc["agreement_with_profiler_steps"]["matched"] == 3
    assert doc["ranks"][0]["begins_with"]["op"] == "broadcast"


def test_cli_prints_lines_and_writes_the_document(tmp_path: Path) -> None:
    out = tmp_path / "steps.json"
    result = runner.invoke(app, ["steps", str(DECODE), "-o", str(out), "--no-cache"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("recovered 40 steps from the collective sequence on 4 of 4 ranks")
    assert f"wrote commcanary.steps.v1: {out}" in result.output
    assert out.read_bytes() == commcanary.recover_steps(TRACES).data


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        (lambda e: not str(e.get("name", "")).startswith(("c10d::", "gloo:")), "no collective calls"),
        (lambda e: not str(e.get("name", "")).startswith("c10d::") or e["ts"] < 0, "no collective calls"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(tmp_path: Path, keep: Any, message: str) -> None:
    paths = [write_trace(tmp_path / t.name, t, keep) for t in TRACES]
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["steps", *map(str, paths), "-o", str(out), "--no-cache"])
    assert result.exit_code == 3, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def test_a_sequence_that_never_repeats_is_refused(tmp_path: Path) -> None:
    # Only the first step of each rank: nothing is called twice as a pattern.
    first_end = 0.0
    data = json.loads(__import__("gzip").decompress(TRACES[0].read_bytes()))
    for e in data["traceEvents"]:
        if e.get("name") == "ProfilerStep#1":
            first_end = e["ts"] + e["dur"]
    short = [write_trace(tmp_path / t.name, t, lambda e: e.get("ts", 0) <= first_end) for t in TRACES]
    result = runner.invoke(app, ["steps", *map(str, short), "--no-cache"])
    assert result.exit_code == 3, result.output
    assert "no repeating pattern" in result.output
