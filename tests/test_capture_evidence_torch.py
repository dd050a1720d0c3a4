"""`commcanary capture --evidence DIR` on a real, unmodified 2-process torch
gloo program that hangs: rank 1 stalls 9 s outside communication while rank 0
waits in an all_reduce with a 4 s timeout. The processes leave what a hang
diagnosis reads — a Flight Recorder dump while the collective is stuck and
after the error, every thread's stack, the exception texts — under both
launch styles: one process per rank running the program's own main (the
exception reaches ``sys.excepthook``) and ``torch.multiprocessing.spawn``
(which catches the worker's exception itself). Needs torch (the `torch`
extra; CI installs it)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

import commcanary

pytest.importorskip("torch")

PROGRAM = """
import datetime, os, subprocess, sys, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def run(rank, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=4))
    for step in range(6):
        if rank == 1 and step == 3:
            time.sleep(9)
        dist.all_reduce(torch.ones(1024))
        time.sleep(0.05)
    dist.destroy_process_group()

if __name__ == "__main__":
    port, mode = int(sys.argv[1]), sys.argv[2]
    if mode == "spawn":
        mp.spawn(run, args=(port,), nprocs=2, join=True)
    elif mode == "direct":
        ranks = [subprocess.Popen([sys.executable, __file__, str(port), "rank", str(r)]) for r in range(2)]
        sys.exit(max(p.wait() for p in ranks))
    else:
        run(int(sys.argv[3]), port)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("mode", ["direct", "spawn"])
def test_a_hung_program_leaves_the_evidence_a_diagnosis_reads(tmp_path: Path, mode: str) -> None:
    (tmp_path / "program.py").write_text(PROGRAM)
    cmd = [sys.executable, "-m", "commcanary", "capture", "-o", "job.trace.json"]
    cmd += ["--evidence", "evidence", "--hang-after", "1.5", "--", sys.executable, "program.py"]
    p = subprocess.run(
        [*cmd, str(free_port()), mode], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert p.returncode == 4, p.stderr[-3000:]  # the workload failed
    assert "evidence: evidence: " in p.stderr and "commcanary diagnose hang evidence" in p.stderr
    evidence = tmp_path / "evidence"
    written = {str(f.relative_to(evidence)) for f in evidence.rglob("*") if f.is_file()}
    assert {
        "fr_during_hang/fr_trace_rank_0",
        "fr_after_error/fr_trace_rank_0",
        "rank0_stacks.txt",
        "rank0_exception.txt",
    } <= written
    assert not any(name.startswith(".") for name in written)
    assert "all_reduce" in (evidence / "rank0_stacks.txt").read_text()
    assert "Timed out" in (evidence / "rank0_exception.txt").read_text()
    # Rank 1 slept through no collective: no dump while it stalled.
    assert "fr_during_hang/fr_trace_rank_1" not in written
    report = commcanary.diagnose_hang(evidence)
    doc = report.document
    assert doc["verdict"] == "hang", report.lines
    assert [r["rank"] for r in doc["root"]] == [1], report.lines


def test_the_evidence_directory_must_be_new_or_empty(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from commcanary.cli import app

    used = tmp_path / "evidence"
    used.mkdir()
    (used / "fr_trace_rank_0").write_bytes(b"old run")
    out = tmp_path / "t.json"
    result = CliRunner().invoke(
        app, ["capture", "-o", str(out), "--evidence", str(used), "--", sys.executable, "-c", "pass"]
    )
    assert result.exit_code == 3, result.output
    assert "must be a new or empty directory" in result.output and not out.exists()
    assert (used / "fr_trace_rank_0").read_bytes() == b"old run"
