"""The gate over repeated runs: intervals, the interval verdict, ``inconclusive``,
and the refusals. Measured runs here are the model's columns with seeded
multiplicative noise (per run and per sample), so the statistics are tested
without processes; the physical harness is ``benches/gate_noise.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

import commcanary
from commcanary import _core
from commcanary.cli import app
from commcanary.compare import compare
from commcanary.compare_runs import compare_runs
from commcanary.errors import InputError
from commcanary.replay import Report
from conftest import EXAMPLES


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("runs")
    return commcanary.compile(EXAMPLES / "llama70b_tp8_trace_long.json").write(tmp / "c.json")


def _measured(canary: Path, rng: np.random.Generator, slowdown: float = 1.0, run_cv: float = 0.02) -> Report:
    """A 'measured' run: the model's columns, each collective stretched by a
    per-run drift and per-sample noise (and ``slowdown``)."""
    run = commcanary.replay(canary, include_samples=True)
    s = run.samples
    assert s is not None
    drift = rng.lognormal(0.0, run_cv)
    noise = rng.lognormal(0.0, 0.05, size=len(s["completion_us"]))
    start = np.asarray(s["collective_start_us"])
    completion = start + (np.asarray(s["completion_us"]) - start) * drift * noise * slowdown
    raw = _core.measured_report(
        str(canary),
        first_arrival_us=s["first_arrival_us"],
        last_arrival_us=s["last_arrival_us"],
        last_entry_us=start,
        completion_us=completion,
        avg_rank_wait_us=s["avg_rank_wait_us"],
        measurement={
            "engine": "gloo",
            "host": "testhost",
            "torch_version": "test",
            "nproc": 8,
            "iterations": 1,
            "warmup": 0,
            "compute_fill": "sleep",
            "compute_fill_scale": 1.0,
            "bytes_scale": 1.0,
        },
        include_samples=True,
    )
    return Report.of_run(raw, str(canary), has_samples=True)


def _results(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["metric"], e["threshold_result"]) for e in doc["evaluations"]]


def test_model_runs_give_the_one_run_verdict_and_never_inconclusive(canary: Path) -> None:
    slower = commcanary.Backend(latency_floor_us=12.0)
    base = [commcanary.replay(canary, include_samples=True) for _ in range(3)]
    cand = [commcanary.replay(canary, include_samples=True, backend=slower) for _ in range(2)]
    one = compare(base[0], cand[0])
    for b, c in ((base[:2], cand), (base, cand[:1]), (base, cand)):
        many = compare_runs(b, c)
        assert many["verdict"] == one["verdict"] == "fail"
        assert _results(many) == _results(one)
        assert all(
            e["interval"]["low"] == e["interval"]["high"] for e in many["evaluations"] if "interval" in e
        )
    same = compare_runs(base, base[:2])
    assert same["verdict"] == "pass" and all(r["level"] != "inconclusive" for r in same["reasons"])


def test_noise_alone_rarely_fails_and_a_real_slowdown_fails(canary: Path) -> None:
    rng = np.random.default_rng(7)
    aa, ab = [], []
    for _ in range(20):
        base = [_measured(canary, rng) for _ in range(4)]
        aa.append(compare_runs(base, [_measured(canary, rng) for _ in range(4)], resamples=500)["verdict"])
        ab.append(
            compare_runs(base, [_measured(canary, rng, 3.0) for _ in range(4)], resamples=500)["verdict"]
        )
    assert aa.count("fail") <= 1, aa
    assert set(aa) <= {"pass", "warn", "inconclusive", "fail"}
    assert ab.count("fail") >= 19, ab


def test_too_few_runs_and_a_straddled_threshold_are_inconclusive(canary: Path) -> None:
    rng = np.random.default_rng(3)
    base = [_measured(canary, rng) for _ in range(2)]
    cand = [_measured(canary, rng) for _ in range(2)]
    doc = compare_runs(base, cand, resamples=300)
    assert doc["verdict"] == "inconclusive"
    assert [r["code"] for r in doc["reasons"] if r["level"] == "inconclusive"][-2:] == ["too_few_runs"] * 2
    # Very noisy runs with a slowdown near the threshold cannot be told apart.
    noisy = np.random.default_rng(5)
    base = [_measured(canary, noisy, run_cv=0.25) for _ in range(3)]
    cand = [_measured(canary, noisy, 1.1, run_cv=0.25) for _ in range(3)]
    doc = compare_runs(base, cand, resamples=300)
    assert doc["verdict"] == "inconclusive"
    assert any(r["code"] == "inconclusive_regression" for r in doc["reasons"])


def test_the_document_validates_and_is_deterministic(canary: Path) -> None:
    from importlib.resources import files

    schema = json.loads((files("commcanary") / "schemas" / "comparison.schema.json").read_text())
    rng = np.random.default_rng(11)
    base = [_measured(canary, rng) for _ in range(3)]
    cand = [_measured(canary, rng, 3.0) for _ in range(3)]
    one = compare_runs(base, cand, resamples=400, seed=4)
    assert one == compare_runs(base, cand, resamples=400, seed=4)
    jsonschema.Draft202012Validator(schema).validate(one)
    assert one["runs"]["baseline"] == 3 and one["runs"]["confidence"] == 0.95


def test_sides_must_be_one_configuration_and_of_one_kind(canary: Path) -> None:
    rng = np.random.default_rng(1)
    model = commcanary.replay(canary, include_samples=True)
    measured = [_measured(canary, rng) for _ in range(3)]
    with pytest.raises(InputError, match="mixes model and measured reports"):
        compare_runs([model, *measured], measured)
    with pytest.raises(InputError, match="mixes configurations"):
        compare_runs(
            [model, commcanary.replay(canary, backend=commcanary.Backend(latency_floor_us=9.0))], [model]
        )
    with pytest.raises(InputError, match="compare a model report with a measured one: calibrate the model"):
        compare_runs([model, model], measured)
    with pytest.raises(InputError, match="compare a model report with a measured one: calibrate"):
        compare(model, measured[0])
    with pytest.raises(InputError, match="no reports"):
        compare_runs([], [model])


def test_the_command_takes_directories_and_exits_by_verdict(canary: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    for side, slowdown in (("a", 1.0), ("b", 1.0), ("slow", 3.0)):
        (tmp_path / side).mkdir()
        for i in range(4):
            _measured(canary, rng, slowdown).write(tmp_path / side / f"r{i}.json")
    (tmp_path / "few").mkdir()
    for i in range(2):
        _measured(canary, rng).write(tmp_path / "few" / f"r{i}.json")
    runner = CliRunner()

    def gate(base: str, cand: str) -> Any:
        out = tmp_path / f"{base}-{cand}.json"
        done = runner.invoke(
            app,
            [
                "compare",
                "--baseline",
                str(tmp_path / base),
                "--candidate",
                str(tmp_path / cand),
                "-o",
                str(out),
            ],
        )
        return done, json.loads(out.read_text()) if out.exists() else None

    done, doc = gate("a", "slow")
    assert done.exit_code == 1 and doc["verdict"] == "fail", done.output
    assert done.output.startswith("comparison verdict: fail (4 baseline runs, 4 candidate runs)")
    done, doc = gate("a", "few")
    assert done.exit_code == 5 and doc["verdict"] == "inconclusive", done.output
    done, doc = gate("a", "b")
    assert done.exit_code in (0, 5) and doc["verdict"] in ("pass", "warn", "inconclusive"), done.output
    missing = runner.invoke(
        app, ["compare", "-o", str(tmp_path / "x.json"), "--baseline", str(tmp_path / "a")]
    )
    assert missing.exit_code == 2 and "give a baseline and a candidate" in missing.output


def test_a_policy_calibrated_on_aa_runs_is_applied_and_recorded(canary: Path, tmp_path: Path) -> None:
    from commcanary.gate_policy import Policy, calibrate_policy

    rng = np.random.default_rng(9)
    aa = [_measured(canary, rng) for _ in range(8)]
    policy = calibrate_policy(aa, runs_per_side=4)
    t = policy.thresholds
    assert t.median_threshold_pct >= 1.0 and t.median_absolute_threshold_us >= 1.0
    assert t.hidden_drop_threshold_points >= 1.0 and policy.min_runs == 4
    stats = {s["statistic"]: s for s in (policy.calibration or {})["statistics"]}
    median = stats["overall.median"]
    assert median["threshold_pct"] == max(1.0, 1.5 * median["drift_pct"])
    assert median["detectable_pct"] > median["threshold_pct"]
    written = policy.write(tmp_path / "p.json")
    from importlib.resources import files

    schema = json.loads((files("commcanary") / "schemas" / "gate_policy.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(json.loads((tmp_path / "p.json").read_text()))
    again = Policy.read(tmp_path / "p.json")
    assert again.sha256 == written.sha256 and again.thresholds == policy.thresholds
    assert again.calibration is not None and again.calibration["runs"] == 8
    doc = compare_runs(aa[:4], [_measured(canary, rng, 3.0) for _ in range(4)], policy=again)
    assert doc["verdict"] == "fail" and doc["runs"]["policy_sha256"] == written.sha256
    assert doc["thresholds"] == again.thresholds.resolved()
    noisy = [_measured(canary, rng, run_cv=0.5) for _ in range(4)]
    loud = compare_runs(aa[:4], noisy, policy=again)
    assert loud["verdict"] in ("inconclusive", "fail")
    assert any(r["code"] == "noisier_than_calibrated" for r in loud["reasons"])
    short = compare_runs(aa[:3], aa[3:6], policy=again)
    assert short["verdict"] == "inconclusive"
    assert [r["code"] for r in short["reasons"]].count("too_few_runs") == 2
    with pytest.raises(InputError, match="model's replays have no noise"):
        calibrate_policy([commcanary.replay(canary)] * 3)
    with pytest.raises(InputError, match="at least two runs"):
        calibrate_policy(aa[:1])


def test_gate_calibrate_and_compare_policy_on_the_command_line(canary: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    for side, slowdown, n in (("aa", 1.0, 6), ("base", 1.0, 3), ("slow", 3.0, 3)):
        (tmp_path / side).mkdir()
        for i in range(n):
            _measured(canary, rng, slowdown).write(tmp_path / side / f"r{i}.json")
    runner = CliRunner()
    policy = tmp_path / "policy.json"
    done = runner.invoke(
        app, ["gate", "calibrate", str(tmp_path / "aa"), "-o", str(policy), "--runs-per-side", "3"]
    )
    assert done.exit_code == 0, done.output
    assert done.output.startswith("calibrated on 6 runs: fail above median ")
    assert "overall.median" in done.output and "wrote gate policy: " in done.output
    out = tmp_path / "cmp.json"
    args = [
        "compare",
        "--baseline",
        str(tmp_path / "base"),
        "--candidate",
        str(tmp_path / "slow"),
        "-o",
        str(out),
    ]
    done = runner.invoke(app, [*args, "--policy", str(policy)])
    assert done.exit_code == 1, done.output
    assert json.loads(out.read_text())["runs"]["policy_sha256"] == json.loads(
        json.dumps(__import__("hashlib").sha256(policy.read_bytes()).hexdigest())
    )
    # A signed policy verifies; a changed one is refused, nothing written.
    assert runner.invoke(app, ["keygen", "-o", str(tmp_path / "k.pem")]).exit_code == 0
    for path in [policy, *(tmp_path / "base").iterdir(), *(tmp_path / "slow").iterdir()]:
        if path.suffix == ".json":
            assert runner.invoke(app, ["sign", str(path), "--key", str(tmp_path / "k.pem")]).exit_code == 0
    trusted = ["--trusted-keys", str(tmp_path / "k.pem.pub")]
    out.unlink()
    done = runner.invoke(app, [*args, "--policy", str(policy), *trusted])
    assert done.exit_code == 1 and out.exists(), done.output
    out.unlink()
    policy.write_bytes(policy.read_bytes().replace(b'"min_runs":3', b'"min_runs":2'))
    done = runner.invoke(app, [*args, "--policy", str(policy), *trusted])
    assert done.exit_code == 3 and not out.exists(), done.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"format":"commcanary.gate_policy.v1","confidence":2}')
    done = runner.invoke(app, [*args, "--policy", str(bad)])
    assert done.exit_code == 3 and "is not a usable gate policy" in done.output


def test_ci_outputs_of_a_gate(canary: Path, tmp_path: Path) -> None:
    """JUnit (read by junitparser), SARIF 2.1.0 (read by sarif-pydantic's model)
    and the Markdown summary, also appended to $GITHUB_STEP_SUMMARY."""
    import junitparser
    from sarif_pydantic import Sarif

    rng = np.random.default_rng(6)
    for side, slowdown, n in (("base", 1.0, 3), ("slow", 3.0, 3), ("few", 1.0, 2)):
        (tmp_path / side).mkdir()
        for i in range(n):
            _measured(canary, rng, slowdown).write(tmp_path / side / f"r{i}.json")
    runner = CliRunner()
    step = tmp_path / "step.md"
    step.write_text("earlier\n")
    out = {k: tmp_path / f"out.{k}" for k in ("json", "xml", "sarif", "md")}
    args = ["compare", "--baseline", str(tmp_path / "base"), "--candidate", str(tmp_path / "slow")]
    args += ["-o", str(out["json"]), "--junit", str(out["xml"]), "--sarif", str(out["sarif"])]
    done = runner.invoke(app, [*args, "--summary-md", str(out["md"])], env={"GITHUB_STEP_SUMMARY": str(step)})
    assert done.exit_code == 1, done.output
    doc = json.loads(out["json"].read_text())
    gated = [e for e in doc["evaluations"] if not e["metric"].startswith("uncertainty.")]
    xml = junitparser.JUnitXml.fromfile(str(out["xml"]))
    cases = [case for suite in xml for case in suite]
    assert len(cases) == len(gated)
    failed = {case.name for case in cases if any(isinstance(r, junitparser.Failure) for r in case.result)}
    assert "overall.median" in failed
    assert len(failed) == sum(1 for e in gated if e["threshold_result"] == "fail")
    log = json.loads(out["sarif"].read_text())
    Sarif.model_validate(log)
    oasis = json.loads((Path(__file__).parent / "data" / "sarif" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(oasis).validate(log)
    broken = json.loads(json.dumps(log))
    broken["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(oasis).validate(broken)
    assert log["version"] == "2.1.0"
    results = log["runs"][0]["results"]
    assert {r["level"] for r in results} <= {"error", "warning", "note"}
    names = {loc["fullyQualifiedName"] for r in results for loc in r["locations"][0]["logicalLocations"]}
    assert "overall.median" in names and any(n.startswith(("phase/", "operation/")) for n in names)
    summary = out["md"].read_text()
    assert summary.startswith("## commcanary gate: **fail** (3 baseline runs, 3 candidate runs)")
    assert step.read_text() == "earlier\n" + summary
    # Inconclusive is a skipped test case with its reason; one run per side works too.
    runner.invoke(
        app,
        [
            "compare",
            "--baseline",
            str(tmp_path / "base"),
            "--candidate",
            str(tmp_path / "few"),
            "-o",
            str(out["json"]),
            "--junit",
            str(out["xml"]),
        ],
    )
    xml = junitparser.JUnitXml.fromfile(str(out["xml"]))
    props = {p.name: p.value for suite in xml for p in suite.properties()}
    assert props["verdict"] == "inconclusive"
    one = tmp_path / "one.xml"
    files = sorted((tmp_path / "base").iterdir())
    done = runner.invoke(
        app, ["compare", str(files[0]), str(files[1]), "-o", str(tmp_path / "one.json"), "--junit", str(one)]
    )
    assert done.exit_code in (0, 1) and junitparser.JUnitXml.fromfile(str(one))
