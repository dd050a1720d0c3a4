"""The transfer-rate spread fit recovers the spread it is given, from the
lower half of each signature's latencies."""

from __future__ import annotations

import numpy as np
import pytest

from commcanary.calibrate.rate_spread import (
    MIN_TRANSFER_SHARE,
    fit_rate_spread,
    lower_spread,
    transfer_dominated,
)


def _signatures(rng: np.random.Generator, sigma: float, stall_share: float = 0.0) -> tuple[np.ndarray, ...]:
    """Lower spreads of signatures of start-up ``a`` and transfer ``t``
    (µs), each seen 300 times, some latencies with a stall added on top."""
    a = np.array([500.0, 1000.0, 2000.0, 800.0])
    t = np.array([4000.0, 20000.0, 90000.0, 400000.0])
    measured = []
    for ai, ti in zip(a, t, strict=True):
        values = ai + ti * np.exp(sigma * rng.standard_normal(300))
        stalled = rng.random(300) < stall_share
        values[stalled] += rng.exponential(3000.0, int(stalled.sum()))
        measured.append(lower_spread(values))
    return np.array(measured), a, t, np.full(len(a), 300.0)


@pytest.mark.parametrize("sigma", [0.1, 0.2, 0.4])
def test_the_fit_recovers_the_spread_of_the_transfer_term(sigma: float) -> None:
    fitted = fit_rate_spread(*_signatures(np.random.default_rng(11), sigma))
    assert fitted == pytest.approx(sigma, abs=0.04)


def test_stalls_on_a_share_of_occurrences_barely_move_it() -> None:
    fitted = fit_rate_spread(*_signatures(np.random.default_rng(12), 0.2, stall_share=0.1))
    assert fitted == pytest.approx(0.2, abs=0.05)


def test_no_spread_fits_none_and_no_signature_fits_zero() -> None:
    assert fit_rate_spread(*_signatures(np.random.default_rng(13), 0.0)) <= 0.02
    empty = np.array([])
    assert fit_rate_spread(empty, empty, empty, empty) == 0.0


def test_only_transfer_dominated_signatures_inform_it() -> None:
    startup = np.array([100.0, 100.0, 100.0])
    transfer = np.array([10.0, 100.0 * MIN_TRANSFER_SHARE / (1 - MIN_TRANSFER_SHARE), 1e5])
    assert transfer_dominated(startup, transfer).tolist() == [False, True, True]
