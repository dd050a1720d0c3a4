"""`commcanary diagnose hang` on a hang made here with real torch gloo
processes (the torch installed: the format this version writes): rank 3
skips an all_reduce on the default group and blocks in its pair group; a
watchdog in every process dumps its Flight Recorder (pickle and JSON) and its
Python stacks while the job is stuck. Needs torch (the `torch` extra; CI
installs it)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import commcanary

pytest.importorskip("torch")

PROGRAM = """
import faulthandler, os, sys, threading, time
os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from datetime import timedelta

def watchdog(rank, out):
    time.sleep(3.0)
    c10d = torch._C._distributed_c10d
    with open(os.path.join(out, f"fr_trace_rank_{rank}"), "wb") as f:
        f.write(c10d._dump_fr_trace())
    with open(os.path.join(out, f"fr_trace_rank_{rank}.json"), "wb") as f:
        data = c10d._dump_fr_trace_json()
        f.write(data if isinstance(data, bytes) else data.encode())
    with open(os.path.join(out, f"rank{rank}_stacks.txt"), "w") as f:
        faulthandler.dump_traceback(file=f, all_threads=True)
    # Leave only when every rank has dumped: an exit breaks the peers' calls.
    open(os.path.join(out, f".done{rank}"), "w").close()
    deadline = time.time() + 30
    while time.time() < deadline and not all(os.path.exists(os.path.join(out, f".done{r}")) for r in range(4)):
        time.sleep(0.05)
    os._exit(0)

def run(rank, port, out):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=4,
                            timeout=timedelta(seconds=30))
    pairs = [dist.new_group([0, 1], timeout=timedelta(seconds=30)), dist.new_group([2, 3], timeout=timedelta(seconds=30))]
    mine = pairs[rank // 2]
    x = torch.ones(1 << 12)
    gathered = torch.empty(2 << 10)
    for step in range(4):
        last = step == 3
        if last:
            threading.Thread(target=watchdog, args=(rank, out), daemon=True).start()
        if not (last and rank == 3):
            dist.all_reduce(x)
        dist.all_gather_into_tensor(gathered, torch.ones(1 << 10), group=mine)
        dist.broadcast(x, src=0)
    time.sleep(60)

if __name__ == "__main__":
    mp.spawn(run, args=(int(sys.argv[1]), sys.argv[2]), nprocs=4, join=True)
"""


@pytest.fixture(scope="module")
def hang_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("torch_hang")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = out / "job.py"
    script.write_text(PROGRAM)
    evidence = out / "evidence"
    evidence.mkdir()
    subprocess.run([sys.executable, str(script), str(port), str(evidence)], timeout=120, check=False)
    if len(list(evidence.glob("fr_trace_rank_*"))) != 8:
        pytest.fail(f"the job left {sorted(p.name for p in evidence.iterdir())}")
    return evidence


@pytest.mark.parametrize("pattern", ["fr_trace_rank_?", "fr_trace_rank_*.json"])
def test_a_real_torch_hang_from_its_flight_recorder(hang_dir: Path, pattern: str) -> None:
    doc = commcanary.diagnose_hang(sorted(hang_dir.glob(pattern))).document
    assert doc["verdict"] == "hang"
    assert [(r["rank"], r["group"]["desc"], r["op"]) for r in doc["root"]] == [
        (3, "default_pg", "all_reduce")
    ]
    seq = doc["root"][0]["collective_seq_id"]
    partial = {
        (p["group"]["ranks"] == [0, 1, 2, 3], tuple(p["missing_ranks"])) for p in doc["partial_collectives"]
    }
    assert (True, (3,)) in partial and (False, (2,)) in partial
    assert {(e["rank"], e["waits_for"]) for e in doc["wait_for"]} == {(0, 3), (1, 3), (2, 3), (3, 2)}
    assert seq == 7  # the default group counts the broadcasts too: all_reduces are 1, 3, 5, 7
    assert doc["step"]["value"] == 3


def test_stacks_and_dumps_together(hang_dir: Path) -> None:
    doc = commcanary.diagnose_hang(hang_dir).document
    assert doc["root"][0]["rank"] == 3
    calls = {p["rank"]: p["stack"]["op"] for p in doc["ranks"] if p["stack"]}
    assert calls == {0: "all_reduce", 1: "all_reduce", 2: "all_reduce", 3: "all_gather"}
    versions = {e["version"] for e in doc["evidence"] if e["kind"] == "flight_recorder"}
    assert len(versions) == 1
    json.dumps(doc)
