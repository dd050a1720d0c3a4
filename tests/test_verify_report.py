"""verify-report: clean reports recompute; every edited number is caught."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import commcanary
from commcanary import InputError
from commcanary.replay import replay
from commcanary.verify import verify_report


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    from conftest import EXAMPLES

    tmp = tmp_path_factory.mktemp("verify")
    canary = commcanary.compile(EXAMPLES / "llama70b_tp8_trace.json")
    canary_path = tmp / "w.canary.json"
    canary.write(canary_path)
    report_path = tmp / "baseline.report.json"
    replay(canary, include_samples=True).write(report_path)
    return canary_path, report_path, json.loads(report_path.read_bytes())


def test_clean_report_recomputes(artifacts: tuple[Path, Path, dict[str, Any]]) -> None:
    canary_path, report_path, _ = artifacts
    result = verify_report(report_path, canary_path)
    assert result["status"] == "model_recomputed"
    assert [c["name"] for c in result["checks"]] == [
        "canary", "simulation_model", "replay_protocol", "backend", "workload", "canary_summary",
        "metrics", "by_phase", "by_op", "calibration", "samples",
    ]  # fmt: skip


def numeric_leaves(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(obj, bool):
        return []
    if isinstance(obj, int | float):
        return [path]
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in numeric_leaves(v, (*path, k))]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in numeric_leaves(v, (*path, i))]
    return []


def edited(doc: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    copy = json.loads(json.dumps(doc))
    node = copy
    for key in path[:-1]:
        node = node[key]
    value = node[path[-1]]
    node[path[-1]] = value + 1 if isinstance(value, int) else value * 1.5 + 0.25
    return copy


# `replay_protocol.max_replay_events` is a ceiling on the work a replay may
# do; no number in the report depends on it, so it is not covered by the
# protocol hash and an edit within the ceiling is not a change of any result.
NOT_RESULTS = {("replay_protocol", "max_replay_events")}


def test_every_numeric_leaf_edit_is_caught(
    artifacts: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    canary_path, _, doc = artifacts
    leaves = [p for p in numeric_leaves(doc) if p not in NOT_RESULTS]
    assert len(leaves) > 200
    for path in leaves:
        tampered = tmp_path / "tampered.json"
        tampered.write_text(json.dumps(edited(doc, path)))
        section = str(path[0])
        try:
            result = verify_report(tampered, canary_path)
        except InputError as exc:
            message = str(exc)
            named = section in message or (path[0] == "samples" and "sample" in message)
            if path[0] == "canary" and path[1] == "source_events":
                named = "source_events" in message
            assert named, f"{path}: {message}"
            continue
        failing = [c["name"] for c in result["checks"] if c["status"] == "fail"]
        assert result["status"] == "failed", f"{path} was not caught"
        assert section in failing or (section == "samples" and "samples" in failing), f"{path}: {failing}"


def test_the_walkthrough_edit_names_row_and_field(
    artifacts: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    canary_path, _, doc = artifacts
    doc = json.loads(json.dumps(doc))
    doc["by_op"][0]["median_us"] *= 0.5
    tampered = tmp_path / "t.json"
    tampered.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"report by_op row 'all_reduce' median_us does not match samples"):
        verify_report(tampered, canary_path)


def test_a_consistent_but_different_report_fails_recomputation(
    artifacts: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    canary_path, _, doc = artifacts
    doc = json.loads(json.dumps(doc))
    doc["backend"]["latency_floor_us"] = 8.5
    tampered = tmp_path / "t.json"
    tampered.write_text(json.dumps(doc))
    result = verify_report(tampered, canary_path)
    assert [c["name"] for c in result["checks"] if c["status"] == "fail"] == [
        "backend",
        "metrics",
        "by_phase",
        "by_op",
        "samples",
    ]
    metrics = next(c for c in result["checks"] if c["name"] == "metrics")
    assert metrics["expected"]["median_us"] != metrics["actual"]["median_us"]


def test_report_and_canary_that_do_not_belong_together(
    artifacts: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    from conftest import EXAMPLES

    _, report_path, _ = artifacts
    other = tmp_path / "other.canary.json"
    commcanary.compile(EXAMPLES / "llama70b_tp8_trace_long.json").write(other)
    with pytest.raises(InputError, match="do not belong together"):
        verify_report(report_path, other)


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda d: d.update(format="commcanary.report.v2"), "format"),
        (lambda d: d.pop("metrics"), "metrics"),
        (lambda d: d["metrics"].update(median_us=float("nan")), "NaN"),
        (lambda d: d["replay_protocol"].update(iterations=-1), "iterations"),
    ],
)
def test_bad_reports_are_input_errors(
    artifacts: tuple[Path, Path, dict[str, Any]], tmp_path: Path, edit: Any, fragment: str
) -> None:
    canary_path, _, doc = artifacts
    doc = json.loads(json.dumps(doc))
    edit(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=fragment):
        verify_report(bad, canary_path)


def test_truncated_report(artifacts: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    canary_path, report_path, _ = artifacts
    bad = tmp_path / "truncated.json"
    bad.write_bytes(report_path.read_bytes()[:-40])
    with pytest.raises(InputError, match="is not valid JSON"):
        verify_report(bad, canary_path)
