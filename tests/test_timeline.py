"""``commcanary timeline`` and :func:`commcanary.timeline`: the Chrome-trace
timeline of the real gloo traces (ranks, group tracks, flows, steps,
straggler marks), of the real hang traces with the hang's marks, and bad
input refused."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from conftest import FIXTURES
from test_diagnose_stragglers import DECODE, TRACES, no_markers, write_trace

HANG = FIXTURES / "hang" / "gloo_tp4_rank3_skips_allreduce"
runner = CliRunner()


def events(doc: dict[str, Any], ph: str, cat: str | None = None) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] == ph and (cat is None or e.get("cat") == cat)]


def check_layout(doc: dict[str, Any]) -> None:
    """Every event names a declared process and track; times are non-negative."""
    assert doc["otherData"]["format"] == "commcanary.timeline.v1"
    names = {(e["pid"], e.get("tid")) for e in events(doc, "M") if e["name"] == "thread_name"}
    for e in doc["traceEvents"]:
        if e["ph"] != "M":
            assert (e["pid"], e["tid"]) in names, e
            assert e["ts"] >= 0 and e.get("dur", 0) >= 0


def test_the_gloo_timeline_has_ranks_tracks_flows_steps_and_the_straggler() -> None:
    made = commcanary.timeline(TRACES)
    doc = made.document()
    check_layout(doc)
    assert made.ranks == 4 and made.straggler_marks == 8 and made.hang_marks == 0
    processes = {e["pid"]: e["args"]["name"] for e in events(doc, "M") if e["name"] == "process_name"}
    assert processes == {r: f"rank {r}" for r in range(4)}
    tracks = {(e["pid"], e["args"]["name"]) for e in events(doc, "M") if e["name"] == "thread_name"}
    assert (0, "tp_pair_0 (pg 1)") in tracks and (2, "tp_pair_1 (pg 2)") in tracks
    assert (0, "tp_pair_1 (pg 2)") not in tracks
    calls = events(doc, "X", "collective") + events(doc, "X", "p2p")
    assert len(calls) == 4 * 378
    steps = events(doc, "X", "step")
    assert Counter(e["pid"] for e in steps) == {r: 40 for r in range(4)}
    assert {e["name"] for e in steps} == {f"ProfilerStep#{n}" for n in range(1, 41)}
    # Each instance's flow starts once, ends once, and binds to a call slice.
    starts = Counter(e["id"] for e in events(doc, "s"))
    ends = Counter(e["id"] for e in events(doc, "f"))
    assert starts == ends and set(starts.values()) == {1} and len(starts) > 300
    slices = {(e["pid"], e["tid"], e["ts"]) for e in calls}
    assert all((e["pid"], e["tid"], e["ts"]) in slices for e in events(doc, "s") + events(doc, "f"))
    marks = events(doc, "i", "straggler")
    assert {(e["pid"], e["tid"]) for e in marks} == {(2, 1)}
    assert sorted(e["args"]["step"] for e in marks) == [7, 8, 14, 22, 23, 24, 31, 38]


def test_without_markers_the_recovered_steps_are_drawn(tmp_path: Path) -> None:
    bare = [write_trace(tmp_path / t.name, t, no_markers) for t in TRACES]
    doc = commcanary.timeline(bare).document()
    check_layout(doc)
    assert doc["otherData"]["steps"] == "recovered"
    steps = events(doc, "X", "step")
    assert {e["name"] for e in steps} == {f"step {k}" for k in range(40)}
    assert len(events(doc, "i", "straggler")) == 8


def test_the_hang_is_marked_on_its_root_and_stuck_ranks(tmp_path: Path) -> None:
    hang = tmp_path / "hang.json"
    commcanary.diagnose_hang(HANG).write(hang)
    out = tmp_path / "timeline.json"
    traces = sorted(HANG.glob("rank*.window*.json.gz"))
    result = runner.invoke(
        app, ["timeline", *map(str, traces), "--hang", str(hang), "-o", str(out), "--no-cache"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("timeline: 4 ranks")
    doc = json.loads(out.read_bytes())
    check_layout(doc)
    marks = events(doc, "i", "hang")
    roots = [e for e in marks if "root" in e["name"]]
    assert [e["pid"] for e in roots] == [3] and "skipped all_reduce" in roots[0]["name"]
    stuck = sorted(e["pid"] for e in marks if "stuck in all_reduce" in e["name"])
    assert stuck == [0, 1, 2]
    # A mark sits after the rank's last call.
    calls = events(doc, "X", "collective") + events(doc, "X", "p2p")
    last = max(e["ts"] + e["dur"] for e in calls if e["pid"] == 3)
    assert roots[0]["ts"] == pytest.approx(last, abs=0.002)
    assert out.read_bytes() == commcanary.timeline(traces, hang=hang).data  # same input, same bytes


def test_bad_input_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    out = tmp_path / "timeline.json"
    not_hang = tmp_path / "stragglers.json"
    commcanary.diagnose_stragglers(TRACES).write(not_hang)
    result = runner.invoke(
        app, ["timeline", str(DECODE), "--hang", str(not_hang), "-o", str(out), "--no-cache"]
    )
    assert result.exit_code == 3, result.output
    assert "format: expected commcanary.hang.v1" in result.output and not out.exists()
    quiet = [
        write_trace(
            tmp_path / t.name, t, lambda e: not str(e.get("name", "")).startswith(("c10d::", "gloo:"))
        )
        for t in TRACES
    ]
    result = runner.invoke(app, ["timeline", *map(str, quiet), "-o", str(out), "--no-cache"])
    assert result.exit_code == 3 and "no collective calls" in result.output and not out.exists()


def test_a_hang_document_of_another_job_is_refused(tmp_path: Path) -> None:
    # The hang of a 4-rank pipeline put on the traces of a 4-rank decode
    # job: a group of the same name has other ranks; and a world size that
    # differs is refused too.
    other = FIXTURES / "hang" / "gloo_w4_pp_p2p_hang"
    hang = tmp_path / "hang.json"
    commcanary.diagnose_hang(other).write(hang)
    out = tmp_path / "timeline.json"
    result = runner.invoke(app, ["timeline", str(DECODE), "--hang", str(hang), "-o", str(out), "--no-cache"])
    assert result.exit_code == 3 and "group '1' has ranks [0, 1, 2, 3] there, [0, 1]" in result.output
    doc = json.loads(hang.read_text())
    doc["world_size"] = 8
    hang.write_text(json.dumps(doc))
    result = runner.invoke(app, ["timeline", str(DECODE), "--hang", str(hang), "-o", str(out), "--no-cache"])
    assert result.exit_code == 3, result.output
    line = result.output.strip()
    assert "of another job" in line and "world size 8" in line and len(line.splitlines()) == 1
    assert not out.exists()


def test_flight_recorder_dumps_alone_draw_the_timeline_and_its_straggler() -> None:
    # The decode job's gloo dumps (issue times only, no completion times):
    # the same ranks, flows across ranks, steps recovered from the
    # collective sequence, and the straggler on the steps its traces show.
    doc = commcanary.timeline(DECODE / "fr").document()
    check_layout(doc)
    assert doc["otherData"]["source"] == "flight_recorder"
    assert doc["otherData"]["steps"] == "recovered"
    assert {e["pid"] for e in events(doc, "M") if e["name"] == "process_name"} == set(range(4))
    assert len(events(doc, "s")) > 300 and Counter(e["id"] for e in events(doc, "s")) == Counter(
        e["id"] for e in events(doc, "f")
    )
    from_traces = commcanary.timeline(TRACES).document()
    marks = events(doc, "i", "straggler")
    assert {e["pid"] for e in marks} == {2}
    assert sorted(e["args"]["step"] for e in marks) == sorted(
        e["args"]["step"] for e in events(from_traces, "i", "straggler")
    )
    # A dump has no trace beside it here, so a directory with both is read
    # from its traces (the dumps listed, not decoded).
    assert commcanary.timeline(DECODE).document()["otherData"]["source"] == "kineto"


def test_a_hang_from_its_dumps_alone_shows_the_call_in_flight_and_the_marks(tmp_path: Path) -> None:
    dumps = HANG / "fr_during_hang"
    hang = tmp_path / "hang.json"
    commcanary.diagnose_hang(dumps).write(hang)
    out = tmp_path / "timeline.json"
    result = runner.invoke(app, ["timeline", str(dumps), "--hang", str(hang), "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_bytes())
    check_layout(doc)
    calls = events(doc, "X", "collective")
    end = max(e["ts"] + e["dur"] for e in calls)
    # Ranks 0-2 wait in the all_reduce rank 3 skipped; rank 3 waits in its
    # next call, a tp_pair_1 all_gather: each runs to the evidence's end.
    in_flight = {e["pid"]: e["name"] for e in calls if e["args"].get("in_flight")}
    assert in_flight == {
        0: "all_reduce (in flight)",
        1: "all_reduce (in flight)",
        2: "all_reduce (in flight)",
        3: "all_gather (in flight)",
    }
    assert all(
        e["ts"] + e["dur"] == pytest.approx(end, abs=0.002) for e in calls if e["args"].get("in_flight")
    )
    roots = [e for e in events(doc, "i", "hang") if "root" in e["name"]]
    assert [e["pid"] for e in roots] == [3]
    assert out.read_bytes() == commcanary.timeline(dumps, hang=hang).data


def test_dumps_of_two_jobs_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "timeline.json"
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    desync = FIXTURES / "hang" / "gloo_w4_desync_broadcast" / "fr_during_hang"
    for src in (DECODE / "fr" / "fr_trace_rank_0.json.gz", desync / "fr_trace_rank_1.json.gz"):
        (mixed / src.name).write_bytes(src.read_bytes())
    result = runner.invoke(app, ["timeline", str(mixed), "-o", str(out)])
    assert result.exit_code == 3, result.output
    assert len(result.output.strip().splitlines()) == 1 and "dumps of different runs" in result.output
    assert not out.exists()
