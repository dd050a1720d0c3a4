"""Properties of the Flight Recorder reader: any dump torch could write reads
back exactly, in every pickle protocol and as JSON; damaged bytes are an
input error, never a crash, and never run anything."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import commcanary
from commcanary.errors import InputError

names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
shapes = st.lists(st.lists(st.integers(0, 4096), max_size=3), max_size=3)
entries = st.fixed_dictionaries(
    {
        "record_id": st.integers(0, 10**6),
        "pg_id": st.integers(0, 16),
        "process_group": st.tuples(names, names),
        "collective_seq_id": st.integers(0, 2**40),
        "p2p_seq_id": st.integers(0, 100),
        "op_id": st.integers(0, 2**40),
        "profiling_name": st.sampled_from(
            ["gloo:all_reduce", "nccl:all_gather", "nccl:send 0->1", "nccl:coalesced"]
        ),
        "time_created_ns": st.integers(0, 2**62),
        "time_discovered_started_ns": st.one_of(st.none(), st.integers(0, 2**62)),
        "input_sizes": shapes,
        "input_dtypes": st.lists(st.sampled_from(["Float", "BFloat16", "Long"]), max_size=3),
        "output_sizes": shapes,
        "output_dtypes": st.lists(st.sampled_from(["Float", "Half"]), max_size=3),
        "state": st.sampled_from(["scheduled", "started", "completed"]),
        "retired": st.booleans(),
        "timeout_ms": st.integers(0, 10**7),
        "is_p2p": st.booleans(),
        "frames": st.lists(
            st.fixed_dictionaries({"name": names, "filename": names, "line": st.integers(0, 10**5)}),
            max_size=3,
        ),
    }
)
dumps = st.fixed_dictionaries(
    {
        "version": st.just("2.10"),
        "pg_config": st.just({"": {"name": "", "desc": "", "ranks": "[]"}}),
        "pg_status": st.dictionaries(
            st.integers(0, 8).map(str),
            st.just(
                {"last_enqueued_collective": 1, "last_started_collective": -1, "last_completed_collective": 1}
            ),
        ),
        "entries": st.lists(entries, max_size=8),
    }
)


def numel(sizes: list[list[int]]) -> int:
    total = 0
    for shape in sizes:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


@settings(max_examples=60, deadline=None)
@given(dump=dumps, protocol=st.sampled_from([0, 1, 2, 3, 4, 5, "json"]))
def test_a_dump_reads_back_exactly(
    tmp_path_factory: pytest.TempPathFactory, dump: dict[str, Any], protocol: Any
) -> None:
    path = tmp_path_factory.mktemp("fr") / "fr_trace_rank_0"
    if protocol == "json":
        path.write_text(json.dumps(dump))
    else:
        path.write_bytes(pickle.dumps(dump, protocol=protocol))
    read = commcanary.read_flight_recorder(path)
    columns = read.entries
    assert len(read) == len(dump["entries"])
    for i, e in enumerate(dump["entries"]):
        assert columns["collective_seq_id"][i] == e["collective_seq_id"]
        assert columns["time_created_ns"][i] == e["time_created_ns"]
        assert columns["process_group"][i] == e["process_group"][0]
        assert columns["group_desc"][i] == e["process_group"][1]
        assert columns["input_numel"][i] == min(numel(e["input_sizes"]), 2**63 - 1)
        assert columns["input_dtypes"][i] == ",".join(e["input_dtypes"])
        assert bool(columns["retired"][i]) == e["retired"]
        assert columns["state"][i] == e["state"]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_damaged_dumps_are_input_errors(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    dump = data.draw(dumps)
    raw = bytearray(pickle.dumps(dump, protocol=data.draw(st.sampled_from([0, 2, 4]))))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(1, len(raw)))
    path: Path = tmp_path_factory.mktemp("bad") / "fr_trace_rank_0"
    path.write_bytes(bytes(raw[:cut]))
    try:
        commcanary.read_flight_recorder(path)
    except InputError as exc:
        assert str(exc).startswith(str(path))
