"""The multi-rank Kineto import on real traces: the gloo decode job (ground
truth from the script's own op log), the hang's windowed traces, the NCCL
trace, the end-to-end pipeline on an imported job, and bad jobs."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from commcanary.cli import app
from conftest import FIXTURES, fixture_json

DECODE = FIXTURES / "kineto" / "gloo_tp4_decode"
HANG = FIXTURES / "hang" / "gloo_tp4_rank3_skips_allreduce"
NCCL = FIXTURES / "kineto" / "third_party_hta_nccl_allreduce_2rank"

# op-log op -> trace op (barrier is a control op; the receiving side of a p2p
# pair is the same event as its send).
OPLOG_OPS = {
    "all_reduce": "all_reduce",
    "all_gather_into_tensor": "all_gather",
    "reduce_scatter_tensor": "reduce_scatter",
    "all_to_all_single": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "send": "point_to_point",
    "isend": "point_to_point",
}


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.fixture(scope="module")
def decode(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("decode") / "job.trace.json"
    result = run("import-kineto", str(DECODE), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(
        "imported 506 collective events from 4 ranks (4 files; skipped 16 control"
    )
    return load(out)


def test_every_collective_of_the_op_log_per_op_group_and_step(decode: dict[str, Any]) -> None:
    oplog = fixture_json(DECODE / "oplog.json.gz")["ranks"]
    groups = {g["desc"]: g["name"] for g in decode["system"]["kineto_process_groups"]}
    expected: Counter[tuple[str, str, int]] = Counter()
    barriers = 0
    for rank, log in oplog.items():
        for op in log["ops"]:
            if op["step"] is None:  # the unprofiled warm-up step
                continue
            if op["op"] == "barrier":
                barriers += 1
                continue
            mapped = OPLOG_OPS.get(op["op"])
            lowest = min(op["pg_ranks"])
            if mapped is None or (mapped != "point_to_point" and int(rank) != lowest):
                continue
            expected[(mapped, groups[op["pg"]], op["step"] + 1)] += 1
    got = Counter((e["op"], e["group"], e["step"]) for e in decode["events"])
    assert got == expected
    assert decode["workload"]["skipped_control_events"] == barriers
    assert decode["workload"]["partial_collectives"] == 0


def test_the_injected_straggler_is_measured_on_the_shared_clock(decode: dict[str, Any]) -> None:
    truth = fixture_json(DECODE / "ground_truth.json.gz")["straggler"]
    first: dict[int, dict[str, Any]] = {}
    for e in decode["events"]:
        if e["op"] == "all_reduce" and e["group"] == "0":
            first.setdefault(e["step"], e)
    for injection in truth["injections"]:
        event = first[injection["step"] + 1]
        lag_ms = event["rank_arrival_us"][event["ranks"].index(truth["rank"])] / 1000
        assert lag_ms >= injection["measured_ms"] - 15.0, injection


def test_events_carry_measured_fields(decode: dict[str, Any]) -> None:
    events = decode["events"]
    assert [e["start_us"] for e in events] == sorted(e["start_us"] for e in events)
    assert {e["phase"] for e in events} == {"prefill", "decode"}
    assert all(e["step"] in (1, 2) for e in events if e["phase"] == "prefill")
    assert all(
        len(e["rank_arrival_us"]) == len(e["ranks"]) and min(e["rank_arrival_us"]) == 0 for e in events
    )
    assert all(e["compute_before_us"] >= 0 and e["compute_overlap_us"] >= 0 for e in events)
    assert any(e.get("concurrent_groups", 1) > 1 for e in events)
    assert "device_us" not in events[0]  # a CPU job claims no device time
    p2p = [e for e in events if e["op"] == "point_to_point"]
    assert {(e["sender_rank"], e["receiver_rank"]) for e in p2p} == {(0, 2), (1, 3), (2, 0), (3, 1)}
    assert "Not claimed" in decode["workload"]["notes"]


def test_python_api_returns_the_trace_object_with_numpy_columns() -> None:
    import numpy as np

    import commcanary

    imported = commcanary.import_kineto(sorted(DECODE.glob("rank*.json.gz")))
    assert imported.ranks == 4 and imported.imported == 506 and imported.partial == ()
    steps = imported.trace.column("step")
    assert isinstance(steps, np.ndarray) and steps.shape == (506,) and np.nanmin(steps) == 1


def test_imported_job_compiles_replays_and_verifies(tmp_path: Path) -> None:
    trace = tmp_path / "job.trace.json"
    assert run("import-kineto", str(DECODE), "-o", str(trace)).exit_code == 0
    canary, report = tmp_path / "job.canary.json", tmp_path / "job.report.json"
    for args in (
        ("compile", str(trace), "-o", str(canary)),
        ("replay", str(canary), "-o", str(report)),
        ("verify-fidelity", str(trace), str(canary), "-o", str(tmp_path / "fidelity.json")),
        ("verify-behavior", str(trace), str(canary), "-o", str(tmp_path / "behavior.json")),
    ):
        result = run(*args)
        assert result.exit_code == 0, (args, result.output)


def test_the_hang_is_reported_as_partial_collectives(tmp_path: Path) -> None:
    out = tmp_path / "hang.trace.json"
    result = run("import-kineto", str(HANG), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "partial: 2 collective(s) seen on some member ranks only" in result.stdout
    assert "all_reduce on group 0" in result.stdout and "missing ranks [3]" in result.stdout
    workload = load(out)["workload"]
    assert workload["partial_collectives"] == 2
    assert "seen on ranks [0, 1, 2], missing ranks [3]" in workload["notes"]
    import commcanary

    imported = commcanary.import_kineto([HANG])
    assert [(p.op, p.group, p.seen, p.missing) for p in imported.partial] == [
        ("all_reduce", "0", (0, 1, 2), (3,)),
        ("all_gather", "2", (3,), (2,)),
    ]
    strict = run("import-kineto", str(HANG), "-o", str(tmp_path / "strict.json"), "--strict")
    assert strict.exit_code == 3
    assert "seen on some member ranks only (--strict)" in strict.stderr
    assert not (tmp_path / "strict.json").exists()


def _nccl_rank(tmp_path: Path, rank: int, shift_us: float) -> Path:
    data = json.loads(gzip.decompress((NCCL / "rank0.json.gz").read_bytes()))
    data["distributedInfo"]["rank"] = rank
    for e in data["traceEvents"]:
        if isinstance(e.get("ts"), int | float):
            e["ts"] += shift_us
    path = tmp_path / f"nccl_rank{rank}.json"
    path.write_text(json.dumps(data))
    return path


def test_nccl_device_time_is_the_kernel_duration(tmp_path: Path) -> None:
    single = tmp_path / "single.json"
    assert run("import-kineto", str(NCCL / "rank0.json.gz"), "-o", str(single)).exit_code == 0
    events = load(single)["events"]
    with_kernel = [e for e in events if "kineto_kernel_dur_us" in e["metadata"]]
    assert len(with_kernel) == 21
    assert all(e["device_us"] == round(e["metadata"]["kineto_kernel_dur_us"], 3) for e in with_kernel)
    # Two ranks of the same job (rank 1 a time-shifted copy): one event per
    # instance, matched through the named group, device time from the kernels.
    files = [_nccl_rank(tmp_path, 0, 0.0), _nccl_rank(tmp_path, 1, 5.0)]
    job = tmp_path / "job.json"
    result = run("import-kineto", *map(str, files), "-o", str(job))
    assert result.exit_code == 0, result.output
    merged = load(job)["events"]
    assert len(merged) == 21 and all("device_us" in e for e in merged)
    assert all(e["rank_arrival_us"] == [0.0, 5.0] for e in merged)


def _bad(tmp_path: Path, *inputs: Path) -> Any:
    out = tmp_path / "out.json"
    result = run("import-kineto", *map(str, inputs), "-o", str(out))
    assert result.exit_code == 3, result.output
    assert not out.exists()
    line = result.stderr.strip()
    assert "\n" not in line
    return line


def _plain(tmp_path: Path, rank: int, edit: Any = None, name: str | None = None) -> Path:
    data = json.loads(gzip.decompress((DECODE / f"rank{rank}.json.gz").read_bytes()))
    if edit is not None:
        edit(data)
    path = tmp_path / (name or f"rank{rank}.json")
    path.write_text(json.dumps(data))
    return path


def test_bad_jobs_are_refused_naming_the_file(tmp_path: Path) -> None:
    ranks = [DECODE / f"rank{r}.json.gz" for r in range(4)]
    not_kineto = tmp_path / "oplog.json.gz"
    shutil.copy(DECODE / "oplog.json.gz", not_kineto)
    assert "oplog.json.gz" in _bad(tmp_path, not_kineto, *ranks) and "traceEvents" in _bad(
        tmp_path, not_kineto, *ranks
    )
    twice = tmp_path / "rank2_copy.json.gz"
    shutil.copy(ranks[2], twice)
    assert "the same rank given twice" in _bad(tmp_path, *ranks, twice)

    def world(d: dict[str, Any]) -> None:
        d["distributedInfo"]["world_size"] = 8

    assert "traces of different jobs" in _bad(tmp_path, _plain(tmp_path, 3, world), *ranks[:3])

    def other_groups(d: dict[str, Any]) -> None:
        d["distributedInfo"]["pg_config"][1]["ranks"] = [1, 3]

    line = _bad(tmp_path, _plain(tmp_path, 3, other_groups), *ranks[:3])
    assert "rank3.json" in line and "process group" in line

    def size(d: dict[str, Any]) -> None:
        d["distributedInfo"]["pg_config"][0]["pg_size"] = 3

    assert "pg_size is 3" in _bad(tmp_path, _plain(tmp_path, 3, size), *ranks[:3])

    def negative(d: dict[str, Any]) -> None:
        next(e for e in d["traceEvents"] if e.get("name") == "c10d::allreduce_")["dur"] = -5.0

    assert "negative" in _bad(tmp_path, _plain(tmp_path, 3, negative), *ranks[:3])
    truncated = tmp_path / "rank3.json.gz"
    truncated.write_bytes(ranks[3].read_bytes()[:50_000])
    assert "rank3.json.gz" in _bad(tmp_path, truncated, *ranks[:3])


def test_the_cache_serves_a_second_import_and_survives_damage(tmp_path: Path) -> None:
    import commcanary

    files = sorted(DECODE.glob("rank*.json.gz"))
    cache = tmp_path / "cache"
    cold = commcanary.import_kineto(files, cache_dir=cache)
    warm = commcanary.import_kineto(files, cache_dir=cache)
    assert (cold.cache_hits, warm.cache_hits) == (0, 4)
    assert warm.trace.to_bytes() == cold.trace.to_bytes()
    entries = sorted((cache / "kineto-profiles").rglob("*.bin"))
    assert len(entries) == 4
    entries[0].write_bytes(entries[0].read_bytes()[:-10])  # truncated
    damaged = bytearray(entries[1].read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF  # one flipped byte
    entries[1].write_bytes(bytes(damaged))
    rebuilt = commcanary.import_kineto(files, cache_dir=cache)
    assert rebuilt.cache_hits == 2 and rebuilt.trace.to_bytes() == cold.trace.to_bytes()
    assert commcanary.import_kineto(files, cache_dir=cache).cache_hits == 4


def test_two_processes_filling_one_cache_agree(tmp_path: Path) -> None:
    import subprocess
    import sys

    cache = tmp_path / "cache"
    code = (
        "import sys, commcanary; "
        "r = commcanary.import_kineto(sys.argv[2:], cache_dir=sys.argv[1]); "
        "sys.stdout.buffer.write(r.trace.to_bytes())"
    )
    files = [str(p) for p in sorted(DECODE.glob("rank*.json.gz"))]
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(cache), *files], stdout=subprocess.PIPE)
        for _ in range(3)
    ]
    outputs = [p.communicate()[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outputs)) == 1
    import commcanary

    assert commcanary.import_kineto(files, cache_dir=cache).cache_hits == 4
    assert not list(cache.rglob("*.tmp"))


def test_clock_offsets_move_a_rank_on_the_job_clock(tmp_path: Path) -> None:
    plain, shifted = tmp_path / "plain.json", tmp_path / "shifted.json"
    offsets = tmp_path / "offsets.json"
    offsets.write_text('{"1": 200.0}')
    assert run("import-kineto", str(DECODE), "-o", str(plain)).exit_code == 0
    result = run("import-kineto", str(DECODE), "-o", str(shifted), "--clock-offsets", str(offsets))
    assert result.exit_code == 0, result.output

    def pair_gaps(path: Path) -> list[float]:
        events = [e for e in load(path)["events"] if e["ranks"] == [0, 1]]
        return [e["rank_arrival_us"][1] - e["rank_arrival_us"][0] for e in events]

    before, after = pair_gaps(plain), pair_gaps(shifted)
    assert len(before) == len(after) == 80
    assert all(abs((b - a) - 200.0) < 0.01 for a, b in zip(before, after, strict=True))
    assert "corrected by the given clock offsets" in load(shifted)["workload"]["notes"]
    offsets.write_text('{"one": 5}')
    bad = run("import-kineto", str(DECODE), "-o", str(tmp_path / "x.json"), "--clock-offsets", str(offsets))
    assert bad.exit_code == 3 and "offsets.json: field 'one'" in bad.stderr


@pytest.fixture(scope="module")
def small_job(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The first 1500 events of each rank of the decode job, as JSON text."""
    out = []
    for r in range(4):
        data = json.loads(gzip.decompress((DECODE / f"rank{r}.json.gz").read_bytes()))
        data["traceEvents"] = data["traceEvents"][:1500]
        out.append(json.dumps(data).encode())
    return out


def test_hostile_bytes_in_one_rank_file_never_crash(small_job: list[bytes], tmp_path: Path) -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    import commcanary
    from commcanary.errors import InputError

    paths = [tmp_path / f"rank{r}.json" for r in range(4)]
    for p, text in zip(paths, small_job, strict=True):
        p.write_bytes(text)
    original = small_job[1]

    @given(
        st.lists(st.tuples(st.integers(0, len(original) - 1), st.integers(0, 255)), min_size=1, max_size=4),
        st.booleans(),
    )
    def check(edits: list[tuple[int, int]], truncate: bool) -> None:
        data = bytearray(original)
        for at, value in edits:
            data[at] = value
        if truncate:
            data = data[: edits[0][0]]
        paths[1].write_bytes(bytes(data))
        try:
            imported = commcanary.import_kineto(paths)
        except InputError as exc:
            assert "\n" not in str(exc)
        else:
            assert imported.imported > 0

    check()


def test_one_gloo_file_says_to_give_every_rank(tmp_path: Path) -> None:
    line = _bad(tmp_path, DECODE / "rank0.json.gz")
    assert "c10d:: (gloo) calls do not name their process group, so give every rank's trace" in line


def test_a_rewritten_file_is_hashed_again(tmp_path: Path) -> None:
    import commcanary

    files = []
    for r in range(4):
        f = tmp_path / f"rank{r}.json.gz"
        shutil.copy(DECODE / f"rank{r}.json.gz", f)
        files.append(f)
    cache = tmp_path / "cache"
    first = commcanary.import_kineto(files, cache_dir=cache)
    assert commcanary.import_kineto(files, cache_dir=cache).cache_hits == 4
    # Rewrite rank 0 with its ProfilerStep numbers changed: the steps of the
    # events (taken from the lowest member rank) change.
    data = json.loads(gzip.decompress(files[0].read_bytes()))
    for e in data["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            e["name"] = "ProfilerStep#9" + e["name"].split("#")[1]
    files[0].write_bytes(gzip.compress(json.dumps(data).encode()))
    changed = commcanary.import_kineto(files, cache_dir=cache)
    assert changed.cache_hits == 3
    assert changed.trace.to_bytes() != first.trace.to_bytes()
