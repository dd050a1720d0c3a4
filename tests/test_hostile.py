"""Hostile input: every failure is exit 3, one line naming the file, nothing written."""

from __future__ import annotations

import contextlib
import copy
import gzip
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commcanary.cli import main
from conftest import EXAMPLES

DEMO = json.loads((EXAMPLES / "llama70b_tp8_trace.json").read_text())


def run_compile(trace_path: Path, out: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["compile", str(trace_path), "-o", str(out)])
    return code, err.getvalue()


def assert_refused(trace_path: Path, out: Path, *fragments: str) -> str:
    code, err = run_compile(trace_path, out)
    lines = err.splitlines()
    assert code == 3, err
    assert len(lines) == 1, lines
    assert lines[0].startswith("commcanary: ")
    assert "internal error" not in lines[0]
    assert str(trace_path) in lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert not out.exists()
    return lines[0]


def write(tmp: Path, name: str, data: bytes | str) -> Path:
    path = tmp / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def event_trace(**fields: Any) -> str:
    event = {"op": "all_reduce", "bytes": 1024, "ranks": [0, 1], "start_us": 0.0, **fields}
    return json.dumps({"format": "commcanary.trace.v1", "events": [event]})


CASES: list[tuple[str, str | bytes, tuple[str, ...]]] = [
    ("malformed.json", '{"format": "commcanary.trace.v1", "events": [', ("is not valid JSON",)),
    ("wrong_format.json", '{"format": "commcanary.trace.v0", "events": []}', ("'format'",)),
    ("nan.json", event_trace().replace('"start_us": 0.0', '"start_us": NaN'), ("field 'start_us'", "NaN")),
    ("inf.json", event_trace().replace('"start_us": 0.0', '"start_us": -Infinity'), ("field 'start_us'",)),
    ("negative_bytes.json", event_trace(bytes=-4), ("field 'bytes' must be a positive integer",)),
    ("fraction_bytes.json", event_trace(bytes=4.5), ("field 'bytes' must be a positive integer",)),
    ("duplicate_ranks.json", event_trace(ranks=[0, 1, 1]), ("field 'ranks'", "duplicate rank 1")),
    ("negative_rank.json", event_trace(ranks=[0, -1]), ("field 'ranks'",)),
    ("huge_rank_count.json", event_trace(ranks=10**7), ("field 'ranks'",)),
    (
        "sender_outside.json",
        event_trace(op="send", sender_rank=0, receiver_rank=7),
        ("field 'receiver_rank'",),
    ),
    ("arrival_keys.json", event_trace(rank_arrival_us={"0": 1.0, "2": 1.0}), ("field 'rank_arrival_us'",)),
    ("arrival_list.json", event_trace(rank_arrival_us=[1.0]), ("field 'rank_arrival_us'",)),
    (
        "skew_mismatch.json",
        event_trace(rank_arrival_us=[0.0, 5.0], arrival_skew_us=1.0),
        ("field 'arrival_skew_us'",),
    ),
    (
        "nested.json",
        event_trace().replace('"start_us"', '"metadata": ' + "[" * 100 + "]" * 100 + ', "start_us"'),
        ("field 'metadata'", "max_json_depth"),
    ),
    (
        "duplicate_key.json",
        event_trace().replace('"bytes": 1024', '"bytes": 1024, "bytes": 2048'),
        ("duplicate",),
    ),
    ("empty.json", b"", ("is not valid JSON",)),
    ("not_object.json", "[1, 2]", ("must contain a JSON object",)),
    ("events_object.json", '{"format": "commcanary.trace.v1", "events": {}}', ("'events'",)),
    ("no_events.json", '{"format": "commcanary.trace.v1", "events": []}', ("empty trace",)),
    ("unknown_op.json", event_trace(op="reduce"), ("op 'reduce' is unsupported",)),
    ("bad_utf8.json", b'{"format": "commcanary.trace.v1", "events": [], "x": "\xff"}', ("UTF-8",)),
    ("truncated.json.gz", gzip.compress(event_trace().encode())[:-9], ("gzip",)),
]


@pytest.mark.parametrize(("name", "data", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_hostile_case(tmp_path: Path, name: str, data: str | bytes, fragments: tuple[str, ...]) -> None:
    assert_refused(write(tmp_path, name, data), tmp_path / "out.json", *fragments)


def test_ten_million_rank_list(tmp_path: Path) -> None:
    ranks = "[" + ",".join(["0"] * 10_000_000) + "]"
    path = write(tmp_path, "big_ranks.json", event_trace().replace("[0, 1]", ranks))
    assert_refused(path, tmp_path / "out.json", "field 'ranks'")


def test_directory_and_missing_file(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    assert_refused(tmp_path / "dir", tmp_path / "out.json", "is a directory")
    assert_refused(tmp_path / "missing.json", tmp_path / "out.json", "does not exist")


def test_output_in_missing_directory(tmp_path: Path) -> None:
    code, err = run_compile(EXAMPLES / "llama70b_tp8_trace.json", tmp_path / "missing" / "out.json")
    assert code == 3
    assert err.startswith("commcanary: cannot write") and "does not exist" in err
    assert not (tmp_path / "missing").exists()


json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
)
json_any = st.recursive(
    json_leaf,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=8,
)
FIELDS = [
    "op",
    "bytes",
    "ranks",
    "phase",
    "group",
    "start_us",
    "gap_us",
    "rank_arrival_us",
    "arrival_skew_us",
    "compute_before_us",
    "compute_overlap_us",
    "compute_pressure",
    "concurrent_groups",
    "sender_rank",
    "receiver_rank",
    "custom_op",
    "observed_exposed_us",
    "rank_count",
    "message_sequence",
    "metadata",
]


@st.composite
def mutated_trace(draw: st.DrawFn) -> bytes:
    trace = copy.deepcopy(DEMO)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["set", "delete", "top"]))
        events = trace.get("events")
        if kind != "top" and not (isinstance(events, list) and events and isinstance(events[0], dict)):
            continue
        event = trace["events"][draw(st.integers(0, len(trace["events"]) - 1))] if kind != "top" else {}
        if not isinstance(event, dict):
            continue
        if kind == "set":
            event[draw(st.sampled_from(FIELDS))] = draw(json_any)
        elif kind == "delete":
            event.pop(draw(st.sampled_from(["op", "bytes", "ranks", "start_us"])), None)
        elif kind == "top":
            trace[draw(st.sampled_from(["format", "events", "workload", "system"]))] = draw(json_any)
    data = json.dumps(trace).encode()
    if draw(st.booleans()) and draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return data


@given(mutated_trace())
def test_mutated_traces_fail_cleanly_or_compile(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        path = write(tmp_path, "mutant.json", data)
        out = tmp_path / "out.json"
        code, err = run_compile(path, out)
        if code == 0:
            assert out.exists() and err == ""
            json.loads(out.read_bytes())
        else:
            lines = err.splitlines()
            assert code == 3 and len(lines) == 1, err
            assert lines[0].startswith("commcanary: ") and "internal error" not in lines[0]
            assert str(path) in lines[0]
            assert not out.exists()
