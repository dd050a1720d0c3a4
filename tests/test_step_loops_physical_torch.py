"""A step loop canary runs on real process groups: `replay --physical gloo` of the real DDP
fixture's loop canary runs every one of its logical events, the flat canary's count. Needs torch
(the `torch` extra; CI installs it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app

pytest.importorskip("torch")

DATA = Path(__file__).parent / "data" / "fixtures" / "kineto" / "gloo_w4_ddp_straggler" / "markers"


def test_a_loop_canary_replays_on_gloo(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    commcanary.import_kineto(str(DATA)).write(trace)
    loop = commcanary.compile(trace)
    loop.write(tmp_path / "loop.canary.json")
    assert json.loads(loop.to_bytes())["format"] == "commcanary.canary.v4"
    result = CliRunner().invoke(
        app,
        [
            "replay",
            str(tmp_path / "loop.canary.json"),
            "--physical",
            "gloo",
            "--iterations",
            "1",
            "--warmup",
            "0",
            "-o",
            str(tmp_path / "measured.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "measured.json").read_bytes())
    assert report["canary"]["format"] == "commcanary.canary.v4"
    assert f"replayed {loop.summary['source_events']} events" in result.output
