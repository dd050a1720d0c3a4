"""`commcanary comm-perf`: NCCL Inspector records (tests/data/nccl_tools,
written from the published format) as the communication-performance table,
against an nccl-tests JSON run; and the refusals of hostile files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from commcanary.cli import app

DATA = Path(__file__).parent / "data" / "nccl_tools"
INSPECTOR = DATA / "inspector"
RUN = DATA / "all_reduce_perf.json"


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_the_table_compares_each_row_with_nccl_tests_and_flags_the_slow_instance(tmp_path: Path) -> None:
    out = tmp_path / "perf.json"
    result = run("comm-perf", str(INSPECTOR), "--nccl-tests", str(RUN), "-o", str(out))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("communication: 40 collective instance(s) from 120 record(s), 2 ")
    reduce_line = next(line for line in lines if line.lstrip().startswith("all_reduce"))
    assert "58% of what nccl-tests measured (106.67 GB/s at 64.0 MiB)" in reduce_line
    assert "1 slow instance(s)" in reduce_line
    gather_line = next(line for line in lines if line.lstrip().startswith("all_gather"))
    assert "no nccl-tests run of this op on this many ranks" in gather_line
    doc = json.loads(out.read_text())
    assert doc["format"] == "commcanary.comm_perf.v1"
    reduce = next(r for r in doc["rows"] if r["op"] == "all_reduce")
    assert reduce["flagged"] == [
        {"busbw_gbps": reduce["flagged"][0]["busbw_gbps"], "rank": 2, "seq": 13, "time_us": 8200.0}
    ]
    assert reduce["expected"]["fraction"] == round(
        reduce["median_busbw_gbps"] / reduce["expected"]["busbw_gbps"], 4
    )
    again = tmp_path / "again.json"
    assert run("comm-perf", str(INSPECTOR), "--nccl-tests", str(RUN), "-o", str(again)).exit_code == 0
    assert again.read_bytes() == out.read_bytes()


def _refused(result: Any, *words: str) -> None:
    assert result.exit_code == 3, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    for w in words:
        assert w in result.output, result.output


def test_hostile_files_are_one_line_naming_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "inspector"
    shutil.copytree(INSPECTOR, bad)
    victim = sorted(bad.iterdir())[1]
    lines = victim.read_text().splitlines()
    record = json.loads(lines[3])
    record["metadata"]["inspector_output_format_version"] = "v9.0"
    victim.write_text("\n".join([*lines[:3], json.dumps(record), *lines[4:]]) + "\n")
    out = tmp_path / "o.json"
    _refused(
        run("comm-perf", str(bad), "-o", str(out)), victim.name, "record 4", "inspector_output_format_version"
    )
    record["metadata"]["inspector_output_format_version"] = "v4.0"
    record["header"]["rank"] = 9
    victim.write_text("\n".join([*lines[:3], json.dumps(record), *lines[4:]]) + "\n")
    _refused(run("comm-perf", str(bad), "-o", str(out)), "header.rank")
    victim.write_text("\n".join([*lines[:3], '{"header": ', *lines[4:]]) + "\n")
    _refused(run("comm-perf", str(bad), "-o", str(out)), victim.name)
    assert not out.exists()
    broken_run = tmp_path / "run.json"
    doc = json.loads(RUN.read_text())
    doc["results"][2]["out_of_place"]["bus_bw"] = -3
    broken_run.write_text(json.dumps(doc))
    _refused(
        run("comm-perf", str(INSPECTOR), "--nccl-tests", str(broken_run), "-o", str(out)),
        "run.json",
        "results[2].out_of_place.bus_bw",
    )
    doc = json.loads(RUN.read_text())
    doc["args"][0] = "./build/hello"
    broken_run.write_text(json.dumps(doc))
    _refused(run("comm-perf", str(INSPECTOR), "--nccl-tests", str(broken_run)), "args")
    empty = tmp_path / "empty"
    empty.mkdir()
    _refused(run("comm-perf", str(empty)), "no NCCL Inspector records")
    assert not out.exists()


JOB4 = Path(__file__).parent / "data" / "nccl_profiler" / "job4"


def test_a_jobs_trace_is_compared_with_nccl_tests_too(tmp_path: Path) -> None:
    trace = tmp_path / "job.json"
    assert run("import-nccl-profiler", str(JOB4), "-o", str(trace)).exit_code == 0
    out = tmp_path / "perf.json"
    result = run("comm-perf", "--trace", str(trace), "--nccl-tests", str(RUN), "-o", str(out))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("communication: 42 collective instance(s) from 96 call(s) in the traces")
    reduce_line = next(
        line for line in lines if line.lstrip().startswith("all_reduce 4.0 MiB on default_pg:0 (4 ranks")
    )
    assert "of what nccl-tests measured (40.00 GB/s at 4.0 MiB)" in reduce_line
    doc = json.loads(out.read_text())
    assert doc["source"] == "traces" and doc["instances"] == 42
    reduce = next(r for r in doc["rows"] if r["op"] == "all_reduce")
    assert reduce["expected"]["busbw_gbps"] == 40.0
    assert all("step" in f for r in doc["rows"] for f in r["flagged"])
    both = run("comm-perf", str(INSPECTOR), "--trace", str(trace))
    assert both.exit_code == 2 and "--trace" in both.output, both.output
    neither = run("comm-perf")
    assert neither.exit_code == 2, neither.output
