"""Step loops on the repository's real DDP jobs (torch 2.15, gloo, 4 ranks, 24 steps; with and
without ProfilerStep markers): the loop canary is one event, verifies from its trace on the
independent Python path, runs the flat canary's program (same commitments, same replay report
outside the sections that name the canary, same PARAM export), validates against the schema, and
a tampered loop is caught."""

from __future__ import annotations

import copy
import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from commcanary.fidelity import verify_fidelity

DATA = Path(__file__).parent / "data" / "fixtures" / "kineto" / "gloo_w4_ddp_straggler"
runner = CliRunner()


@pytest.fixture(scope="module", params=["markers", "nomarkers"])
def job(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp(f"loop-{request.param}")
    trace_path = work / "trace.json"
    commcanary.import_kineto(str(DATA / request.param)).write(trace_path)
    trace = json.loads(trace_path.read_bytes())
    loop = commcanary.compile(trace_path)
    flat = commcanary.compile(trace_path, step_loops=False)
    loop.write(work / "loop.canary.json")
    flat.write(work / "flat.canary.json")
    return {"work": work, "trace_path": trace_path, "trace": trace, "loop": loop, "flat": flat}


def test_the_import_carries_iterations(job: dict[str, Any]) -> None:
    trace = job["trace"]
    steps = {e["step"] for e in trace["events"] if "step" in e}
    assert len(steps) >= 20
    if "nomarkers" in str(job["work"]):
        assert trace["workload"]["kineto_steps"] == "recovered"
    else:
        assert "kineto_steps" not in trace["workload"]


def test_a_real_job_is_one_loop_running_the_flat_program(job: dict[str, Any]) -> None:
    loop, flat = job["loop"], job["flat"]
    doc = json.loads(loop.to_bytes())
    assert doc["format"] == commcanary.formats.CANARY_LOOP_FORMAT
    assert json.loads(flat.to_bytes())["format"] == commcanary.CANARY_FORMAT
    assert loop.summary["canary_events"] == 1 and list(doc["events"][0]) == ["loop", "schedule", "variants"]
    iterations = len({e["step"] for e in job["trace"]["events"] if "step" in e})
    assert loop.summary["event_compression_ratio"] >= (iterations - 2) * 0.8
    assert loop.summary["canary_bytes"] < flat.summary["canary_bytes"]
    for key in ("execution_semantic_sha256", "calibration_evaluation_sha256", "expanded_canary_events"):
        assert loop.summary[key] == flat.summary[key], key
    assert verify_fidelity(job["trace"], doc)["status"] == "source_verified"
    jsonschema.Draft202012Validator(
        json.loads(files("commcanary").joinpath("schemas/canary.schema.json").read_text())
    ).validate(doc)


def test_replay_and_export_do_not_tell_them_apart(job: dict[str, Any]) -> None:
    work = job["work"]
    reports = {}
    for kind in ("loop", "flat"):
        result = runner.invoke(
            app, ["replay", str(work / f"{kind}.canary.json"), "-o", str(work / f"{kind}.r.json")]
        )
        assert result.exit_code == 0, result.output
        doc = json.loads((work / f"{kind}.r.json").read_bytes())
        reports[kind] = {k: v for k, v in doc.items() if k not in ("canary", "canary_summary")}
        result = runner.invoke(
            app, ["export-param", str(work / f"{kind}.canary.json"), "-o", str(work / f"{kind}.param.json")]
        )
        assert result.exit_code == 0, result.output
    assert reports["loop"] == reports["flat"]
    assert (work / "loop.param.json").read_bytes() == (work / "flat.param.json").read_bytes()
    result = runner.invoke(
        app,
        [
            "verify-report",
            str(work / "loop.r.json"),
            str(work / "loop.canary.json"),
            "-o",
            str(work / "vr.json"),
        ],
    )
    assert result.exit_code == 0, result.output


def test_bounded_loops_verify_too(job: dict[str, Any]) -> None:
    canary = commcanary.compile(job["trace_path"], timing_sample_limit=4)
    doc = json.loads(canary.to_bytes())
    assert canary.summary["fidelity_mode"] == "bounded_approximate" and "loop" in doc["events"][0]
    assert verify_fidelity(job["trace"], doc)["status"] == "source_verified"


def test_a_tampered_loop_fails_verification(job: dict[str, Any]) -> None:
    doc = json.loads(job["loop"].to_bytes())
    bad = copy.deepcopy(doc)
    slot = max(bad["events"][0]["loop"], key=lambda leaf: len(leaf["timing"]))
    record = slot["timing"][-1]
    record[1] = round(record[1] + 1.0, 9)  # one iteration's gap, off by a microsecond
    checks = {c["name"]: c["status"] for c in verify_fidelity(job["trace"], bad)["checks"]}
    assert checks["source_commitments"] == "fail" and checks["execution_semantic_sha256"] == "fail"
    # Swapping two iterations' shapes breaks the walk over the source.
    bad = copy.deepcopy(doc)
    schedule = bad["events"][0]["schedule"]
    if len(schedule) >= 2:
        schedule[0], schedule[1] = schedule[1], schedule[0]
        assert verify_fidelity(job["trace"], bad)["status"] == "failed"


def test_the_command_line_keeps_it_flat_on_request(job: dict[str, Any]) -> None:
    work = job["work"]
    out = work / "cli-flat.canary.json"
    result = runner.invoke(app, ["compile", str(job["trace_path"]), "-o", str(out), "--no-step-loops"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_bytes())["format"] == "commcanary.canary.v3"
    assert out.read_bytes() == (work / "flat.canary.json").read_bytes()


def test_a_loop_in_a_v3_file_is_refused(job: dict[str, Any], tmp_path: Path) -> None:
    text = job["loop"].to_bytes().replace(b"commcanary.canary.v4", b"commcanary.canary.v3")
    (tmp_path / "bad.canary.json").write_bytes(text)
    result = runner.invoke(app, ["replay", str(tmp_path / "bad.canary.json"), "-o", str(tmp_path / "r.json")])
    assert result.exit_code == 3
    assert "step loop, which only a commcanary.canary.v4 canary may hold" in result.output
    assert not (tmp_path / "r.json").exists()
