"""The replay model's collective latency of every occurrence, split into
the terms calibration fits (:mod:`commcanary.calibrate`).

At a backend ``β`` the model's latency of sample ``i`` is

    c_i = s_i·(m_i·F_i + b_i·x_i) + k_i

with ``F_i`` and ``x_i = 1/B_i`` the latency floor and inverse bandwidth
``β`` gives its operation (an ``op_overrides`` entry or the backend's own;
a ``send`` or ``recv`` without one takes ``point_to_point``'s), ``m_i`` the
steps of its algorithm that pay the floor (``_core.algorithm_steps`` under
``floor_per_step``, else 1), ``b_i`` its bandwidth term at 1 Gbit/s,
``s_i`` the host stretch (``max(1, rank_cpu_share·running ranks /
host_cpus)`` when it starts; 1 without ``host_cpus``) and ``k_i``
the rest (the per-rank start-up term, noise; stalls and the rate spread
are left out, to be fitted to what the measurements show about their
medians). Nothing of the model
is restated: ``b_i`` is the difference of two replays without host sharing
at floor 0 (a 1 Gbit/s and a vanishing bandwidth), ``s_i`` the change of a
replay at ``β`` when every floor rises by 1 µs, over ``m_i``, snapped to
the stretches the host allows (multiples of ``rank_cpu_share/host_cpus``), and ``k_i`` what is left
of the replay at ``β``. With ``β``'s schedule held the latency is linear in
``(F, x)``; the stretch moves with the schedule, so calibration refits and
replays until its backend stops changing. The terms are read with every
op's floors and transfer summed: an op the backend pipelines
(``pipelined_ops``) costs ``s_i·max(m_i·F_i, b_i·x_i) + k_i`` of the same
terms, its stretch read off the summed schedule (a floor hidden under a
transfer moves nothing to read it by).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from commcanary import _core
from commcanary.replay import Backend, replay

__all__ = ["ModelTerms", "bandwidth_term", "model_terms", "pipelined"]

#: A bandwidth whose term is negligible (Gbit/s).
VANISHING_BANDWIDTH = 1e9
#: How far every floor rises to read the host stretch off the model, µs.
_FLOOR_STEP_US = 1.0
#: How far a read stretch may lie from one the host allows and still be
#: taken as read (beyond it the step moved the schedule).
_SNAP_TOLERANCE = 0.01

Floats = npt.NDArray[np.float64]


class ModelTerms(NamedTuple):
    """Per sample at one backend: ``k_i``, ``s_i·b_i`` (the bandwidth term
    at 1 Gbit/s, stretched), ``s_i`` and ``s_i·m_i`` (what one µs of floor
    adds; module doc)."""

    constant: Floats
    per_gbps: Floats
    stretch: Floats
    per_floor: Floats

    def latency(self, floor: float | Floats, x: float | Floats, pipelined: bool = False) -> Floats:
        """The model's latency per sample at floor ``F`` and ``1/B = x``:
        ``k + s·m·F + s·b·x``, or pipelined ``k + max(s·m·F, s·b·x)``."""
        if pipelined:
            return self.constant + np.maximum(self.per_floor * floor, self.per_gbps * x)
        return self.constant + self.per_floor * floor + self.per_gbps * x

    @classmethod
    def unshared(cls, constant: Floats, steps: Floats) -> ModelTerms:
        """Terms of ``constant`` alone: no bandwidth term, no stretch."""
        return cls(constant, np.zeros_like(constant), np.ones_like(constant), steps)


def collective_us(canary: str, backend: Backend, iterations: int) -> Floats:
    """The model's collective latency of every sample of ``canary``."""
    run = replay(canary, backend=backend, iterations=iterations, include_samples=True)
    assert run.samples is not None
    return np.asarray(run.samples["collective_us"], dtype=np.float64)


def bandwidth_term(canary: str, scaled: Backend, iterations: int) -> Floats:
    """``b_i``: each sample's bandwidth term at 1 Gbit/s, unstretched, with
    the message and gap scales of ``scaled``."""
    at = [scaled.replace(bandwidth_gbps=bw, latency_floor_us=0.0) for bw in (1.0, VANISHING_BANDWIDTH)]
    return collective_us(canary, at[0], iterations) - collective_us(canary, at[1], iterations)


def op_floors(backend: Backend, ops: npt.NDArray[np.str_]) -> tuple[Floats, Floats]:
    """``(F_i, x_i)`` per sample: the floor and inverse bandwidth of its op."""
    own = {op: (f, 1.0 / bw) for op, f, bw in backend.op_overrides}
    overall = (backend.latency_floor_us, 1.0 / backend.bandwidth_gbps)
    transfer = own.get("point_to_point", overall)

    def of(op: str) -> tuple[float, float]:
        return own.get(op, transfer if op in ("send", "recv") else overall)

    pairs = np.array([of(str(op)) for op in ops], dtype=np.float64).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


def pipelined(backend: Backend, ops: npt.NDArray[np.str_]) -> npt.NDArray[np.bool_]:
    """Per sample, whether the backend pipelines its op (a ``send`` or
    ``recv`` as ``point_to_point``)."""
    named = set(backend.pipelined_ops)
    p2p = "point_to_point" in named
    return np.array([str(op) in named or (p2p and str(op) in ("send", "recv")) for op in ops], dtype=bool)


def algorithm_steps(ops: npt.NDArray[np.str_], ranks: npt.NDArray[np.int64]) -> Floats:
    """Per sample, the steps of its op's algorithm over its group
    (``_core.algorithm_steps``, asked once per distinct op and size)."""
    pairs = list(zip((str(o) for o in ops), (int(n) for n in ranks), strict=True))
    known = {pair: _core.algorithm_steps(*pair) for pair in set(pairs)}
    return np.array([known[pair] for pair in pairs], dtype=np.float64)


def model_terms(
    canary: str,
    backend: Backend,
    iterations: int,
    ops: npt.NDArray[np.str_],
    algorithm: Floats,
    b: Floats,
) -> ModelTerms:
    """The terms of ``canary``'s samples (ops ``ops`` of ``algorithm``
    steps, bandwidth terms ``b``) at ``backend`` without its stalls and
    rate spread (module doc): calibration fits medians to them, and stalls
    and spread to what lies about them."""
    backend = backend.replace(stall_probability=0.0, stall_mean_us=0.0, rate_spread=0.0, pipelined_ops=())
    c = collective_us(canary, backend, iterations)
    steps = algorithm if backend.floor_per_step else np.ones_like(c)
    stretch = np.ones_like(c)
    if backend.host_cpus > 0:
        raised = backend.replace(
            latency_floor_us=backend.latency_floor_us + _FLOOR_STEP_US,
            op_overrides=tuple((op, f + _FLOOR_STEP_US, bw) for op, f, bw in backend.op_overrides),
        )
        read = (collective_us(canary, raised, iterations) - c) / _FLOOR_STEP_US
        stretch = _snap(read / steps, backend.host_cpus / backend.rank_cpu_share)
    floors, xs = op_floors(backend, ops)
    per_gbps = stretch * b
    per_floor = stretch * steps
    return ModelTerms(c - per_floor * floors - per_gbps * xs, per_gbps, stretch, per_floor)


def _snap(read: Floats, cpus: float) -> Floats:
    """The stretch the host allows (a multiple of ``1/cpus``, ``cpus`` in
    ranks' demand) nearest each read one; where none is
    near (the raised floors moved the schedule there), the median of those
    that are."""
    snapped = np.maximum(1.0, np.round(read * cpus) / cpus)
    good = np.abs(read - snapped) <= _SNAP_TOLERANCE
    fallback = float(np.median(snapped[good])) if good.any() else 1.0
    return np.where(good, snapped, fallback)
