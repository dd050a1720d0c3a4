"""The agent watching a running job through the NCCL profiler plugin: the
real plugin (built here) loaded by four processes of the C harness's job
mode, which call it as NCCL does; rank 3 never calls step 25's AllReduce and
the others stay hung in it. `commcanary agent --nccl-logs` must raise the
alarm within --hang-after plus a poll and name rank 3 from the logs."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HARNESS = ROOT / "rust" / "commcanary-nccl-profiler" / "tests" / "harness" / "harness.c"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("cargo") is None or shutil.which("cc") is None:
        pytest.skip("needs cargo and cc to build the plugin and the harness")
    work = tmp_path_factory.mktemp("plugin")
    subprocess.run(["cargo", "build", "-q", "-p", "commcanary-nccl-profiler", "--lib"], cwd=ROOT, check=True)
    lib = work / "libnccl-profiler-commcanary.so"
    shutil.copy(ROOT / "target" / "debug" / "libnccl_profiler_commcanary.so", lib)
    exe = work / "harness"
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(exe), str(HARNESS), "-ldl"], check=True)
    return lib, exe


def _get(port: int, path: str) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return str(reply.read().decode())
    except OSError:
        return None


def test_a_live_hang_is_raised_from_the_plugins_logs(plugin: tuple[Path, Path], tmp_path: Path) -> None:
    lib, exe = plugin
    logs, watch, archive = tmp_path / "nccl", tmp_path / "shards", tmp_path / "archive"
    watch.mkdir()
    barrier = tmp_path / "barrier"
    barrier.write_bytes(bytes(64))
    env = {
        **os.environ,
        "COMMCANARY_NCCL_DIR": str(logs),
        "WORLD_SIZE": "4",
        "HARNESS_BARRIER": str(barrier),
        "HARNESS_STEP_MS": "100",
        "HARNESS_HOLD_S": "40",
    }
    ranks = [
        subprocess.Popen(
            [str(exe), str(lib), "6", "job", "40", "-1", "25", "3"],
            env={**env, "RANK": str(r)},
            stdout=subprocess.DEVNULL,
        )
        for r in range(4)
    ]
    port = _port()
    agent_log = tmp_path / "agent.log"
    log_file = agent_log.open("wb")
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "commcanary",
            "agent",
            "--watch",
            str(watch),
            "--nccl-logs",
            str(logs),
            "--archive",
            str(archive),
            "--hang-after",
            "3",
            "--listen",
            f"127.0.0.1:{port}",
            "--run-for",
            "35",
        ],
        stderr=log_file,
    )
    try:
        # While the job runs: its progress shows.
        deadline = time.monotonic() + 20
        seen = 0
        while time.monotonic() < deadline:
            status = json.loads(_get(port, "/status") or "{}")
            procs = status.get("nccl", {}).get("processes", [])
            seen = max([0] + [c["enqueued"] for p in procs for c in p["comms"]])
            if seen >= 10:
                break
            time.sleep(0.2)
        assert seen >= 10, "the agent followed the running job"
        started = time.monotonic()
        alarms: list[Path] = []
        while time.monotonic() - started < 25 and not alarms:
            alarms = [d for d in archive.glob("alarm-*") if (d / "alarm.json").exists()]
            time.sleep(0.2)
        assert alarms, f"an alarm was raised: {agent_log.read_text()}"
        alarm = json.loads((alarms[0] / "alarm.json").read_text())
        assert alarm["groups"] == ["default_pg:0"]
        assert alarm["diagnosis"]["lines"][0].startswith("hang: root rank 3 never joined all_reduce #26"), (
            alarm
        )
        metrics = _get(port, "/metrics") or ""
        assert 'commcanary_nccl_in_flight{rank="0",group="default_pg:0"} 1' in metrics
    finally:
        for p in [*ranks, agent]:
            p.kill()
            p.wait()
        log_file.close()
