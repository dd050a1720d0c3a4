"""`commcanary capture` and `record_collective` with real processes: four
ranks that synchronise at every step (one sleeps before step 3), merged into
one trace with measured arrivals, then compiled, replayed and verified; the
refusals and the shard rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from commcanary.errors import InputError

WORKLOAD = """
import os, sys, time, multiprocessing as mp

def worker(rank, barrier):
    os.environ["RANK"] = str(rank)
    from commcanary.capture import record_collective, step as mark_step
    for step in range(6):
        barrier.wait()
        mark_step()
        if rank == 2 and step == 3:
            time.sleep(0.08)
        record_collective("all_reduce", [0, 1, 2, 3], bytes=1 << 20, dtype="float32",
                          collective_id=f"ar-{step}", group="world", phase="decode")
        pair = [0, 1] if rank < 2 else [2, 3]
        record_collective("all_gather", pair, bytes=1 << 16, dtype="float32",
                          collective_id=f"ag-{pair[0]}-{step}", group=f"tp{pair[0] // 2}", phase="decode")
        if rank in (0, 2):
            record_collective("send" if rank == 0 else "recv", [0, 2], bytes=4096, dtype="float32",
                              sender_rank=0, receiver_rank=2, collective_id=f"p2p-{step}", group="world",
                              phase="decode")
    if rank == 3 and os.environ.get("LOSE_RANK_3"):
        os._exit(0)

if __name__ == "__main__":
    barrier = mp.get_context("spawn").Barrier(4)
    procs = [mp.get_context("spawn").Process(target=worker, args=(r, barrier)) for r in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else max(p.exitcode for p in procs))
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "commcanary", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    d = tmp_path_factory.mktemp("capture")
    (d / "workload.py").write_text(WORKLOAD)
    p = cli(
        "capture",
        "-o",
        "job.trace.json",
        "--workload-name",
        "four",
        "--",
        sys.executable,
        "workload.py",
        cwd=d,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == "captured trace: job.trace.json"
    return d, json.loads((d / "job.trace.json").read_text())


def test_four_real_processes_merge_into_measured_instances(captured: tuple[Path, dict[str, Any]]) -> None:
    _, trace = captured
    events = trace["events"]
    counts: dict[tuple[str, str], int] = {}
    for e in events:
        counts[(e["op"], e["group"])] = counts.get((e["op"], e["group"]), 0) + 1
    assert counts == {
        ("all_reduce", "world"): 6,
        ("all_gather", "tp0"): 6,
        ("all_gather", "tp1"): 6,
        ("point_to_point", "world"): 6,
    }
    assert trace["system"]["shards"] == 4 and trace["workload"]["partial_collectives"] == 0
    lag = {
        e["step"]: e["rank_arrival_us"][2] - max(e["rank_arrival_us"][r] for r in (0, 1, 3))
        for e in events
        if e["op"] == "all_reduce"
    }
    assert lag[3] >= 60_000, lag  # the 80 ms sleep on rank 2, measured across processes
    assert all(abs(v) < 40_000 for s, v in lag.items() if s != 3), lag
    assert sorted(e["step"] for e in events if e["op"] == "all_reduce") == list(range(6))  # capture.step()
    p2p = [e for e in events if e["op"] == "point_to_point"]
    assert all((e["sender_rank"], e["receiver_rank"]) == (0, 2) for e in p2p)


def test_the_captured_trace_compiles_replays_and_verifies(captured: tuple[Path, dict[str, Any]]) -> None:
    d, _ = captured
    for args in (
        ("compile", "job.trace.json", "-o", "job.canary.json"),
        ("replay", "job.canary.json", "-o", "job.report.json"),
        ("verify-fidelity", "job.trace.json", "job.canary.json", "-o", "fidelity.json"),
    ):
        p = cli(*args, cwd=d)
        assert p.returncode == 0, (args, p.stdout, p.stderr)


def test_refusals(tmp_path: Path) -> None:
    (tmp_path / "workload.py").write_text(WORKLOAD)
    p = cli("capture", "-o", "x.json", "--", sys.executable, "-c", "print('hello')", cwd=tmp_path)
    assert p.returncode == 3 and "hello" in p.stdout
    assert p.stderr.strip().startswith(
        "commcanary: target command did not write a trace; import commcanary.capture.record_collective "
        "or pass --allow-empty (tried: "
    )
    assert "Flight Recorder ring" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()
    p = cli("capture", "-o", "x.json", "--allow-empty", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert p.returncode == 0 and json.loads((tmp_path / "x.json").read_text())["events"] == []
    (tmp_path / "x.json").unlink()
    p = cli("capture", "-o", "x.json", "--", sys.executable, "workload.py", "5", cwd=tmp_path)
    assert p.returncode == 4 and p.stderr.strip() == "commcanary: workload exited with child code 5"
    assert not (tmp_path / "x.json").exists()
    p = cli("capture", "-o", "x.json", cwd=tmp_path)
    assert p.returncode == 3 and "capture requires a command after --" in p.stderr
    p = cli("capture", "-o", "x.json", "--", "/nonexistent/program", cwd=tmp_path)
    assert p.returncode == 3 and "could not run capture command '/nonexistent/program'" in p.stderr


def _shards(tmp_path: Path, session: str = "s1") -> list[Path]:
    import os

    out = []
    for rank in (0, 1):
        env = dict(
            os.environ,
            COMMCANARY_TRACE_DIR=str(tmp_path),
            COMMCANARY_CAPTURE_SESSION_ID=session,
            RANK=str(rank),
        )
        code = "from commcanary.capture import record_collective as r; r('all_reduce', 2, bytes=64, collective_id='a')"
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    out = sorted(tmp_path.glob("*.shard.jsonl"))
    assert len(out) == 2
    return out


def test_shard_rules(tmp_path: Path) -> None:
    from commcanary.capture.merge import merge_shards

    shards = _shards(tmp_path)
    merged = merge_shards(shards, session="s1", workload_name="w")
    assert len(merged.trace["events"]) == 1 and merged.trace["events"][0]["ranks"] == [0, 1]
    with pytest.raises(InputError, match="belongs to capture session 's1', not this capture's 'other'"):
        merge_shards(shards, session="other", workload_name="w")
    # A process killed while writing leaves a torn last line: named, refused.
    torn = tmp_path / "torn"
    torn.mkdir()
    for s in shards:
        (torn / s.name).write_bytes(s.read_bytes())
    victim = sorted(torn.iterdir())[1]
    victim.write_bytes(victim.read_bytes()[:-7])
    with pytest.raises(InputError, match="the last line is torn"):
        merge_shards(sorted(torn.iterdir()), session="s1", workload_name="w")
    # A rank that never recorded its part: a partial collective, not an event.
    merged = merge_shards(shards[:1], session="s1", workload_name="w")
    assert merged.partial == 0  # one shard: that process's own view
    lost = tmp_path / "lost"
    lost.mkdir()
    (lost / shards[0].name).write_bytes(shards[0].read_bytes())
    (lost / "rank-1-pid-1-rec-x.shard.jsonl").write_bytes(shards[1].read_bytes().split(b"\n", 1)[0] + b"\n")
    merged = merge_shards(sorted(lost.iterdir()), session="s1", workload_name="w")
    assert merged.partial == 1 and merged.trace["events"] == []
    assert "missing ranks [1]" in (merged.first_partial or "")


def test_a_killed_program_leaves_its_shards_usable(tmp_path: Path) -> None:
    from commcanary.capture.merge import merge_shards

    program = (
        "import os, signal\n"
        "os.environ['RANK'] = '0'\n"
        "from commcanary.capture import record_collective\n"
        "for i in range(3):\n"
        "    record_collective('all_reduce', [0], bytes=1024, collective_id=i)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    (tmp_path / "killed.py").write_text(program)
    p = cli(
        "capture",
        "-o",
        "x.json",
        "--preserve-on-failure",
        "kept",
        "--",
        sys.executable,
        "killed.py",
        cwd=tmp_path,
    )
    assert p.returncode == 4 and "workload exited with child code -9" in p.stderr
    assert "preserved failed capture: kept" in p.stderr and not (tmp_path / "x.json").exists()
    failure = json.loads((tmp_path / "kept" / "capture_failure.json").read_text())
    assert failure["format"] == "commcanary.capture_failure.v1" and failure["child_returncode"] == -9
    shards = sorted((tmp_path / "kept" / "shards").iterdir())
    assert [s.name for s in shards] == [f["name"] for f in failure["partial_shards"]]
    merged = merge_shards(shards, session=failure["capture_session_id"], workload_name="w")
    assert len(merged.trace["events"]) == 3
    again = cli(
        "capture",
        "-o",
        "x.json",
        "--preserve-on-failure",
        "kept",
        "--",
        sys.executable,
        "-c",
        "pass",
        cwd=tmp_path,
    )
    assert again.returncode == 3 and "already exists" in again.stderr


def test_clock_offsets_put_hosts_on_one_clock(tmp_path: Path) -> None:
    import os

    from commcanary.capture.merge import merge_shards

    for rank, offset in ((0, "0"), (1, "-2500.5")):
        env = dict(
            os.environ,
            COMMCANARY_TRACE_DIR=str(tmp_path),
            COMMCANARY_CAPTURE_SESSION_ID="s",
            RANK=str(rank),
            COMMCANARY_CLOCK_OFFSET_US=offset,
        )
        code = (
            "from commcanary.capture import record_collective as r; "
            "r('all_reduce', 2, bytes=64, collective_id='a', called_at_ns=10_000_000_000)"
        )
        subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    event = merge_shards(sorted(tmp_path.glob("*.shard.jsonl")), session="s", workload_name="w").trace[
        "events"
    ][0]
    assert event["rank_arrival_us"] == [2500.5, 0.0]


def test_bad_shards_from_the_program_are_refused_naming_the_file(tmp_path: Path) -> None:
    other = (
        "import os\n"
        "os.environ['COMMCANARY_CAPTURE_SESSION_ID'] = 'another-session'\n"
        "from commcanary.capture import record_collective\n"
        "record_collective('all_reduce', [0], bytes=64)\n"
    )
    (tmp_path / "other.py").write_text(other)
    p = cli("capture", "-o", "x.json", "--", sys.executable, "other.py", cwd=tmp_path)
    assert p.returncode == 3 and "belongs to capture session 'another-session'" in p.stderr
    assert ".shard.jsonl" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    torn = (
        "import os\n"
        "from commcanary.capture import record_collective\n"
        "record_collective('all_reduce', [0], bytes=64)\n"
        "d = os.environ['COMMCANARY_TRACE_DIR']\n"
        "name = [n for n in os.listdir(d) if n.endswith('.shard.jsonl')][0]\n"
        "with open(os.path.join(d, name), 'ab') as f:\n"
        '    f.write(b\'{"op": "all_re\')\n'
        "os._exit(0)  # as a killed process: no exit handlers, so no end note after the torn line\n"
    )
    (tmp_path / "torn.py").write_text(torn)
    p = cli("capture", "-o", "x.json", "--", sys.executable, "torn.py", cwd=tmp_path)
    assert p.returncode == 3 and "the last line is torn" in p.stderr
    assert not (tmp_path / "x.json").exists()


def test_ctrl_c_is_forwarded_to_the_program(tmp_path: Path) -> None:
    import signal
    import time

    program = (
        "import signal, sys, time\n"
        "from commcanary.capture import record_collective\n"
        "def stop(*_):\n"
        "    record_collective('all_reduce', [0], bytes=64)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGINT, stop)\n"
        "open('ready', 'w').close()\n"
        "time.sleep(60)\n"
    )
    (tmp_path / "wait.py").write_text(program)
    proc = subprocess.Popen(
        [sys.executable, "-m", "commcanary", "capture", "-o", "x.json", "--", sys.executable, "wait.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # SIGINT as a terminal gives it: a test run in the background (a
        # non-interactive shell's `&`) inherits it ignored, and so would capture.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # The program is ready once its handler is set (up to 2 minutes on a
    # loaded host: an interrupt before that would end it without a record).
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert (tmp_path / "ready").exists(), "the program never got ready"
    proc.send_signal(signal.SIGINT)  # to capture only: it forwards the interrupt
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, err
    assert out.startswith("captured trace: x.json")
    assert len(json.loads((tmp_path / "x.json").read_text())["events"]) == 1
