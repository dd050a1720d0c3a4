"""``commcanary import-kineto`` and :func:`commcanary.import_kineto` on one rank's profile."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from commcanary.errors import InputError, OptionError

INPUTS = Path(__file__).parent / "conformance" / "inputs"
CLEAN = INPUTS / "kineto_clean.json"
TRUNCATED = INPUTS / "kineto_truncated.json"


def _profile(events: list[dict[str, object]], **top: object) -> dict[str, object]:
    return {"traceEvents": events, **top}


def _comms(ts: float, dur: float, name: str = "allreduce", **args: object) -> dict[str, object]:
    base: dict[str, object] = {
        "Collective name": name,
        "In msg nelems": 1024,
        "Out msg nelems": 1024,
        "Group size": 2,
        "dtype": "Float",
        "Process Group Name": "0",
        "Process Group Ranks": "[0, 1]",
    }
    base.update(args)
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": "record_param_comms",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "dur": dur,
        "args": base,
    }


def test_the_clean_profile_imports_compiles_and_replays(tmp_path: Path) -> None:
    imported = commcanary.import_kineto(CLEAN, workload_name="w", phase="decode")
    assert (imported.imported, imported.control, imported.empty, imported.nested) == (4, 1, 0, 0)
    trace = imported.trace
    assert trace.event_count == 4
    assert trace.column("start_us")[0] == 0.0
    out = imported.write(tmp_path / "t.json")
    doc = json.loads(out.read_bytes())
    assert doc["format"] == "commcanary.trace.v1"
    assert doc["system"]["source_format"] == "pytorch-kineto"
    assert "no cross-rank arrival skew" in doc["workload"]["notes"]
    assert all("rank_arrival_us" not in e and "compute_overlap_us" not in e for e in doc["events"])
    # The written file is the canonical form of the same trace.
    assert out.read_bytes() == trace.to_bytes()
    canary = commcanary.compile(out)
    assert canary.summary["source_events"] == 4
    assert commcanary.compile(trace).to_bytes() == canary.to_bytes()
    report = commcanary.replay(canary)
    assert report.metrics["count"] == 4


def test_cli_prints_the_summary_and_refuses_truncated_groups(tmp_path: Path) -> None:
    run = CliRunner().invoke
    out = tmp_path / "t.json"
    result = run(app, ["import-kineto", str(CLEAN), "-o", str(out), "--phase", "decode"])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"imported 4 collective events (skipped 1 control, 0 empty): {out}\n"
    bad = tmp_path / "bad.json"
    result = run(app, ["import-kineto", str(TRUNCATED), "-o", str(bad)])
    assert result.exit_code == 3
    assert "refusing to fabricate group membership" in result.stderr
    assert not bad.exists()
    result = run(app, ["import-kineto", str(CLEAN), "-o", str(CLEAN)])
    assert result.exit_code == 2
    result = run(app, ["import-kineto", str(CLEAN), "-o", str(out), "--max-json-items", "0"])
    assert result.exit_code == 2
    assert result.stderr == "commcanary: --max-json-items must be at least 1\n"


def test_rules_of_selection(tmp_path: Path) -> None:
    events = [
        _comms(10, 50),
        _comms(20, 5),  # nested inside the first on the same thread
        _comms(100, 5, name="wait"),
        _comms(200, 5, **{"In msg nelems": 0, "Out msg nelems": 0}),
        _comms(300, 5, name="gather"),
        _comms(
            400,
            5,
            name="all_gather",
            **{"Process Group Name": "", "Process Group Ranks": "", "Group size": 4},
        ),
        _comms(500, 5, name="send", **{"Src Rank": 0, "Dst Rank": 1}),
        {
            "ph": "X",
            "cat": "kernel",
            "name": "record_param_comms",
            "ts": 5,
            "dur": 1,
            "args": {"Collective name": "allreduce"},
        },
    ]
    path = tmp_path / "p.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_profile(events, baseTimeNanoseconds=7)).encode()))
    imported = commcanary.import_kineto(path)
    assert (imported.imported, imported.control, imported.empty, imported.nested) == (4, 1, 1, 1)
    doc = json.loads(imported.trace.to_bytes())
    ops = [(e["op"], e.get("custom_op", False), e["group"], e["ranks"]) for e in doc["events"]]
    assert ops == [
        ("all_reduce", False, "0", [0, 1]),
        ("gather", True, "0", [0, 1]),
        ("all_gather", False, "default", [0, 1, 2, 3]),
        ("send", False, "0", [0, 1]),
    ]
    assert doc["events"][2]["metadata"]["kineto_ranks_assumed"] is True
    assert (doc["events"][3]["sender_rank"], doc["events"][3]["receiver_rank"]) == (0, 1)
    assert doc["system"]["kineto_base_time_ns"] == 7
    only = commcanary.import_kineto(path, process_group="default")
    assert only.imported == 1


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"format": "commcanary.trace.v1", "events": []}, "field 'traceEvents' must be a list"),
        ({"traceEvents": []}, "no importable record_param_comms collective events found"),
        ({"traceEvents": [_comms(0, 1, dtype="Quaternion")]}, "unknown kineto dtype 'Quaternion'"),
        (
            {"traceEvents": [_comms(0, 1, **{"Process Group Ranks": None, "Group size": 0})]},
            "no usable group information",
        ),
    ],
)
def test_bad_profiles_are_input_errors(tmp_path: Path, document: object, fragment: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match=fragment) as caught:
        commcanary.import_kineto(path)
    assert str(caught.value).startswith(str(path))


def test_option_errors_name_the_option(tmp_path: Path) -> None:
    with pytest.raises(OptionError) as caught:
        commcanary.import_kineto(CLEAN, max_input_bytes=0)
    assert caught.value.option == "max_input_bytes"
    with pytest.raises(InputError, match="max_input_bytes=10"):
        commcanary.import_kineto(CLEAN, max_input_bytes=10)


def test_a_real_nccl_profile_links_each_collective_to_its_kernel() -> None:
    from conftest import FIXTURES

    profile = FIXTURES / "kineto" / "third_party_hta_nccl_allreduce_2rank" / "rank0.json.gz"
    raw = json.loads(gzip.decompress(profile.read_bytes()))
    kernels: dict[int, list[float]] = {}
    for e in raw["traceEvents"]:
        if e.get("cat") == "kernel" and "External id" in e.get("args", {}):
            kernels.setdefault(int(e["args"]["External id"]), []).append(float(e["dur"]))
    comms = {
        f"kineto-{i:06d}": e
        for i, e in enumerate(raw["traceEvents"])
        if e.get("name") == "record_param_comms" and e.get("cat", "cpu_op") == "cpu_op"
    }
    imported = commcanary.import_kineto(profile)
    assert (imported.imported, imported.control) == (21, 6)
    doc = json.loads(imported.trace.to_bytes())
    assert doc["system"]["kineto_backend"] == "nccl"
    assert sorted({e["op"] for e in doc["events"]}) == ["all_reduce", "broadcast"]
    for event in doc["events"]:
        source = comms[event["id"]]
        durations = kernels[int(source["args"]["External id"])]
        assert event["metadata"]["kineto_kernel_count"] == len(durations) == 1
        assert event["metadata"]["kineto_kernel_dur_us"] == durations[0]
    canary = commcanary.compile(imported.trace)
    assert canary.summary["source_events"] == 21
