"""Calibration recovers a backend it did not see: measured reports made of
the model's own times (at a known backend, on a shared host, at two
message scales) fit back to that backend, through the rounds in which the
host stretch of each occurrence follows the fitted schedule."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import commcanary
from commcanary import _core
from commcanary.calibrate import calibrate, read_backend_file
from commcanary.replay import Report

#: The backend the "measurements" come from: one core, each rank keeping
#: half of it busy in a collective (so two ranks share it unstretched),
#: ranks serialized, the floor paid per algorithm step, all_reduce with its
#: own floor and bandwidth.
TRUTH = commcanary.Backend(
    latency_floor_us=300.0,
    bandwidth_gbps=10.0,
    op_overrides=(("all_reduce", 1000.0, 15.0),),
    serialize_ranks=True,
    overlap_efficiency=0.0,
    host_cpus=1.0,
    rank_cpu_share=0.5,
    floor_per_step=True,
)


def _canary(directory: Path, rounds: int = 40) -> Path:
    """Two pairs of ranks gathering 200 µs apart (overlapping, four ranks on
    two cores, only once latencies are the host's, not the default GPU's), then
    all four reducing, at two sizes each."""
    events = []
    for i in range(rounds):
        size = 256 << 10 if i % 2 else 1 << 20
        events += [
            {"op": "all_gather", "ranks": [0, 1], "bytes": size, "group": "a", "gap_us": 20_000.0},
            {"op": "all_gather", "ranks": [2, 3], "bytes": size, "group": "b", "gap_us": 200.0},
            {"op": "all_reduce", "ranks": [0, 1, 2, 3], "bytes": 4 * size, "group": "w", "gap_us": 20_000.0},
        ]
    trace = directory / "t.json"
    trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    return commcanary.compile(trace, lossless_timing=True).write(directory / "c.json")


def _measured_by_the_model(canary: Path, scale: float, out: Path, truth: commcanary.Backend = TRUTH) -> Path:
    run = commcanary.replay(canary, backend=replace(truth, bytes_scale=scale), include_samples=True)
    s = run.samples
    assert s is not None
    raw = _core.measured_report(
        str(canary),
        first_arrival_us=s["first_arrival_us"],
        last_arrival_us=s["last_arrival_us"],
        last_entry_us=s["collective_start_us"],
        completion_us=s["completion_us"],
        avg_rank_wait_us=s["avg_rank_wait_us"],
        measurement={
            "engine": "gloo",
            "host": "testhost",
            "torch_version": "test",
            "nproc": 4,
            "iterations": 1,
            "warmup": 0,
            "compute_fill": "sleep",
            "compute_fill_scale": 1.0,
            "bytes_scale": scale,
        },
        include_samples=True,
        host_cpus=1,
        rank_cpu_share=0.5,
    )
    Report.of_run(raw, str(canary), has_samples=True).write(out)
    return out


def test_calibration_recovers_the_backend_of_a_shared_host(tmp_path: Path) -> None:
    canary = _canary(tmp_path)
    reports = [_measured_by_the_model(canary, k, tmp_path / f"m{k:g}.json") for k in (1.0, 8.0)]
    stretched = commcanary.replay(canary, backend=TRUTH, include_samples=True).samples
    plain = commcanary.replay(canary, backend=replace(TRUTH, host_cpus=0.0), include_samples=True).samples
    assert stretched is not None and plain is not None
    # The gathers overlap (four ranks' demand on one core) and are stretched.
    assert (stretched["collective_us"] > plain["collective_us"] * 1.5).any()
    fit = calibrate(reports, [canary])
    own = {op: (f, bw) for op, f, bw in fit.backend.op_overrides}
    assert own["all_gather"] == pytest.approx((300.0, 10.0), rel=0.02)
    assert own["all_reduce"] == pytest.approx((1000.0, 15.0), rel=0.02)
    assert (fit.backend.host_cpus, fit.backend.rank_cpu_share, fit.backend.floor_per_step) == (1.0, 0.5, True)
    errors = {e["op"]: e["mdape_after_pct"] for e in fit.errors}
    assert max(errors.values()) < 1.0, errors
    replayed = commcanary.replay(canary, backend=fit.backend, include_samples=True).samples
    assert replayed is not None
    assert np.median(np.abs(replayed["collective_us"] / stretched["collective_us"] - 1)) < 0.02


def test_calibration_recovers_the_spread_of_the_transfer_rate(tmp_path: Path) -> None:
    truth = replace(TRUTH, rate_spread=0.2, independent_groups=True)
    canary = _canary(tmp_path, rounds=150)
    reports = [_measured_by_the_model(canary, 8.0, tmp_path / "m8.json", truth)]
    fit = calibrate(reports, [canary])
    assert fit.backend.independent_groups is True
    assert fit.backend.rate_spread == pytest.approx(0.2, abs=0.05)
    own = {op: (f, bw) for op, f, bw in fit.backend.op_overrides}
    assert own["all_reduce"][1] == pytest.approx(15.0, rel=0.1)
    assert "transfer rate spread: sigma" in "\n".join(fit.lines())


def test_calibration_finds_an_op_whose_floors_and_transfer_overlap(tmp_path: Path) -> None:
    # The all_reduce's six floors of 1 ms outlast the transfer of 1 MiB at
    # 15 Gbit/s (0.8 ms) but not of 8 MiB (6.7 ms): summed, no floor and
    # bandwidth price both sizes.
    truth = replace(TRUTH, pipelined_ops=("all_reduce",))
    canary = _canary(tmp_path)
    reports = [_measured_by_the_model(canary, k, tmp_path / f"m{k:g}.json", truth) for k in (1.0, 8.0)]
    fit = calibrate(reports, [canary])
    assert fit.backend.pipelined_ops == ("all_reduce",)
    own = {op: (f, bw) for op, f, bw in fit.backend.op_overrides}
    assert own["all_reduce"] == pytest.approx((1000.0, 15.0), rel=0.03)
    assert own["all_gather"] == pytest.approx((300.0, 10.0), rel=0.03)
    errors = {e["op"]: e["mdape_after_pct"] for e in fit.errors}
    assert max(errors.values()) < 1.5, errors
    assert "pipelined steps: all_reduce" in "\n".join(fit.lines())
    written = read_backend_file(fit.write(tmp_path / "backend.json"))
    assert written.pipelined_ops == ("all_reduce",)
    # Measurements of the summed model keep the sum.
    summed = [_measured_by_the_model(canary, k, tmp_path / f"s{k:g}.json") for k in (1.0, 8.0)]
    assert calibrate(summed, [canary]).backend.pipelined_ops == ()
