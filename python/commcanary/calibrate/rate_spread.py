"""Fitting the spread of a host's transfer rate to measured latencies (part
of ``calibrate``).

On a host shared by many ranks, a large message's copies run at a speed
that varies from one occurrence to the next (caches, memory bandwidth, the
other processes' share of the cores): measured on 4 gloo ranks over 2
cores, the signatures of 10 to 500 ms spread by a factor that is about the
same at every size, about 1.3 from the 10th percentile to the median and
again to the 90th. The model multiplies each occurrence's bandwidth term
``T`` by ``exp(sigma·z)``, ``z`` standard normal (the replay's
``rate_spread``), and leaves its start-up term ``A`` (the floors) alone:
the median stays ``A + T``, where the floor and bandwidth were fitted.

What is measured is the lower half of each signature's latencies in one
report: ``ln(median / p25)``, which stalls (they only add) leave nearly
untouched. The model's is ``ln((A + T) / (A + T·exp(-0.6745·sigma)))``. ``sigma``
is the value on a grid that minimises the count-weighted absolute
difference over the signatures whose bandwidth term is at least 80% of
their latency: below that the floors' stalls set the lower half too (a
4-rank all_reduce of 1 MiB on 2 cores spreads as if ``sigma`` were 0.6 to
1.2, one of 64 MiB as if 0.15 to 0.23), and stalls are fitted there
instead.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

#: The standard normal's 25th percentile, negated.
_Z25 = 0.6744897501960817
#: A signature informs the fit with at least this many occurrences in one
#: report, and a bandwidth term at least this share of its latency.
MIN_OCCURRENCES = 8
MIN_TRANSFER_SHARE = 0.8
#: The candidate spreads: 0 to 1.5 in steps of 0.005.
_GRID = np.round(np.arange(0.0, 1.5 + 1e-9, 0.005), 3)


def transfer_dominated(
    startup: npt.NDArray[np.float64], transfer: npt.NDArray[np.float64]
) -> npt.NDArray[np.bool_]:
    """Which signatures (model medians ``A``, ``T``) the spread is fitted on."""
    total = np.maximum(startup + transfer, 1e-9)
    return np.asarray(transfer / total >= MIN_TRANSFER_SHARE)


def lower_spread(values: npt.NDArray[np.float64]) -> float:
    """``ln(median / p25)`` of one signature's measured latencies."""
    p25, p50 = np.percentile(values, [25.0, 50.0])
    return math.log(max(float(p50), 1e-9) / max(float(p25), 1e-9))


def fit_rate_spread(
    measured: npt.NDArray[np.float64],
    startup: npt.NDArray[np.float64],
    transfer: npt.NDArray[np.float64],
    count: npt.NDArray[np.float64],
) -> float:
    """The ``sigma`` of the grid closest to the measured lower spreads
    ``measured`` of signatures with model terms ``startup``, ``transfer``
    seen ``count`` times (all transfer-dominated); 0 without any."""
    if len(measured) == 0:
        return 0.0
    total = startup + transfer
    # Rows: candidate spreads; columns: signatures.
    low = startup[None, :] + transfer[None, :] * np.exp(-_Z25 * _GRID[:, None])
    model = np.log(total[None, :] / np.maximum(low, 1e-9))
    loss = np.abs(model - measured[None, :]) @ count
    return float(_GRID[int(np.argmin(loss))])
