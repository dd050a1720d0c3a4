"""The research controls: ``baseline`` (each method against a literal Python
rendering of spec §7.2 that uses CPython's own ``random`` and
``statistics``), ``reduce`` (the walkthrough's counts, the ledger, the
budget, 1-minimality against an independent oracle) and the
ranking-inversion example."""

from __future__ import annotations

import itertools
import json
import random
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from conftest import EXAMPLES

ROOT = Path(__file__).resolve().parent.parent
LONG = EXAMPLES / "llama70b_tp8_trace_long.json"
runner = CliRunner()
sys.path.insert(0, str(ROOT / "examples"))
import research_scaffolding  # noqa: E402


@pytest.fixture(scope="module")
def adversarial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("research") / "adversarial_decode.trace.json"
    path.write_text(json.dumps(research_scaffolding.adversarial_trace()))
    return path


# --- baselines, against the spec written out in Python ----------------------

COPIED = [
    "phase", "op", "bytes", "ranks", "rank_count", "group", "rank_arrival_us", "arrival_skew_us",
    "compute_before_us", "compute_overlap_us", "compute_overlap_unknown", "root_rank", "compute_pressure",
    "concurrent_groups", "sender_rank", "receiver_rank", "tag", "channel", "message_sequence",
    "observed_exposed_us", "custom_op",
]  # fmt: skip


def gap(e: dict[str, Any]) -> float:
    return float(e.get("gap_us", e.get("compute_before_us", 0.0)))


def features(e: dict[str, Any]) -> tuple[float, ...]:
    arrivals = e.get("rank_arrival_us")
    values = list(arrivals.values() if isinstance(arrivals, dict) else arrivals or [])
    skew = max(values) - min(values) if values else e.get("arrival_skew_us", 0.0)
    pressure = e.get("compute_pressure", 0.5)
    return (gap(e), skew, e.get("compute_before_us", 0.0), e.get("compute_overlap_us", 0.0), pressure)


def shape(e: dict[str, Any]) -> tuple[Any, ...]:
    keys = (
        "op",
        "dtype",
        "reduction_op",
        "bytes",
        "root_rank",
        "sender_rank",
        "receiver_rank",
        "tag",
        "channel",
    )
    return (
        e.get("phase", "unknown"),
        tuple(e["ranks"]),
        e.get("group", "default"),
        *(e.get(k) for k in keys),
    )


def nearest(points: list[tuple[float, ...]], center: tuple[float, ...], scale: list[float]) -> int:
    d = [sum(abs(x - c) / s for x, c, s in zip(p, center, scale, strict=True)) for p in points]
    return d.index(min(d))


def scales(points: list[tuple[float, ...]]) -> list[float]:
    return [max(1.0, max(abs(p[f]) for p in points)) for f in range(5)]


def representative(members: list[int], feats: list[tuple[float, ...]]) -> int:
    points = [feats[i] for i in members]
    center = tuple(statistics.median(p[f] for p in points) for f in range(5))
    return members[nearest(points, center, scales(points))]


def by_shape(events: list[dict[str, Any]]) -> dict[tuple[Any, ...], list[int]]:
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, e in enumerate(events):
        groups.setdefault(shape(e), []).append(i)
    return groups


def ranges(n: int, k: int) -> list[range]:
    return [range(j * n // k, max((j + 1) * n // k, j * n // k + 1)) for j in range(k)]


def expected_sources(events: list[dict[str, Any]], method: str, **o: Any) -> list[int]:
    """The source event each output event copies, per spec §7.2."""
    feats = [features(e) for e in events]
    out = [0] * len(events)
    if method == "random":
        picked = sorted(
            random.Random(o["seed"]).sample(range(len(events)), min(o["sample_count"], len(events)))
        )
        return [picked[i % len(picked)] for i in range(len(events))]
    rng = random.Random(o.get("seed", 0))
    for members in by_shape(events).values():
        if method == "frequency":
            rep = representative(members, feats)
            for i in members:
                out[i] = rep
        elif method == "cluster":
            k = o["cluster_count"]
            ordered = sorted(members, key=lambda i: feats[i])
            found = (
                members
                if len(members) <= k
                else [representative([ordered[x] for x in r], feats) for r in ranges(len(ordered), k)]
            )
            reps: list[int] = []
            for r in found:
                if all(feats[r] != feats[q] for q in reps):
                    reps.append(r)
            for i in members:
                points = [feats[r] for r in reps]
                out[i] = reps[nearest(points, feats[i], scales([feats[i], *points]))]
        else:  # stratified
            ordered = sorted(members, key=lambda i: feats[i])
            for r in ranges(len(ordered), min(o["strata_per_group"], len(ordered))):
                stratum = [ordered[x] for x in r]
                sample = rng.choice(stratum)
                for i in stratum:
                    out[i] = sample
    return out


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("random", {"sample_count": 8, "seed": 0}),
        ("random", {"sample_count": 5, "seed": 11}),
        ("frequency", {}),
        ("cluster", {"cluster_count": 8}),
        ("cluster", {"cluster_count": 3}),
        ("stratified", {"strata_per_group": 4, "seed": 0}),
        ("stratified", {"strata_per_group": 2, "seed": 7}),
    ],
)
def test_each_baseline_equals_the_spec_event_for_event(method: str, options: dict[str, Any]) -> None:
    source = json.loads(LONG.read_text())["events"]
    got = json.loads(commcanary.baseline(LONG, method, **options).to_bytes())
    want = expected_sources(source, method, **options)
    assert len(got["events"]) == len(source)
    for i, (event, src) in enumerate(zip(got["events"], want, strict=True)):
        copied = {k: source[src][k] for k in COPIED if k in source[src]}
        rest = {k: v for k, v in event.items() if k not in ("id", "gap_us", "metadata")}
        assert rest == copied, (i, src)
        assert event["gap_us"] == gap(source[src])
        assert event["id"].endswith(f"-{i:06d}") and event["metadata"]["commcanary_baseline"]
    label = {"random": "random_sampling", "frequency": "frequency_representative"}
    label |= {"cluster": "clustering_representative", "stratified": "stratified_sampling"}
    assert got["workload"]["baseline_method"] == label[method]
    assert got["workload"]["notes"].endswith("Not source-verified against the original trace.")


def test_isolated_keeps_one_event_per_shape_and_the_marker_reaches_the_strict_gate(tmp_path: Path) -> None:
    out = tmp_path / "isolated.trace.json"
    result = runner.invoke(app, ["baseline", str(LONG), "-o", str(out), "--method", "isolated"])
    assert result.exit_code == 0 and result.output == f"wrote isolated baseline trace with 3 events: {out}\n"
    doc = json.loads(out.read_text())
    assert [e["phase"] for e in doc["events"]] == ["isolated_collective"] * 3
    assert all(e["gap_us"] == 1.0 and e["compute_overlap_us"] == 0.0 for e in doc["events"])
    assert all(set(e["rank_arrival_us"].values()) == {0.0} for e in doc["events"])
    assert doc["workload"]["baseline_method"] == "isolated_collective"
    gated = runner.invoke(
        app, ["compile", str(out), "-o", str(tmp_path / "c.json"), "--require-behavior-verification"]
    )
    assert gated.exit_code == 3 and not (tmp_path / "c.json").exists()


def test_cluster_is_the_walkthrough_control(tmp_path: Path) -> None:
    out = tmp_path / "cluster.trace.json"
    result = runner.invoke(
        app, ["baseline", str(LONG), "-o", str(out), "--method", "cluster", "--cluster-count", "8"]
    )
    assert result.exit_code == 0, result.output
    canary = commcanary.compile(out)
    assert (canary.source_events, canary.canary_events) == (56, 33)
    canary.write(tmp_path / "c.json")
    verdict = commcanary.verify_behavior(LONG, tmp_path / "c.json")
    assert verdict["status"] == "failed" and verdict["configuration_ranking_status"] == "pass"


def test_observed_gaps_keep_the_real_start_to_start_gaps() -> None:
    source = json.loads(LONG.read_text())["events"]
    got = json.loads(commcanary.baseline(LONG, "frequency", gaps="observed").to_bytes())["events"]
    starts = sorted(e["start_us"] for e in source)
    real = {round(b - a, 6) for a, b in itertools.pairwise(starts)}
    assert {round(e["gap_us"], 6) for e in got} <= real | {0.0}
    assert {e["gap_us"] for e in got} != {gap(e) for e in source}


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--method", "frequency", "--seed", "3"], 3, "baseline method 'frequency' does not accept --seed"),
        (["--method", "cluster", "--cluster-count", "0"], 3, "--cluster-count must be at least 1"),
        (["--method", "isolated", "--partial"], 3, "does not accept --partial"),
        (["--method", "median"], 2, "median"),
    ],
)
def test_bad_baseline_options_are_refused(tmp_path: Path, argv: list[str], code: int, message: str) -> None:
    out = tmp_path / "b.json"
    result = runner.invoke(app, ["baseline", str(LONG), "-o", str(out), *argv])
    assert result.exit_code == code and message in result.output, result.output
    assert not out.exists()


# --- reduce -------------------------------------------------------------------


ONE_EVENT = b'{"format":"commcanary.trace.v1","events":[{"op":"all_reduce","bytes":8,"ranks":[0,1]}]}'


@pytest.mark.parametrize("data", [b"/\xf8\n", ONE_EVENT], ids=["not-json", "one-event"])
def test_reduce_of_a_bad_trace_prints_one_line(tmp_path: Path, data: bytes) -> None:
    # Found by the CLI fuzz target: the budget line came before the refusal.
    bad = tmp_path / "t.json"
    bad.write_bytes(data)
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["reduce", str(bad), "-o", str(out), "--max-oracle-calls", "8"])
    assert result.exit_code == 3
    (line,) = result.stderr.splitlines()
    assert line.startswith("commcanary: ")
    assert not out.exists()


def test_reduce_keeps_forty_decisions_with_one_event(adversarial: Path, tmp_path: Path) -> None:
    out = tmp_path / "reduced.trace.json"
    result = runner.invoke(app, ["reduce", str(adversarial), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "reduction: oracle-call budget 256",
        f"ddmin reduced 100 -> 1 events in 6 oracle calls: {out}",
    ]
    ledger = json.loads(out.read_text())["workload"]["reduction"]
    assert ledger == {
        "method": "ddmin_ranking",
        "original_events": 100,
        "reduced_events": 1,
        "oracle_calls": 6,
        "oracle_call_budget": 256,
        "budget_exhausted": False,
        "ranking_tie_tolerance_us": 0.001,
        "ranking_metrics": ["median_us", "p95_us", "p99_us", "mean_us"],
        "configurations": ["baseline", "low_latency", "high_bandwidth", "overlap_friendly", "congested"],
        "timing_sample_limit": None,
    }


def test_an_exhausted_budget_warns_and_is_exact(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["reduce", str(LONG), "-o", str(out), "--max-oracle-calls", "3"])
    assert result.exit_code == 0, result.output
    assert f"ddmin reduced 56 -> 14 events in 3 oracle calls: {out}" in result.output
    assert "warning: oracle call budget exhausted; result may not be 1-minimal" in result.output
    assert json.loads(out.read_text())["workload"]["reduction"]["budget_exhausted"] is True


def test_a_python_oracle_is_called_within_the_budget() -> None:
    calls: list[list[int]] = []

    def needs_3_and_11(kept: list[int]) -> bool:
        calls.append(kept)
        return 3 in kept and 11 in kept

    found = commcanary.reduce(LONG, oracle=needs_3_and_11)
    kept = [e["id"] for e in json.loads(found.trace.to_bytes())["events"]]
    source = [e["id"] for e in json.loads(LONG.read_text())["events"]]
    assert kept == [source[3], source[11]] and found.oracle_calls == len(calls)
    assert not found.budget_exhausted
    calls.clear()
    never = commcanary.reduce(LONG, max_oracle_calls=5, oracle=lambda kept: calls.append(kept) or False)
    assert (never.oracle_calls, len(calls), never.budget_exhausted, never.reduced_events) == (5, 5, True, 56)


def relations(events: list[dict[str, Any]], tmp: Path) -> list[str]:
    """The ranking relations, computed through the public compile and replay."""
    path = tmp / "subset.json"
    path.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    canary = commcanary.compile(path, timing_sample_limit=max(2, len(events)), lossless_timing=True)
    names = sorted(c["name"] for c in commcanary.DEFAULT_CONFIGURATIONS)
    by_name = {c["name"]: c for c in commcanary.DEFAULT_CONFIGURATIONS}
    metrics = {
        n: commcanary.replay(
            canary, backend=commcanary.Backend(**{k: v for k, v in by_name[n].items() if k != "name"})
        ).metrics
        for n in names
    }
    out = []
    for m in ("median_us", "p95_us", "p99_us", "mean_us"):
        for x, a in enumerate(names):
            for b in names[x + 1 :]:
                va, vb = metrics[a][m], metrics[b][m]
                out.append("tie" if abs(va - vb) <= 0.001 else "left" if va < vb else "right")
    return out


EVENT = st.fixed_dictionaries(
    {
        "op": st.sampled_from(["all_reduce", "all_gather"]),
        "bytes": st.sampled_from([1024, 1 << 20, 1 << 24]),
        "ranks": st.just([0, 1]),
        "gap_us": st.sampled_from([1.0, 50.0, 500.0]),
        "rank_arrival_us": st.sampled_from([{"0": 0.0, "1": 0.0}, {"0": 0.0, "1": 300.0}]),
        "compute_overlap_us": st.sampled_from([0.0, 20.0, 10000.0]),
        "compute_pressure": st.sampled_from([0.5, 1.0]),
    }
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(EVENT, min_size=2, max_size=6))
def test_ddmin_is_one_minimal_for_its_oracle(events: list[dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    found = commcanary.reduce(path, max_oracle_calls=10_000)
    assert not found.budget_exhausted
    kept = json.loads(found.trace.to_bytes())["events"]
    whole = relations(events, tmp_path)
    assert relations(kept, tmp_path) == whole
    if len(kept) >= 2:
        for i in range(len(kept)):
            assert relations(kept[:i] + kept[i + 1 :], tmp_path) != whole, i


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-oracle-calls", "0"], "--max-oracle-calls must be between 1 and 10000"),
        (["--max-oracle-calls", "10001"], "--max-oracle-calls must be between 1 and 10000"),
        (["--timing-sample-limit", "1"], "--timing-sample-limit must be at least 2"),
    ],
)
def test_bad_reduce_options_are_refused(tmp_path: Path, argv: list[str], message: str) -> None:
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["reduce", str(LONG), "-o", str(out), *argv])
    assert result.exit_code == 3 and message in result.output, result.output
    assert not out.exists()


def test_a_one_event_trace_and_duplicate_configurations_are_refused(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text(
        json.dumps(
            {"format": "commcanary.trace.v1", "events": [{"op": "all_reduce", "bytes": 8, "ranks": 2}]}
        )
    )
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["reduce", str(one), "-o", str(out)])
    assert result.exit_code == 3 and "at least two events" in result.output, result.output
    configs = tmp_path / "configs.json"
    configs.write_text(json.dumps([{"name": "a"}, {"name": "a", "latency_floor_us": 3.0}]))
    result = runner.invoke(app, ["reduce", str(LONG), "-o", str(out), "--configurations", str(configs)])
    assert result.exit_code == 3 and "field 'name' repeats 'a'" in result.output, result.output
    assert not out.exists()


# --- the example --------------------------------------------------------------


def test_the_ranking_inversion_example_prints_the_walkthrough(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "research_scaffolding.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "isolated ranking: isolated-fast-no-overlap > workload-overlap-friendly",
        "full workload ranking: workload-overlap-friendly > isolated-fast-no-overlap",
        "too-small canary status: failed fail",
        "random baseline status: failed failed fail",
        "frequency baseline status: failed failed fail",
        "cluster baseline status: failed failed fail",
        "verified canary status: behaviorally_verified pass",
        "behavior-search canary: 16 samples, behaviorally_verified pass",
        "out/research_scaffold",
    ]
    assert (tmp_path / "out/research_scaffold/adversarial_decode.trace.json").exists()
