"""Arrow tables and Parquet files: a trace's events and a straggler
diagnosis' member table, read back by pyarrow with the values the core
holds; ``--format parquet`` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from conftest import EXAMPLES, FIXTURES

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

runner = CliRunner()
JOB = FIXTURES / "kineto" / "gloo_tp4_decode"


def test_a_trace_as_arrow_holds_the_cores_columns() -> None:
    trace = commcanary.load_trace(EXAMPLES / "llama70b_tp8_trace_long.json")
    table = trace.to_arrow()
    assert table.num_rows == trace.event_count
    document = json.loads((EXAMPLES / "llama70b_tp8_trace_long.json").read_text())
    events = document["events"]
    assert table.column("op").to_pylist() == [e["op"] for e in events]
    assert table.column("bytes").to_pylist() == [e["bytes"] for e in events]
    assert table.column("rank_count").to_pylist() == [len(e["ranks"]) for e in events]
    assert table.column("group").to_pylist() == [e["group"] for e in events]
    np.testing.assert_array_equal(table.column("gap_us").to_numpy(), trace.column("gap_us"))
    assert pa.types.is_dictionary(table.schema.field("op").type)
    assert len(table.column("op").chunk(0).dictionary) == len({e["op"] for e in events})


def test_import_kineto_writes_parquet(tmp_path: Path) -> None:
    out = tmp_path / "job.parquet"
    result = runner.invoke(
        app, ["import-kineto", str(JOB), "-o", str(out), "--no-cache", "--format", "parquet"]
    )
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    imported = commcanary.import_kineto(JOB)
    assert table.num_rows == imported.trace.event_count == imported.imported
    np.testing.assert_array_equal(table.column("start_us").to_numpy(), imported.trace.column("start_us"))
    # Same input, same bytes.
    again = tmp_path / "again.parquet"
    assert (
        runner.invoke(
            app, ["import-kineto", str(JOB), "-o", str(again), "--no-cache", "--format", "parquet"]
        ).exit_code
        == 0
    )
    assert again.read_bytes() == out.read_bytes()


def test_straggler_members_as_parquet(tmp_path: Path) -> None:
    job = FIXTURES / "kineto" / "gloo_w4_ddp_straggler" / "markers"
    out = tmp_path / "members.parquet"
    result = runner.invoke(
        app, ["diagnose", "stragglers", str(job), "-o", str(out), "--no-cache", "--format", "parquet"]
    )
    assert result.exit_code in (0, 1), result.output
    report = commcanary.diagnose_stragglers(job)
    members = report.members()
    table = pq.read_table(out)
    assert table.num_rows == len(members["rank"])
    np.testing.assert_array_equal(table.column("lag_us").to_numpy(), members["lag_us"])
    assert table.column("op").to_pylist() == members["op"].tolist()
    for name in ("steps", "findings", "ranks"):
        assert report.to_arrow(name).num_rows == len(report.document[name])


def test_format_misuse(tmp_path: Path) -> None:
    out = tmp_path / "x"
    result = runner.invoke(app, ["import-kineto", str(JOB), "-o", str(out), "--format", "csv"])
    assert result.exit_code == 2
    assert "--format must be json or parquet" in result.output
    assert not out.exists()
    result = runner.invoke(
        app, ["import-kineto", str(JOB), "-o", str(tmp_path / "no" / "x.parquet"), "--format", "parquet"]
    )
    assert result.exit_code == 3
    assert "does not exist" in result.output
