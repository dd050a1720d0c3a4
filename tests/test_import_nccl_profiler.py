"""`commcanary import-nccl-profiler`: the NCCL profiler plugin's logs of a
4-rank job (tests/data/nccl_profiler, written by the real plugin) as a trace,
through Typer's runner and the Python API, and its refusals."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from commcanary.cli import app
from commcanary.importers import import_nccl_profiler

JOB4 = Path(__file__).parent / "data" / "nccl_profiler" / "job4"


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_the_job_imports_every_instance_and_its_straggler_is_found(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    result = run("import-nccl-profiler", str(JOB4), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("imported 42 collective events from 4 ranks")
    trace = json.loads(out.read_text())
    ops = Counter((e["op"], e["group"]) for e in trace["events"])
    assert ops[("all_reduce", "default_pg:0")] == 6
    assert ops[("all_gather", "dp:pair0")] == ops[("all_gather", "dp:pair1")] == 6
    assert ops[("point_to_point", "default_pg:0")] == 24
    reduce = next(e for e in trace["events"] if e["op"] == "all_reduce")
    assert reduce["bytes"] == 4 << 20 and reduce["dtype"] == "float32" and reduce["device_us"] == 250.0
    diagnosis = run("diagnose", "stragglers", str(out))
    assert diagnosis.exit_code == 1, diagnosis.output  # 1: stragglers found
    assert "rank 1:" in diagnosis.output.splitlines()[1]
    again = tmp_path / "again.json"
    assert run("import-nccl-profiler", str(JOB4), "-o", str(again)).exit_code == 0
    assert json.loads(again.read_text())["events"] == trace["events"]


def test_the_api_reports_each_processes_progress_and_losses() -> None:
    imported = import_nccl_profiler(JOB4)
    assert [p.rank for p in imported.processes] == [0, 1, 2, 3]
    for p in imported.processes:
        assert (p.abi, p.segments, p.sealed, p.dropped, p.torn, p.orphans) == (6, 1, 1, 0, 0, 0)
        world = next(c for c in p.comms if c.group == "default_pg:0")
        assert (world.enqueued, world.last_enqueued, world.last_completed) == (6, 5, 5)
    assert imported.job.imported == 42


def test_refusals_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    missing = run("import-nccl-profiler", str(tmp_path / "nowhere"), "-o", str(out))
    assert missing.exit_code == 3 and len(missing.output.strip().splitlines()) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    none = run("import-nccl-profiler", str(empty), "-o", str(out))
    assert none.exit_code == 3 and "no NCCL profiler logs" in none.output
    damaged = tmp_path / "damaged"
    shutil.copytree(JOB4, damaged)
    victim = sorted(damaged.iterdir())[2]
    data = bytearray(victim.read_bytes())
    data[40] ^= 0xFF
    victim.write_bytes(bytes(data))
    broken = run("import-nccl-profiler", str(damaged), "-o", str(out))
    assert broken.exit_code == 3, broken.output
    assert victim.name in broken.output and "checksum" in broken.output
    assert len(broken.output.strip().splitlines()) == 1
    assert not out.exists()


def test_a_cut_last_frame_is_skipped_and_said(tmp_path: Path) -> None:
    cut = tmp_path / "cut"
    shutil.copytree(JOB4, cut)
    victim = sorted(cut.iterdir())[0]
    victim.write_bytes(victim.read_bytes()[:-40])  # into the frame before the seal
    result = run("import-nccl-profiler", str(cut), "-o", str(tmp_path / "t.json"))
    assert result.exit_code == 0, result.output
    assert "in a cut last frame" in result.output


HANG4 = Path(__file__).parent / "data" / "nccl_profiler" / "hang4"


def test_diagnose_hang_reads_the_logs_and_names_the_rank_that_never_joined(tmp_path: Path) -> None:
    out = tmp_path / "hang.json"
    result = run("diagnose", "hang", str(HANG4), "-o", str(out))
    assert result.exit_code == 1, result.output  # 1: a hang was found
    first = result.output.splitlines()[0]
    assert first.startswith("hang: root rank 3 never joined all_reduce #6 on default_pg:0"), first
    assert "ranks 0-2 are waiting in" in first
    doc = json.loads(out.read_text())
    assert doc["root"][0]["rank"] == 3
    assert any("NCCL profiler plugin" in n for n in doc["notes"])
    kinds = {f["kind"] for f in doc["evidence"]}
    assert kinds == {"nccl_profiler"}


def test_the_logs_beside_other_files_and_an_analysis_that_cannot_use_them(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(HANG4, job / "nccl")
    (job / "README.md").write_text("the job's notes\n")
    result = run("diagnose", "hang", str(job))
    assert result.exit_code == 1, result.output
    assert "root rank 3" in result.output
    stragglers = run("diagnose", "stragglers", str(job / "nccl"))
    assert stragglers.exit_code == 3, stragglers.output
    assert "import-nccl-profiler" in stragglers.output
