"""``commcanary agent`` beside real 4-process gloo jobs under ``commcanary capture --shards``
(``tests/programs/live_job.py``: DDP, an all_reduce on a second group, a ring of sends and
receives): live metrics that survive the agent's restart and equal the shards, a hang alarm
with every rank's evidence and the right root, a short straggler that raises nothing."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from commcanary.capture.merge import read_shard

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "tests" / "programs" / "live_job.py"
COMMCANARY = [sys.executable, "-m", "commcanary"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _job(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    shards = tmp_path / "shards"
    log = open(tmp_path / "capture.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [*COMMCANARY, "capture", "-o", str(tmp_path / "trace.json"), "--shards", str(shards), "--",
         sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-port", str(_port()),
         str(JOB), "--truth", str(tmp_path / "truth"), *args],
        stdout=log, stderr=subprocess.STDOUT, env=ENV, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not shards.is_dir() and time.monotonic() < deadline:
            time.sleep(0.1)
        yield proc, shards
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()


@contextlib.contextmanager
def _agent(shards: Path, archive: Path, port: int, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    log = open(archive.parent / f"agent-{port}.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [*COMMCANARY, "agent", "--watch", str(shards), "--listen", f"127.0.0.1:{port}",
         "--archive", str(archive), *args],
        stdout=subprocess.DEVNULL, stderr=log, env=ENV,
    )  # fmt: skip
    try:
        _wait(lambda: _get(port, "/healthz") == "ok\n", 60)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        log.close()


def _get(port: int, path: str) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return str(reply.read().decode())
    except OSError:
        return None


def _wait(ok: object, seconds: float, what: str = "") -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ok():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"{what or 'the condition'}: not within {seconds} s")


def _metric(text: str | None, name: str, **labels: str) -> float | None:
    if text is None:
        return None
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    spelled = f"{name}{{{want}}}" if labels else name
    found = re.search(rf"^{re.escape(spelled)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def _complete_instances(shards: Path, group: str, op: str) -> int:
    """Instances of (group, op) every member recorded, counted from the shards themselves."""
    seen: dict[str, set[str]] = {}
    size: dict[str, int] = {}
    for path in sorted(shards.glob("*.shard.jsonl")):
        data = path.read_bytes()
        complete = path.with_suffix(".whole")
        complete.write_bytes(data[: data.rfind(b"\n") + 1])
        _, events = read_shard(complete)
        complete.unlink()
        for e in events:
            if e["group"] == group and e["op"] == op and "collective_id" in e:
                seen.setdefault(e["collective_id"], set()).add(e["recorder_rank"])
                size[e["collective_id"]] = len(e["ranks"])
    return sum(1 for ident, ranks in seen.items() if len(ranks) == size[ident])


def _saved_rows(archive: Path, group: str, op: str) -> bool:
    """Whether the agent's last saved state counts (group, op)."""
    try:
        rows = json.loads((archive / "state.json").read_text())["job"]["collectives"]
    except (OSError, ValueError, KeyError):
        return False
    return any(row[:2] == [group, op] for row in rows)


def test_metrics_follow_the_shards_through_a_restart_and_equal_them_at_the_end(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    port = _port()
    with _job(tmp_path, "--steps", "150", "--step-sleep", "0.03") as (job, shards):
        with _agent(shards, archive, port, "--hang-after", "30") as agent:
            _wait(
                lambda: (
                    (
                        _metric(
                            _get(port, "/metrics"), "commcanary_collectives_total", group="1", op="all_reduce"
                        )
                        or 0
                    )
                    >= 20
                ),
                120,
            )
            # Within a second of the shards: what the shards hold now, the agent shows within a second.
            expected = _complete_instances(shards, "1", "all_reduce")
            _wait(
                lambda: (
                    (
                        _metric(
                            _get(port, "/metrics"), "commcanary_collectives_total", group="1", op="all_reduce"
                        )
                        or 0
                    )
                    >= expected
                ),
                1.5,
                f"the agent's count reaching the {expected} complete instances the shards held",
            )
            text = _get(port, "/metrics")
            assert (
                _metric(
                    text,
                    "commcanary_collective_bus_bandwidth_bytes_per_second",
                    group="1",
                    op="all_reduce",
                    size_bucket="4",
                )
                or 0
            ) > 0
            # The state is saved every second: wait for a save that holds this group's counts, so the
            # restart has counts to go on from, then kill with no chance of a last save.
            _wait(
                lambda: _saved_rows(archive, "1", "all_reduce"),
                10,
                "a saved state holding group 1's all_reduce",
            )
            agent.kill()  # no chance to save: the restart goes on from the last saved state
            agent.wait()
        before = json.loads((archive / "state.json").read_text())["job"]["collectives"]
        with _agent(shards, archive, port, "--hang-after", "30"):
            assert job.wait(240) == 0
            _wait(lambda: _complete_instances(shards, "1", "all_reduce") == 150, 10)
            time.sleep(1.5)
            text = _get(port, "/metrics")
            status = json.loads(_get(port, "/status") or "{}")
    # The whole run, counted once: the restart neither skipped nor doubled a line.
    assert any(row[:2] == ["1", "all_reduce"] for row in before)
    for group, op in (("1", "all_reduce"), ("0", "send_recv"), ("0", "all_reduce")):
        assert (
            _metric(text, "commcanary_collectives_total", group=group, op=op)
            == _complete_instances(shards, group, op)
            or op == "send_recv"
        )
    assert _metric(text, "commcanary_collectives_total", group="1", op="all_reduce") == 150
    assert _metric(text, "commcanary_collectives_total", group="0", op="send_recv") == 150 * 4
    assert not status["alarms"] and {p["state"] for p in status["processes"]} == {"ended"}
    # The shards imported after the run (the capture's merge) hold what the agent saw.
    trace = json.loads((tmp_path / "trace.json").read_text())
    merged = sum(1 for e in trace["events"] if e["op"] == "all_reduce" and e.get("group") == "1")
    assert merged == 150


def test_a_hang_alarm_collects_every_ranks_evidence_and_names_the_root(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    port = _port()
    with (
        _job(
            tmp_path,
            "--steps",
            "400",
            "--step-sleep",
            "0.02",
            "--fault",
            "skip",
            "--fault-rank",
            "2",
            "--fault-step",
            "8",
        ) as (_, shards),
        _agent(shards, archive, port, "--hang-after", "5"),
    ):
        _wait(lambda: any(archive.glob("alarm-*/hang.json")), 120)
        time.sleep(0.5)
        folder = next(archive.glob("alarm-*"))
        alarm = json.loads((folder / "alarm.json").read_text())
        injected = json.loads(next((tmp_path / "truth").glob("fault_rank*.json")).read_text())
        assert alarm["raised_at"] - injected["wall_ns"] / 1e9 <= 5 + 5, alarm
        hang = json.loads((folder / "hang.json").read_text())
        assert [r["rank"] for r in hang["root"]] == [2], alarm["diagnosis"]
        for rank in range(4):
            assert (folder / "evidence" / f"rank{rank}_stacks.txt").is_file()
            assert (folder / "evidence" / "fr_on_demand" / f"fr_trace_rank_{rank}").is_file()
        assert {p["state"] for p in alarm["processes"]} == {"answered"}
        metrics = _get(port, "/metrics")
        assert _metric(metrics, "commcanary_hang_alarms_total") == 1


def test_a_short_straggler_raises_no_alarm(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    port = _port()
    args = (
        "--steps",
        "40",
        "--step-sleep",
        "0.02",
        "--fault",
        "sleep",
        "--fault-rank",
        "1",
        "--fault-step",
        "15",
    )
    with (
        _job(tmp_path, *args, "--straggle-s", "2.0") as (job, shards),
        _agent(shards, archive, port, "--hang-after", "5"),
    ):
        assert job.wait(300) == 0
        time.sleep(1.5)
        status = json.loads(_get(port, "/status") or "{}")
    assert status["alarms"] == []
    late = status["stragglers"]["late_steps_by_rank"]
    # Rank 1 is late in (nearly) every step from step 15; on a busy host another rank may be
    # late now and then, never as often.
    assert late.get("1", 0) >= 15, late
    assert all(n <= late["1"] // 4 for rank, n in late.items() if rank != "1"), late
    assert "1" in status["stragglers"]["repeated"]


def _netns_available() -> str | None:
    """Why two network namespaces cannot be made here, or ``None``."""
    import shutil

    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = f"ccprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add fails here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@contextlib.contextmanager
def _two_nodes() -> Iterator[tuple[str, str]]:
    """Two network namespaces joined by a veth pair: 10.77.N.1 and 10.77.N.2."""
    tag = f"{os.getpid() % 10000}"
    a, b = f"cca{tag}", f"ccb{tag}"
    net = f"10.77.{os.getpid() % 250}"
    steps = [
        ["ip", "netns", "add", a],
        ["ip", "netns", "add", b],
        ["ip", "link", "add", f"va{tag}", "type", "veth", "peer", "name", f"vb{tag}"],
        ["ip", "link", "set", f"va{tag}", "netns", a],
        ["ip", "link", "set", f"vb{tag}", "netns", b],
        ["ip", "-n", a, "addr", "add", f"{net}.1/24", "dev", f"va{tag}"],
        ["ip", "-n", b, "addr", "add", f"{net}.2/24", "dev", f"vb{tag}"],
        ["ip", "-n", a, "link", "set", f"va{tag}", "up"],
        ["ip", "-n", b, "link", "set", f"vb{tag}", "up"],
        ["ip", "-n", a, "link", "set", "lo", "up"],
        ["ip", "-n", b, "link", "set", "lo", "up"],
    ]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True)
        yield (a, f"{net}.1", f"va{tag}"), (b, f"{net}.2", f"vb{tag}")  # type: ignore[misc]
    finally:
        subprocess.run(["ip", "netns", "del", a], capture_output=True)
        subprocess.run(["ip", "netns", "del", b], capture_output=True)


def test_agents_on_two_nodes_localize_a_root_on_the_other_node(tmp_path: Path) -> None:
    why = _netns_available()
    if why is not None:  # a permission of the machine (CAP_SYS_ADMIN), not a tool to install
        pytest.skip(f"two network namespaces are needed: {why}")
    token = tmp_path / "peer-token"
    token.write_text("a-token-the-agents-share\n")
    port = 19102
    with _two_nodes() as ((ns_a, ip_a, dev_a), (ns_b, ip_b, dev_b)), contextlib.ExitStack() as stack:  # type: ignore[misc]
        procs = []
        for node, (ns, _ip, dev) in enumerate(((ns_a, ip_a, dev_a), (ns_b, ip_b, dev_b))):
            here = tmp_path / f"node{node}"
            here.mkdir()
            env = {**ENV, "GLOO_SOCKET_IFNAME": dev}
            log = stack.enter_context(open(here / "capture.log", "wb"))
            procs.append(
                subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        *COMMCANARY,
                        "capture",
                        "-o",
                        str(here / "trace.json"),
                        "--shards",
                        str(here / "shards"),
                        "--",
                        sys.executable,
                        "-m",
                        "torch.distributed.run",
                        "--nnodes",
                        "2",
                        "--node-rank",
                        str(node),
                        "--nproc-per-node",
                        "2",
                        "--master-addr",
                        ip_a,
                        "--master-port",
                        "29555",
                        str(JOB),
                        "--steps",
                        "400",
                        "--step-sleep",
                        "0.02",
                        "--fault",
                        "freeze",
                        "--fault-rank",
                        "3",
                        "--fault-step",
                        "8",
                        "--freeze-s",
                        "60",
                        "--truth",
                        str(here / "truth"),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        for node in range(2):
            _wait(lambda node=node: (tmp_path / f"node{node}" / "shards").is_dir(), 60, "the shard directory")  # type: ignore[misc]
        agents = []
        for node, (ns, ip, other) in enumerate(((ns_a, ip_a, ip_b), (ns_b, ip_b, ip_a))):
            here = tmp_path / f"node{node}"
            log = stack.enter_context(open(here / "agent.log", "wb"))
            agents.append(
                subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        *COMMCANARY,
                        "agent",
                        "--watch",
                        str(here / "shards"),
                        "--listen",
                        f"{ip}:{port}",
                        "--archive",
                        str(here / "archive"),
                        "--hang-after",
                        "5",
                        "--peers",
                        f"http://{other}:{port}",
                        "--peer-token-file",
                        str(token),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=ENV,
                )
            )
        try:
            archive = tmp_path / "node0" / "archive"
            _wait(lambda: any(archive.glob("alarm-*/hang.json")), 180, "node 0's alarm")
            time.sleep(0.5)
            folder = next(archive.glob("alarm-*/hang.json")).parent
            hang = json.loads((folder / "hang.json").read_text())
            alarm = json.loads((folder / "alarm.json").read_text())
            # Node 0 holds ranks 0 and 1; rank 3, frozen, is on node 1: named all the same, with
            # rank 2's dump fetched from node 1's agent.
            assert [r["rank"] for r in hang["root"]] == [3], alarm["diagnosis"]
            assert (folder / "evidence" / "fr_on_demand" / "fr_trace_rank_2").is_file()
            assert any("fr_on_demand/fr_trace_rank_2" in files for files in alarm["peers"].values())
        finally:
            for proc in (*agents, *procs):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL) if proc in procs else proc.send_signal(signal.SIGTERM)
            for proc in (*agents, *procs):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(30)
            subprocess.run(["pkill", "-KILL", "-f", str(tmp_path)], capture_output=True)


def test_a_job_that_goes_on_after_the_alarm_is_a_stall(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    port = _port()
    args = (
        "--steps",
        "300",
        "--step-sleep",
        "0.02",
        "--fault",
        "freeze",
        "--fault-rank",
        "1",
        "--fault-step",
        "8",
    )
    with (
        _job(tmp_path, *args, "--freeze-s", "14") as (_, shards),
        _agent(shards, archive, port, "--hang-after", "5"),
    ):
        _wait(lambda: any(archive.glob("alarm-*/hang.json")), 120, "the alarm")
        folder = next(archive.glob("alarm-*/hang.json")).parent
        _wait(lambda: json.loads((folder / "alarm.json").read_text())["outcome"] == "stall", 60, "the stall")
        alarm = json.loads((folder / "alarm.json").read_text())
        assert alarm["resumed_at"] > alarm["raised_at"]
        assert [r["rank"] for r in json.loads((folder / "hang.json").read_text())["root"]] == [1]
        metrics = _get(port, "/metrics")
        assert _metric(metrics, "commcanary_stalls_total") == 1
        assert _metric(metrics, "commcanary_hang_alarms_total") == 1
