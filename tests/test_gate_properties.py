"""Properties of the core's judgement of one statistic over repeated runs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from commcanary import _core

runs = st.lists(st.floats(min_value=1.0, max_value=1e6, allow_nan=False), min_size=1, max_size=12)


@given(runs, runs, st.integers(min_value=0, max_value=2**32))
@settings(max_examples=60, deadline=None)
def test_the_interval_holds_the_estimate_and_is_seeded(
    base: list[float], cand: list[float], seed: int
) -> None:
    b, c = np.array(base), np.array(cand)
    one = _core.judge_runs(b, c, threshold_abs=1.0, threshold_pct=10.0, resamples=200, seed=seed)
    assert one == _core.judge_runs(b, c, threshold_abs=1.0, threshold_pct=10.0, resamples=200, seed=seed)
    assert one["low"] <= one["estimate"] <= one["high"]
    assert one["low_pct"] is not None and one["high_pct"] is not None and one["estimate_pct"] is not None
    assert one["low_pct"] <= one["estimate_pct"] <= one["high_pct"]
    assert one["verdict"] in ("pass", "warn", "inconclusive", "fail")


@given(
    st.floats(min_value=1.0, max_value=1e6),
    st.integers(min_value=1, max_value=20),
    st.integers(min_value=1, max_value=20),
)
@settings(max_examples=40, deadline=None)
def test_identical_runs_are_judged_as_one_run(value: float, nb: int, nc: int) -> None:
    """No noise, no doubt: a point interval, and the one-run verdict."""
    same = _core.judge_runs(np.full(nb, value), np.full(nc, value), threshold_abs=1.0, threshold_pct=10.0)
    assert (same["low"], same["high"], same["verdict"]) == (0.0, 0.0, "pass")
    slower = _core.judge_runs(
        np.full(nb, value), np.full(nc, value * 1.5 + 2.0), threshold_abs=1.0, threshold_pct=10.0
    )
    assert slower["low"] == slower["high"] and slower["verdict"] == "fail"


@given(runs.filter(lambda v: len(v) >= 2), st.floats(min_value=0.0, max_value=3.0))
@settings(max_examples=40, deadline=None)
def test_a_larger_slowdown_is_never_judged_better(base: list[float], extra: float) -> None:
    b = np.array(base)
    order = {"pass": 0, "warn": 1, "inconclusive": 2, "fail": 3}
    small = _core.judge_runs(b, b * 1.05, threshold_abs=1.0, threshold_pct=10.0, resamples=300, seed=1)
    large = _core.judge_runs(
        b, b * (1.05 + extra), threshold_abs=1.0, threshold_pct=10.0, resamples=300, seed=1
    )
    if small["verdict"] != "warn" and large["verdict"] != "warn":
        assert order[large["verdict"]] >= order[small["verdict"]]
    assert large["estimate"] >= small["estimate"]
