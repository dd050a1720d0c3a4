"""``diagnose stragglers``, ``steps`` and ``timeline`` read a merged
``commcanary.trace.v1`` (from ``import-kineto`` of several ranks) as they read
the per-rank traces it came from; a trace without every member's arrival, a
merged trace mixed with per-rank traces, and a merged trace given as hang
evidence are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from conftest import FIXTURES

DECODE = FIXTURES / "kineto" / "gloo_tp4_decode"
TRACES = [DECODE / f"rank{r}.json.gz" for r in range(4)]
runner = CliRunner()


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("merged") / "job.trace.json"
    commcanary.import_kineto(TRACES).write(path)
    return path


def test_stragglers_of_the_merged_trace_are_those_of_the_rank_traces(merged: Path) -> None:
    ranks = commcanary.diagnose_stragglers(TRACES).document
    doc = commcanary.diagnose_stragglers(merged).document
    key = ("rank", "step", "kind", "op")
    assert [tuple(f[k] for k in key) for f in doc["findings"]] == [
        tuple(f[k] for k in key) for f in ranks["findings"]
    ]
    for got, want in zip(doc["findings"], ranks["findings"], strict=True):
        # The trace keeps times to the nanosecond: the same costs.
        assert got["estimated_cost_us"] == pytest.approx(want["estimated_cost_us"], abs=0.01)
        assert got["usual_gap_before_us"] == pytest.approx(want["usual_gap_before_us"], abs=0.01)
    assert {f["kind"] for f in doc["evidence"]["files"]} == {"commcanary.trace.v1"}
    assert sorted(f["rank"] for f in doc["evidence"]["files"]) == [0, 1, 2, 3]
    assert doc["step_source"] == "ProfilerStep"  # the events' `step`


def test_steps_and_timeline_read_the_merged_trace(merged: Path, tmp_path: Path) -> None:
    steps = commcanary.recover_steps(merged)
    assert steps.count == 40
    agreement = steps.document["agreement_with_profiler_steps"]
    assert agreement["matched"] == agreement["markers"] == 160
    out = tmp_path / "timeline.json"
    result = runner.invoke(app, ["timeline", str(merged), "-o", str(out)])
    assert result.exit_code == 0, result.output
    events = json.loads(out.read_text())["traceEvents"]
    marks = [e for e in events if e.get("cat") == "straggler"]
    assert sorted(m["args"]["step"] for m in marks) == [7, 8, 14, 22, 23, 24, 31, 38]
    assert {e["pid"] for e in events if e.get("ph") == "X"} == {0, 1, 2, 3}


def test_a_trace_without_arrivals_is_refused(merged: Path, tmp_path: Path) -> None:
    data = json.loads(merged.read_text())
    for e in data["events"]:
        e.pop("rank_arrival_us", None)
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data))
    for argv in (["diagnose", "stragglers"], ["steps"], ["timeline"]):
        out = tmp_path / "out.json"
        result = runner.invoke(app, [*argv, str(bare), "-o", str(out)])
        assert result.exit_code == 3, (argv, result.output)
        assert "no event with every member's arrival" in result.output
        assert len(result.output.strip().splitlines()) == 1 and not out.exists()


def test_a_merged_trace_with_rank_traces_or_as_hang_evidence_is_refused(merged: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["diagnose", "stragglers", str(merged), str(TRACES[0]), "-o", str(out)])
    assert result.exit_code == 3 and "cannot be read with" in result.output, result.output
    result = runner.invoke(app, ["diagnose", "hang", str(merged), "-o", str(out)])
    assert result.exit_code == 3 and "no hang evidence" in result.output, result.output
    assert "a merged trace leaves out the collectives that never finished" in result.output
    assert not out.exists()
