"""The per-step host stall fit recovers the stalls it is given."""

from __future__ import annotations

import numpy as np

from commcanary.calibrate.host_stalls import MAX_STALLED_SHARE, fit_stalls, stalled_survival


def _draw(rng: np.random.Generator, steps: np.ndarray, q: float, mean: float) -> np.ndarray:
    stalls = rng.binomial(steps.astype(np.int64), q)
    waits = np.array([rng.exponential(mean, m).sum() for m in stalls])
    return waits + rng.normal(0.0, mean / 50.0, len(steps))


def test_the_fit_recovers_per_step_stalls_from_a_mix_of_step_counts() -> None:
    rng = np.random.default_rng(3)
    steps = np.repeat([1.0, 3.0, 6.0], [3000, 1000, 2000])
    q, s = fit_stalls(_draw(rng, steps, 0.05, 2000.0), steps)
    assert 0.04 <= q <= 0.062, q
    assert 1600.0 <= s <= 2500.0, s


def test_one_step_everywhere_is_one_exponential_stall_per_occurrence() -> None:
    t = np.array([100.0, 1000.0, 5000.0])
    share = stalled_survival(np.array([1.0]), np.array([1.0]), 0.2, 1000.0, t)
    assert np.allclose(share, 0.2 * np.exp(-t / 1000.0))


def test_more_steps_stall_more_often_and_longer() -> None:
    t = np.array([1.0, 3000.0])
    one = stalled_survival(np.array([1.0]), np.array([1.0]), 0.1, 1000.0, t)
    six = stalled_survival(np.array([6.0]), np.array([1.0]), 0.1, 1000.0, t)
    assert six[0] > 4 * one[0] and six[1] > 5 * one[1]
    assert abs(six[0] - (1 - 0.9**6)) < 0.01


def test_the_longest_operation_stalls_on_under_half_its_occurrences() -> None:
    rng = np.random.default_rng(5)
    steps = np.full(2000, 14.0)
    q, _ = fit_stalls(_draw(rng, steps, 0.2, 1000.0), steps)
    assert 1 - (1 - q) ** 14 <= MAX_STALLED_SHARE + 1e-6


def test_no_tail_is_no_stall() -> None:
    assert fit_stalls(np.zeros(100), np.ones(100)) == (0.0, 0.0)
    assert fit_stalls(np.ones(5), np.ones(5)) == (0.0, 0.0)
