"""validate-model measures round by round: each configuration once per round,
so a host that drifts over the campaign shifts every configuration alike.

The physical replay is replaced by a host whose speed halves after every
call: measured configuration-major, the last configuration would look the
slowest whatever its size; measured round by round, the ranking holds."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import commcanary
import commcanary.physical
from commcanary.validate import METRICS, validate_model

ROOT = Path(__file__).resolve().parents[1]


def canary(tmp_path: Path) -> Path:
    events = [
        {"op": "all_reduce", "ranks": [0, 1], "bytes": 1 << 20, "group": "w", "gap_us": 100.0}
        for _ in range(4)
    ]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    return commcanary.compile(trace, lossless_timing=True).write(tmp_path / "c.canary.json")


def test_physical_runs_go_round_by_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []

    def drifting_host(_canary: Any, **kw: Any) -> Any:
        calls.append(kw["bytes_scale"])
        slowdown = 2.0 ** len(calls)
        value = kw["bytes_scale"] * 1000.0 * slowdown
        return SimpleNamespace(report=SimpleNamespace(metrics=dict.fromkeys(METRICS, value)))

    monkeypatch.setattr(commcanary.physical, "replay_physical", drifting_host)
    configs = [{"name": "big", "bytes_scale": 64}, {"name": "small"}, {"name": "tiny", "bytes_scale": 0.25}]
    seen: list[tuple[int, int]] = []
    result = validate_model(canary(tmp_path), configs, runs=3, progress=lambda d, t: seen.append((d, t)))
    assert calls == [64, 1, 0.25] * 3
    assert seen == [(i, 9) for i in range(1, 10)]
    # Within a round the drift is a factor 4 at most, less than the sizes'
    # ratios (4 and 64): the measured order is the sizes' order, the model's.
    assert result.agreement == 1.0
    assert result.document["run_to_run_agreement"] == 1.0
