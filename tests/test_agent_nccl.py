"""`commcanary agent --nccl-logs`: the NCCL profiler plugin's logs followed
by the agent: per-communicator progress in /status and /metrics, a stalled
communicator raising the alarm, and the logs diagnosed in its evidence
(tests/data/nccl_profiler/hang4, written by the real plugin)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from commcanary.agent.nccl import NcclWatch
from commcanary.agent.service import Agent

HANG4 = Path(__file__).parent / "data" / "nccl_profiler" / "hang4"
JOB4 = Path(__file__).parent / "data" / "nccl_profiler" / "job4"


def test_a_communicator_with_calls_in_flight_and_no_progress_raises_the_alarm(tmp_path: Path) -> None:
    watch, logs, archive = tmp_path / "shards", tmp_path / "nccl", tmp_path / "archive"
    watch.mkdir()
    shutil.copytree(HANG4, logs)
    lines: list[str] = []
    agent = Agent(watch, archive, hang_after_s=5, log=lines.append, nccl_logs=logs)
    agent.tick()
    assert agent.alarms == 1, lines
    (alarm_dir,) = [d for d in archive.iterdir() if d.name.startswith("alarm-")]
    alarm = json.loads((alarm_dir / "alarm.json").read_text())
    assert alarm["groups"] == ["default_pg:0"]
    assert alarm["waiting"] == {"default_pg:0": ["0", "1", "2"]}
    assert alarm["diagnosis"]["verdict"] == "hang"
    assert alarm["diagnosis"]["lines"][0].startswith("hang: root rank 3 never joined all_reduce #6"), alarm
    assert sorted(p.name for p in (alarm_dir / "evidence" / "nccl").iterdir()) == sorted(
        p.name for p in HANG4.iterdir()
    )
    metrics = agent.metrics_text()
    assert 'commcanary_nccl_in_flight{rank="0",group="default_pg:0"} 1' in metrics
    assert 'commcanary_nccl_in_flight{rank="3",group="default_pg:0"} 0' in metrics
    assert 'commcanary_nccl_last_completed_seq{rank="3",group="default_pg:0"} 4' in metrics
    status = json.loads(agent.status_json())
    ranks = {p["rank"]: p for p in status["nccl"]["processes"]}
    world = next(c for c in ranks[1]["comms"] if c["group"] == "default_pg:0")
    assert (world["last_enqueued"], world["last_completed"], world["in_flight"]) == (5, 4, 1)
    agent.tick()
    assert agent.alarms == 1, "one alarm per stall"


def test_a_finished_job_raises_nothing_and_growth_is_followed(tmp_path: Path) -> None:
    watch, logs = tmp_path / "shards", tmp_path / "nccl"
    watch.mkdir()
    logs.mkdir()
    agent = Agent(watch, tmp_path / "archive", hang_after_s=5, log=lambda _: None, nccl_logs=logs)
    sources = sorted(JOB4.iterdir())
    data = {p.name: p.read_bytes() for p in sources}
    for cut in (0.3, 0.7, 1.0):
        for name, b in data.items():
            (logs / name).write_bytes(b[: int(len(b) * cut)])
        agent.tick()
    assert agent.alarms == 0
    status = json.loads(agent.status_json())["nccl"]
    assert status["damaged"] == []
    for p in status["processes"]:
        world = next(c for c in p["comms"] if c["group"] == "default_pg:0")
        assert (world["enqueued"], world["last_completed"], world["in_flight"]) == (6 + 12, 5, 0)


def test_a_damaged_segment_is_said_and_not_read_again(tmp_path: Path) -> None:
    logs = tmp_path / "nccl"
    shutil.copytree(JOB4, logs)
    victim = sorted(logs.iterdir())[0]
    data = bytearray(victim.read_bytes())
    data[40] ^= 0xFF
    victim.write_bytes(bytes(data))
    watch = NcclWatch(logs)
    watch.poll()
    assert len(watch.damaged) == 1 and victim.name in watch.damaged[0]
    assert watch.stalled(time.time(), 1) == {}
