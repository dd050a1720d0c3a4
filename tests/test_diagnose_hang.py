"""``commcanary diagnose hang`` and :func:`commcanary.diagnose_hang`: the real
gloo hang from each kind of evidence alone and together, constructed dumps
for every fault kind, and bad evidence refused."""

from __future__ import annotations

import json
import pickle
import shutil
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

import commcanary
import hang_jobs as hj
from commcanary.cli import app
from conftest import FIXTURES

HANG = FIXTURES / "hang" / "gloo_tp4_rank3_skips_allreduce"
runner = CliRunner()


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(files("commcanary").joinpath("schemas/hang.schema.json").read_text())
    return loaded


def check(report: commcanary.HangReport) -> dict[str, Any]:
    jsonschema.Draft202012Validator(schema()).validate(report.document)
    return report.document


def partials(doc: dict[str, Any]) -> set[tuple[str, int | None, tuple[int, ...], tuple[int, ...]]]:
    return {
        (p["group"]["desc"], p["collective_seq_id"], tuple(p["present_ranks"]), tuple(p["missing_ranks"]))
        for p in doc["partial_collectives"]
    }


def edges(doc: dict[str, Any]) -> set[tuple[int, int, str]]:
    return {(e["rank"], e["waits_for"], e["group"]["desc"]) for e in doc["wait_for"]}


def assert_fixture_hang(doc: dict[str, Any]) -> None:
    assert doc["verdict"] == "hang"
    assert [(r["rank"], r["group"]["desc"], r["collective_seq_id"], r["op"]) for r in doc["root"]] == [
        (3, "default_pg", 86, "all_reduce")
    ]
    assert doc["root"][0]["group"] == {"name": "0", "desc": "default_pg", "ranks": [0, 1, 2, 3]}
    assert partials(doc) == {
        ("default_pg", 86, (0, 1, 2), (3,)),
        ("tp_pair_1", 27, (3,), (2,)),
    }
    assert edges(doc) == {
        (0, 3, "default_pg"),
        (1, 3, "default_pg"),
        (2, 3, "default_pg"),
        (3, 2, "tp_pair_1"),
    }
    assert doc["step"]["value"] == 13
    flight = {p["rank"]: p["in_flight"] for p in doc["ranks"]}
    assert {r: (f["op"], f["group"]["desc"], f["collective_seq_id"]) for r, f in flight.items()} == {
        0: ("all_reduce", "default_pg", 86),
        1: ("all_reduce", "default_pg", 86),
        2: ("all_reduce", "default_pg", 86),
        3: ("all_gather", "tp_pair_1", 27),
    }


@pytest.mark.parametrize("encoding", ["pickle", "json"])
def test_fixture_from_the_flight_recorder_dumps_alone(encoding: str) -> None:
    names = [f"fr_trace_rank_{r}" + ("" if encoding == "pickle" else ".json") + ".gz" for r in range(4)]
    doc = check(commcanary.diagnose_hang([HANG / "fr_during_hang" / n for n in names]))
    assert_fixture_hang(doc)
    assert doc["sequence_numbers"] == "flight_recorder"
    assert doc["confidence"] == "high"
    assert "recovered" in doc["step"]["source"]
    if encoding == "pickle":  # pickles carry stacks: where rank 3 called its collective
        frame = {p["rank"]: p["in_flight"]["frame"] for p in doc["ranks"]}[3]
        assert frame == {"file": "/opt/workload/comm_workload.py", "line": 275, "func": "<lambda>"}


def test_fixture_from_the_windowed_traces_alone() -> None:
    doc = check(commcanary.diagnose_hang(sorted(HANG.glob("rank*.window*.json.gz"))))
    assert_fixture_hang(doc)
    assert doc["sequence_numbers"] == "estimated from the traces"
    assert doc["step"]["source"].startswith("ProfilerStep")


def test_fixture_from_everything_in_the_directory() -> None:
    report = commcanary.diagnose_hang(HANG)
    doc = check(report)
    assert_fixture_hang(doc)
    assert doc["step"]["source"].startswith("ProfilerStep")
    stacks = {p["rank"]: p["stack"]["api"] for p in doc["ranks"]}
    assert stacks == {0: "all_reduce", 1: "all_reduce", 2: "all_reduce", 3: "all_gather_into_tensor"}
    kinds = {e["kind"] for e in doc["evidence"] if e["used"]}
    assert kinds == {"flight_recorder", "kineto", "stacks", "exception"}
    skipped = {Path(e["file"]).name for e in doc["evidence"] if not e["used"]}
    assert {"README.md", "ground_truth.json.gz", "oplog.json.gz"} <= skipped
    assert report.data == commcanary.diagnose_hang(HANG).data  # same evidence, same bytes


def test_fixture_from_the_stacks_alone() -> None:
    doc = check(commcanary.diagnose_hang(sorted(HANG.glob("rank*_stacks.txt.gz"))))
    assert doc["verdict"] == "inconclusive"
    assert doc["root"] == [] and doc["partial_collectives"] == []
    calls = {p["rank"]: (p["stack"]["call"], p["stack"]["op"]) for p in doc["ranks"]}
    assert calls == {
        0: ("all_reduce", "all_reduce"),
        1: ("all_reduce", "all_reduce"),
        2: ("all_reduce", "all_reduce"),
        3: ("all_gather_single", "all_gather"),
    }
    text = " ".join(c["statement"] for c in doc["conclusions"])
    assert "rank 3 is in a different call" in text and "cannot be concluded" in text


def test_fixture_from_the_exceptions_alone() -> None:
    doc = check(commcanary.diagnose_hang(sorted(HANG.glob("rank*_exception.txt.gz"))))
    assert doc["verdict"] == "hang" and doc["confidence"] == "low" and doc["root"] == []
    timeouts = {p["rank"]: p["exception"]["timeout_ms"] for p in doc["ranks"]}
    assert timeouts == {0: 10000, 1: 10000, 2: 10000, 3: 10000}


def test_cli_prints_the_answer_first_and_exits_1(tmp_path: Path) -> None:
    out, page = tmp_path / "hang.json", tmp_path / "hang.html"
    result = runner.invoke(
        app, ["diagnose", "hang", str(HANG / "fr_during_hang"), "-o", str(out), "--html", str(page)]
    )
    assert result.exit_code == 1, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("hang: root rank 3 skipped all_reduce #86 on default_pg")
    assert (
        "wait-for: 0-2 -> 3 (all_reduce #86 on default_pg); 3 -> 2 (all_gather #27 on tp_pair_1)"
        in result.stdout
    )
    assert json.loads(out.read_bytes())["format"] == "commcanary.hang.v1"
    assert page.read_text().startswith("<!DOCTYPE html>")


# Constructed dumps -------------------------------------------------------


def diagnose(
    tmp_path: Path, job: hj.Job, *, absent: tuple[int, ...] = (), encoding: str = "pickle"
) -> dict[str, Any]:
    hj.write(hj.dumps(job, absent=absent), tmp_path / "dumps", encoding=encoding)
    return check(commcanary.diagnose_hang(tmp_path / "dumps"))


@pytest.mark.parametrize(("fault", "kind"), [("size", "size"), ("dtype", "dtype"), ("op", "op")])
@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_a_mismatch_names_the_minority(tmp_path: Path, fault: str, kind: str, backend: str) -> None:
    doc = diagnose(tmp_path, hj.Job(fault=fault, backend=backend, fault_rank=2))
    assert doc["verdict"] == "hang"
    [m] = doc["mismatches"]
    assert (m["kind"], m["majority_ranks"], m["minority_ranks"], m["state"]) == (
        kind,
        [0, 1, 3],
        [2],
        "in_flight",
    )
    assert [(r["rank"], r["kind"]) for r in doc["root"]] == [(2, "mismatch")]
    assert {(e["rank"], e["waits_for"]) for e in doc["wait_for"]} == {(0, 2), (1, 2), (3, 2)}


def test_a_rank_that_never_started_is_the_root(tmp_path: Path) -> None:
    doc = diagnose(tmp_path, hj.Job(backend="nccl"), absent=(1,))
    assert doc["verdict"] == "hang" and doc["confidence"] == "medium"
    [root] = doc["root"]
    assert (root["rank"], root["kind"], root["group"]["desc"], root["collective_seq_id"]) == (
        1,
        "no_evidence",
        "default_pg",
        1,
    )
    state = {p["rank"]: p["state"] for p in doc["ranks"]}
    assert state == {0: "blocked", 1: "no_evidence", 2: "blocked", 3: "blocked"}


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
@pytest.mark.parametrize("encoding", ["pickle", "json"])
def test_a_healthy_job_is_no_hang_and_exits_0(tmp_path: Path, backend: str, encoding: str) -> None:
    hj.write(hj.dumps(hj.Job(backend=backend, p2p=backend == "nccl")), tmp_path / "d", encoding=encoding)
    result = runner.invoke(app, ["diagnose", "hang", str(tmp_path / "d"), "-o", str(tmp_path / "h.json")])
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "h.json").read_bytes())
    assert doc["root"] == [] and doc["partial_collectives"] == []
    if backend == "nccl":
        assert doc["verdict"] == "no_hang" and result.stdout.startswith("no hang:")
    else:
        # gloo retires a failed call like a completed one and records no
        # completion time: its dumps alone cannot tell a finished job from
        # a failed one, and say so.
        assert doc["verdict"] == "inconclusive" and doc["confidence"] == "medium"
        assert result.stdout.startswith("inconclusive:")
        assert any("exception texts" in w for w in doc["would_settle"])


def test_nccl_entries_with_start_times(tmp_path: Path) -> None:
    job = hj.Job(backend="nccl", fault="skip", fault_rank=0)
    dumps = hj.dumps(job)
    assert dumps[1]["entries"][-1]["time_discovered_started_ns"] > 0
    assert dumps[1]["entries"][-1]["state"] == "started"
    doc = diagnose(tmp_path, job)
    assert [(r["rank"], r["group"]["desc"], r["collective_seq_id"]) for r in doc["root"]] == [
        (0, "default_pg", 16)
    ]
    assert doc["step"]["value"] == 5
    assert doc["groups"][0]["membership"].startswith("declared")


def test_a_coalesced_p2p_exchange_missing_its_send(tmp_path: Path) -> None:
    doc = diagnose(tmp_path, hj.Job(backend="nccl", p2p=True, fault="skip_send", fault_rank=1))
    [root] = doc["root"]
    assert (root["rank"], root["op"], root["group"]["desc"], root["collective_seq_id"]) == (
        1,
        "send",
        "tp_pair_0",
        None,
    )
    p2p = [p for p in doc["partial_collectives"] if p["p2p"]]
    assert [(p["op"], p["present_ranks"], p["missing_ranks"]) for p in p2p] == [("recv", [0], [1])]
    assert (0, 1, "tp_pair_0") in edges(doc)


def test_a_stall_outside_communication(tmp_path: Path) -> None:
    doc = diagnose(tmp_path, hj.Job(fault="stall", fault_rank=2))
    [root] = doc["root"]
    assert (root["rank"], root["kind"]) == (2, "not_blocked")
    assert "stalled outside communication" in root["reason"]


def test_read_flight_recorder_gives_columns(tmp_path: Path) -> None:
    [path, *_] = hj.write(hj.dumps(hj.Job(backend="nccl")), tmp_path, encoding="pickle")
    dump = commcanary.read_flight_recorder(path)
    assert dump.version == "2.10" and dump.encoding == "pickle" and len(dump) == 24
    assert dump.entries["collective_seq_id"].dtype.kind == "i"
    assert dump.entries["op"][:2] == ["all_reduce", "all_gather"]
    assert dump.pg_config[0]["ranks"] == [0, 1, 2, 3]


# Bad evidence ------------------------------------------------------------


def refused(tmp_path: Path, *paths: Path) -> str:
    out = tmp_path / "never.json"
    result = runner.invoke(app, ["diagnose", "hang", *map(str, paths), "-o", str(out)])
    assert result.exit_code == 3, result.output
    assert not out.exists()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("commcanary: ")
    return lines[0]


class _System:
    def __reduce__(self) -> tuple[Any, tuple[str]]:
        import os

        return (os.system, ("touch PWNED",))


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_a_malicious_pickle_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: int
) -> None:
    monkeypatch.chdir(tmp_path)
    dumps = hj.write(hj.dumps(hj.Job()), tmp_path / "d")
    evil = pickle.loads(dumps[3].read_bytes())
    evil["entries"][0]["frames"] = _System()
    dumps[3].write_bytes(pickle.dumps(evil, protocol=protocol))
    # Alone, it is all the evidence there is: refused, naming the file.
    line = refused(tmp_path, dumps[3])
    assert "fr_trace_rank_3" in line and "refuses" in line
    assert not (tmp_path / "PWNED").exists()
    # Among good dumps, it is a skipped input, said so, and never run.
    out = tmp_path / "skipped.json"
    result = runner.invoke(app, ["diagnose", "hang", str(tmp_path / "d"), "-o", str(out)])
    assert result.exit_code in (0, 1), result.output
    assert "skipped a damaged file" in result.output and "fr_trace_rank_3" in result.output
    doc = json.loads(out.read_text())
    assert doc["confidence"] != "high"
    skipped = [f for f in doc["evidence"] if f["kind"] == "skipped"]
    assert [Path(f["file"]).name for f in skipped] == ["fr_trace_rank_3"]
    assert "refuses" in skipped[0]["reason"]
    assert not (tmp_path / "PWNED").exists()


def test_a_truncated_pickle(tmp_path: Path) -> None:
    dumps = hj.write(hj.dumps(hj.Job()), tmp_path / "d")
    dumps[1].write_bytes(dumps[1].read_bytes()[:-100])
    assert "fr_trace_rank_1" in refused(tmp_path, dumps[1])
    report = commcanary.diagnose_hang(dumps)
    assert any("skipped a damaged file" in line and "fr_trace_rank_1" in line for line in report.lines)


def test_only_damaged_files_are_refused_naming_the_first(tmp_path: Path) -> None:
    dumps = hj.write(hj.dumps(hj.Job()), tmp_path / "d")
    for d in dumps:
        d.write_bytes(d.read_bytes()[:-100])
    assert "fr_trace_rank_0" in refused(tmp_path, tmp_path / "d")


def test_a_json_dump_without_entries(tmp_path: Path) -> None:
    dumps = hj.write(hj.dumps(hj.Job()), tmp_path / "d", encoding="json")
    data = json.loads(dumps[2].read_text())
    del data["entries"]
    dumps[2].write_text(json.dumps(data))
    # Without `entries` it is no dump at all: JSON that is not evidence.
    line = refused(tmp_path, dumps[2])
    assert "fr_trace_rank_2.json" in line and "neither a profiler trace nor a Flight Recorder dump" in line


def test_unrelated_json_beside_the_evidence_is_skipped_and_listed(tmp_path: Path) -> None:
    hj.write(hj.dumps(hj.Job()), tmp_path / "d")
    # A ground truth or config that mentions the dump's fields is no dump.
    (tmp_path / "d" / "ground_truth.json").write_text(json.dumps({"note": "pg_config", "entries": []}))
    (tmp_path / "d" / "README.md").write_text("# a job\n")
    doc = commcanary.diagnose_hang(tmp_path / "d").document
    skipped = {Path(f["file"]).name: f["reason"] for f in doc["evidence"] if f["kind"] == "skipped"}
    assert set(skipped) == {"ground_truth.json", "README.md"}
    assert not any("damaged" in line for line in commcanary.diagnose_hang(tmp_path / "d").lines)


def test_dumps_of_two_runs(tmp_path: Path) -> None:
    hj.write(hj.dumps(hj.Job()), tmp_path / "a")
    hj.write(hj.dumps(hj.Job(base_ns=hj.BASE_NS + 3_600 * 10**9)), tmp_path / "b")
    (tmp_path / "b" / "fr_trace_rank_3").replace(tmp_path / "a" / "fr_trace_rank_3")
    line = refused(tmp_path, tmp_path / "a")
    assert "fr_trace_rank_3" in line and "different runs" in line


def test_dumps_of_two_jobs(tmp_path: Path) -> None:
    hj.write(hj.dumps(hj.Job()), tmp_path / "a")
    hj.write(hj.dumps(hj.Job(tp_name="expert")), tmp_path / "b")
    shutil.copy(tmp_path / "b" / "fr_trace_rank_3", tmp_path / "a" / "fr_trace_rank_3")
    line = refused(tmp_path, tmp_path / "a")
    assert "different jobs" in line


def test_a_directory_without_evidence(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("nothing to see\n")
    assert "no hang evidence" in refused(tmp_path, tmp_path / "empty")


def test_a_named_file_that_is_not_evidence(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"hello": 1}')
    assert "x.json" in refused(tmp_path, tmp_path / "x.json")
