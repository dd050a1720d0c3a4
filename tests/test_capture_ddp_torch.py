"""`commcanary capture -- torchrun --nproc-per-node 4 PROGRAM` of real, unmodified DDP and FSDP2
training on gloo: the collectives torch issues from C++ (DDP's gradient buckets and buffer
broadcasts, FSDP2's all_gathers and gradient reductions) are recorded from each process's Flight
Recorder ring, each exactly once, and the program's own Python all_reduces are not counted twice.
The truth is each rank's own log: its Flight Recorder's entries, read by the program itself at the
end, and the number of Python calls it made. Needs torch (the `torch` extra; CI installs it)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("torch")

STEPS = 12
DDP_PROGRAM = """
import json, os, sys
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = int(sys.argv[1])
torch.manual_seed(0)
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
model = DDP(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)),
            bucket_cap_mb=0.05)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
python_calls = 0
profiled = os.environ.get("PROFILE") == "1"
prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if profiled else None
if prof is not None:
    prof.start()
for step in range(STEPS):
    x, y = torch.randn(16, 64), torch.randint(0, 10, (16,))
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    if step % 4 == 3:
        dist.all_reduce(loss.detach().clone())  # the program's own metric
        python_calls += 1
    if prof is not None:
        prof.step()
if prof is not None:
    prof.stop()
import torch._C._distributed_c10d as c10d
doc = json.loads(bytes(c10d._dump_fr_trace_json(backend="gloo", includeCollectives=True)))
ops = [e["profiling_name"].split(":")[-1] for e in doc["entries"] if not e.get("is_p2p")]
with open(os.path.join(os.environ["LOG_DIR"], f"rank{rank}.json"), "w") as f:
    json.dump({"fr_ops": ops, "python_calls": python_calls}, f)
dist.destroy_process_group()
"""

FSDP_PROGRAM = """
import json, os, sys
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

STEPS = int(sys.argv[1])
torch.manual_seed(0)
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
for layer in (model[0], model[2]):
    fully_shard(layer)
fully_shard(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(STEPS):
    loss = model(torch.randn(8, 32)).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
import torch._C._distributed_c10d as c10d
doc = json.loads(bytes(c10d._dump_fr_trace_json(backend="gloo", includeCollectives=True)))
ops = [e["profiling_name"].split(":")[-1] for e in doc["entries"] if not e.get("is_p2p")]
with open(os.path.join(os.environ["LOG_DIR"], f"rank{rank}.json"), "w") as f:
    json.dump({"fr_ops": ops, "python_calls": 0}, f)
dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_captured(tmp_path: Path, program: str, nproc: int, arg: int, env: dict[str, str]) -> str:
    """`commcanary capture -o job.trace.json -- torchrun --nproc-per-node N train.py ARG` in
    ``tmp_path``; returns its stderr (the run must succeed)."""
    import os

    (tmp_path / "train.py").write_text(program)
    cmd = [sys.executable, "-m", "commcanary", "capture", "-o", "job.trace.json", "--", sys.executable]
    cmd += ["-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1"]
    cmd += ["--master-port", str(_free_port()), "train.py", str(arg)]
    env = os.environ | {"OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"} | env
    p = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stderr


def _capture(
    tmp_path: Path, program: str, steps: int, profile: bool = True
) -> tuple[dict[str, object], list[dict[str, object]]]:
    logs = tmp_path / "logs"
    logs.mkdir()
    _run_captured(tmp_path, program, 4, steps, {"LOG_DIR": str(logs), "PROFILE": "1" if profile else "0"})
    trace = json.loads((tmp_path / "job.trace.json").read_text())
    truth = [json.loads((logs / f"rank{r}.json").read_text()) for r in range(4)]
    return trace, truth


def _compiles_to_a_loop(tmp_path: Path, *, verify: bool) -> None:
    """The captured trace compiles to a one-event step loop (source-verified when asked)."""
    steps = [["compile", "job.trace.json", "-o", "job.canary.json"]]
    if verify:
        steps.append(["verify-fidelity", "job.trace.json", "job.canary.json", "-o", "fidelity.json"])
    for args in steps:
        q = subprocess.run(
            [sys.executable, "-m", "commcanary", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert q.returncode == 0, (args, q.stderr)
    canary = json.loads((tmp_path / "job.canary.json").read_text())
    assert canary["format"] == "commcanary.canary.v4" and canary["compiler"]["canary_events"] == 1


def _ops(names: list[str]) -> Counter[str]:
    from commcanary.capture.flight import op_of

    return Counter(op for op in (op_of(n) for n in names) if op is not None)


def test_ddp_gradient_all_reduces_are_captured_once(tmp_path: Path) -> None:
    trace, truth = _capture(tmp_path, DDP_PROGRAM, STEPS)
    events = trace["events"]
    assert trace["workload"]["partial_collectives"] == 0
    # Every rank's recorder saw the same collectives; the capture has each once.
    want = _ops(truth[0]["fr_ops"])  # type: ignore[arg-type]
    assert all(_ops(t["fr_ops"]) == want for t in truth)  # type: ignore[arg-type]
    got = Counter(e["op"] for e in events)
    assert got == want, (got, want)
    ids = [e["metadata"]["capture_collective_id"] for e in events if "capture_collective_id" in e["metadata"]]
    assert len(ids) == len(set(ids))
    # The buckets: all_reduces DDP issued itself, each step, besides the program's own.
    python_calls = int(truth[0]["python_calls"])  # type: ignore[call-overload]
    assert python_calls == STEPS // 4
    wrapped = [e for e in events if e["metadata"].get("capture_wrapped") is True]
    assert len(wrapped) == python_calls
    per_step = Counter(
        e["step"] for e in events if e["op"] == "all_reduce" and not e["metadata"].get("capture_wrapped")
    )
    # The same buckets every step after the first (DDP rebuilds its buckets then).
    assert set(per_step) == set(range(STEPS)) and len({per_step[s] for s in range(1, STEPS)}) == 1, per_step
    assert sum(per_step.values()) == got["all_reduce"] - python_calls
    # The capture compiles to a verified step loop.
    _compiles_to_a_loop(tmp_path, verify=True)


def test_fsdp2_collectives_are_captured_once(tmp_path: Path) -> None:
    steps = 4
    trace, truth = _capture(tmp_path, FSDP_PROGRAM, steps)
    want = _ops(truth[0]["fr_ops"])  # type: ignore[arg-type]
    assert want["all_gather"] >= steps, want  # FSDP2 gathers its shards every step
    got = Counter(e["op"] for e in trace["events"])
    assert got == want, (got, want)
    assert trace["workload"]["partial_collectives"] == 0


def test_an_unprofiled_ddp_job_gets_recovered_steps(tmp_path: Path) -> None:
    trace, truth = _capture(tmp_path, DDP_PROGRAM, STEPS, profile=False)
    events = trace["events"]
    assert Counter(e["op"] for e in events) == _ops(truth[0]["fr_ops"])  # type: ignore[arg-type]
    assert trace["workload"]["capture_steps"] == "recovered"  # type: ignore[index]
    stepped = [e for e in events if "step" in e]
    # The sequence repeats every 4 iterations (the program's own all_reduce runs every 4th), so
    # a recovered step is 4 of the program's iterations: the same buckets in each.
    per_step = Counter(e["step"] for e in stepped if e["op"] == "all_reduce")
    whole = [per_step[k] for k in sorted(per_step)[:-1]]  # the last one may be cut short
    assert len(per_step) >= STEPS // 4 - 1 and len(set(whole)) == 1, per_step
    _compiles_to_a_loop(tmp_path, verify=False)


LONG_PROGRAM = """
import sys, time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(64)
for i in range(int(sys.argv[1])):
    dist.all_reduce(t)
    time.sleep(0.01)
dist.destroy_process_group()
"""


def test_a_ring_smaller_than_the_job_is_read_as_it_fills(tmp_path: Path) -> None:
    # 400 all_reduces through a 200-entry ring: only reads while the job runs see them all.
    stderr = _run_captured(tmp_path, LONG_PROGRAM, 2, 400, {"TORCH_FR_BUFFER_SIZE": "200"})
    assert "overwritten" not in stderr
    events = json.loads((tmp_path / "job.trace.json").read_text())["events"]
    assert Counter(e["op"] for e in events)["all_reduce"] == 400
    assert all(e["metadata"]["capture_wrapped"] for e in events if e["op"] == "all_reduce")
