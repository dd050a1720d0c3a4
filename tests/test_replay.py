"""Replay through the Python API: the walkthrough numbers, samples, determinism."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import commcanary
from commcanary import InputError
from commcanary.replay import Backend, Report, replay

CONFIGS = {
    "baseline": (Backend(), "median=91.977 us p95=107.746 us p99=108.321 us hidden=16.27%"),
    "floor-12": (
        Backend(latency_floor_us=12.0),
        "median=121.409 us p95=146.616 us p99=152.095 us hidden=13.25%",
    ),
    "low_latency": (
        Backend(latency_floor_us=3.5),
        "median=67.992 us p95=86.173 us p99=89.929 us hidden=20.41%",
    ),
    "high_bandwidth": (
        Backend(bandwidth_gbps=110.0, latency_floor_us=10.0),
        "median=37.398 us p95=44.392 us p99=46.303 us hidden=32.56%",
    ),
    "overlap_friendly": (
        Backend(latency_floor_us=9.0, overlap_efficiency=0.95),
        "median=96.744 us p95=114.011 us p99=118.56 us hidden=19.95%",
    ),
    "congested": (
        Backend(bandwidth_gbps=28.0, compute_pressure=0.95),
        "median=442.565 us p95=603.392 us p99=622.217 us hidden=3.99%",
    ),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_demo_replays_match_the_walkthrough(demo_trace: Path, name: str) -> None:
    backend, want = CONFIGS[name]
    report = replay(commcanary.compile(demo_trace), backend=backend)
    assert report.summary_line() == f"replayed 10 events: {want}"


def test_long_trace_with_iterations_and_seed(long_trace: Path) -> None:
    canary = commcanary.compile(long_trace)
    assert replay(canary).summary_line() == (
        "replayed 56 events: median=253.046 us p95=415.129 us p99=431.39 us hidden=5.56%"
    )
    assert replay(canary, iterations=3, seed=11).summary_line() == (
        "replayed 168 events: median=221.926 us p95=352.552 us p99=426.488 us hidden=6.32%"
    )


def test_ablations(demo_trace: Path) -> None:
    report = replay(
        commcanary.compile(demo_trace), ablations=["arrival_skew", "compute_overlap", "rare_tail_windows"]
    )
    assert report.summary_line().endswith("median=101.175 us p95=118.037 us p99=123.236 us hidden=0.0%")
    assert report.section("replay_protocol")["ablations"] == [
        "arrival_skew",
        "compute_overlap",
        "rare_tail_windows",
    ]
    with pytest.raises(InputError, match="unsupported replay ablation 'bogus'"):
        replay(commcanary.compile(demo_trace), ablations=["bogus"])


def test_default_protocol_hash_is_the_published_constant(demo_trace: Path) -> None:
    protocol = replay(commcanary.compile(demo_trace)).section("replay_protocol")
    assert protocol["sha256"] == "1c8de52ac1378918e35d0c5b1bc604a3f7419a820e7c2cea9f426478c2bf6604"


def test_samples_are_numpy_and_consistent(long_trace: Path, tmp_path: Path) -> None:
    report = replay(commcanary.compile(long_trace), include_samples=True, iterations=2)
    s = report.samples
    assert s is not None
    assert isinstance(s["exposed_us"], np.ndarray) and s["exposed_us"].shape == (112,)
    assert set(s["phase"]) == {"prefill", "decode"}
    assert np.all(s["iteration"][:56] == 0) and np.all(s["iteration"][56:] == 1)
    np.testing.assert_allclose(s["total_us"], s["hidden_us"] + s["exposed_us"], atol=0.0021)
    first = s["first_arrival_us"][0]
    assert (s["arrival_skew_us"][0], s["collective_us"][0]) == (
        round(s["last_arrival_us"][0] - first, 3),
        s["collective_us"][0],
    )
    path = tmp_path / "r.json"
    report.write(path)
    back = Report.from_file(path)
    assert back.metrics == report.metrics
    assert back.samples is not None
    np.testing.assert_array_equal(back.samples["exposed_us"], s["exposed_us"])
    assert json.loads(path.read_bytes())["format"] == "commcanary.report.v3"


def test_report_bytes_are_deterministic_across_threads(long_trace: Path) -> None:
    canary = commcanary.compile(long_trace)
    with ThreadPoolExecutor(max_workers=4) as pool:
        outputs = list(pool.map(lambda _: replay(canary, include_samples=True).to_bytes(), range(6)))
    assert len(set(outputs)) == 1


def test_bad_settings(demo_trace: Path) -> None:
    canary = commcanary.compile(demo_trace)
    for backend, message in [
        (Backend(bandwidth_gbps=0.0), "bandwidth_gbps must be positive"),
        (Backend(latency_floor_us=-1.0), "latency_floor_us must be non-negative"),
        (Backend(overlap_efficiency=1.5), "overlap_efficiency must be between 0 and 1"),
        (Backend(label=""), "backend_label must be non-empty"),
    ]:
        with pytest.raises(InputError, match=message):
            replay(canary, backend=backend)
    with pytest.raises(InputError, match="iterations must be at least 1"):
        replay(canary, iterations=0)
    with pytest.raises(InputError, match="replay would execute 20 events, above max_replay_events=10"):
        replay(canary, iterations=2, max_replay_events=10)


def big_trace(n: int = 30_000) -> bytes:
    """A trace large enough for the two-thread readers (>1 MiB of canary)."""
    events = []
    now = 0.0
    for i in range(n):
        now += 10.0 + (i * 7919 % 97) / 8
        events.append(
            {
                "op": "all_reduce" if i % 3 else "all_gather",
                "bytes": 4096 * (1 + i % 5),
                "ranks": 4,
                "start_us": now,
                "rank_arrival_us": [0.0, (i % 7) / 4, (i % 11) / 8, (i % 13) / 16],
                "compute_overlap_us": (i % 17) / 2,
                "metadata": {"note": "},{" if i % 101 == 0 else "plain", "list": [{"a": 1}, {"b": 2}]},
            }
        )
    return json.dumps({"format": "commcanary.trace.v1", "events": events}).encode()


def test_large_canary_reads_identically_when_pretty_printed(tmp_path: Path) -> None:
    canary = commcanary.compile(big_trace(), timing_sample_limit=16)
    compact = tmp_path / "c.json"
    canary.write(compact)
    assert compact.stat().st_size > 1 << 20
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads(compact.read_bytes()), indent=2))
    a = replay(compact, include_samples=True)
    b = replay(pretty, include_samples=True)
    assert a.to_bytes() == b.to_bytes()
    tampered = json.loads(compact.read_bytes())
    tampered["events"][-1]["timing"][0][1] += 1.0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(tampered, separators=(",", ":"), sort_keys=True))
    with pytest.raises(InputError, match="does not match"):
        replay(bad)
