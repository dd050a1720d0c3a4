"""The suite's scoring (benches/faulty_jobs/score.py): a straggler finding no
delay was injected for counts as right only when the program's own clock
shows that rank reaching the step's collective after every other member; a
hang answer is acceptable when right, or when what it leaves open it says
how to settle."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))

from faulty_jobs.score import judge_hang, judge_stragglers, measured_lateness


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


def hang_truth(kind: str | None) -> dict[str, Any]:
    return {
        "expected": {
            "hang": True,
            "root_ranks": [5],
            "category": "desync" if kind else "missed_collective",
            "desync_kind": kind,
            "step_iteration": 2,
            "step_profiler": None,
        },
        "scenario": {"markers": False},
    }


def hang_answer(kind: str | None, confidence: str, settle: list[str], roots: list[int]) -> dict[str, Any]:
    doc = {
        "verdict": "hang",
        "confidence": confidence,
        "root": [{"rank": r, "kind": "no_evidence"} for r in roots],
        "category": "desync",
        "desync_kind": kind,
        "step": {"value": 2, "source": "recovered"},
        "would_settle": settle,
    }
    return {"status": "ok", "document": doc}


def test_a_desync_whose_kind_is_left_open_and_named_is_acceptable_not_right() -> None:
    settle = ["the desynced call in a dump of every rank"]
    judged = judge_hang(hang_truth("size"), hang_answer(None, "medium", settle, [5]))
    assert (judged["right"], judged["acceptable"], judged["confidently_wrong"]) == (False, True, False)
    # Not without saying what would settle it, not at high confidence, not
    # with the wrong root, and not when the kind it names is wrong.
    assert not judge_hang(hang_truth("size"), hang_answer(None, "medium", [], [5]))["acceptable"]
    assert not judge_hang(hang_truth("size"), hang_answer(None, "high", settle, [5]))["acceptable"]
    assert not judge_hang(hang_truth("size"), hang_answer(None, "medium", settle, [4]))["acceptable"]
    assert not judge_hang(hang_truth("size"), hang_answer("dtype", "medium", settle, [5]))["acceptable"]
    assert judge_hang(hang_truth("size"), hang_answer("size", "medium", [], [5]))["right"]
