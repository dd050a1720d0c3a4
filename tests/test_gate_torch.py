"""``gate run`` on real gloo processes: the runs a policy demands, then
``compare --policy`` over the directory."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from commcanary.compare import Thresholds
from commcanary.gate_policy import Policy


def test_gate_run_measures_what_the_policy_demands(tmp_path: Path) -> None:
    events = [
        {"op": "all_reduce", "ranks": [0, 1], "bytes": 1 << 16, "group": "w", "gap_us": 200.0}
        for _ in range(4)
    ]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    canary = commcanary.compile(trace).write(tmp_path / "c.json")
    policy = Policy(Thresholds(), min_runs=2).write(tmp_path / "p.json")
    runner = CliRunner()
    base = ["gate", "run", str(canary), "--policy", str(tmp_path / "p.json"), "--physical", "gloo"]
    refused = runner.invoke(app, [*base, "-o", str(tmp_path / "few"), "--runs", "1"])
    assert refused.exit_code == 2 and "at least the policy's 2 runs" in refused.output
    assert not (tmp_path / "few").exists()
    done = runner.invoke(app, [*base, "-o", str(tmp_path / "obs"), "--timeout-s", "120"])
    assert done.exit_code == 0, done.output
    runs = sorted((tmp_path / "obs").glob("run-*.json"))
    assert [p.name for p in runs] == ["run-001.json", "run-002.json"]
    out = tmp_path / "cmp.json"
    obs = str(tmp_path / "obs")
    gate = runner.invoke(
        app,
        [
            "compare",
            "--policy",
            str(tmp_path / "p.json"),
            "--baseline",
            obs,
            "--candidate",
            obs,
            "-o",
            str(out),
        ],
    )
    assert gate.exit_code in (0, 5), gate.output
    assert json.loads(out.read_text())["runs"]["policy_sha256"] == policy.sha256
    again = runner.invoke(app, [*base, "-o", str(tmp_path / "obs")])
    assert again.exit_code == 2 and "already holds runs" in again.output
