"""``replay --backend-file``: a backend from a file (``commcanary calibrate
-o``) replaces the backend options; bad files and mixed options are refused."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.calibrate import read_backend_file
from commcanary.cli import app
from conftest import EXAMPLES

runner = CliRunner()
BACKEND = {
    "label": "calibrated to gloo on a test host",
    "bandwidth_gbps": 10.5,
    "latency_floor_us": 470.0,
    "compute_pressure": 0.55,
    "overlap_efficiency": 0.72,
}


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    return commcanary.compile(EXAMPLES / "llama70b_tp8_trace.json").write(tmp_path / "c.json")


def test_the_file_gives_the_backend(canary: Path, tmp_path: Path) -> None:
    file = tmp_path / "backend.json"
    file.write_text(json.dumps({"format": "commcanary.backend.v1", "backend": BACKEND, "errors": []}))
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["replay", str(canary), "--backend-file", str(file), "-o", str(out)])
    assert result.exit_code == 0, result.output
    backend = json.loads(out.read_text())["backend"]
    assert {k: backend[k] for k in BACKEND} == BACKEND
    direct = commcanary.replay(canary, backend=commcanary.Backend(**BACKEND))
    assert json.loads(out.read_text())["metrics"] == direct.metrics


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"format": "commcanary.backend.v0", "backend": BACKEND},
            "field 'format' must be 'commcanary.backend.v1'",
        ),
        (
            {"format": "commcanary.backend.v1", "backend": {**BACKEND, "extra": 1}},
            "field 'backend' must have exactly",
        ),
        (
            {"format": "commcanary.backend.v1", "backend": {**BACKEND, "bandwidth_gbps": "fast"}},
            "field 'backend.bandwidth_gbps' must be a number",
        ),
        ({"format": "commcanary.backend.v1", "backend": {**BACKEND, "bandwidth_gbps": -1.0}}, "bandwidth"),
    ],
)
def test_bad_backend_files_are_refused(canary: Path, tmp_path: Path, doc: dict, message: str) -> None:
    file = tmp_path / "backend.json"
    file.write_text(json.dumps(doc))
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["replay", str(canary), "--backend-file", str(file), "-o", str(out)])
    assert result.exit_code in (2, 3) and message in result.output, result.output
    assert not out.exists()


def test_backend_options_and_a_file_do_not_mix(canary: Path, tmp_path: Path) -> None:
    file = tmp_path / "backend.json"
    file.write_text(json.dumps({"format": "commcanary.backend.v1", "backend": BACKEND}))
    argv = [
        "replay",
        str(canary),
        "--backend-file",
        str(file),
        "--latency-floor-us",
        "3",
        "-o",
        str(tmp_path / "r"),
    ]
    result = runner.invoke(app, argv)
    assert result.exit_code == 3 and "cannot be combined with --backend-file" in result.output, result.output


def test_an_op_override_changes_that_op_only_and_the_report_recomputes(canary: Path, tmp_path: Path) -> None:
    plain = commcanary.replay(canary, include_samples=True)
    slow = commcanary.Backend(op_overrides=(("all_reduce", 100.0, 5.0),))
    report = commcanary.replay(canary, backend=slow, include_samples=True)
    assert report.section("backend")["op_overrides"] == [
        {"op": "all_reduce", "latency_floor_us": 100.0, "bandwidth_gbps": 5.0}
    ]
    assert "op_overrides" not in plain.section("backend")  # default reports are unchanged
    assert report.samples is not None and plain.samples is not None
    assert (report.samples["collective_us"] > plain.samples["collective_us"] + 90).all()
    out = tmp_path / "r.json"
    report.write(out)
    assert commcanary.verify_report(out, canary)["status"] == "model_recomputed"
    file = tmp_path / "backend.json"
    entry = {"op": "all_reduce", "latency_floor_us": 100.0, "bandwidth_gbps": 5.0}
    file.write_text(
        json.dumps({"format": "commcanary.backend.v1", "backend": {**BACKEND, "op_overrides": [entry]}})
    )
    result = runner.invoke(
        app, ["replay", str(canary), "--backend-file", str(file), "-o", str(tmp_path / "f.json")]
    )
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "f.json").read_text())["backend"]["op_overrides"] == [entry]


def test_bad_op_overrides_are_refused(canary: Path) -> None:
    for overrides in (
        (("all_reduce", -1.0, 5.0),),
        (("all_reduce", 1.0, 0.0),),
        (("b", 1.0, 1.0), ("b", 2.0, 2.0)),
    ):
        with pytest.raises(commcanary.InputError, match="op_overrides"):
            commcanary.replay(canary, backend=commcanary.Backend(op_overrides=overrides))


def test_serialized_groups_share_one_queue_and_the_report_recomputes(canary: Path, tmp_path: Path) -> None:
    plain = commcanary.replay(canary, include_samples=True)
    serial = commcanary.replay(
        canary, backend=commcanary.Backend(serialize_groups=True), include_samples=True
    )
    assert serial.section("backend")["serialize_groups"] is True
    assert "serialize_groups" not in plain.section("backend")
    out = tmp_path / "serial.json"
    serial.write(out)
    assert commcanary.verify_report(out, canary)["status"] == "model_recomputed"


def _two_groups_canary(directory: Path) -> Path:
    """Rank 1 sends 64 MiB to rank 2 (group ``kv``), then 10 µs later joins
    an all_reduce of ranks 0 and 1 (group ``tp``)."""
    events = [
        {
            "op": "send",
            "ranks": [1, 2],
            "sender_rank": 1,
            "receiver_rank": 2,
            "bytes": 64 << 20,
            "group": "kv",
            "gap_us": 5.0,
        },
        {"op": "all_reduce", "ranks": [0, 1], "bytes": 4096, "group": "tp", "gap_us": 10.0},
    ]
    trace = directory / "two.trace.json"
    trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    return commcanary.compile(trace, lossless_timing=True).write(directory / "two.canary.json")


def test_serialized_ranks_enter_late_when_busy_and_the_report_recomputes(tmp_path: Path) -> None:
    canary = _two_groups_canary(tmp_path)
    plain = commcanary.replay(canary, include_samples=True)
    serial = commcanary.replay(canary, backend=commcanary.Backend(serialize_ranks=True), include_samples=True)
    assert plain.samples is not None and serial.samples is not None
    transfer = float(serial.samples["collective_us"][0])
    # Without it the all_reduce starts at once on its own communicator; with
    # it, rank 1 is still sending: the all_reduce queues until the send ends.
    assert float(plain.samples["queue_wait_us"][1]) == 0.0
    assert float(serial.samples["queue_wait_us"][1]) == pytest.approx(transfer - 10.0, abs=1e-6)
    assert serial.section("backend")["serialize_ranks"] is True
    assert "serialize_ranks" not in plain.section("backend")
    out = tmp_path / "serial.json"
    serial.write(out)
    assert commcanary.verify_report(out, canary)["status"] == "model_recomputed"


def test_host_stalls_keep_the_median_and_lengthen_the_tail(canary: Path, tmp_path: Path) -> None:
    plain = commcanary.replay(canary, include_samples=True, iterations=200)
    stalled_backend = commcanary.Backend(stall_probability=0.3, stall_mean_us=400.0)
    stalled = commcanary.replay(canary, backend=stalled_backend, include_samples=True, iterations=200)
    assert plain.samples is not None and stalled.samples is not None
    extra = stalled.samples["collective_us"] - plain.samples["collective_us"]
    assert (extra >= 0).all()
    share = float((extra > 0).mean())
    assert 0.25 < share < 0.35, share
    assert float(extra[extra > 0].mean()) == pytest.approx(400.0, rel=0.15)
    assert stalled.section("backend")["stall_probability"] == 0.3
    assert "stall_probability" not in plain.section("backend")
    out = tmp_path / "stalled.json"
    stalled.write(out)
    assert commcanary.verify_report(out, canary)["status"] == "model_recomputed"
    # Same seed, same bytes; another seed, other stalls.
    again = commcanary.replay(canary, backend=stalled_backend, include_samples=True, iterations=200)
    assert again.metrics == stalled.metrics
    for bad in ({"stall_probability": 0.6}, {"stall_mean_us": -1.0}):
        with pytest.raises(commcanary.InputError, match="stall_"):
            commcanary.replay(canary, backend=commcanary.Backend(**bad))  # type: ignore[arg-type]


def test_a_point_to_point_override_prices_sends_and_recvs(tmp_path: Path) -> None:
    canary = _two_groups_canary(tmp_path)
    plain = commcanary.replay(canary, include_samples=True)
    slow = commcanary.Backend(op_overrides=(("point_to_point", 0.0, 1.0),))
    priced = commcanary.replay(canary, backend=slow, include_samples=True)
    assert plain.samples is not None and priced.samples is not None
    assert float(priced.samples["collective_us"][0]) > 40 * float(plain.samples["collective_us"][0])
    # The all_reduce is not a transfer: unchanged.
    assert priced.samples["collective_us"][1] == plain.samples["collective_us"][1]


def test_a_backend_file_carries_ranks_and_stalls(canary: Path, tmp_path: Path) -> None:
    file = tmp_path / "backend.json"
    extra = {
        "serialize_ranks": True,
        "stall_probability": 0.2,
        "stall_mean_us": 900.0,
        "rate_spread": 0.2,
        "independent_groups": True,
    }
    file.write_text(json.dumps({"format": "commcanary.backend.v1", "backend": {**BACKEND, **extra}}))
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["replay", str(canary), "--backend-file", str(file), "-o", str(out)])
    assert result.exit_code == 0, result.output
    backend = json.loads(out.read_text())["backend"]
    assert {k: backend[k] for k in extra} == extra
    file.write_text(
        json.dumps({"format": "commcanary.backend.v1", "backend": {**BACKEND, "stall_probability": 0.9}})
    )
    result = runner.invoke(
        app, ["replay", str(canary), "--backend-file", str(file), "-o", str(tmp_path / "x")]
    )
    assert result.exit_code == 3 and "backend.stall_probability" in result.output, result.output


def _overlapping_groups_canary(directory: Path) -> Path:
    """An all_reduce of ranks 0-1, one of ranks 2-3 a microsecond later
    (while the first runs), and after a long gap one of 2-3 alone."""
    big = 8 << 20
    events = [
        {"op": "all_reduce", "ranks": [0, 1], "bytes": big, "group": "a", "gap_us": 0.0},
        {"op": "all_reduce", "ranks": [2, 3], "bytes": big, "group": "b", "gap_us": 1.0},
        {"op": "all_reduce", "ranks": [2, 3], "bytes": big, "group": "b", "gap_us": 1e6},
    ]
    trace = directory / "overlap.trace.json"
    trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    return commcanary.compile(trace, lossless_timing=True).write(directory / "overlap.canary.json")


def test_a_host_with_fewer_cores_than_running_ranks_stretches_their_latency(tmp_path: Path) -> None:
    canary = _overlapping_groups_canary(tmp_path)

    def latencies(cpus: float) -> Any:
        report = commcanary.replay(canary, backend=commcanary.Backend(host_cpus=cpus), include_samples=True)
        assert report.samples is not None
        return report, report.samples["collective_us"]

    plain_report, plain = latencies(0.0)
    assert (latencies(4.0)[1] == plain).all()
    # Two cores: the first and last run two ranks (no stretch); the second
    # starts while the first runs, four ranks on two cores (stretch 2).
    two_report, two = latencies(2.0)
    assert two[0] == plain[0] and two[2] == plain[2] and two[1] > plain[1]
    # One core: stretches 2, 4, 2. The noise term is not stretched, so the
    # excess over the unshared latency grows as the stretch less one.
    _, one = latencies(1.0)
    base = one[0] - plain[0]
    assert one[2] - plain[2] == pytest.approx(base, abs=0.01)  # samples keep 3 decimals
    assert one[1] - plain[1] == pytest.approx(3 * (two[1] - plain[1]), abs=0.01)
    assert two_report.section("backend")["host_cpus"] == 2.0
    assert "host_cpus" not in plain_report.section("backend")
    out = tmp_path / "shared.json"
    two_report.write(out)
    assert commcanary.verify_report(out, canary)["status"] == "model_recomputed"


def test_sharing_counts_the_ranks_demand_not_their_number(tmp_path: Path) -> None:
    canary = _overlapping_groups_canary(tmp_path)

    def latencies(**terms: Any) -> Any:
        report = commcanary.replay(canary, backend=commcanary.Backend(**terms), include_samples=True)
        assert report.samples is not None
        return report, report.samples["collective_us"]

    # Half a core per rank on one core is two whole-core ranks on two.
    half_report, half = latencies(host_cpus=1.0, rank_cpu_share=0.5)
    assert (half == latencies(host_cpus=2.0)[1]).all()
    assert (latencies(host_cpus=1.0, rank_cpu_share=0.25)[1] == latencies(host_cpus=4.0)[1]).all()
    assert half_report.section("backend")["rank_cpu_share"] == 0.5
    out = tmp_path / "share.json"
    half_report.write(out)
    assert commcanary.verify_report(out, canary)["status"] == "model_recomputed"
    with pytest.raises(commcanary.InputError, match="rank_cpu_share"):
        commcanary.replay(canary, backend=commcanary.Backend(rank_cpu_share=0.0))


def test_a_floor_per_step_prices_each_step_of_the_algorithm(tmp_path: Path) -> None:
    canary = _overlapping_groups_canary(tmp_path)
    once = commcanary.Backend(latency_floor_us=1000.0)
    per_step = commcanary.Backend(latency_floor_us=1000.0, floor_per_step=True)
    a = commcanary.replay(canary, backend=once, include_samples=True)
    b = commcanary.replay(canary, backend=per_step, include_samples=True)
    assert a.samples is not None and b.samples is not None
    # A ring all_reduce over two ranks takes 2(2-1) = 2 steps: one floor more.
    assert b.samples["collective_us"] - a.samples["collective_us"] == pytest.approx(1000.0, abs=0.01)
    assert b.section("backend")["floor_per_step"] is True and "floor_per_step" not in a.section("backend")
    out = tmp_path / "steps.json"
    b.write(out)
    assert commcanary.verify_report(out, canary)["status"] == "model_recomputed"
    file = tmp_path / "backend.json"
    doc = {**BACKEND, "floor_per_step": True, "rank_cpu_share": 0.4, "host_cpus": 2}
    file.write_text(json.dumps({"format": "commcanary.backend.v1", "backend": doc}))
    result = runner.invoke(
        app, ["replay", str(canary), "--backend-file", str(file), "-o", str(tmp_path / "r")]
    )
    assert result.exit_code == 0, result.output
    backend = json.loads((tmp_path / "r").read_text())["backend"]
    assert (backend["floor_per_step"], backend["rank_cpu_share"]) == (True, 0.4)
    file.write_text(json.dumps({"format": "commcanary.backend.v1", "backend": {**doc, "floor_per_step": 1}}))
    refused = runner.invoke(
        app, ["replay", str(canary), "--backend-file", str(file), "-o", str(tmp_path / "x")]
    )
    assert refused.exit_code == 3 and "backend.floor_per_step' must be a boolean" in refused.output


def test_a_backend_file_carries_host_cpus(canary: Path, tmp_path: Path) -> None:
    file = tmp_path / "backend.json"
    file.write_text(json.dumps({"format": "commcanary.backend.v1", "backend": {**BACKEND, "host_cpus": 4}}))
    result = runner.invoke(
        app, ["replay", str(canary), "--backend-file", str(file), "-o", str(tmp_path / "r")]
    )
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r").read_text())["backend"]["host_cpus"] == 4.0
    with pytest.raises(commcanary.InputError, match="host_cpus"):
        commcanary.replay(canary, backend=commcanary.Backend(host_cpus=-1.0))


def test_the_message_scale_is_a_physical_option(canary: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["replay", str(canary), "--bytes-scale", "2", "-o", str(out)])
    assert result.exit_code != 0 and "--bytes-scale does not apply to the model" in result.output, (
        result.output
    )
    assert not out.exists()


def test_a_rate_spread_keeps_the_median_and_spreads_the_transfer_term(canary: Path, tmp_path: Path) -> None:
    # At 0.01 Gbit/s the bandwidth term is nearly all of each latency.
    slow = commcanary.Backend(bandwidth_gbps=0.01, latency_floor_us=1.0)
    plain = commcanary.replay(canary, backend=slow, include_samples=True, iterations=100)
    spread_backend = replace(slow, rate_spread=0.3)
    spread = commcanary.replay(canary, backend=spread_backend, include_samples=True, iterations=100)
    assert plain.samples is not None and spread.samples is not None
    ratio = np.log(spread.samples["collective_us"] / plain.samples["collective_us"])
    assert abs(float(np.median(ratio))) < 0.03
    assert float(np.std(ratio)) == pytest.approx(0.3, abs=0.03)
    _echoed_and_recomputed(spread, plain, ("rate_spread", 0.3), canary, tmp_path)
    with pytest.raises(commcanary.InputError, match="rate_spread"):
        commcanary.replay(canary, backend=commcanary.Backend(rate_spread=2.5))


def test_independent_groups_drop_the_contention_of_concurrent_groups(tmp_path: Path) -> None:
    events = [
        {
            "op": "all_reduce",
            "ranks": [0, 1],
            "bytes": 8 << 20,
            "group": "a",
            "gap_us": 10.0,
            "concurrent_groups": 3,
        },
        {"op": "all_reduce", "ranks": [2, 3], "bytes": 8 << 20, "group": "b", "gap_us": 1e5},
    ]
    trace = tmp_path / "groups.trace.json"
    trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    canary = commcanary.compile(trace, lossless_timing=True).write(tmp_path / "groups.canary.json")
    plain = commcanary.replay(canary, include_samples=True)
    alone = commcanary.replay(
        canary, backend=commcanary.Backend(independent_groups=True), include_samples=True
    )
    assert plain.samples is not None and alone.samples is not None
    contended, single = plain.samples["collective_us"], alone.samples["collective_us"]
    # The spec's contention 1 + 0.22 (g - 1) on the bandwidth term, gone.
    assert float(single[0]) < float(contended[0]) / 1.3
    assert single[1] == contended[1]
    _echoed_and_recomputed(alone, plain, ("independent_groups", True), canary, tmp_path)


def test_a_pipelined_op_pays_the_longer_of_its_floors_and_its_transfer(tmp_path: Path) -> None:
    # Two 4-rank all_reduces (6 ring steps), one small and one large.
    events = [
        {"op": "all_reduce", "ranks": [0, 1, 2, 3], "bytes": size, "group": "w", "gap_us": 1e5}
        for size in (1 << 10, 64 << 20)
    ]
    trace = tmp_path / "sizes.trace.json"
    trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    canary = commcanary.compile(trace, lossless_timing=True).write(tmp_path / "sizes.canary.json")
    summed = commcanary.Backend(latency_floor_us=500.0, bandwidth_gbps=8.0, floor_per_step=True)
    piped = replace(summed, pipelined_ops=("all_reduce",))
    plain = commcanary.replay(canary, backend=summed, include_samples=True).samples
    both = commcanary.replay(canary, backend=piped, include_samples=True)
    assert plain is not None and both.samples is not None
    small, large = both.samples["collective_us"]
    floors, transfer = 6 * 500.0, (64 << 20) * 1.5 * 8 / 8000 * (1 + 0.18 * 0.55)
    # The small one's transfer hides in its floors, the large one's floors in its transfer.
    assert small == pytest.approx(plain["collective_us"][0], abs=2.0)
    assert small == pytest.approx(floors, rel=0.01)
    assert large == pytest.approx(plain["collective_us"][1] - floors, abs=2.0)
    assert large == pytest.approx(transfer, rel=0.01)
    _echoed_and_recomputed(
        both, commcanary.replay(canary, backend=summed), ("pipelined_ops", ["all_reduce"]), canary, tmp_path
    )
    file = tmp_path / "backend.json"
    file.write_text(
        json.dumps(
            {"format": "commcanary.backend.v1", "backend": {**BACKEND, "pipelined_ops": ["all_reduce"]}}
        )
    )
    assert read_backend_file(file).pipelined_ops == ("all_reduce",)
    for bad in (["all_reduce", "all_reduce"], "all_reduce", [""], [3]):
        file.write_text(
            json.dumps({"format": "commcanary.backend.v1", "backend": {**BACKEND, "pipelined_ops": bad}})
        )
        result = runner.invoke(
            app, ["replay", str(canary), "--backend-file", str(file), "-o", str(tmp_path / "x.json")]
        )
        assert result.exit_code == 3 and "backend.pipelined_ops" in result.output, result.output
    assert not (tmp_path / "x.json").exists()
    with pytest.raises(commcanary.InputError, match="pipelined_ops"):
        commcanary.replay(canary, backend=commcanary.Backend(pipelined_ops=("b", "a", "a")))


def _echoed_and_recomputed(
    report: commcanary.Report,
    plain: commcanary.Report,
    setting: tuple[str, Any],
    canary: Path,
    tmp_path: Path,
) -> None:
    """``report``'s backend section carries ``setting``, ``plain``'s does
    not, and ``report`` written out recomputes from ``canary``."""
    key, value = setting
    assert report.section("backend")[key] == value
    assert key not in plain.section("backend")
    out = tmp_path / f"{key}.json"
    report.write(out)
    assert commcanary.verify_report(out, canary)["status"] == "model_recomputed"
