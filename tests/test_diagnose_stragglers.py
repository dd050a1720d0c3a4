"""``commcanary diagnose stragglers`` and :func:`commcanary.diagnose_stragglers`
on the real 4-rank gloo traces with an injected straggler, and bad input
refused."""

from __future__ import annotations

import gzip
import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

import commcanary
import kineto_jobs
from commcanary.cli import app
from conftest import FIXTURES

DECODE = FIXTURES / "kineto" / "gloo_tp4_decode"
TRACES = [DECODE / f"rank{r}.json.gz" for r in range(4)]
runner = CliRunner()

#: ProfilerStep#N of each injected sleep on rank 2, and its length in ms.
INJECTED = {7: 60, 8: 60, 14: 30, 22: 120, 23: 120, 24: 120, 31: 30, 38: 60}


def check(report: commcanary.StragglerReport) -> dict[str, Any]:
    schema = json.loads(files("commcanary").joinpath("schemas/stragglers.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report.document)
    return report.document


def test_the_injected_straggler_is_found_on_its_steps_only() -> None:
    report = commcanary.diagnose_stragglers(TRACES)
    doc = check(report)
    assert report.found and doc["verdict"] == "stragglers"
    assert sorted((f["rank"], f["step"]) for f in doc["findings"]) == [(2, s) for s in sorted(INJECTED)]
    for f in doc["findings"]:
        assert f["kind"] == "late_arrival"
        assert f["op"] == "all_reduce" and f["group"]["desc"] == "default_pg"
        # What the other ranks waited: never nothing, never much more than the sleep.
        assert 15_000 < f["estimated_cost_us"] <= 1.25 * INJECTED[f["step"]] * 1000
        assert f["gap_before_us"] > f["lag_us"]  # the sleep sits in the gap before the call
    assert doc["ranks"][0] == {
        "rank": 2,
        "straggler_steps": 8,
        "recurrence": "recurring",
        "total_estimated_cost_us": pytest.approx(sum(f["estimated_cost_us"] for f in doc["findings"])),
    }
    assert [s["step"] for s in doc["steps"]] == list(range(1, 41))
    late = {s["step"]: s for s in doc["steps"]}
    assert all(late[n]["last_rank"] == 2 and late[n]["straggler_ranks"] == [2] for n in INJECTED)
    cols = report.columns("findings")
    assert cols["step"].dtype == np.int64 and list(cols["step"]) == sorted(INJECTED)
    assert set(cols["kind"]) == {"late_arrival"}
    assert report.lines[0].startswith("stragglers: 1 of 4 ranks slowed 8 of 40 steps")


def test_cli_prints_lines_writes_the_document_and_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "stragglers.json"
    result = runner.invoke(app, ["diagnose", "stragglers", str(DECODE), "-o", str(out), "--no-cache"])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("stragglers: 1 of 4 ranks")
    assert "rank 2:" in result.output and f"wrote commcanary.stragglers.v1: {out}" in result.output
    again = commcanary.diagnose_stragglers(TRACES)
    assert out.read_bytes() == again.data  # same input, same bytes


def test_ranks_in_step_have_no_stragglers(tmp_path: Path) -> None:
    # Rank 0's real trace twice, the copy as rank 1: every pair collective
    # has both members arriving together.
    twin = write_trace(tmp_path / "rank1.json.gz", TRACES[0], lambda e: True, rank=1)
    report = commcanary.diagnose_stragglers([TRACES[0], twin])
    doc = check(report)
    assert not report.found and doc["verdict"] == "none" and doc["findings"] == []
    assert report.lines[0].startswith("no stragglers: 40 steps on 2 ranks")
    out = tmp_path / "none.json"
    result = runner.invoke(
        app, ["diagnose", "stragglers", str(TRACES[0]), str(twin), "-o", str(out), "--no-cache"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_bytes())["verdict"] == "none"


def rename_markers(e: dict[str, Any]) -> bool:
    if str(e.get("name", "")).startswith("ProfilerStep#"):
        e["name"] = "ProfilerStep#next"
    return True


def no_markers(e: dict[str, Any]) -> bool:
    return not str(e.get("name", "")).startswith("ProfilerStep#")


def test_without_step_markers_the_recovered_steps_give_the_same_stragglers(tmp_path: Path) -> None:
    marked = commcanary.diagnose_stragglers(TRACES)
    bare = [write_trace(tmp_path / t.name, t, no_markers) for t in TRACES]
    report = commcanary.diagnose_stragglers(bare)
    doc = check(report)
    assert doc["step_source"] == "recovered" and len(doc["steps"]) == 40
    # Recovered step k is ProfilerStep#(k+1) in these traces.
    got = [(f["rank"], f["step"] + 1, f["kind"], round(f["estimated_cost_us"], -2)) for f in doc["findings"]]
    want = [(f["rank"], f["step"], f["kind"], round(f["estimated_cost_us"], -2)) for f in marked.findings]
    assert got == want
    assert "recovered from the collective sequence" in report.lines[-1]


def write_trace(path: Path, source: Path, keep: Any, rank: int | None = None) -> Path:
    data = json.loads(gzip.decompress(source.read_bytes()))
    data["traceEvents"] = [e for e in data["traceEvents"] if keep(e)]
    if rank is not None:
        data["distributedInfo"]["rank"] = rank
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    return path


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("single", "at least two ranks"),
        ("bad_marker", "traceEvents["),
        ("no_collectives", "no collective that two or more ranks completed"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(tmp_path: Path, case: str, message: str) -> None:
    if case == "single":
        paths = [TRACES[0]]
    elif case == "bad_marker":
        # Alone (a damaged file among good ones is skipped: see below).
        paths = [write_trace(tmp_path / "rank1.json.gz", TRACES[1], rename_markers)]
    else:
        comm = ("c10d::", "gloo:", "nccl:", "record_param_comms")
        paths = [
            write_trace(tmp_path / t.name, t, lambda e: not str(e.get("name", "")).startswith(comm))
            for t in TRACES
        ]
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["diagnose", "stragglers", *map(str, paths), "-o", str(out), "--no-cache"])
    assert result.exit_code == 3, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def test_a_constructed_slow_collective_is_labelled_and_its_bandwidth_row_flagged(tmp_path: Path) -> None:
    # Rank 3 arrives on time at step 12's first all_reduce and stays 20 ms
    # longer inside; rank 1 arrives 15 ms late at step 20. Everything else
    # runs to a jittered schedule.
    job = kineto_jobs.Job(
        world=4,
        steps=30,
        groups=[("0", "default_pg", [0, 1, 2, 3]), ("1", "pair_0", [0, 1]), ("2", "pair_1", [2, 3])],
        ops=[
            kineto_jobs.Op("all_reduce", 0, 262144),
            kineto_jobs.Op("all_gather", 1, 65536),
            kineto_jobs.Op("all_gather", 2, 65536),
            kineto_jobs.Op("all_reduce", 0, 1024),
        ],
        slow={(3, 12, 0): 20_000.0},
        late={(1, 20): 15_000.0},
    )
    report = commcanary.diagnose_stragglers(kineto_jobs.write_job(tmp_path, job))
    doc = check(report)
    got = [(f["rank"], f["step"], f["kind"], f["op"]) for f in doc["findings"]]
    assert got == [(3, 12, "slow_collective", "all_reduce"), (1, 20, "late_arrival", "all_reduce")]
    slow, late = doc["findings"]
    assert slow["estimated_cost_us"] == pytest.approx(20_000, rel=0.05)
    assert late["estimated_cost_us"] == pytest.approx(15_000, rel=0.05)
    rows = {(r["group"]["desc"], r["op"], r["bucket_bytes"]): r for r in doc["communication"]}
    big = rows[("default_pg", "all_reduce", 1 << 20)]
    assert big["count"] == 30 and big["ranks"] == 4 and big["bus_factor"] == 1.5
    assert [(f["step"], f["rank"]) for f in big["flagged"]] == [(12, 3)]
    # 1 MiB at 2000 B/µs plus 50 µs: about 574 µs, 1.83 GB/s, 2.74 on the bus.
    assert big["median_time_us"] == pytest.approx(574, rel=0.02)
    assert big["median_busbw_gbps"] == pytest.approx(1.5 * big["median_algbw_gbps"])
    assert rows[("pair_0", "all_gather", 1 << 19)]["bus_factor"] == 0.5
    assert sum(r["flagged_count"] for r in doc["communication"]) == 1
    assert "1 instance(s) in 1 class(es) far below" in report.lines[-1]


def test_a_damaged_trace_among_good_ones_is_skipped_and_said(tmp_path: Path) -> None:
    bad = write_trace(tmp_path / "rank1.json.gz", TRACES[1], rename_markers)
    report = commcanary.diagnose_stragglers([bad, *TRACES[2:]])
    assert report.document["world"] == 2
    assert any("skipped a damaged file" in line and "rank1.json.gz" in line for line in report.lines)
