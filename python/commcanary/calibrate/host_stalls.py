"""Fitting a host's stalls to measured latencies (part of ``calibrate``).

On a host with more processes than cores, a collective now and then waits
a scheduling quantum or several for a descheduled member. Every step of the
operation's algorithm hands off to a peer, so every step can wait: the
model stalls each step with probability ``q`` and each stall is
exponential with mean ``S`` (the replay's ``stall_probability`` and
``stall_mean_us`` under ``floor_per_step``). An occurrence of ``k`` steps
then stalls ``m ~ Binomial(k, q)`` times and waits an Erlang sum:

    P(X > t) = sum over m >= 1 of Bin(m; k, q) * exp(-t/S) * sum_{j<m} (t/S)^j / j!

What is measured is each latency's excess over its signature's median in
the same report (over the host stretch, which the model applies to the
stalls too). ``(q, S)`` is the pair on a log grid whose predicted share of
excesses above the measured 90th, 95th, 98th and 99th percentiles is
closest, in log share, to the measured one: the upper tail, above the
jitter of latencies that did not stall. ``q`` is bounded so that the
calibrated operation with the most steps stalls on at most 45% of its
occurrences: below one half, the medians stay where the floor and
bandwidth were fitted.

With one step everywhere this is the tail ``q·exp(-t/S)`` of one stall per
occurrence.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt

#: The percentiles of the excesses the fit matches.
PERCENTILES = (90.0, 95.0, 98.0, 99.0)
#: The largest share of an operation's occurrences that may stall.
MAX_STALLED_SHARE = 0.45
#: Binomial terms beyond this many stalls are dropped (their mass is
#: below 1e-12 for the probabilities fitted here).
_MAX_STALLS = 64


@functools.cache
def _log_binomials(k: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Stall counts ``m = 1..min(k, _MAX_STALLS)`` and ``ln C(k, m)``: the
    same for every ``(q, S)`` of the grid, so computed once per ``k``."""
    m = np.arange(1, min(k, _MAX_STALLS) + 1, dtype=np.float64)
    coef = np.array([math.lgamma(k + 1) - math.lgamma(i + 1) - math.lgamma(k - i + 1) for i in m])
    return m, coef


def stalled_survival(
    steps: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    q: float,
    mean_us: float,
    t: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """``P(X > t)`` for each threshold ``t``, averaged over occurrences of
    ``steps`` steps weighted by ``weights`` (their counts)."""
    x = t / mean_us
    # Q(m, x) = P(Erlang(m) > x) for m = 1.._MAX_STALLS, by the Poisson sum.
    terms = np.exp(-x)[None, :] * np.cumprod(
        np.vstack([np.ones_like(x)] + [x / j for j in range(1, _MAX_STALLS)]), axis=0
    )
    erlang = np.cumsum(terms, axis=0)  # row m-1: sum_{j<m}
    total = np.zeros_like(t)
    for k, w in zip(steps, weights, strict=True):
        m, log_binomial = _log_binomials(int(k))
        log_pmf = log_binomial + m * math.log(q) + (k - m) * math.log1p(-q)
        total += w * (np.exp(log_pmf) @ erlang[: len(m)])
    return total / float(np.sum(weights))


def fit_stalls(
    excess: npt.NDArray[np.float64], steps: npt.NDArray[np.float64], most_steps: float = 1.0
) -> tuple[float, float]:
    """The per-step ``(q, S)`` of the excesses (µs over their signature's
    median, one per occurrence) of occurrences of ``steps`` steps, ``q``
    bounded for ``most_steps`` or the most of ``steps`` if more (the
    calibrated operation with the most steps); ``(0, 0)`` when fewer than
    20 or no tail."""
    if len(excess) < 20:
        return 0.0, 0.0
    t = np.percentile(excess, PERCENTILES)
    if not (t[0] > 0 and np.all(np.diff(t) > 0)):
        return 0.0, 0.0
    measured = np.log(1.0 - np.array(PERCENTILES) / 100.0)
    ks, counts = np.unique(np.maximum(1.0, np.round(steps)), return_counts=True)
    q_top = 1.0 - (1.0 - MAX_STALLED_SHARE) ** (1.0 / max(float(ks.max()), round(most_steps)))
    best = (math.inf, 0.0, 0.0)
    weights = counts.astype(np.float64)
    for q in np.geomspace(1e-3, q_top, 40):
        for s in np.geomspace(t[0] / 20.0, t[-1] * 4.0, 48):
            share = stalled_survival(ks, weights, float(q), float(s), t)
            loss = float(np.sum((np.log(np.maximum(share, 1e-12)) - measured) ** 2))
            if loss < best[0]:
                best = (loss, float(q), float(s))
    # Rounded down, so a q at its bound stays within it.
    return math.floor(best[1] * 1e6) / 1e6, round(best[2], 3)
