"""``replay --physical``: canaries executed on 4 real gloo processes. The
gloo fixture's canary (its recorded arrival offsets, the 60-120 ms sleeps of
rank 2 among them, reappear as measured lags), a measured report compared
with itself and with a run under more compute, and bad input (too few
processes, an op torch cannot run, an engine this build lacks, a process
that dies) refused with every process ended. Needs torch (the ``torch``
extra; CI installs it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from conftest import FIXTURES

torch = pytest.importorskip("torch")

DECODE = FIXTURES / "kineto" / "gloo_tp4_decode"
runner = CliRunner()


@pytest.fixture(scope="module")
def fixture_canary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("physical")
    commcanary.import_kineto(sorted(DECODE.glob("rank*.json.gz"))).write(d / "job.trace.json")
    commcanary.compile(d / "job.trace.json", lossless_timing=True, timing_sample_limit=1000).write(
        d / "job.canary.json"
    )
    return d / "job.canary.json"


def small_canary(directory: Path, gap_us: float = 3000.0) -> Path:
    """Eight decode steps of four ranks: a world all_reduce, pair all_gathers,
    a broadcast and a transfer, ``gap_us`` apart; rank 2 reaches step 4's
    all_reduce 60 ms late."""
    events = []
    for step in range(8):
        for op, ranks, size, group in (
            ("all_reduce", [0, 1, 2, 3], 1 << 20, "world"),
            ("all_gather", [0, 1], 1 << 16, "pair0"),
            ("all_gather", [2, 3], 1 << 16, "pair1"),
            ("broadcast", [0, 1, 2, 3], 1024, "world"),
        ):
            e = {
                "op": op,
                "ranks": ranks,
                "bytes": size,
                "group": group,
                "gap_us": gap_us,
                "compute_overlap_us": 0.0,
            }
            if step == 4 and op == "all_reduce":
                # 100 ms of slack first, so every rank is on schedule even on
                # a busy host, then rank 2 is 60 ms late.
                e["gap_us"] = 100_000.0
                e["rank_arrival_us"] = {"0": 0.0, "1": 0.0, "2": 60_000.0, "3": 0.0}
            events.append(e | ({"root_rank": 0} if op == "broadcast" else {}))
        events.append(
            {
                "op": "point_to_point",
                "ranks": [0, 2],
                "sender_rank": 0,
                "receiver_rank": 2,
                "bytes": 4096,
                "gap_us": 1000.0,
            }
        )
    trace = directory / "small.trace.json"
    trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    commcanary.compile(trace, lossless_timing=True, timing_sample_limit=1000).write(
        directory / "small.canary.json"
    )
    return directory / "small.canary.json"


def workers_left() -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "commcanary.physical.worker" in cmd:
            found.append(cmd)
    return found


def test_the_fixture_canary_runs_on_real_gloo_and_its_offsets_come_back(
    fixture_canary: Path, tmp_path: Path
) -> None:
    from commcanary.physical import load_program, replay_physical

    run = replay_physical(fixture_canary, warmup=0, iterations=1)
    program = load_program(fixture_canary)
    report = run.report
    assert report.metrics["count"] == program.occurrences == 506
    assert report.section("backend")["mode"] == "physical-measurement"
    assert report.section("backend")["engine"] == "gloo"
    # The recorded sleeps of rank 2 (arrival offsets of tens of ms) are
    # measured again as rank 2's lag behind the other members.
    late = []
    for k in range(program.occurrences):
        sig = program.signatures[int(program.signature[k])]
        if 2 not in sig["ranks"] or len(sig["ranks"]) < 4:
            continue
        at = int(program.offsets_at[k])
        offsets = program.offsets_us[at : at + len(sig["ranks"])]
        lead = offsets[sig["ranks"].index(2)] - max(
            o for r, o in zip(sig["ranks"], offsets, strict=True) if r != 2
        )
        if lead > 20_000:
            measured = run.enter_us[2, k] - np.nanmax(np.delete(run.enter_us[:, k], 2))
            late.append((lead, measured))
    assert len(late) == 8, late  # the eight injected steps
    # On a host that keeps the recorded schedule each comes back whole (50-117
    # ms measured here); a busy host falls behind and absorbs some of it.
    assert np.median([measured / lead for lead, measured in late]) > 0.5, late
    out = tmp_path / "measured.report.json"
    report.write(out)
    same = runner.invoke(app, ["compare", str(out), str(out), "-o", str(tmp_path / "c.json")])
    assert same.exit_code == 0 and same.output.startswith("comparison verdict: pass"), same.output
    checked = runner.invoke(
        app, ["verify-report", str(out), str(fixture_canary), "-o", str(tmp_path / "v.json")]
    )
    assert checked.exit_code == 0 and "report verification: measured_reconciled" in checked.output
    assert "cannot be recomputed" in checked.output
    assert workers_left() == []


def test_more_compute_between_collectives_is_measured_with_less_queueing(tmp_path: Path) -> None:
    from commcanary.physical import replay_physical

    # 0.3 ms between collectives that take milliseconds here: the program
    # falls behind its schedule and its collectives queue, as in the model.
    canary = small_canary(tmp_path, gap_us=300.0)
    base = replay_physical(canary, iterations=2, warmup=1)
    assert base.report.metrics["count"] == 80
    for sample in (20, 60):  # step 4's all_reduce, in both iterations
        lag = base.enter_us[2, sample] - np.nanmax(np.delete(base.enter_us[:, sample], 2))
        assert 45_000 < lag < 75_000, lag
    base.report.write(tmp_path / "base.json")
    argv = ["replay", str(canary), "--physical", "gloo", "-o", str(tmp_path / "busy.json"), "--warmup", "1"]
    result = runner.invoke(app, [*argv, "--iterations", "2", "--compute-fill-scale", "10"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("measured on gloo: replayed 80 events")
    # Ten times the compute between collectives: the program keeps more of
    # its schedule, so less queueing, and compare says the latency fell.
    assert base.report.samples is not None
    assert np.mean(base.report.samples["queue_wait_us"]) > 1000.0
    result = runner.invoke(
        app,
        ["compare", str(tmp_path / "base.json"), str(tmp_path / "busy.json"), "-o", str(tmp_path / "c.json")],
    )
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["delta"]["median_pct"] < 0 and doc["delta"]["p95_pct"] < 0, doc["delta"]
    assert doc["verdict"] == "pass" and result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--nproc", "2"], 3, "--nproc 2 is smaller than the canary's world size (4 ranks)"),
        (["--latency-floor-us", "3"], 3, "--latency-floor-us does not apply to a physical replay"),
        (["--physical", "mpi"], 3, "--physical must be one of gloo, nccl"),
        (["--bytes-scale", "0"], 3, "--bytes-scale must be positive and at most 1e6, got 0.0"),
    ],
)
def test_bad_physical_runs_are_refused(tmp_path: Path, extra: list[str], code: int, message: str) -> None:
    canary = small_canary(tmp_path)
    argv = ["replay", str(canary), "-o", str(tmp_path / "r.json")]
    argv += extra if "--physical" in extra else ["--physical", "gloo", *extra]
    result = runner.invoke(app, argv)
    assert result.exit_code == code and message in result.output, result.output
    assert not (tmp_path / "r.json").exists()


def test_a_custom_op_and_a_missing_engine_are_refused(tmp_path: Path) -> None:
    trace = tmp_path / "custom.trace.json"
    events = [{"op": "barrier_all", "custom_op": True, "bytes": 8, "ranks": 2, "gap_us": 1.0}] * 2
    trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    commcanary.compile(trace).write(tmp_path / "c.json")
    result = runner.invoke(
        app, ["replay", str(tmp_path / "c.json"), "--physical", "gloo", "-o", str(tmp_path / "r.json")]
    )
    assert result.exit_code == 3 and "custom op 'barrier_all'" in result.output, result.output
    if not torch.cuda.is_available():
        canary = small_canary(tmp_path)
        result = runner.invoke(
            app, ["replay", str(canary), "--physical", "nccl", "-o", str(tmp_path / "r.json")]
        )
        assert result.exit_code == 3 and "nccl" in result.output.lower(), result.output
    assert not (tmp_path / "r.json").exists()


def test_a_process_that_dies_ends_the_run_with_exit_4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from commcanary.physical.worker import FAULT_VAR

    canary = small_canary(tmp_path)
    monkeypatch.setenv(FAULT_VAR, "1:12")
    result = runner.invoke(
        app,
        ["replay", str(canary), "--physical", "gloo", "-o", str(tmp_path / "r.json"), "--timeout-s", "120"],
    )
    assert result.exit_code == 4, result.output
    assert "replay process of rank 1 failed (exit 9)" in result.output
    assert not (tmp_path / "r.json").exists()
    assert workers_left() == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="--physical nccl needs GPUs; none is visible here")
def test_the_same_code_runs_on_nccl(tmp_path: Path) -> None:
    from commcanary.physical import replay_physical

    canary = small_canary(tmp_path)
    if torch.cuda.device_count() < 4:
        pytest.skip(f"needs 4 GPUs, {torch.cuda.device_count()} visible")
    run = replay_physical(canary, engine="nccl", iterations=1, warmup=1)
    assert run.report.metrics["count"] == 40 and run.report.section("backend")["engine"] == "nccl"


def test_calibrate_fits_the_model_to_measured_runs(tmp_path: Path) -> None:
    from commcanary.physical import replay_physical

    canary = small_canary(tmp_path)
    reports = []
    for i in range(2):
        run = replay_physical(canary, iterations=2, warmup=1)
        reports.append(run.report.write(tmp_path / f"m{i}.json"))
    out = tmp_path / "backend.json"
    result = runner.invoke(app, ["calibrate", *map(str, reports), "--canary", str(canary), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("calibrated: bandwidth=")
    doc = json.loads(out.read_text())
    assert doc["format"] == "commcanary.backend.v1"
    # The ranks shared this host's cores: the reports say how many, and the
    # backend models that sharing.
    cores = len(os.sched_getaffinity(0))
    assert json.loads(reports[0].read_text())["backend"]["host_cpus"] == cores
    from test_schema import report_schema

    jsonschema.Draft202012Validator(report_schema()).validate(json.loads(reports[0].read_text()))
    assert doc["backend"]["host_cpus"] == cores and doc["fitted_from"][0]["host_cpus"] == cores
    # Each rank's CPU time inside its calls, over their wall time: gloo's
    # ranks wait on each other more than they compute.
    shares = [json.loads(r.read_text())["backend"]["rank_cpu_share"] for r in reports]
    assert all(0 < s <= 1 for s in shares), shares
    assert doc["backend"]["rank_cpu_share"] == pytest.approx(float(np.median(shares)), abs=1e-4)
    assert doc["backend"]["floor_per_step"] is True
    errors = {e["op"]: e for e in doc["errors"]}
    assert set(errors) == {"all_reduce", "all_gather", "broadcast", "point_to_point"}
    # The default backend is a GPU's; the fitted one is far closer to gloo here.
    assert all(e["mdape_after_pct"] < e["mdape_before_pct"] for e in errors.values()), errors
    assert all(e["noise_pct"] is not None and e["samples"] > 0 for e in errors.values())
    fitted = tmp_path / "fitted.report.json"
    replayed = runner.invoke(app, ["replay", str(canary), "--backend-file", str(out), "-o", str(fitted)])
    assert replayed.exit_code == 0, replayed.output
    backend = json.loads(fitted.read_text())["backend"]
    assert backend["latency_floor_us"] == doc["backend"]["latency_floor_us"]
    refused = runner.invoke(
        app, ["calibrate", str(fitted), "--canary", str(canary), "-o", str(tmp_path / "b2.json")]
    )
    assert refused.exit_code == 3 and "is not a measured report" in refused.output


def test_validate_model_ranks_configurations_both_ways(tmp_path: Path) -> None:
    canary = small_canary(tmp_path)
    configs = tmp_path / "configs.json"
    configs.write_text(
        json.dumps(
            [
                {"name": "base"},
                {"name": "big", "bytes_scale": 16},
                {"name": "sparse", "compute_fill_scale": 3},
                {"name": "serial", "concurrent_groups": "off"},
            ]
        )
    )
    out = tmp_path / "v.json"
    argv = ["validate-model", str(canary), "--configurations", str(configs), "--runs", "2", "-o", str(out)]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("model validation: ranking agreement ")
    doc = json.loads(out.read_text())
    assert doc["decisions"] == 24 and 0 <= doc["ranking_agreement"] <= 1
    assert doc["configurations"][3]["concurrent_groups"] == "off"
    assert 0 <= doc["run_to_run_agreement"] <= 1 and set(doc["kendall_tau"]) == {
        "median_us",
        "p95_us",
        "p99_us",
        "mean_us",
    }
    # Sixteen times the bytes is slower on average, in the model and on gloo
    # alike (the mean: the 1 MiB all_reduce grows, the small ops hardly do).
    assert doc["model"]["big"]["mean_us"] > doc["model"]["base"]["mean_us"]
    measured = {n: np.median([r["mean_us"] for r in doc["measured"][n]]) for n in ("base", "big")}
    assert measured["big"] > 1.2 * measured["base"], doc["measured"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"name": "a", "bandwidth_gbps": 3}, {"name": "b"}]))
    refused = runner.invoke(
        app, ["validate-model", str(canary), "--configurations", str(bad), "-o", str(out)]
    )
    assert refused.exit_code == 3 and "unknown key 'bandwidth_gbps'" in refused.output, refused.output
    once = runner.invoke(app, [*argv[:4], "--runs", "1"])
    assert once.exit_code == 3 and "at least 2 physical runs" in once.output, once.output


def test_under_torchrun_rank_0_writes_the_measured_report(tmp_path: Path) -> None:
    import subprocess
    import sys

    canary = small_canary(tmp_path)
    out = tmp_path / "launched.json"
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4"]
    argv += ["-m", "commcanary.physical", str(canary), "-o", str(out), "--physical", "gloo"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "measured on gloo: replayed 40 events" in p.stdout
    report = commcanary.Report.from_file(out)
    assert report.metrics["count"] == 40 and report.section("backend")["nproc"] == 4
    assert 0 < report.section("backend")["rank_cpu_share"] <= 1
    assert workers_left() == []
