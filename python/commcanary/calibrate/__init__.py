"""Calibrating the replay model against measured runs (``commcanary
calibrate``).

The model's collective latency of an occurrence is ``F + c + b / B`` (spec
§4.3): the backend's latency floor ``F``, a term ``c`` that the backend's
floor and bandwidth do not touch (the per-rank start-up term, the model's
deterministic noise), and the bandwidth term ``b / B`` (message bits,
op factor, concurrent groups, pressure over the bandwidth ``B``). ``c`` and
``b`` are read off the model itself, replaying each canary twice (floor 0
at a bandwidth so high its term vanishes, and at 1 Gbit/s), so nothing of
the model is restated here. The fit chooses ``F >= 0`` and ``B > 0``
minimising the absolute relative error of the model's median collective
latency per signature (operation, size, group) against the measured
median, each signature weighted by its occurrences, by iteratively
reweighted least squares (a signature no floor and bandwidth can fit
pulls no harder than its error): once over every operation (the
backend's ``F`` and ``B``), then per operation (an ``op_overrides``
entry: its own ``F`` at the overall ``B``, or its own ``F`` and ``B``
when its measured sizes span a factor of 4 or more and that fits its
medians better with a bandwidth within a factor of 100 of the overall
one: a bandwidth is not read off one size).

The floor is paid once per step of each op's algorithm
(``floor_per_step``: a ring all_reduce over ``n`` ranks ``2(n-1)`` steps,
an all_gather ``n-1``), so a floor fitted on one group size prices
another. For a gloo run the backend also records the host's cores
(``host_cpus``) and the share of a core a rank keeps busy inside a
collective (``rank_cpu_share``, the median of the reports'): while the
running ranks' demand exceeds the cores, the model stretches each latency
and stall by ``rank_cpu_share·running ranks / host_cpus``, so ``F`` and
``B`` are fitted per unstretched rank. Which ranks run together depends on the schedule, and
the schedule on the backend: the terms are read off the model at a
backend (:mod:`commcanary.calibrate.model_terms`), the backend fitted to them, and
the two repeated until the backend stops changing (a few rounds; the
first at the default backend). Each report is replayed at the message and
gap scales it was measured at (``backend.bytes_scale``,
``backend.compute_fill_scale``), so one canary measured at several scales
calibrates each operation's bandwidth over the sizes it spans.

Six more properties of the measured system go into the backend file.
An op's floors and transfer may overlap (``pipelined_ops``): its latency
is then ``max(F·steps, transfer)`` plus the per-rank term, each step
taking the longer of its hand-off and its chunk's transfer. Each op
measured at three sizes or more is also fitted that way (the floors and
bandwidths that fit one signature exactly, searched in pairs: the error
is piecewise linear in each), and keeps the shape that cuts the error of
its medians by a tenth or more; two sizes fit either shape exactly.
Each rank runs one operation at a time (``serialize_ranks``): the physical
replay calls every collective blocking, so a rank still busy on one
communicator enters the next late. Nothing is hidden
(``overlap_efficiency`` 0): the replay fills compute before each
collective, never beside it. And the host's stalls (``stall_probability``,
``stall_mean_us``): on a host with more processes than cores, a collective
now and then waits a scheduling quantum or several for a descheduled
member, at any step of its algorithm, so its latency exceeds its
signature's median by a sum of waits. Each step stalls with ``q`` for an
exponential time of mean ``S``, fitted to the excesses' upper percentiles
(:mod:`commcanary.calibrate.host_stalls`), each the median over the reports of its
value in one (one run disturbed throughout by another load on the host
does not set every replay's tail). The operation with the most steps
stalls on under one half of its occurrences, so medians stay where they
were fitted, while means and tails grow (and a queue grows with the mean,
not the median). Stalls are fitted on the signatures whose bandwidth term
is under 80% of their latency; above it, the spread of the host's transfer
rate (``rate_spread``): each occurrence's bandwidth term times
``exp(sigma·z)``, ``sigma`` fitted to the lower half of those signatures'
latencies (:mod:`commcanary.calibrate.rate_spread`), again the median over reports.
And on a host shared by every rank, concurrent communicators contend for
its cores, not for a link (``independent_groups``): the spec's
``1 + 0.22·(g-1)`` would price two 2-rank groups running at once above
one 4-rank group, though both keep four processes on the same cores.

Errors are reported per operation as the median absolute percentage error
of the model's per-occurrence collective latency against each measurement,
with the default backend and the calibrated one (without its stalls and
rate spread, which no model of one occurrence can place), beside the measurements'
own run-to-run noise: the median absolute percentage deviation of each
occurrence's measurements from their median over iterations and reports
(the floor no model of medians can beat).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from commcanary import _core, formats
from commcanary.calibrate.host_stalls import fit_stalls
from commcanary.calibrate.model_terms import (
    VANISHING_BANDWIDTH,
    ModelTerms,
    algorithm_steps,
    bandwidth_term,
    collective_us,
    model_terms,
    op_floors,
    pipelined,
)
from commcanary.calibrate.rate_spread import (
    MIN_OCCURRENCES,
    fit_rate_spread,
    lower_spread,
    transfer_dominated,
)
from commcanary.errors import InputError
from commcanary.formats import MEASURED_MODE
from commcanary.replay import Backend, Report

__all__ = ["BACKEND_FORMAT", "Calibration", "calibrate", "read_backend_file"]

#: The backend file's format identifier.
BACKEND_FORMAT = formats.BACKEND_FORMAT


@dataclass
class Calibration:
    """A fitted backend and how well the model fits before and after."""

    backend: Backend
    #: Per operation: ``op``, ``samples``, ``mdape_before_pct``,
    #: ``mdape_after_pct``, ``noise_pct``.
    errors: list[dict[str, Any]] = field(default_factory=list)
    #: The runs fitted: ``report``, ``canary_sha256``, ``engine``, ``host``, ``samples``.
    runs: list[dict[str, Any]] = field(default_factory=list)

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the backend file atomically (canonical JSON, written by the core)."""
        _core.write_backend_file(
            os.fspath(path), self.backend.settings(), orjson.dumps(self.runs), orjson.dumps(self.errors)
        )
        return Path(path)

    def lines(self) -> list[str]:
        b = self.backend
        out = [
            f"calibrated: bandwidth={_core.float_repr(b.bandwidth_gbps)} Gbit/s "
            f"latency floor={_core.float_repr(b.latency_floor_us)} us from {sum(r['samples'] for r in self.runs)} "
            f"measured occurrences in {len(self.runs)} report(s)",
            f"- host stalls: {b.stall_probability * 100:.1f}% of algorithm steps, "
            f"{_core.float_repr(b.stall_mean_us)} us mean; each rank runs one operation at a time; "
            "nothing hidden (the measured runs fill compute before each collective)",
        ]
        if b.rate_spread > 0:
            out.append(
                f"- transfer rate spread: sigma {b.rate_spread:g} (large messages take exp(sigma*z) times their "
                "median bandwidth term, z standard normal)"
            )
        if b.floor_per_step:
            out.append(
                "- the latency floor is paid once per step of each op's algorithm (ring: n-1 per pass)"
            )
        if b.pipelined_ops:
            out.append(
                f"- pipelined steps: {', '.join(b.pipelined_ops)} (each step takes the longer of its hand-off "
                "and its chunk's transfer: max(floors, transfer), not their sum)"
            )
        if b.host_cpus > 0:
            out.append(
                f"- host: {b.host_cpus:g} cores shared by every rank, each keeping "
                f"{b.rank_cpu_share:g} of a core busy in a collective; while the running ranks' demand "
                "exceeds the cores, each runs at cores/demand of its speed"
            )
        for e in self.errors:
            noise = "n/a" if e["noise_pct"] is None else f"{e['noise_pct']:.1f}%"
            out.append(
                f"- {e['op']}: median abs error {e['mdape_before_pct']:.1f}% -> {e['mdape_after_pct']:.1f}% "
                f"({e['samples']} samples; run-to-run noise {noise})"
            )
        return out


@dataclass
class _Run:
    """One measured report and the model's terms of its samples."""

    canary: str
    path: str
    iterations: int
    #: The measured run's message and gap scales, which its replays take.
    scales: tuple[float, float]
    op: npt.NDArray[Any]
    bytes: npt.NDArray[np.float64]
    key: list[str]
    occurrence: npt.NDArray[np.int64]
    #: Each sample's algorithm steps (:func:`model_terms.algorithm_steps`).
    steps: npt.NDArray[np.float64]
    measured: npt.NDArray[np.float64]
    #: Each sample's bandwidth term at 1 Gbit/s, unstretched.
    bandwidth: npt.NDArray[np.float64]
    #: The model's latency under the default backend.
    default: npt.NDArray[np.float64]
    #: The model's terms at the backend of the current round.
    terms: ModelTerms


def _host_cpus(backend: dict[str, Any], where: str) -> float:
    """The cores a gloo run's ranks shared (0 when not recorded, or for
    an engine whose collectives do not run on the host's cores)."""
    cpus = backend.get("host_cpus", 0)
    if isinstance(cpus, bool) or not isinstance(cpus, int) or not 0 <= cpus <= 1_000_000:
        raise InputError(f"{where} field 'backend.host_cpus' must be an integer between 0 and 1000000")
    return float(cpus) if backend.get("engine") == "gloo" else 0.0


def _share(backend: dict[str, Any], where: str) -> float:
    """A gloo run's measured share of a core per rank in its collectives
    (0 when not recorded)."""
    share = backend.get("rank_cpu_share", 0.0)
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
        raise InputError(f"{where} field 'backend.rank_cpu_share' must be a number between 0 and 1")
    return float(share)


def _cpu_share(runs: list[dict[str, Any]]) -> float:
    """The host's share of a core per rank in a collective: the median
    over the runs that measured it, 1 (a whole core) when none did."""
    shares = [r["rank_cpu_share"] for r in runs if r["rank_cpu_share"] > 0]
    return round(float(np.median(shares)), 4) if shares else 1.0


def _scale(backend: dict[str, Any], key: str, where: str) -> float:
    """A measured run's message or gap scale (1 when not recorded)."""
    v = backend.get(key, 1.0)
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1e6:
        raise InputError(f"{where} field 'backend.{key}' must be a number above 0 and at most 1e6")
    return float(v)


#: By (canary, iterations, scales): the model's latency under the default
#: backend and each sample's bandwidth term, which no fitted backend moves
#: (reports of one canary at one scale share their replays).
_Fixed = dict[tuple[str, int, tuple[float, float]], tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]


def _measured(
    path: str | os.PathLike[str], canaries: dict[str, str], fixed: _Fixed
) -> tuple[_Run, dict[str, Any]]:
    report = Report.from_file(path)
    backend = report.section("backend") or {}
    where = os.fspath(path)
    if backend.get("mode") != MEASURED_MODE:
        raise InputError(f"{where} is not a measured report (backend.mode is {backend.get('mode')!r})")
    sha = (report.section("canary") or {}).get("sha256", "")
    if sha not in canaries:
        raise InputError(f"{where} was measured on canary {sha[:12]}, which none of the given canaries is")
    samples = report.samples
    if samples is None:
        raise InputError(f"{where} has no samples to calibrate against")
    iterations = int((report.section("replay_protocol") or {}).get("iterations", 1))
    cpus = _host_cpus(backend, where)
    n = len(samples["collective_us"])
    per_iteration = n // max(1, iterations)
    signatures = samples["signature"]
    key = [f"{o}|{g}|{s}" for o, g, s in zip(samples["op"], samples["group"], signatures, strict=True)]
    sizes = [float(s.get("bytes", 0)) for s in report.signatures]
    group_sizes = np.array([len(s.get("ranks", ())) for s in report.signatures], dtype=np.int64)
    canary = canaries[sha]
    ops = np.asarray(samples["op"])
    scales = (_scale(backend, "bytes_scale", where), _scale(backend, "compute_fill_scale", where))
    if (sha, iterations, scales) not in fixed:
        scaled = Backend().replace(bytes_scale=scales[0], gap_scale=scales[1])
        fixed[(sha, iterations, scales)] = (
            collective_us(canary, scaled, iterations),
            bandwidth_term(canary, scaled.replace(independent_groups=cpus > 0), iterations),
        )
    default, bandwidth = fixed[(sha, iterations, scales)]
    run = _Run(
        canary=sha,
        path=canary,
        iterations=iterations,
        scales=scales,
        op=ops,
        bytes=np.array([sizes[int(i)] for i in signatures]) * scales[0],
        key=key,
        occurrence=np.arange(n) % max(1, per_iteration),
        steps=algorithm_steps(ops, group_sizes[np.asarray(signatures, dtype=np.int64)]),
        measured=np.asarray(samples["collective_us"], dtype=np.float64),
        bandwidth=bandwidth,
        default=default,
        terms=ModelTerms.unshared(default, np.ones_like(default)),
    )
    if len(default) != n:
        raise InputError(f"{where} has {n} samples, its canary's replay {len(default)}")
    info = {
        "report": where,
        "canary_sha256": sha,
        "engine": backend.get("engine"),
        "host": backend.get("host"),
        "host_cpus": int(cpus),
        "rank_cpu_share": _share(backend, where) if cpus > 0 else 0.0,
        "samples": n,
    }
    return run, info


def _at(runs: list[_Run], backend: Backend) -> list[_Run]:
    """``runs`` with the model's terms at ``backend`` (replays shared by
    the reports of one canary)."""
    cache: dict[tuple[str, int, tuple[float, float]], ModelTerms] = {}
    out = []
    for run in runs:
        k = (run.canary, run.iterations, run.scales)
        if k not in cache:
            scaled = backend.replace(bytes_scale=run.scales[0], gap_scale=run.scales[1])
            cache[k] = model_terms(run.path, scaled, run.iterations, run.op, run.steps, run.bandwidth)
        out.append(replace(run, terms=cache[k]))
    return out


@dataclass
class _Medians:
    """Per signature and run: the measured median latency, the model's
    terms' medians (``per_floor``: what one µs of floor adds) and how many
    occurrences there were."""

    measured: npt.NDArray[np.float64]
    constant: npt.NDArray[np.float64]
    per_gbps: npt.NDArray[np.float64]
    per_floor: npt.NDArray[np.float64]
    count: npt.NDArray[np.float64]

    def error(self, floor: float, x: float, pipelined: bool = False) -> float:
        """The count-weighted mean absolute relative error at ``(F, 1/B)``
        (pipelined: ``max`` of the two terms, not their sum)."""
        return float(self.errors(np.array([floor]), np.array([x]), pipelined)[0])

    def errors(
        self, floor: npt.NDArray[np.float64], x: npt.NDArray[np.float64], pipelined: bool
    ) -> npt.NDArray[np.float64]:
        """:meth:`error` at each pair ``(floor[j], x[j])``."""
        a = floor[:, None] * self.per_floor[None, :]
        b = x[:, None] * self.per_gbps[None, :]
        model = self.constant[None, :] + (np.maximum(a, b) if pipelined else a + b)
        rel = np.abs(model - self.measured[None, :]) / np.maximum(self.measured, 1e-3)[None, :]
        return np.asarray(rel @ self.count / max(float(np.sum(self.count)), 1.0))


def _medians(runs: list[_Run], op: str | None) -> _Medians:
    """The per-signature medians of ``op`` (or of every op)."""
    rows: dict[tuple[int, str], list[int]] = {}
    for r, run in enumerate(runs):
        for i, k in enumerate(run.key):
            if op is None or run.op[i] == op:
                rows.setdefault((r, k), []).append(i)
    groups = [(runs[r], idx) for (r, _k), idx in rows.items()]
    return _Medians(
        measured=np.array([np.median(run.measured[idx]) for run, idx in groups]),
        constant=np.array([np.median(run.terms.constant[idx]) for run, idx in groups]),
        per_gbps=np.array([np.median(run.terms.per_gbps[idx]) for run, idx in groups]),
        per_floor=np.array([np.median(run.terms.per_floor[idx]) for run, idx in groups]),
        count=np.array([len(idx) for _, idx in groups], dtype=np.float64),
    )


#: IRLS rounds, and the relative residual below which a signature's weight
#: stops growing (so a near-exact fit does not take all the weight).
_IRLS_ROUNDS = 30
_IRLS_FLOOR = 0.02


def _robust_fit(med: _Medians, x_fixed: float | None = None) -> tuple[float, float]:
    """``(F, 1/B)`` with ``F >= 0``, ``1/B > 0`` (or ``F`` alone at
    ``x_fixed``) minimising the count-weighted absolute relative error of
    the model's medians (:meth:`_Medians.error`), by iteratively reweighted
    least squares: a signature seen more often counts more, and one the
    model cannot fit (a scheduling outlier) pulls no harder than its error."""
    m = np.maximum(med.measured, 1e-3)
    target = med.measured - med.constant
    w = med.count / m**2
    floor, x = 0.0, x_fixed if x_fixed is not None else 1.0
    for _ in range(_IRLS_ROUNDS):
        if x_fixed is not None:
            t = target - med.per_gbps * x_fixed
            s = med.per_floor
            floor = max(float(np.sum(w * s * t) / max(np.sum(w * s**2), 1e-300)), 0.0)
        else:
            floor, x = _least_squares(med.per_floor, med.per_gbps, target, w)
        resid = np.abs(floor * med.per_floor + med.per_gbps * x - target) / m
        w = med.count / m**2 / np.maximum(resid, _IRLS_FLOOR)
    return floor, x


def _least_squares(
    s: npt.NDArray[np.float64],
    per: npt.NDArray[np.float64],
    target: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
) -> tuple[float, float]:
    """Weighted least squares for ``F·s + per·x = target``, ``F >= 0``, ``x > 0``."""
    sw = np.sqrt(w)
    a = np.stack([s, per], axis=1)
    (floor, x), *_ = np.linalg.lstsq(a * sw[:, None], target * sw, rcond=None)
    if floor < 0:
        floor = 0.0
        x = float(np.sum(w * per * target) / max(np.sum(w * per * per), 1e-300))
    return float(floor), max(float(x), 1.0 / VANISHING_BANDWIDTH)


#: An op is fitted pipelined only when that cuts its medians' error by at
#: least this share: the shape is one choice per op, not a free parameter
#: to chase noise with.
_PIPELINED_GAIN = 0.1


def _fit_op(runs: list[_Run], op: str, overall_x: float) -> tuple[float, float, bool]:
    """One op's ``(F, 1/B, pipelined)``: both when it was measured at sizes
    a factor of 4 apart or more (and the shape too at three sizes or more),
    else its own ``F`` at the overall bandwidth, its floors and transfer
    summed."""
    med = _medians(runs, op)
    sizes = np.concatenate([run.bytes[run.op == op] for run in runs])
    best = (_robust_fit(med, overall_x)[0], overall_x)
    if not (sizes.min() > 0 and sizes.max() / sizes.min() >= 4):
        return (*best, False)
    both = _robust_fit(med)
    if _plausible(both[1], overall_x) and med.error(*both) < med.error(*best):
        best = both
    # Two sizes fit either shape exactly: a shape is read off three or more.
    piped = _pipelined_fit(med, overall_x) if len(np.unique(sizes)) >= 3 else None
    if piped is not None and med.error(*piped, pipelined=True) <= (1 - _PIPELINED_GAIN) * med.error(*best):
        return (*piped, True)
    return (*best, False)


def _plausible(x: Any, overall_x: float) -> Any:
    """Two sizes close together extrapolate badly: an op's own bandwidth
    (one ``1/B`` or an array of them) stays within a factor of 100 of the
    overall one."""
    return (x >= 0.01 * overall_x) & (x <= 100 * overall_x)


#: At most this many candidate floors and as many inverse bandwidths.
_PIPELINED_CANDIDATES = 200


def _pipelined_fit(med: _Medians, overall_x: float) -> tuple[float, float] | None:
    """``(F, 1/B)`` minimising the count-weighted absolute relative error of
    the pipelined medians ``k + max(s·m·F, s·b·x)`` (:meth:`_Medians.error`),
    over the floors and inverse bandwidths that fit one signature exactly
    (the error is piecewise linear in each, so its minimum lies at such a
    value or where a signature changes term); None when no signature
    pins both."""
    excess = med.measured - med.constant
    floors = excess[med.per_floor > 0] / med.per_floor[med.per_floor > 0]
    xs = excess[med.per_gbps > 0] / med.per_gbps[med.per_gbps > 0]
    floors, xs = floors[floors >= 0], xs[_plausible(xs, overall_x)]
    if len(floors) == 0 or len(xs) == 0:
        return None
    q = np.linspace(0.0, 1.0, _PIPELINED_CANDIDATES)
    floors, xs = (np.unique(np.quantile(a, q, method="nearest")) for a in (floors, xs))
    f_grid, x_grid = (a.ravel() for a in np.meshgrid(floors, xs, indexing="ij"))
    j = int(np.argmin(med.errors(f_grid, x_grid, pipelined=True)))
    return float(f_grid[j]), float(x_grid[j])


def _fit(runs: list[_Run]) -> tuple[float, float]:
    """The overall ``(F, 1/B)`` over every operation's signatures."""
    return _robust_fit(_medians(runs, None))


def _errors(runs: list[_Run], fitted: dict[str, tuple[float, float, bool]]) -> list[dict[str, Any]]:
    out = []
    for op, (floor, x, piped) in sorted(fitted.items()):
        err_before, err_after = [], []
        # Each occurrence's measurements over iterations and reports of its canary.
        repeats: dict[tuple[str, tuple[float, float], int], list[float]] = {}
        for run in runs:
            sel = run.op == op
            m = run.measured[sel]
            ok = m > 0
            y_before = run.default[sel]
            y_after = run.terms.latency(floor, x, piped)[sel]
            err_before.extend(np.abs(y_before[ok] - m[ok]) / m[ok])
            err_after.extend(np.abs(y_after[ok] - m[ok]) / m[ok])
            for k, v in zip(run.occurrence[sel], m, strict=True):
                repeats.setdefault((run.canary, run.scales, int(k)), []).append(float(v))
        noise: list[float] = []
        for values in repeats.values():
            if len(values) >= 2:
                centre = float(np.median(values))
                noise.extend(abs(v - centre) / max(centre, 1e-9) for v in values)
        out.append(
            {
                "op": op,
                "samples": len(err_before),
                "mdape_before_pct": round(float(np.median(err_before)) * 100, 2) if err_before else 0.0,
                "mdape_after_pct": round(float(np.median(err_after)) * 100, 2) if err_after else 0.0,
                "noise_pct": round(float(np.median(noise)) * 100, 2) if noise else None,
            }
        )
    return out


def calibrate(
    reports: Sequence[str | os.PathLike[str]],
    canaries: Sequence[str | os.PathLike[str]],
    *,
    label: str | None = None,
) -> Calibration:
    """Fit the model's latency floor and bandwidth to measured ``reports``
    (from ``replay --physical``) of the given ``canaries``.

    Raises :class:`InputError` for a report that is not measured, has no
    samples, or whose canary is not among ``canaries``.
    """
    if not reports:
        raise InputError("calibration needs at least one measured report")
    by_sha: dict[str, str] = {}
    for c in canaries:
        data = _core.read_input_file(os.fspath(c))
        _core.check_canary(os.fspath(c), data=data)
        by_sha[_canary_sha(data)] = os.fspath(c)
    fixed: _Fixed = {}
    measured = [_measured(r, by_sha, fixed) for r in reports]
    runs = [m[0] for m in measured]
    cpus = sorted({m[1]["host_cpus"] for m in measured})
    if len(cpus) > 1:
        raise InputError(
            f"the reports were measured on hosts of {' and '.join(map(str, cpus))} cores: calibrate them separately"
        )
    engines = sorted({str(m[1]["engine"]) for m in measured})
    name = label or f"calibrated to {'+'.join(engines)} on {measured[0][1]['host'] or platform.node()}"
    # The first round's schedule: the default backend on the measured host.
    backend = Backend().replace(
        label=name,
        host_cpus=float(cpus[0]),
        rank_cpu_share=_cpu_share([m[1] for m in measured]),
        floor_per_step=True,
        # Ranks sharing one host contend for its cores, not for a link.
        independent_groups=cpus[0] > 0,
    )
    for _ in range(_ROUNDS if cpus[0] > 0 else 1):
        runs = _at(runs, backend)
        fitted, latest = _fit_backend(runs, backend)
        if latest == backend:
            break
        backend = latest
    return Calibration(backend=backend, errors=_errors(runs, fitted), runs=[m[1] for m in measured])


#: At most this many rounds of fitting and replaying: the host stretch of
#: each occurrence moves with the schedule the fitted backend gives.
_ROUNDS = 6


def _fit_backend(runs: list[_Run], base: Backend) -> tuple[dict[str, tuple[float, float, bool]], Backend]:
    """The per-op ``(F, 1/B, pipelined)`` and the backend fitted to
    ``runs``' terms (``base`` gives its label and host)."""
    floor, x = _fit(runs)
    floor, x = round(floor, 3), 1.0 / round(1.0 / x, 6)
    fitted = {}
    for op in sorted({str(o) for run in runs for o in run.op}):
        f_op, x_op, piped = _fit_op(runs, op, x)
        fitted[op] = (round(f_op, 3), 1.0 / round(1.0 / x_op, 6), piped)
    backend = base.replace(
        bandwidth_gbps=round(1.0 / x, 6),
        latency_floor_us=floor,
        # The physical replay fills compute before each collective, never
        # beside it: what it measured hid nothing.
        overlap_efficiency=0.0,
        op_overrides=tuple((op, f, round(1.0 / xo, 6)) for op, (f, xo, _) in fitted.items()),
        pipelined_ops=tuple(op for op, (_, _, piped) in fitted.items() if piped),
        serialize_ranks=True,
        floor_per_step=True,
    )
    split = [_split(run, backend) for run in runs]
    stall_p, stall_mean = _host_stalls(runs, split)
    spread = _rate_spread(runs, split)
    return fitted, backend.replace(stall_probability=stall_p, stall_mean_us=stall_mean, rate_spread=spread)


#: Per run, per sample: the model's start-up term (floors and the rest)
#: and bandwidth term at a backend, and whether its signature is
#: transfer-dominated (:func:`rate_spread.transfer_dominated`).
_Split = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_]]


def _split(run: _Run, backend: Backend) -> _Split:
    """A pipelined op's start-up is what its floors add beyond its
    transfer, so that start-up and transfer still sum to its latency."""
    floors, xs = op_floors(backend, run.op)
    hand_off = run.terms.per_floor * floors
    transfer = run.terms.per_gbps * xs
    piped = pipelined(backend, run.op)
    startup = run.terms.constant + np.where(piped, np.maximum(hand_off - transfer, 0.0), hand_off)
    dominated = np.zeros(len(startup), dtype=bool)
    keys = np.asarray(run.key)
    for k in np.unique(keys):
        mine = keys == k
        dominated[mine] = transfer_dominated(np.median(startup[mine]), np.median(transfer[mine]))
    return startup, transfer, dominated


def _rate_spread(runs: list[_Run], split: list[_Split]) -> float:
    """The spread of the transfer rate: the median over reports of each
    one's fit (:func:`rate_spread.fit_rate_spread`) to its
    transfer-dominated signatures seen at least ``MIN_OCCURRENCES`` times;
    0 when no report has one."""
    fits = []
    for run, (startup, transfer, dominated) in zip(runs, split, strict=True):
        keys = np.asarray(run.key)
        rows = []
        for k in np.unique(keys[dominated]):
            mine = keys == k
            if int(mine.sum()) >= MIN_OCCURRENCES:
                a, t = float(np.median(startup[mine])), float(np.median(transfer[mine]))
                rows.append((lower_spread(run.measured[mine]), a, t, float(mine.sum())))
        if rows:
            cols = np.array(rows).T
            fits.append(fit_rate_spread(cols[0], cols[1], cols[2], cols[3]))
    return round(float(np.median(fits)), 3) if fits else 0.0


def _host_stalls(runs: list[_Run], split: list[_Split]) -> tuple[float, float]:
    """The host's stalls: the median over reports of each one's ``(q, S)``
    (:func:`_stalls`), so one run disturbed throughout (another load on
    the host) does not set the tail of every replay."""
    most = max(float(run.steps.max(initial=1.0)) for run in runs)
    fits = [f for f in (_stalls(run, s[2], most) for run, s in zip(runs, split, strict=True)) if f[1] > 0]
    if not fits:
        return 0.0, 0.0
    q, s = np.median(np.array(fits), axis=0)
    return round(float(q), 6), round(float(s), 3)


def _stalls(run: _Run, dominated: npt.NDArray[np.bool_], most_steps: float) -> tuple[float, float]:
    """The host's per-step stalls ``(q, S)`` (:func:`host_stalls.fit_stalls`)
    of the latencies' excess over their signature's median in one report,
    over the run's host stretch (the model stretches stalls by it), on the
    signatures that are not transfer-dominated (``dominated``: there the
    spread of the rate sets the excess), ``q`` bounded for an operation of
    ``most_steps`` steps."""
    excess: list[npt.NDArray[np.float64]] = []
    steps: list[npt.NDArray[np.float64]] = []
    keys = np.asarray(run.key)
    for k in np.unique(keys[~dominated]):
        mine = keys == k
        values = run.measured[mine]
        if len(values) >= 3:
            excess.append((values - np.median(values)) / run.terms.stretch[mine])
            steps.append(run.steps[mine])
    if not excess:
        return 0.0, 0.0
    return fit_stalls(np.concatenate(excess), np.concatenate(steps), most_steps)


def _canary_sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def read_backend_file(path: str | os.PathLike[str]) -> Backend:
    """The backend of a backend file (``commcanary calibrate -o``), read and
    checked by the core; :class:`InputError` names the field."""
    return Backend.of(_core.read_backend_file(os.fspath(path)))
