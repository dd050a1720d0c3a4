"""The real torch 2.15 gloo jobs in tests/data/fixtures/ diagnosed from
each evidence subset that can show their cause: the root rank, the fault's
category, its step, and an honest "inconclusive" (naming what would settle
it) where the subset cannot show the cause.

The truth is each fixture's README and ground_truth.json (from the job's own
op log); `ProfilerStep#N` is step N (the unrecorded warm-up step is 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import commcanary
from conftest import FIXTURES

HANG = FIXTURES / "hang"


def subset(name: str, kind: str) -> list[Path]:
    """The fixture's files of one evidence kind (or the whole directory)."""
    root = HANG / name
    if kind == "all":
        return [root]
    files = sorted(p for p in root.rglob("*") if p.is_file())
    if kind == "dumps":
        return [p for p in files if p.parent.name.startswith("fr_")]
    if kind == "traces":
        return [p for p in files if ".window" in p.name]
    assert kind == "texts"
    return [p for p in files if "_stacks.txt" in p.name or "_exception.txt" in p.name or ".log" in p.name]


def diagnose(name: str, kind: str) -> dict[str, Any]:
    doc: dict[str, Any] = commcanary.diagnose_hang(subset(name, kind)).document
    return doc


def roots(doc: dict[str, Any]) -> list[int]:
    return sorted(r["rank"] for r in doc["root"])


@pytest.mark.parametrize("kind", ["all", "dumps"])
def test_the_broadcast_desync_is_rank_3_at_profiler_step_4(kind: str) -> None:
    doc = diagnose("gloo_w4_desync_broadcast", kind)
    assert doc["verdict"] == "hang" and doc["confidence"] == "high"
    assert roots(doc) == [3]
    assert (doc["category"], doc["desync_kind"]) == ("desync", "op")
    assert doc["step"]["value"] == 4


@pytest.mark.parametrize("kind", ["all", "traces"])
def test_the_pipeline_deadlock_starts_at_rank_2s_missing_send(kind: str) -> None:
    doc = diagnose("gloo_w4_pp_p2p_hang", kind)
    assert doc["verdict"] == "hang"
    assert roots(doc) == [2]
    assert doc["category"] == "p2p_unmatched"
    assert doc["step"]["value"] == 5


def test_gloo_dumps_alone_cannot_show_a_pipeline_deadlock_and_say_so() -> None:
    # gloo's Flight Recorder records no send or receive: ranks 0 and 1 look
    # idle there, though they wait in a receive.
    doc = diagnose("gloo_w4_pp_p2p_hang", "dumps")
    assert doc["verdict"] == "inconclusive" and doc["confidence"] != "high"
    assert doc["category"] is None
    assert any("profiler traces" in w and "no send or receive" in w for w in doc["would_settle"])


def test_the_killed_rank_is_rank_0_and_its_process_died() -> None:
    doc = diagnose("gloo_w4_rank_sigkill", "all")
    assert doc["verdict"] == "hang"
    assert roots(doc) == [0]
    assert doc["category"] == "process_died"
    assert doc["step"]["value"] == 5


def test_without_rank_0s_evidence_its_death_is_an_inference() -> None:
    # The dumps of the survivors: rank 0 left none; that it died (and not
    # that its dump was lost) is inferred, and said to be.
    doc = diagnose("gloo_w4_rank_sigkill", "dumps")
    assert roots(doc) == [0] and doc["category"] == "process_died"
    assert doc["confidence"] == "medium"
    assert any("launcher" in w for w in doc["would_settle"])


@pytest.mark.parametrize("kind", ["all", "dumps"])
def test_the_frozen_rank_came_only_after_the_timeout(kind: str) -> None:
    doc = diagnose("gloo_w4_rank_sigstop", kind)
    assert doc["verdict"] == "hang"
    assert roots(doc) == [2]
    assert [r["kind"] for r in doc["root"]] == ["late"]
    assert doc["category"] == "stalled_outside_communication"
    assert doc["step"]["value"] == 7


@pytest.mark.parametrize(
    "name",
    ["gloo_w4_desync_broadcast", "gloo_w4_pp_p2p_hang", "gloo_w4_rank_sigkill", "gloo_w4_rank_sigstop"],
)
def test_texts_alone_never_name_a_root_and_say_what_would(name: str) -> None:
    doc = diagnose(name, "texts")
    assert doc["root"] == [] and doc["confidence"] == "low"
    assert any("Flight Recorder dumps or profiler traces" in w for w in doc["would_settle"])


def test_a_whole_fixture_directory_skips_what_is_not_evidence() -> None:
    doc = diagnose("gloo_w4_desync_broadcast", "all")
    skipped = {Path(f["file"]).name for f in doc["evidence"] if f["kind"] == "skipped"}
    assert {"ground_truth.json.gz", "oplog.json.gz", "README.md", "PROVENANCE.md"} <= skipped


# The DDP straggler: rank 1 sleeps 60 ms before the forward on steps 4 and 15.
DDP = FIXTURES / "kineto" / "gloo_w4_ddp_straggler"


def test_ddp_without_markers_finds_the_sleeper_on_its_iterations() -> None:
    doc = commcanary.diagnose_stragglers([DDP / "nomarkers"]).document
    assert doc["step_source"] == "recovered"
    late = {(f["rank"], f["step"]) for f in doc["findings"] if f["estimated_cost_us"] > 40_000}
    assert late == {(1, 4), (1, 15)}
    # The lag sits on the step's first late call (DDP's buffer broadcast),
    # so the what-if gives the sleep back.
    for f in doc["findings"]:
        if (f["rank"], f["step"]) in late:
            assert f["op"] == "broadcast" and 50_000 < f["estimated_cost_us"] < 70_000
    assert doc["detector"]["step_noise_us"] > 0


def test_ddp_with_markers_finds_the_sleeper_at_profiler_step_4() -> None:
    doc = commcanary.diagnose_stragglers([DDP / "markers"]).document
    assert doc["step_source"] == "ProfilerStep"
    top = max(doc["findings"], key=lambda f: f["estimated_cost_us"])
    assert (top["rank"], top["step"], top["kind"]) == (1, 4, "late_arrival")
    assert top["estimated_cost_us"] > 50_000


@pytest.mark.parametrize("command", [["diagnose", "stragglers"], ["steps"]])
def test_trace_analyses_of_a_directory_without_traces_say_so(tmp_path: Path, command: list[str]) -> None:
    from typer.testing import CliRunner

    from commcanary.cli import app

    out = tmp_path / "out.json"
    dumps = HANG / "gloo_w4_desync_broadcast" / "fr_during_hang"
    result = CliRunner().invoke(app, [*command, str(dumps), "-o", str(out)])
    assert result.exit_code == 3, result.output
    lines = result.output.strip().splitlines()
    assert (
        len(lines) == 1 and "no profiler trace found" in lines[0] and "not used by this analysis" in lines[0]
    )
    assert not out.exists()


def test_a_timeline_of_a_directory_without_traces_or_dumps_says_so(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from commcanary.cli import app

    texts = tmp_path / "texts"
    texts.mkdir()
    job = HANG / "gloo_w4_desync_broadcast"
    for name in ("rank0_exception.txt.gz", "rank1_stacks.txt.gz"):
        (texts / name).write_bytes((job / name).read_bytes())
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["timeline", str(texts), "-o", str(out)])
    assert result.exit_code == 3, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "no profiler trace or Flight Recorder dump found" in lines[0]
    assert "not used by this analysis" in lines[0] and not out.exists()


def test_traces_of_two_runs_in_one_directory_are_refused_naming_them(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from commcanary.cli import app

    # The marked and unmarked captures are two runs of one DDP job.
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    for run in ("markers", "nomarkers"):
        for rank in range(4):
            (mixed / f"{run}_rank{rank}.json.gz").write_bytes(
                (DDP / run / f"rank{rank}.json.gz").read_bytes()
            )
    out = tmp_path / "out.json"
    for command in (["diagnose", "stragglers"], ["diagnose", "hang"], ["steps"]):
        result = CliRunner().invoke(app, [*command, str(mixed), "-o", str(out)])
        assert result.exit_code == 3, result.output
        line = result.output.strip()
        assert "traces of two runs" in line and "process" in line and len(line.splitlines()) == 1
        assert not out.exists()


def test_gloo_traces_alone_cannot_tell_a_dead_rank_from_a_stalled_one() -> None:
    # Rank 0's trace just ends: the killed process is named, its category
    # is left open, and the launcher's log named as what would settle it.
    doc = diagnose("gloo_w4_rank_sigkill", "traces")
    assert doc["verdict"] == "inconclusive" and doc["confidence"] == "medium"
    assert roots(doc) == [0] and doc["category"] is None
    assert any("launcher" in w for w in doc["would_settle"])


@pytest.mark.parametrize("name", ["gloo_w4_desync_broadcast", "gloo_w4_rank_sigstop"])
def test_gloo_traces_alone_do_not_blame_the_ranks_an_estimated_pairing_names(name: str) -> None:
    # gloo's traces carry no sequence numbers; the pairing that names the
    # majority as missing is an estimate, so the answer stays open.
    doc = diagnose(name, "traces")
    assert doc["verdict"] == "inconclusive" and doc["confidence"] != "high"
    assert doc["category"] is None
    assert any("sequence numbers" in w for w in doc["would_settle"])
