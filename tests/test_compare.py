"""The comparison gate: verdicts, reasons with codes, compatibility."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import commcanary
from commcanary import InputError
from commcanary.compare import Thresholds, compare
from commcanary.replay import Backend, Report, replay


@pytest.fixture(scope="module")
def reports() -> tuple[Report, Report]:
    from conftest import EXAMPLES

    canary = commcanary.compile(EXAMPLES / "llama70b_tp8_trace.json")
    return replay(canary), replay(canary, backend=Backend(latency_floor_us=12.0))


def messages(result: dict) -> list[str]:
    return [r["message"] for r in result["reasons"]]


def test_default_thresholds_fail_with_the_walkthrough_reasons(reports: tuple[Report, Report]) -> None:
    result = compare(*reports)
    assert result["verdict"] == "fail"
    assert messages(result)[:6] == [
        "p99 regression 40.4% exceeds 15.0%",
        "p95 regression 36.1% exceeds 10.0%",
        "median regression 32.0% exceeds 8.0%",
        "phase 'decode' p99 regression 41.5% exceeds 15.0%",
        "phase 'prefill' p99 regression 16.8% exceeds 15.0%",
        "operation 'all_reduce' p99 regression 40.4% exceeds 15.0%",
    ]
    # Warnings do not vanish under a failure.
    assert result["reasons"][6]["code"] == "hidden_communication_drop_warning"
    delta = result["delta"]
    assert (delta["median_pct"], delta["p95_pct"], delta["p99_pct"]) == (32.0, 36.08, 40.41)
    assert (delta["median_absolute_us"], delta["p95_absolute_us"], delta["p99_absolute_us"]) == (
        29.432,
        38.87,
        43.774,
    )
    assert delta["communication_hidden_pct_points"] == -3.02
    assert result["worst_regressions"]["phase"]["name"] == "decode"


def test_absolute_floors_warn_and_name_the_hidden_drop(reports: tuple[Report, Report]) -> None:
    floors = Thresholds(
        p99_absolute_threshold_us=1000,
        p95_absolute_threshold_us=1000,
        median_absolute_threshold_us=1000,
        breakdown_absolute_threshold_us=1000,
    )
    result = compare(*reports, floors)
    assert result["verdict"] == "warn"
    assert [r["code"] for r in result["reasons"]] == ["hidden_communication_drop_warning"]
    assert "3.02 points" in messages(result)[0]
    loose = Thresholds(**{**floors.__dict__, "hidden_drop_threshold_points": 100})
    assert compare(*reports, loose)["verdict"] == "pass"


def test_raised_percentages_warn(reports: tuple[Report, Report]) -> None:
    result = compare(*reports, Thresholds(50, 50, 50, breakdown_threshold_pct=50))
    assert result["verdict"] == "warn"
    assert {r["code"] for r in result["reasons"]} >= {"latency_regression_warning"}


def test_identical_reports_pass(reports: tuple[Report, Report]) -> None:
    result = compare(reports[0], reports[0])
    assert result["verdict"] == "pass"
    assert result["reasons"] == [
        {"code": "within_thresholds", "level": "pass", "message": "candidate is within configured thresholds"}
    ]


def test_incompatible_reports(demo_trace: Path) -> None:
    canary = commcanary.compile(demo_trace)
    a, b = replay(canary), replay(canary, seed=8)
    with pytest.raises(InputError, match="different replay protocol fingerprints"):
        compare(a, b)
    result = compare(a, a, allow_mismatch=True)
    assert result["verdict"] == "pass"
    mismatched = compare(a, b, Thresholds(1000, 1000, 1000, 1000, 1000, 1000, 1000), allow_mismatch=True)
    assert mismatched["verdict"] == "warn"
    assert mismatched["reasons"][-1]["code"] == "incompatible_reports"


def test_negative_threshold_is_refused(reports: tuple[Report, Report]) -> None:
    with pytest.raises(InputError, match="p95_threshold_pct must be non-negative"):
        compare(*reports, Thresholds(p95_threshold_pct=-1))


def test_breakdown_reasons_come_worst_regression_first(tmp_path: Path) -> None:
    # A slower latency floor: the small reduce_scatter regresses far more
    # than the large all_gather, and its reason comes first.
    events = [
        {
            "op": op,
            "bytes": size,
            "ranks": 8,
            "group": "tp",
            "phase": "serve",
            "gap_us": 5.0,
            "compute_overlap_us": 0.0,
        }
        for _ in range(20)
        for op, size in (("all_gather", 1 << 22), ("reduce_scatter", 1 << 10))
    ]
    trace = tmp_path / "serve.trace.json"
    trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    canary = commcanary.compile(trace)
    result = compare(replay(canary), replay(canary, backend=Backend(latency_floor_us=200.0)))
    ops = [m for m in messages(result) if m.startswith("operation '")]
    assert [m.split("'")[1] for m in ops] == ["reduce_scatter", "all_gather"], ops
    pcts = [float(m.split("regression ")[1].split("%")[0]) for m in ops]
    assert pcts[0] > pcts[1]
    assert [r["name"] for r in result["breakdown_delta"]["by_op"]] == ["reduce_scatter", "all_gather"]
