"""The compiler through the Python API, on the bundled examples."""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import commcanary
from commcanary import BudgetError, InputError


def canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def test_demo_summary(demo_trace: Path) -> None:
    canary = commcanary.compile(demo_trace)
    s = canary.summary
    assert (s["source_events"], s["canary_events"]) == (10, 5)
    assert s["event_compression_ratio"] == 2.0
    assert s["fidelity_mode"] == "lossless_timing"
    assert s["source_bytes"] == 3608
    data = canary.to_bytes()
    assert len(data) == s["canary_bytes"]
    assert s["byte_compression_ratio"] == round(s["source_bytes"] / s["canary_bytes"], 3)
    # The canary file is canonical JSON: re-serializing it changes nothing.
    assert canonical(json.loads(data)) == data


def test_source_commitment_recomputes_with_hashlib(demo_trace: Path) -> None:
    trace = json.loads(demo_trace.read_text())
    events = sorted(trace["events"], key=lambda e: e["start_us"])
    projection = canonical({**trace, "events": events})
    canary = commcanary.compile(demo_trace)
    assert canary.summary["source_bytes"] == len(projection)
    assert canary.commitments["source_trace_sha256"] == hashlib.sha256(projection).hexdigest()


def test_provenance_recomputes_with_hashlib(long_trace: Path) -> None:
    doc = commcanary.compile(long_trace).document
    compiler = dict(doc["compiler"])
    want = compiler.pop("artifact_provenance_sha256")
    compiler.pop("canary_bytes")
    compiler.pop("byte_compression_ratio")
    assert hashlib.sha256(canonical({**doc, "compiler": compiler})).hexdigest() == want


def test_long_trace_bounds_at_limit_two(long_trace: Path) -> None:
    canary = commcanary.compile(long_trace, timing_sample_limit=2)
    assert canary.fidelity_mode == "bounded_approximate"
    b = canary.bounds
    assert (b["max_gap_error_us"], b["max_skew_error_us"], b["max_compute_before_error_us"]) == (
        3.731571429,
        3.187,
        3.643,
    )
    assert (b["max_pressure_error"], b["max_prefix_gap_error_us"]) == (0.0, 4.666714286)


def test_budget_refusal_reports_achieved_value(long_trace: Path) -> None:
    with pytest.raises(BudgetError, match=r"max_skew_error_us=2\.779 us exceeds budget 0\.1 us"):
        commcanary.compile(long_trace, timing_sample_limit=4, budgets={"max_skew_error_us": 0.1})
    with pytest.raises(BudgetError, match="lossless timing was requested"):
        commcanary.compile(long_trace, timing_sample_limit=4, lossless_timing=True)


def test_occurrences_are_numpy_columns(long_trace: Path) -> None:
    canary = commcanary.compile(long_trace)
    occ = canary.occurrences()
    assert isinstance(occ["gap_us"], np.ndarray)
    assert occ["gap_us"].shape == (56,)
    trace = json.loads(long_trace.read_text())
    starts = sorted(e["start_us"] for e in trace["events"])
    assert occ["gap_us"].sum() == pytest.approx(starts[-1] - starts[0], abs=1e-6)


def test_trace_columns(long_trace: Path) -> None:
    trace = commcanary.load_trace(long_trace)
    assert trace.event_count == 56
    assert trace.signature_count == 3
    start = trace.column("start_us")
    assert start.dtype == np.float64 and start.shape == (56,)
    with pytest.raises(ValueError, match="unknown trace column"):
        trace.column("nope")


def test_max_events_marks_partial_source(long_trace: Path) -> None:
    canary = commcanary.compile(long_trace, max_events=10)
    assert canary.source_events == 10
    assert canary.summary["source_coverage_status"] == "partial_source"
    assert commcanary.compile(long_trace).summary["source_coverage_status"] == "full_source"


def test_same_input_same_bytes_across_threads(demo_trace: Path, long_trace: Path) -> None:
    paths = [demo_trace, long_trace] * 4
    with ThreadPoolExecutor(max_workers=4) as pool:
        outputs = list(pool.map(lambda p: commcanary.compile(p).to_bytes(), paths))
    assert all(o == outputs[i % 2] for i, o in enumerate(outputs))


def test_bytes_and_gzip_inputs(tmp_path: Path, demo_trace: Path) -> None:
    import gzip

    raw = demo_trace.read_bytes()
    gz = tmp_path / "trace.json.gz"
    gz.write_bytes(gzip.compress(raw))
    want = commcanary.compile(demo_trace).to_bytes()
    assert commcanary.compile(raw).to_bytes() == want
    assert commcanary.compile(gz).to_bytes() == want


def test_input_errors_name_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {"format": "commcanary.trace.v1", "events": [{"op": "all_reduce", "bytes": 0, "ranks": 2}]}
        )
    )
    with pytest.raises(
        InputError, match=r"bad\.json: trace event 0 field 'bytes' must be a positive integer"
    ):
        commcanary.compile(bad)
