"""``replay --backend-file``: a backend from a file (``commcanary calibrate
-o``) replaces the backend options; bad files and mixed options are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from conftest import EXAMPLES

runner = CliRunner()
BACKEND = {
    "label": "calibrated to gloo on a test host",
    "bandwidth_gbps": 10.5,
    "latency_floor_us": 470.0,
    "compute_pressure": 0.55,
    "overlap_efficiency": 0.72,
}


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    return commcanary.compile(EXAMPLES / "llama70b_tp8_trace.json").write(tmp_path / "c.json")


def test_the_file_gives_the_backend(canary: Path, tmp_path: Path) -> None:
    file = tmp_path / "backend.json"
    file.write_text(json.dumps({"format": "commcanary.backend.v1", "backend": BACKEND, "errors": []}))
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["replay", str(canary), "--backend-file", str(file), "-o", str(out)])
    assert result.exit_code == 0, result.output
    backend = json.loads(out.read_text())["backend"]
    assert {k: backend[k] for k in BACKEND} == BACKEND
    direct = commcanary.replay(canary, backend=commcanary.Backend(**BACKEND))
    assert json.loads(out.read_text())["metrics"] == direct.metrics


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"format": "commcanary.backend.v0", "backend": BACKEND},
            "field 'format' must be 'commcanary.backend.v1'",
        ),
        (
            {"format": "commcanary.backend.v1", "backend": {**BACKEND, "extra": 1}},
            "field 'backend' must have exactly",
        ),
        ({"format": "commcanary.backend.v1", "backend": {**BACKEND, "bandwidth_gbps": "fast"}}, "wrong type"),
        ({"format": "commcanary.backend.v1", "backend": {**BACKEND, "bandwidth_gbps": -1.0}}, "bandwidth"),
    ],
)
def test_bad_backend_files_are_refused(canary: Path, tmp_path: Path, doc: dict, message: str) -> None:
    file = tmp_path / "backend.json"
    file.write_text(json.dumps(doc))
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["replay", str(canary), "--backend-file", str(file), "-o", str(out)])
    assert result.exit_code in (2, 3) and message in result.output, result.output
    assert not out.exists()


def test_backend_options_and_a_file_do_not_mix(canary: Path, tmp_path: Path) -> None:
    file = tmp_path / "backend.json"
    file.write_text(json.dumps({"format": "commcanary.backend.v1", "backend": BACKEND}))
    argv = [
        "replay",
        str(canary),
        "--backend-file",
        str(file),
        "--latency-floor-us",
        "3",
        "-o",
        str(tmp_path / "r"),
    ]
    result = runner.invoke(app, argv)
    assert result.exit_code == 3 and "cannot be combined with --backend-file" in result.output, result.output


def test_an_op_override_changes_that_op_only_and_the_report_recomputes(canary: Path, tmp_path: Path) -> None:
    plain = commcanary.replay(canary, include_samples=True)
    slow = commcanary.Backend(op_overrides=(("all_reduce", 100.0, 5.0),))
    report = commcanary.replay(canary, backend=slow, include_samples=True)
    assert report.section("backend")["op_overrides"] == [
        {"op": "all_reduce", "latency_floor_us": 100.0, "bandwidth_gbps": 5.0}
    ]
    assert "op_overrides" not in plain.section("backend")  # default reports are unchanged
    assert report.samples is not None and plain.samples is not None
    assert (report.samples["collective_us"] > plain.samples["collective_us"] + 90).all()
    out = tmp_path / "r.json"
    report.write(out)
    assert commcanary.verify_report(out, canary)["status"] == "model_recomputed"
    file = tmp_path / "backend.json"
    entry = {"op": "all_reduce", "latency_floor_us": 100.0, "bandwidth_gbps": 5.0}
    file.write_text(
        json.dumps({"format": "commcanary.backend.v1", "backend": {**BACKEND, "op_overrides": [entry]}})
    )
    result = runner.invoke(
        app, ["replay", str(canary), "--backend-file", str(file), "-o", str(tmp_path / "f.json")]
    )
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "f.json").read_text())["backend"]["op_overrides"] == [entry]


def test_bad_op_overrides_are_refused(canary: Path) -> None:
    for overrides in (
        (("all_reduce", -1.0, 5.0),),
        (("all_reduce", 1.0, 0.0),),
        (("b", 1.0, 1.0), ("b", 2.0, 2.0)),
    ):
        with pytest.raises(commcanary.InputError, match="op_overrides"):
            commcanary.replay(canary, backend=commcanary.Backend(op_overrides=overrides))


def test_serialized_groups_share_one_queue_and_the_report_recomputes(canary: Path, tmp_path: Path) -> None:
    plain = commcanary.replay(canary, include_samples=True)
    serial = commcanary.replay(
        canary, backend=commcanary.Backend(serialize_groups=True), include_samples=True
    )
    assert serial.section("backend")["serialize_groups"] is True
    assert "serialize_groups" not in plain.section("backend")
    out = tmp_path / "serial.json"
    serial.write(out)
    assert commcanary.verify_report(out, canary)["status"] == "model_recomputed"
