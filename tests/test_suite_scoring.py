"""The suite's straggler scoring (benches/faulty_jobs/score.py): a finding no
delay was injected for counts as right only when the program's own clock
shows that rank reaching the step's collective after every other member."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))

from faulty_jobs.score import judge_stragglers, measured_lateness


def call(iteration: int, start_ms: float, site: str = "grad_norm") -> dict[str, Any]:
    return {
        "op": "all_reduce",
        "group": "world",
        "site": site,
        "iteration": iteration,
        "start_ns": int(start_ms * 1e6),
    }


def forward(iteration: int, start_ms: float) -> dict[str, Any]:
    return {"kind": "ddp_forward", "iteration": iteration, "start_ns": int(start_ms * 1e6)}


def truth() -> dict[str, Any]:
    # Iteration 1: rank 1 reaches grad_norm 20 ms after rank 0; iteration 2: on
    # time; iteration 3: it starts DDP's forward (its buffer broadcast) 30 ms late.
    return {
        "ranks": {
            "0": {"comms": [call(1, 100.0), call(2, 200.0)], "events": [forward(3, 300.0)]},
            "1": {"comms": [call(1, 120.0), call(2, 199.0)], "events": [forward(3, 330.0)]},
        },
        "noise": {"robust_sigma_ms": 2.0},
        "fault": {"pairs": []},
        "iteration_profiler_steps": {},
    }


def finding(rank: int, step: int, lag_ms: float) -> dict[str, Any]:
    return {"rank": rank, "step": step, "kind": "late_arrival", "lag_us": lag_ms * 1e3}


def test_lateness_is_measured_against_every_other_member() -> None:
    assert measured_lateness(truth()) == {(1, 1): 20.0, (0, 2): 1.0, (1, 3): 30.0}


def test_a_finding_the_clock_confirms_is_host_confirmed_and_others_stay_false() -> None:
    doc = {
        "step_source": "recovered",
        "findings": [finding(1, 1, 21.0), finding(1, 2, 15.0), finding(0, 2, 9.0)],
    }
    judged = judge_stragglers(truth(), {"status": "ok", "document": doc})
    assert [(f["rank"], f["step"]) for f in judged["host_confirmed"]] == [(1, 1)]
    # rank 0's 1 ms at iteration 2 is under half its 9 ms lag; rank 1 was early there
    assert sorted((f["rank"], f["step"]) for f in judged["false_findings"]) == [(0, 2), (1, 2)]
