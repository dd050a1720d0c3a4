"""The shared golden vectors in tests/golden/, checked from Python (the Rust
suite reads the same files)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import commcanary
from commcanary import _core
from conftest import GOLDEN

CANONICAL = json.loads((GOLDEN / "canonical_json.json").read_text())
PYFLOAT = json.loads((GOLDEN / "pyfloat.json").read_text())
COMPILE = json.loads((GOLDEN / "compile.json").read_text())


def dumps(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


@pytest.mark.parametrize("case", CANONICAL, ids=[c["name"] for c in CANONICAL])
def test_canonical_vector(case: dict[str, str]) -> None:
    assert dumps(json.loads(case["input"])) == case["canonical"]
    assert _core.canonical_json(case["input"].encode()).decode() == case["canonical"]
    assert hashlib.sha256(case["canonical"].encode()).hexdigest() == case["sha256"]


@pytest.mark.parametrize("case", PYFLOAT, ids=[c["hex"] for c in PYFLOAT])
def test_float_vector(case: dict[str, Any]) -> None:
    x = float.fromhex(case["hex"])
    assert repr(x) == _core.float_repr(x) == case["repr"]
    for n, want in case["round"].items():
        assert repr(round(x, int(n))) == repr(_core.py_round(x, int(n))) == want


@pytest.mark.parametrize("case", COMPILE, ids=[c["name"] for c in COMPILE])
def test_compile_vector(case: dict[str, Any]) -> None:
    if "trace_file" in case:
        source: bytes = (GOLDEN / Path(case["trace_file"])).read_bytes()
    else:
        source = dumps(case["trace"]).encode()
    canary = commcanary.compile(source, **case.get("options", {}))
    s, want = canary.summary, case["expected"]
    for key in (
        "source_events",
        "canary_events",
        "sequence_motif_count",
        "event_compression_ratio",
        "timing_mode",
    ):
        assert s[key] == want[key], key
    assert s["fidelity_mode"] == want["fidelity_mode"]
    assert s["bounds"] == want["bounds"]
    assert s["source_trace_sha256"] == want["source_trace_sha256"]
    assert s["execution_semantic_sha256"] == want["execution_semantic_sha256"]
    assert hashlib.sha256(canary.to_bytes()).hexdigest() == want["canary_sha256"]


def test_walkthrough_bounds_are_the_published_ones() -> None:
    # Independent of the regenerated file: the numbers the walkthrough prints.
    by_name = {c["name"]: c["expected"] for c in COMPILE}
    b2 = by_name["walkthrough-limit-2"]["bounds"]
    assert (b2["max_gap_error_us"], b2["max_skew_error_us"], b2["max_compute_before_error_us"]) == (
        3.731571429,
        3.187,
        3.643,
    )
    assert (b2["max_pressure_error"], b2["max_prefix_gap_error_us"]) == (0.0, 4.666714286)
    b4 = by_name["walkthrough-limit-4"]["bounds"]
    assert (b4["max_gap_error_us"], b4["max_skew_error_us"], b4["max_compute_before_error_us"]) == (
        2.095,
        2.779,
        2.75,
    )
    assert b4["max_prefix_gap_error_us"] == 1.713
    motif = by_name["motif-ab"]
    assert (motif["source_events"], motif["canary_events"]) == (12, 1)


REPLAY = json.loads((GOLDEN / "replay.json").read_text())


@pytest.mark.parametrize("case", REPLAY, ids=[c["name"] for c in REPLAY])
def test_replay_vector(case: dict[str, Any]) -> None:
    source = next(c for c in COMPILE if c["name"] == case["compile_case"])
    if "trace_file" in source:
        trace: bytes = (GOLDEN / Path(source["trace_file"])).read_bytes()
    else:
        trace = dumps(source["trace"]).encode()
    canary = commcanary.compile(trace, **source.get("options", {}))
    settings = dict(case["settings"])
    backend = commcanary.Backend(**settings.pop("backend", {}))
    report = commcanary.replay(canary, backend=backend, **settings)
    want = case["expected"]
    assert report.summary_line() == want["line"]
    assert report.metrics == want["metrics"]
    assert (report.by_phase, report.by_op) == (want["by_phase"], want["by_op"])
    assert hashlib.sha256(report.to_bytes()).hexdigest() == want["report_sha256"]


def test_replay_vectors_include_the_published_walkthrough_lines() -> None:
    lines = {c["name"]: c["expected"]["line"] for c in REPLAY}
    assert lines["walkthrough-demo/default"].endswith(
        "median=91.977 us p95=107.746 us p99=108.321 us hidden=16.27%"
    )
    assert lines["walkthrough-demo/floor-12"].endswith(
        "median=121.409 us p95=146.616 us p99=152.095 us hidden=13.25%"
    )
