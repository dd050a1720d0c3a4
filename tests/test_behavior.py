"""Behaviour verification, behaviour search and the strict compile gate.

Statuses are kept apart: each mutation of a verified canary is caught by the
status it concerns, and the others keep their verdicts.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.behavior import Tolerances, verify_behavior
from commcanary.cli import app
from commcanary.fidelity import canonical, program_commitments, provenance
from conftest import DATA, EXAMPLES

runner = CliRunner()
LONG = EXAMPLES / "llama70b_tp8_trace_long.json"
DEMO = EXAMPLES / "llama70b_tp8_trace.json"
GEN100 = DATA / "gen100.json"
NAMES = ["baseline", "low_latency", "high_bandwidth", "overlap_friendly", "congested"]


def compile_to(path: Path, trace: Path = LONG, **options: Any) -> Path:
    commcanary.compile(trace, **options).write(path)
    return path


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verified, bounded-approximate canary of the long trace (limit 2)."""
    return compile_to(tmp_path_factory.mktemp("behavior") / "limit2.canary.json", timing_sample_limit=2)


def test_lossless_and_bounded_canaries_are_behaviorally_verified(tmp_path: Path, bounded: Path) -> None:
    lossless = compile_to(tmp_path / "lossless.json")
    for canary, mode in ((lossless, "lossless_timing"), (bounded, "bounded_approximate")):
        result = verify_behavior(LONG, canary)
        assert result["format"] == "commcanary.behavior_verification.v1"
        assert {k: result[k] for k in STATUS_KEYS} == {
            "status": "behaviorally_verified",
            "representation_fidelity_status": mode,
            "source_verified_status": "source_verified",
            "behavioral_fidelity_status": "pass",
            "configuration_ranking_status": "pass",
            "source_coverage_status": "full_source",
        }
        assert [row["name"] for row in result["configurations"]] == NAMES
        assert result["ranking"]["total_pairs"] == 40 and result["ranking"]["passed_pairs"] == 40
        assert result["capture_uncertainty"] == {"status": "certain", "compute_fields_uncertain_events": 0}


STATUS_KEYS = (
    "status",
    "representation_fidelity_status",
    "source_verified_status",
    "behavioral_fidelity_status",
    "configuration_ranking_status",
    "source_coverage_status",
)


def test_rows_carry_per_check_evidence(bounded: Path) -> None:
    row = verify_behavior(LONG, bounded)["configurations"][0]
    assert set(row) == {
        "name", "status", "source_metrics", "canary_metrics", "source_queue_wait_metrics",
        "canary_queue_wait_metrics", "checks", "queue_wait_checks", "phase_checks", "op_checks", "tail_event_recall",
    }  # fmt: skip
    metrics = [c["metric"] for c in row["checks"]]
    assert metrics == [
        "count",
        "median_us",
        "p95_us",
        "p99_us",
        "max_us",
        "mean_us",
        "communication_hidden_pct",
    ]
    for check in row["checks"] + row["queue_wait_checks"] + row["phase_checks"] + row["op_checks"]:
        assert {"metric", "status", "source", "canary", "absolute_delta", "relative_delta_pct"} <= set(check)
    assert {c["scope"] for c in row["phase_checks"]} == {"phase"}
    assert {c["name"] for c in row["phase_checks"]} == {"decode", "prefill"}
    assert set(row["tail_event_recall"]) == {"q95", "q99"}
    assert row["tail_event_recall"]["q99"]["threshold"] == 0.8


def test_a_subset_canary_fails_every_row_but_keeps_the_ranking(tmp_path: Path) -> None:
    trace = json.loads(GEN100.read_bytes())
    subset = tmp_path / "subset.trace.json"
    subset.write_text(json.dumps({**trace, "events": trace["events"][7:8]}))  # not a prefix
    canary = compile_to(tmp_path / "subset.canary.json", subset)
    out = tmp_path / "b.json"
    result = runner.invoke(app, ["verify-behavior", str(GEN100), str(canary), "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        "behavior verification: failed",
        "- representation fidelity: lossless_timing",
        "- source verified: failed",
        "- behavioral fidelity: fail",
        "- configuration ranking: pass",
        *[f"- {name}: fail" for name in NAMES],
        "- ranking: pass",
    ]
    doc = json.loads(out.read_bytes())
    assert doc["source_coverage_status"] == "partial_source"
    count = doc["configurations"][0]["checks"][0]
    assert (count["metric"], count["source"], count["canary"], count["status"]) == ("count", 100, 1, "fail")


def test_tolerances_change_the_verdict_not_the_evidence(bounded: Path) -> None:
    strict = verify_behavior(LONG, bounded, tolerances=Tolerances(0.0, 0.0, 0.0, 1.0, 0.0))
    assert strict["behavioral_fidelity_status"] == "fail"
    assert strict["source_verified_status"] == "source_verified"
    assert strict["status"] == "failed"
    assert strict["tolerances"]["relative_tolerance_pct"] == 0.0


def test_custom_configurations(tmp_path: Path, bounded: Path) -> None:
    configs = tmp_path / "configs.json"
    configs.write_text(
        json.dumps(
            [{"name": "slow", "bandwidth_gbps": 10.0}, {"name": "fast", "bandwidth_gbps": 200.0, "seed": 3}]
        )
    )
    out = tmp_path / "b.json"
    lossless = compile_to(tmp_path / "lossless.json")
    result = runner.invoke(
        app, ["verify-behavior", str(LONG), str(lossless), "-o", str(out), "--configurations", str(configs)]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[5:] == ["- slow: pass", "- fast: pass", "- ranking: pass"]
    doc = json.loads(out.read_bytes())
    assert doc["ranking"]["total_pairs"] == 4
    assert doc["configuration_settings"][1] == {
        "name": "fast", "bandwidth_gbps": 200.0, "latency_floor_us": 7.5, "compute_pressure": 0.55,
        "overlap_efficiency": 0.72, "iterations": 1, "seed": 3, "max_replay_events": 1_000_000,
    }  # fmt: skip
    # The limit-2 canary summarises the prefill phase: on a very fast fabric its
    # prefill tail moves by more than the tolerance, and the check says where.
    result = runner.invoke(
        app, ["verify-behavior", str(LONG), str(bounded), "-o", str(out), "--configurations", str(configs)]
    )
    assert result.exit_code == 1
    assert result.stdout.splitlines()[5:] == ["- slow: pass", "- fast: fail", "- ranking: pass"]
    fast = json.loads(out.read_bytes())["configurations"][1]
    failing = {(c["scope"], c["name"], c["metric"]) for c in fast["phase_checks"] if c["status"] == "fail"}
    assert ("phase", "prefill", "p99_us") in failing


# --- mutations of a verified canary, each re-sealed so it stays internally consistent ---


def reseal(doc: dict[str, Any]) -> bytes:
    """Recompute program commitments, provenance and size, as a careful forger would."""
    c = doc["compiler"]
    c["execution_semantic_sha256"], c["calibration_evaluation_sha256"] = program_commitments(doc)
    c["artifact_provenance_sha256"] = provenance(doc)
    size = 0
    for _ in range(20):
        c["canary_bytes"] = size
        c["byte_compression_ratio"] = round(c["source_bytes"] / size, 3) if size else 0.0
        data = canonical(doc)
        if len(data) == size:
            return data
        size = len(data)
    raise AssertionError("size did not settle")


def first_record(doc: dict[str, Any], kind: str) -> list[Any] | dict[str, Any]:
    for leaf in doc["events"]:
        for record in leaf.get("timing", []):
            if kind == "plain" and isinstance(record, list):
                return record
            if kind == "bounded" and isinstance(record, dict) and "interval" in record:
                return record
    raise AssertionError(f"no {kind} record")


def mutate(bounded: Path, tmp_path: Path, change: Any) -> dict[str, Any]:
    doc = json.loads(bounded.read_bytes())
    change(doc)
    path = tmp_path / "mutated.canary.json"
    path.write_bytes(reseal(doc))
    commcanary._core.check_canary(str(path))  # the forgery is internally consistent
    return verify_behavior(LONG, path)


def statuses(result: dict[str, Any]) -> tuple[str, str, str, str]:
    return (
        result["source_verified_status"],
        result["behavioral_fidelity_status"],
        result["configuration_ranking_status"],
        result["status"],
    )


def test_mutated_timing_record_is_caught_by_source_verification(tmp_path: Path, bounded: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        record = first_record(doc, "plain")
        assert isinstance(record, list)
        record[3] = round(record[3] + 0.5, 9)  # compute_before_us, a value replay only reports

    result = mutate(bounded, tmp_path, change)
    assert statuses(result) == ("failed", "pass", "pass", "failed")
    failure = next(c for c in result["source_verification"]["checks"] if c["name"] == "source_commitments")
    assert failure["failures"][0]["field"] == "compute_before_us"


def test_mutated_commitment_is_caught_by_source_verification(tmp_path: Path, bounded: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        record = first_record(doc, "bounded")
        assert isinstance(record, dict)
        record["source_segment_sha256"] = hashlib.sha256(b"forged").hexdigest()

    result = mutate(bounded, tmp_path, change)
    assert statuses(result) == ("failed", "pass", "pass", "failed")
    failure = next(c for c in result["source_verification"]["checks"] if c["name"] == "source_commitments")
    assert failure["failures"][0]["field"] == "source_segment_sha256"


def test_mutated_bound_is_caught_by_source_verification(tmp_path: Path, bounded: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        record = first_record(doc, "bounded")
        assert isinstance(record, dict)
        record["errors"][0] = 0.001  # claims a tighter gap bound than the source allows
        doc["compiler"]["fidelity"]["max_gap_error_us"] = max(
            r["errors"][0]
            for leaf in doc["events"]
            for r in leaf.get("timing", [])
            if isinstance(r, dict) and "errors" in r
        )

    result = mutate(bounded, tmp_path, change)
    assert statuses(result) == ("failed", "pass", "pass", "failed")
    names = {c["name"] for c in result["source_verification"]["checks"] if c["status"] == "fail"}
    assert "source_commitments" in names


def test_mutated_weight_is_caught_by_behaviour_and_coverage(tmp_path: Path, bounded: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        record = first_record(doc, "plain")
        assert isinstance(record, list)
        record[0] += 1
        doc["compiler"]["source_events"] += 1
        doc["compiler"]["recursive_timing_records"] += 0

    result = mutate(bounded, tmp_path, change)
    assert statuses(result) == ("failed", "fail", "pass", "failed")
    assert result["source_coverage_status"] == "partial_source"
    count = result["configurations"][0]["checks"][0]
    assert (count["metric"], count["source"], count["canary"]) == ("count", 56, 57)


def test_unsealed_edits_are_input_errors(tmp_path: Path, bounded: Path) -> None:
    doc = json.loads(bounded.read_bytes())
    record = first_record(doc, "plain")
    assert isinstance(record, list)
    record[1] = round(record[1] + 1.0, 9)
    path = tmp_path / "edited.json"
    path.write_bytes(canonical(doc))
    out = tmp_path / "b.json"
    result = runner.invoke(app, ["verify-behavior", str(LONG), str(path), "-o", str(out)])
    assert result.exit_code == 3
    assert result.stderr.startswith(f"commcanary: {path}") and len(result.stderr.splitlines()) == 1
    assert not out.exists()


# --- bad input ---


@pytest.mark.parametrize(
    ("configs", "fragment"),
    [
        ([{"name": "a"}, {"name": "b", "bandwidth": 3.0}], "unknown key 'bandwidth'"),
        ([{"name": "a"}, {"name": "b", "bandwidth_gbps": -1.0}], "'bandwidth_gbps' must be positive"),
        ([{"name": "a"}], "between 2 and 32 entries"),
        ([{"name": "a"}, {"name": "a"}], "repeats 'a'"),
        ({"configurations": [{"name": "a"}, {"name": "b"}], "extra": 1}, "unknown key 'extra'"),
        (
            [{"name": "a"}, {"name": "b", "overlap_efficiency": 1.5}],
            "'overlap_efficiency' must be between 0 and 1",
        ),
        (
            [{"name": "a"}, {"name": "b", "max_replay_events": 10**12}],
            "'max_replay_events' must be between 1",
        ),
        ([{"name": "a"}, {"name": "b", "iterations": True}], "'iterations' must be an integer"),
        ([{"name": "a"}, {"name": ""}], "'name' must be a non-empty string"),
    ],
)
def test_bad_configuration_files(tmp_path: Path, bounded: Path, configs: Any, fragment: str) -> None:
    path = tmp_path / "configs.json"
    path.write_text(json.dumps(configs))
    out = tmp_path / "b.json"
    result = runner.invoke(
        app, ["verify-behavior", str(LONG), str(bounded), "-o", str(out), "--configurations", str(path)]
    )
    assert result.exit_code == 3, result.output
    assert fragment in result.stderr and str(path) in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert not out.exists()


def test_canary_for_another_trace_is_refused(tmp_path: Path) -> None:
    other = compile_to(tmp_path / "other.canary.json", GEN100)
    for command in ("verify-behavior", "verify-fidelity"):
        out = tmp_path / f"{command}.json"
        result = runner.invoke(app, [command, str(LONG), str(other), "-o", str(out)])
        assert result.exit_code == 3, result.output
        assert "was compiled from another trace" in result.stderr
        assert not out.exists()


@pytest.mark.parametrize(
    ("flag", "value", "rule"),
    [
        ("--tail-recall-threshold", "1.5", "must be between 0 and 1"),
        ("--relative-tolerance-pct", "-1", "must be non-negative"),
        ("--ranking-tie-tolerance-us", "nan", "must be non-negative"),
    ],
)
def test_bad_tolerances(tmp_path: Path, bounded: Path, flag: str, value: str, rule: str) -> None:
    out = tmp_path / "b.json"
    result = runner.invoke(app, ["verify-behavior", str(LONG), str(bounded), "-o", str(out), flag, value])
    assert result.exit_code == 2
    assert result.stderr == f"commcanary: {flag} {rule}\n"
    assert not out.exists()


# --- verify-fidelity ---


def test_verify_fidelity_lines_and_exit(tmp_path: Path, bounded: Path) -> None:
    out = tmp_path / "f.json"
    result = runner.invoke(app, ["verify-fidelity", str(LONG), str(bounded), "-o", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "fidelity verification: source_verified"
    assert len(lines) == 14 and all(line.endswith(": pass") for line in lines[1:])
    demo = compile_to(tmp_path / "demo.json", DEMO)
    result = runner.invoke(app, ["verify-fidelity", str(LONG), str(demo), "-o", str(out)])
    assert result.exit_code == 1
    assert "- source_commitments: fail" in result.stdout.splitlines()


# --- behaviour search ---


def test_search_selects_the_smallest_verified_canary_and_writes_evidence(tmp_path: Path) -> None:
    out = tmp_path / "searched.canary.json"
    result = runner.invoke(
        app, ["compile", str(LONG), "-o", str(out), "--behavior-search", "--timing-sample-limit", "128"]
    )
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        "behavior search: evaluating up to 127 uniform candidates plus per-group refinement"
    )
    evidence_path = tmp_path / "searched.canary.search-evidence.json"
    evidence_bytes = evidence_path.read_bytes()
    canary = json.loads(out.read_bytes())
    summary = canary["compiler"]["behavior_search"]
    assert summary["evidence"] == {
        "canonical_bytes": len(evidence_bytes),
        "format": "commcanary.behavior_search_evidence.v1",
        "sha256": hashlib.sha256(evidence_bytes).hexdigest(),
    }
    # The byte ratio describes the artifact itself: the summary is small and the ledger is elsewhere.
    assert canary["compiler"]["canary_bytes"] == out.stat().st_size
    assert (
        canary["compiler"]["canary_bytes"] <= summary["selected_canary_bytes_without_search_metadata"] * 1.05
    )
    evidence = json.loads(evidence_bytes)
    ledger = evidence["search"]
    assert len(ledger["uniform_candidates"]) == 127
    assert ledger["candidate_count"] == summary["candidates"] == 127
    decisions = [row["decision"] for row in ledger["uniform_candidates"]]
    assert decisions.count("selected") == 1 and decisions[0] == "selected"
    sizes = [
        row["canary_bytes"]
        for row in ledger["uniform_candidates"]
        if row["status"] == "behaviorally_verified"
    ]
    assert summary["selected_canary_bytes_without_search_metadata"] == min(sizes)
    assert evidence["selected_verification"]["status"] == "behaviorally_verified"
    assert ledger["per_group_refinement"]["status"] == "skipped"
    # Same input, same bytes out.
    again = tmp_path / "again.canary.json"
    assert runner.invoke(app, ["compile", str(LONG), "-o", str(again), "--behavior-search"]).exit_code == 0
    assert again.read_bytes() == out.read_bytes()
    assert (tmp_path / "again.canary.search-evidence.json").read_bytes() == evidence_bytes


def test_search_refines_per_group_when_lower_limits_exist(tmp_path: Path) -> None:
    found = commcanary.search_behavior(GEN100, min_limit=2, max_limit=6)
    refinement = found.evidence["search"]["per_group_refinement"]
    selected = found.evidence["search"]["selected_candidate"]
    assert refinement["status"] in ("refined", "no_smaller_verified_candidate", "skipped")
    if refinement["status"] != "skipped":
        assert refinement["attempted_candidates"] == len(refinement["candidates"]) > 0
        assert all("group_id" in row for row in refinement["candidates"])
    assert found.canary.summary["source_events"] == 100
    assert selected["canary_bytes"] == found.summary["selected_canary_bytes_without_search_metadata"]
    assert (
        commcanary.verify_behavior(GEN100, found.canary.write(tmp_path / "c.json"))["status"]
        == "behaviorally_verified"
    )


@pytest.mark.parametrize(
    ("extra", "code", "fragment"),
    [
        (["--search-evidence-output", "{missing}/e.json"], 3, "does not exist"),
        (["--search-evidence-output", "{out}"], 2, "is the --output file; choose another path"),
        (
            ["--behavior-search-min-sample-limit", "1"],
            2,
            "--behavior-search-min-sample-limit must be at least 2",
        ),
        (["--behavior-search-min-sample-limit", "9", "--timing-sample-limit", "4"], 3, "must be at least"),
    ],
)
def test_search_bad_input_writes_nothing(tmp_path: Path, extra: list[str], code: int, fragment: str) -> None:
    out = tmp_path / "s.canary.json"
    args = [a.format(missing=tmp_path / "missing", out=out) for a in extra]
    result = runner.invoke(app, ["compile", str(LONG), "-o", str(out), "--behavior-search", *args])
    assert result.exit_code == code, result.output
    assert fragment in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_evidence_output_needs_search(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    result = runner.invoke(
        app, ["compile", str(LONG), "-o", str(out), "--search-evidence-output", str(tmp_path / "e.json")]
    )
    assert result.exit_code == 2 and not out.exists()
    assert result.stderr == "commcanary: --search-evidence-output needs --behavior-search\n"


# --- the strict gate ---


def reduced_trace(tmp_path: Path) -> Path:
    """A 1-event subset of the 100-event trace carrying a reduction ledger (spec shape)."""
    trace = json.loads(GEN100.read_bytes())
    workload = copy.deepcopy(trace.get("workload", {}))
    workload["reduction_method"] = "ddmin_ranking"
    workload["reduction"] = {
        "method": "ddmin_ranking",
        "original_events": 100,
        "reduced_events": 1,
        "oracle_calls": 6,
        "oracle_call_budget": 256,
        "budget_exhausted": False,
        "ranking_tie_tolerance_us": 0.001,
        "ranking_metrics": ["median_us", "p95_us", "p99_us", "mean_us"],
        "configurations": NAMES,
        "timing_sample_limit": None,
    }
    path = tmp_path / "reduced.trace.json"
    path.write_text(json.dumps({**trace, "workload": workload, "events": trace["events"][:1]}))
    return path


def test_strict_gate_refuses_a_reduced_trace(tmp_path: Path) -> None:
    reduced = reduced_trace(tmp_path)
    out = tmp_path / "gated.canary.json"
    result = runner.invoke(app, ["compile", str(reduced), "-o", str(out), "--require-behavior-verification"])
    assert result.exit_code == 3
    assert "partial source" in result.stderr and "workload.reduction" in result.stderr
    assert "--reference-trace ORIGINAL" in result.stderr and "--allow-partial-source" in result.stderr
    assert not out.exists()


def test_strict_gate_accepts_a_reduced_trace_when_allowed(tmp_path: Path) -> None:
    reduced = reduced_trace(tmp_path)
    out = tmp_path / "gated.canary.json"
    args = [
        "compile",
        str(reduced),
        "-o",
        str(out),
        "--require-behavior-verification",
        "--allow-partial-source",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    compiler = json.loads(out.read_bytes())["compiler"]
    assert compiler["source_coverage_status"] == "partial_source"
    assert compiler["behavior_verification_status"] == "behaviorally_verified"
    assert compiler["behavior_verification_reference"] == "input_trace"
    assert compiler["canary_bytes"] == out.stat().st_size


def test_strict_gate_with_reference_trace_reports_the_subset(tmp_path: Path) -> None:
    reduced = reduced_trace(tmp_path)
    out = tmp_path / "gated.canary.json"
    args = [
        "compile",
        str(reduced),
        "-o",
        str(out),
        "--require-behavior-verification",
        "--reference-trace",
        str(GEN100),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 3
    lines = result.stdout.splitlines()
    assert "- source verified: failed" in lines
    assert "- configuration ranking: pass" in lines and "- ranking: pass" in lines
    assert "failed required behavior verification" in result.stderr
    assert not out.exists()


def test_strict_gate_refuses_max_events_and_passes_a_full_trace(tmp_path: Path) -> None:
    out = tmp_path / "gated.canary.json"
    result = runner.invoke(
        app, ["compile", str(GEN100), "-o", str(out), "--max-events", "50", "--require-behavior-verification"]
    )
    assert result.exit_code == 3 and "max_events" in result.stderr and not out.exists()
    result = runner.invoke(app, ["compile", str(LONG), "-o", str(out), "--require-behavior-verification"])
    assert result.exit_code == 0, result.output
    compiler = json.loads(out.read_bytes())["compiler"]
    assert (compiler["behavior_verification_status"], compiler["source_verified_status"]) == (
        "behaviorally_verified",
        "source_verified",
    )
    assert commcanary.verify_fidelity(LONG, out)["status"] == "source_verified"


def test_search_with_the_gate_still_refuses_a_partial_source(tmp_path: Path) -> None:
    reduced = reduced_trace(tmp_path)
    out = tmp_path / "s.canary.json"
    args = ["compile", str(reduced), "-o", str(out), "--behavior-search", "--require-behavior-verification"]
    result = runner.invoke(app, args)
    assert result.exit_code == 3 and "partial source" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reduced.trace.json"]
    # The gate reads the coverage from the loaded trace, as a compile would record it.
    status, reason = commcanary.load_trace(reduced).source_coverage()
    assert status == commcanary.compile(reduced).summary["source_coverage_status"] == "partial_source"
    assert reason and reason in result.stderr
    assert commcanary.load_trace(LONG).source_coverage(max_events=3)[0] == "partial_source"
    assert commcanary.load_trace(LONG).source_coverage() == ("full_source", None)


def uncertain_trace(tmp_path: Path) -> Path:
    trace = json.loads(LONG.read_bytes())
    trace["events"][3]["compute_fields_uncertain"] = True
    path = tmp_path / "uncertain.trace.json"
    path.write_text(json.dumps(trace))
    return path


def test_capture_uncertainty_downgrades_to_unverified(tmp_path: Path) -> None:
    trace = uncertain_trace(tmp_path)
    canary = compile_to(tmp_path / "u.canary.json", trace)
    out = tmp_path / "b.json"
    result = runner.invoke(app, ["verify-behavior", str(trace), str(canary), "-o", str(out)])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:5] == [
        "behavior verification: behaviorally_unverified",
        "- representation fidelity: lossless_timing",
        "- source verified: source_verified",
        "- behavioral fidelity: pass",
        "- configuration ranking: pass",
    ]
    doc = json.loads(out.read_bytes())
    assert doc["capture_uncertainty"] == {
        "status": "rank_local_compute_uncertain",
        "compute_fields_uncertain_events": 1,
    }
    assert doc["assurance_state"] == "source_corresponding"
    # No candidate can be verified, and the search says why.
    result = runner.invoke(app, ["compile", str(trace), "-o", str(tmp_path / "s.json"), "--behavior-search"])
    assert result.exit_code == 3
    assert "no behaviorally verified canary" in result.stderr and "uncertain" in result.stderr
    assert not (tmp_path / "s.json").exists()


def test_search_reports_progress_after_each_candidate() -> None:
    import commcanary

    seen: list[tuple[int, int]] = []
    found = commcanary.search_behavior(
        str(LONG), min_limit=2, max_limit=5, progress=lambda done, planned: seen.append((done, planned))
    )
    assert len(seen) == found.summary["candidates"]
    assert seen[0] == (1, 4)
    assert [d for d, _ in seen] == list(range(1, len(seen) + 1))
    assert all(d <= p for d, p in seen)


def test_an_error_raised_by_progress_stops_the_search() -> None:
    import commcanary

    calls: list[int] = []

    def stop_at_three(done: int, planned: int) -> None:
        calls.append(done)
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        commcanary.search_behavior(str(LONG), min_limit=2, max_limit=40, progress=stop_at_three)
    assert calls == [1, 2, 3]
