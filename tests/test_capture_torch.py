"""`commcanary capture` of a real, unmodified 4-process torch gloo program:
two groups besides the world, sync and async collectives, send/recv, and a
sleep on one rank; the merged trace has the program's collectives per op and
group and measures the sleep. Needs torch (the `torch` extra; CI installs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("torch")

STEPS = 4
PROGRAM = """
import os, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

STEPS = 4

def run(rank, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=4)
    pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    mine = pairs[rank // 2]
    for step in range(STEPS):
        dist.barrier()
        if rank == 2 and step == 2:
            time.sleep(0.1)
        x = torch.ones(1 << 16)
        with torch.profiler.record_function("decode"):
            dist.all_reduce(x)
        out = torch.empty(2 * 1024)
        work = dist.all_gather_into_tensor(out, torch.ones(1024), group=mine, async_op=True)
        work.wait()
        dist.broadcast(torch.zeros(128, dtype=torch.int64), src=0)
        if rank == 0:
            dist.send(torch.ones(4096), dst=2)
        elif rank == 2:
            dist.recv(torch.empty(4096), src=0)
        if rank == 1:
            dist.isend(torch.ones(256), dst=3).wait()
        elif rank == 3:
            dist.irecv(torch.empty(256), src=1).wait()
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(run, args=(int(sys.argv[1]),), nprocs=4, join=True)
"""


def test_an_unmodified_torch_program_is_captured(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "program.py").write_text(PROGRAM)
    cmd = [
        sys.executable,
        "-m",
        "commcanary",
        "capture",
        "-o",
        "job.trace.json",
        "--",
        sys.executable,
        "program.py",
    ]
    p = subprocess.run(
        [*cmd, str(port)], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    assert p.returncode == 0, p.stderr[-3000:]
    trace = json.loads((tmp_path / "job.trace.json").read_text())
    events = trace["events"]
    counts = Counter((e["op"], tuple(e["ranks"])) for e in events)
    assert counts == {
        ("all_reduce", (0, 1, 2, 3)): 4,
        ("all_gather", (0, 1)): 4,
        ("all_gather", (2, 3)): 4,
        ("broadcast", (0, 1, 2, 3)): 4,
        ("point_to_point", (0, 2)): 4,
        ("point_to_point", (1, 3)): 4,
    }
    assert trace["workload"]["partial_collectives"] == 0
    reduce_events = [e for e in events if e["op"] == "all_reduce"]
    lags = [e["rank_arrival_us"][2] - max(e["rank_arrival_us"][r] for r in (0, 1, 3)) for e in reduce_events]
    # The 100 ms sleep before step 2 on rank 2: the largest lag by far, even
    # when a loaded host makes the other ranks drift by tens of ms.
    assert lags[2] >= 50_000 and lags[2] - max(lags[:2] + lags[3:]) >= 25_000, lags
    assert all(e["dtype"] == "float32" for e in reduce_events)
    assert {e["phase"] for e in reduce_events} == {"decode"}  # from record_function
    assert {e["phase"] for e in events if e["op"] == "broadcast"} == {"unknown"}
    assert all(e.get("root_rank") == 0 for e in events if e["op"] == "broadcast")
    for args in (
        ["compile", "job.trace.json", "-o", "job.canary.json"],
        ["replay", "job.canary.json", "-o", "job.report.json"],
        ["verify-fidelity", "job.trace.json", "job.canary.json", "-o", "fidelity.json"],
    ):
        q = subprocess.run(
            [sys.executable, "-m", "commcanary", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert q.returncode == 0, (args, q.stderr)
    # Each member's end is kept, so the straggler view reads the capture:
    # the sleep is rank 2's late arrival at the all_reduce of recovered step 2.
    assert all(len(e["metadata"]["capture_rank_end_us"]) == len(e["ranks"]) for e in events)
    q = subprocess.run(
        [sys.executable, "-m", "commcanary", "diagnose", "stragglers", "job.trace.json", "-o", "s.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert q.returncode == 1, q.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["step_source"] == "recovered" and len(doc["steps"]) == STEPS
    worst = max(doc["findings"], key=lambda f: f["estimated_cost_us"])
    assert (worst["rank"], worst["step"], worst["kind"], worst["op"]) == (2, 2, "late_arrival", "all_reduce")
    assert 50_000 <= worst["estimated_cost_us"] <= 130_000, worst
