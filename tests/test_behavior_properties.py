"""Properties of the verifiers on generated traces.

Whatever the trace and the limit: the independent source verifier accepts
every canary the compiler produces from it; a lossless canary is
behaviourally verified against its own trace (it *is* the reference); and any
canary verified by ``verify-behavior`` is also source-verified, full-source
and ranking-consistent (the statuses never contradict the verdict).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import commcanary
from commcanary.fidelity import SourceTrace, verify_fidelity
from test_compile_properties import traces


@given(traces(), st.integers(2, 12))
def test_source_verifier_accepts_every_compiled_canary(trace: dict[str, Any], limit: int) -> None:
    canary = json.loads(commcanary.compile(json.dumps(trace).encode(), timing_sample_limit=limit).to_bytes())
    result = verify_fidelity(SourceTrace(trace), canary)
    assert result["status"] == "source_verified", [c for c in result["checks"] if c["status"] != "pass"]


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(traces(), st.integers(2, 12))
def test_verdicts_are_consistent(tmp_path: Path, trace: dict[str, Any], limit: int) -> None:
    trace_path = tmp_path / "t.json"
    trace_path.write_text(json.dumps(trace))
    lossless = commcanary.compile(trace_path, timing_sample_limit=max(2, len(trace["events"]))).write(
        tmp_path / "l.json"
    )
    assert commcanary.verify_behavior(trace_path, lossless)["status"] == "behaviorally_verified"
    canary = commcanary.compile(trace_path, timing_sample_limit=limit).write(tmp_path / "c.json")
    result = commcanary.verify_behavior(trace_path, canary)
    assert result["source_verified_status"] == "source_verified"
    rows_pass = all(row["status"] == "pass" for row in result["configurations"])
    assert (result["behavioral_fidelity_status"] == "pass") == rows_pass
    verified = rows_pass and result["ranking"]["status"] == "pass"
    assert (result["status"] == "behaviorally_verified") == verified
