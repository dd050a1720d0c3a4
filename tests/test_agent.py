"""``commcanary agent`` on shards written here: following, resuming, damage,
refusals, metrics and status, straggler steps and stall detection (the real
jobs are in ``test_agent_torch.py``)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from commcanary.agent.follow import Follower
from commcanary.agent.metrics import render_metrics
from commcanary.agent.service import Agent
from commcanary.agent.state import LiveJob
from commcanary.capture import SHARD_FORMAT
from commcanary.cli import app

SESSION = "s-1"


def _line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS) + b"\n"


def _header(rank: int, pid: int, session: str = SESSION, fmt: str = SHARD_FORMAT) -> dict[str, Any]:
    return {
        "format": fmt,
        "capture_session_id": session,
        "rank": str(rank),
        "pid": pid,
        "host": "elsewhere",
        "workload": {"name": "w"},
    }


def _call(
    rank: int, seq: int, step: int, *, arrival_ms: float, group: str = "0", ranks: int = 2
) -> dict[str, Any]:
    return {
        "op": "all_reduce",
        "bytes": 4096,
        "ranks": list(range(ranks)),
        "group": group,
        "phase": "unknown",
        "wall_ns": 1_700_000_000_000_000_000 + int(arrival_ms * 1e6),
        "compute_before_us": 0.0,
        "compute_overlap_us": 0.0,
        "duration_us": 500.0,
        "collective_id": f"{group}:{seq}",
        "step": step,
        "id": f"event-{seq:06d}",
        "collective_seq": seq,
        "capture_session_id": SESSION,
        "recorder_rank": str(rank),
    }


def _job(tmp_path: Path, steps: int, late: dict[int, float] | None = None) -> list[Path]:
    """Two shards: one all_reduce per step, rank 1 late by ``late[step]`` ms."""
    paths = []
    for rank in range(2):
        path = tmp_path / f"rank-{rank}.shard.jsonl"
        lines = [_line(_header(rank, 1000 + rank))]
        for step in range(steps):
            delay = (late or {}).get(step, 0.0) if rank == 1 else 0.0
            lines.append(_line(_call(rank, step, step, arrival_ms=step * 100.0 + delay + 0.01 * rank)))
        path.write_bytes(b"".join(lines))
        paths.append(path)
    return paths


def test_following_counts_each_instance_once_across_polls_and_restarts(tmp_path: Path) -> None:
    shards = _job(tmp_path, 30)
    full = [p.read_bytes() for p in shards]
    for path, data in zip(shards, full, strict=True):  # a line cut in the middle, as while it is written
        path.write_bytes(data[: len(data) // 2])
    job = LiveJob()
    follower = Follower(tmp_path, job)
    follower.poll(time.time())
    first = job.collectives.get(("0", "all_reduce"), 0)
    assert 0 < first < 30 and not job.skipped
    # The state saved, the agent gone, the rest written, a new agent from the saved state.
    saved = orjson.loads(
        orjson.dumps({"job": job.to_json(), "offsets": follower.offsets}, option=orjson.OPT_NON_STR_KEYS)
    )
    for path, data in zip(shards, full, strict=True):
        path.write_bytes(data)
    resumed = LiveJob.from_json(saved["job"])
    Follower(tmp_path, resumed, saved["offsets"]).poll(time.time())
    assert resumed.collectives[("0", "all_reduce")] == 30
    assert resumed.bytes_total[("0", "all_reduce")] == 30 * 4096
    assert not resumed.pending and not resumed.skipped


def test_the_agent_resumes_from_its_state_file(tmp_path: Path) -> None:
    watch, archive = tmp_path / "shards", tmp_path / "archive"
    watch.mkdir()
    shards = _job(watch, 20)
    full = [p.read_bytes() for p in shards]
    for path, data in zip(shards, full, strict=True):
        path.write_bytes(data[: len(data) // 3])
    agent = Agent(watch, archive, hang_after_s=60)
    agent.tick()
    agent.save()
    before = agent.job.collectives[("0", "all_reduce")]
    for path, data in zip(shards, full, strict=True):
        path.write_bytes(data)
    again = Agent(watch, archive, hang_after_s=60)
    assert again.job.collectives[("0", "all_reduce")] == before
    again.tick()
    assert again.job.collectives[("0", "all_reduce")] == 20
    text = again.metrics_text()
    assert 'commcanary_collectives_total{group="0",op="all_reduce"} 20' in text


def test_damaged_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    shards = _job(tmp_path, 5)
    with open(shards[0], "ab") as f:
        f.write(b'{"op": "all_reduce", "bytes": -1}\n')  # fields the capture never writes
        f.write(b'{"kind": "evidence", "files": 5}\n')
        f.write(b'{"kind": "progress", "groups": {"0": {"enqueued": "x", "completed": 1}}}\n')
        f.write(b"not json at all\n")
        f.write(b'{"op": "all_reduce", "byt')  # torn: the process died writing it
    job = LiveJob()
    follower = Follower(tmp_path, job)
    follower.poll(time.time())
    assert job.skipped == {"corrupt": 4}
    assert job.collectives[("0", "all_reduce")] == 5
    job.processes[shards[0].name].dead = True
    follower.poll(time.time())
    assert job.skipped == {"corrupt": 4, "torn": 1}
    assert follower.offsets[shards[0].name] == shards[0].stat().st_size
    other = tmp_path / "other.shard.jsonl"
    other.write_bytes(_line(_header(5, 99, session="another")))
    follower.poll(time.time())
    assert job.skipped["other_session"] == 1 and len(job.processes) == 2


def test_a_step_straggler_is_found_and_a_repeated_one_flagged(tmp_path: Path) -> None:
    late = {s: 40.0 for s in (20, 24, 28)}
    _job(tmp_path, 40, late)
    job = LiveJob()
    Follower(tmp_path, job).poll(time.time())
    flagged = [s for s in job.finished_steps if s["late"]]
    assert [s["step"] for s in flagged] == [20, 24, 28]
    assert all(s["last_rank"] == "1" and abs(s["lateness_s"] - 0.04) < 1e-3 for s in flagged)
    assert job.repeated() == ["1"]
    text = render_metrics(job, time.time(), {})
    assert 'commcanary_rank_repeated_straggler{rank="1"} 1' in text
    assert 'commcanary_rank_late_steps_total{rank="1"} 3' in text


def test_a_straggler_below_the_noise_is_not_flagged(tmp_path: Path) -> None:
    import random

    rng = random.Random(4)
    _job(tmp_path, 60, {s: rng.uniform(0.0, 3.0) for s in range(60)})
    job = LiveJob()
    Follower(tmp_path, job).poll(time.time())
    assert not any(s["late"] for s in job.finished_steps)


def test_a_stall_is_a_group_without_progress_while_a_member_waits(tmp_path: Path) -> None:
    _job(tmp_path, 3)
    job = LiveJob()
    Follower(tmp_path, job).poll(100.0)
    proc = job.processes["rank-0.shard.jsonl"]
    job.take(
        proc.shard,
        {"kind": "progress", "groups": {"0": {"enqueued": 4, "completed": 3}}, "inside": []},
        101.0,
    )
    assert job.stalled(105.0, 10.0) == {}
    assert job.stalled(111.0, 10.0) == {"0": ["0"]}
    # It goes on: no longer stalled.
    job.take(
        proc.shard,
        {"kind": "progress", "groups": {"0": {"enqueued": 4, "completed": 4}}, "inside": []},
        112.0,
    )
    assert job.stalled(130.0, 10.0) == {}


def test_the_metrics_follow_the_exposition_format(tmp_path: Path) -> None:
    _job(tmp_path, 10)
    job = LiveJob()
    Follower(tmp_path, job).poll(time.time())
    text = render_metrics(job, time.time(), {"alarms": 0, "stalls": 0})
    families = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
    assert len(families) == len({name for name, _ in families})
    for line in text.splitlines():
        if not line.startswith("#"):
            assert re.fullmatch(r'[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [-+0-9.eInfNa]+', line), (
                line
            )
    assert (
        'commcanary_collective_bus_bandwidth_bytes_per_second{group="0",op="all_reduce",size_bucket="4096"}'
        in text
    )
    # 4096 bytes, 2 ranks (all_reduce's factor 2(n-1)/n = 1), 500 us from the last arrival to the last end.
    busbw = float(re.search(r'size_bucket="4096"\} (\S+)', text).group(1))  # type: ignore[union-attr]
    assert busbw == pytest.approx(4096 / 500e-6, rel=1e-6)


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_a_shard_of_another_format_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "r.shard.jsonl").write_bytes(_line(_header(0, 1, fmt="commcanary.capture-shard.v2")))
    result = _cli("agent", "--watch", str(tmp_path), "--listen", "127.0.0.1:0", "--run-for", "1")
    assert result.exit_code == 3
    assert "commcanary.capture-shard.v2" in result.output and "r.shard.jsonl" in result.output
    assert not (tmp_path / "agent" / "state.json").exists()


def test_a_taken_port_is_one_line_and_exit_3(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "commcanary",
                "agent",
                "--watch",
                str(tmp_path),
                "--listen",
                f"127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    assert out.returncode == 3, out.stderr
    assert out.stderr.count("\n") == 1 and f"127.0.0.1:{port}" in out.stderr


def test_the_agent_serves_health_status_and_metrics(tmp_path: Path) -> None:
    import urllib.request

    from commcanary.agent.service import serve_http

    _job(tmp_path, 5)
    agent = Agent(tmp_path, tmp_path / "agent", hang_after_s=30)
    agent.tick()
    http = serve_http(agent, "127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{http.server_address[1]}"

        def get(path: str) -> tuple[str, bytes]:
            with urllib.request.urlopen(f"{base}{path}") as reply:
                return reply.headers["Content-Type"], reply.read()

        assert get("/healthz")[1] == b"ok\n"
        status = orjson.loads(get("/status")[1])
        assert status["collectives"] == [{"bytes": 5 * 4096, "count": 5, "group": "0", "op": "all_reduce"}]
        assert [p["rank"] for p in status["processes"]] == ["0", "1"]
        assert get("/metrics")[0].startswith("text/plain; version=0.0.4")
        with pytest.raises(urllib.error.HTTPError) as refused:
            get("/nothing")
        refused.value.close()
    finally:
        http.shutdown()
        http.server_close()


def test_a_peers_evidence_is_taken_by_name_and_bound(tmp_path: Path) -> None:
    import io
    import tarfile

    from commcanary.agent.peers import authorized, evidence_tar, extract_evidence

    source = tmp_path / "source"
    (source / "fr_on_demand").mkdir(parents=True)
    (source / "rank2_stacks.txt").write_text("Thread 0x1 (most recent call first):\n")
    (source / "fr_on_demand" / "fr_trace_rank_2").write_bytes(b"dump")
    (source / "notes.txt").write_text("not evidence")
    data = evidence_tar(source)
    into = tmp_path / "into"
    into.mkdir()
    assert sorted(extract_evidence(data, into)) == ["fr_on_demand/fr_trace_rank_2", "rank2_stacks.txt"]
    assert not (into / "notes.txt").exists()
    # A hostile tar: a path out of the folder, a link, a name that is no evidence.
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name in (
            "../rank1_stacks.txt",
            "/etc/rank1_stacks.txt",
            "fr_x/../../fr_trace_rank_1",
            "rank1_stacks.txt",
        ):
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"abc"))
        link = tarfile.TarInfo("rank3_stacks.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    assert extract_evidence(out.getvalue(), hostile) == ["rank1_stacks.txt"]
    assert sorted(p.name for p in hostile.rglob("*")) == ["rank1_stacks.txt"]
    assert not (tmp_path / "rank1_stacks.txt").exists()
    assert authorized("Bearer s3cret", "s3cret") and not authorized("Bearer other", "s3cret")
    assert not authorized(None, "s3cret") and not authorized("Bearer s3cret", None)


def test_the_peer_routes_need_the_token(tmp_path: Path) -> None:
    import urllib.request

    from commcanary.agent.peers import Peers
    from commcanary.agent.service import serve_http

    agent = Agent(tmp_path, tmp_path / "agent", hang_after_s=30, peers=Peers([], "s3cret"))
    http = serve_http(agent, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{http.server_address[1]}"

    def call(method: str, path: str, token: str | None, body: bytes | None = None) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        request = urllib.request.Request(f"{base}{path}", data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as error:
            error.close()
            return int(error.code)

    try:
        ident = b'{"id": "alarm-20261207T101010Z-1"}'
        assert call("POST", "/peer/collect", None, ident) == 401
        assert call("POST", "/peer/collect", "wrong", ident) == 401
        assert call("POST", "/peer/collect", "s3cret", b'{"id": "../../etc"}') == 400
        assert call("GET", "/peer/evidence?id=alarm-20261207T101010Z-1", "s3cret") == 404
        assert call("POST", "/peer/collect", "s3cret", ident) == 202
        deadline = time.monotonic() + 10
        while (
            call("GET", "/peer/evidence?id=alarm-20261207T101010Z-1", "s3cret") == 409
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert call("GET", "/peer/evidence?id=alarm-20261207T101010Z-1", "s3cret") == 200
        assert call("GET", "/peer/evidence?id=alarm-20261207T101010Z-1", None) == 401
    finally:
        http.shutdown()
        http.server_close()
    plain = Agent(tmp_path, tmp_path / "agent2", hang_after_s=30)
    http = serve_http(plain, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{http.server_address[1]}"
    try:
        assert call("POST", "/peer/collect", "s3cret", b'{"id": "alarm-20261207T101010Z-1"}') == 404
    finally:
        http.shutdown()
        http.server_close()


@settings(deadline=None, max_examples=40)
@given(
    steps=st.integers(1, 25),
    cuts=st.lists(st.floats(0.0, 1.0), max_size=6),
    restarts=st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_any_growth_and_any_restarts_count_what_one_read_counts(
    tmp_path_factory: pytest.TempPathFactory, steps: int, cuts: list[float], restarts: list[bool]
) -> None:
    whole_dir = tmp_path_factory.mktemp("whole")
    shards = _job(whole_dir, steps, {s: 5.0 * (s % 3) for s in range(steps)})
    once = LiveJob()
    Follower(whole_dir, once).poll(1.0)
    grown = tmp_path_factory.mktemp("grown")
    full = [p.read_bytes() for p in shards]
    job, offsets = LiveJob(), None
    for i, cut in enumerate([*sorted(cuts), 1.0]):
        for path, data in zip(shards, full, strict=True):
            (grown / path.name).write_bytes(data[: int(len(data) * cut)])
        follower = Follower(grown, job, offsets)
        follower.poll(1.0)
        offsets = follower.offsets
        if restarts[i % len(restarts)]:
            saved = orjson.dumps({"job": job.to_json(), "offsets": offsets}, option=orjson.OPT_NON_STR_KEYS)
            doc = orjson.loads(saved)
            job, offsets = LiveJob.from_json(doc["job"]), doc["offsets"]
    assert job.collectives == once.collectives and job.bytes_total == once.bytes_total
    assert list(job.finished_steps) == list(once.finished_steps)
    assert job.late_total == once.late_total and not job.skipped
