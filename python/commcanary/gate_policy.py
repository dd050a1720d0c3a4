"""Gate policies: noise calibration on repeated runs (A/A), and the predeclared
``commcanary.gate_policy.v1`` document a comparison applies.

:func:`calibrate_policy` takes repeated measured runs of one configuration (in
the order they were made). For every statistic the gate checks, the core
(``_core.run_noise``) measures its run-to-run drift (split-half and
leave-one-out) and sets its threshold at ``multiple`` times the worse drift,
never below the floors; the breakdown threshold is the largest over every
phase's and operation's quantiles. It also reports the smallest regression
the gate can then detect with ``runs_per_side`` runs per side. The policy
file is read and written by the core; a comparison under a policy records its
SHA-256.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from commcanary import _core
from commcanary.compare import METRICS, Thresholds
from commcanary.compare_runs import DEFAULT_MIN_RUNS, _check_side, _is_measured, _row_value
from commcanary.errors import InputError
from commcanary.replay import Report

__all__ = ["Policy", "calibrate_policy"]


@dataclass(frozen=True)
class Policy:
    """A gate policy: thresholds, runs per side, the bootstrap's confidence,
    resamples and seed, and how it was calibrated (``None`` when written by
    hand). ``sha256`` is the file's digest once read or written."""

    thresholds: Thresholds
    min_runs: int = DEFAULT_MIN_RUNS
    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0
    calibration: dict[str, Any] | None = None
    sha256: str | None = None

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Policy:
        """Read and check a policy file (:class:`commcanary.errors.InputError` naming the field)."""
        raw = _core.read_gate_policy(os.fspath(path))
        calibration = raw["calibration"]
        return cls(
            Thresholds(**raw["thresholds"]),
            min_runs=raw["min_runs"],
            confidence=raw["confidence"],
            resamples=raw["resamples"],
            seed=raw["seed"],
            calibration=None if calibration is None else orjson.loads(calibration),
            sha256=raw["sha256"],
        )

    def write(self, path: str | os.PathLike[str]) -> Policy:
        """Write the policy atomically (canonical JSON); returns it with its digest."""
        digest = _core.write_gate_policy(
            os.fspath(path),
            confidence=self.confidence,
            resamples=self.resamples,
            seed=self.seed,
            min_runs=self.min_runs,
            thresholds=self.thresholds.resolved(),
            calibration=None if self.calibration is None else orjson.dumps(self.calibration),
        )
        return Policy(
            self.thresholds,
            self.min_runs,
            self.confidence,
            self.resamples,
            self.seed,
            self.calibration,
            digest,
        )


def _noise(
    values: list[float],
    name: str,
    runs: int,
    confidence: float,
    multiple: float,
    floor_pct: float,
    floor_abs: float,
) -> dict[str, Any]:
    raw = _core.run_noise(
        np.asarray(values, dtype=np.float64),
        runs=runs,
        confidence=confidence,
        multiple=multiple,
        floor_pct=floor_pct,
        floor_abs=floor_abs,
    )
    return {"statistic": name, **raw}


def calibrate_policy(
    reports: Sequence[Report],
    *,
    runs_per_side: int = 5,
    confidence: float = 0.95,
    multiple: float = 1.5,
    floor_pct: float = 1.0,
    floor_us: float = 1.0,
    floor_points: float = 1.0,
    resamples: int = 2000,
    seed: int = 0,
) -> Policy:
    """A policy from repeated measured runs of one configuration (A/A), in the
    order they were made. Raises :class:`commcanary.errors.InputError` for
    fewer than two runs, model reports (a model has no noise to calibrate) or
    runs of several configurations."""
    _check_side("calibration", reports)
    if not _is_measured(reports[0]):
        raise InputError("calibration needs measured runs: a model's replays have no noise to calibrate")
    if len(reports) < 2:
        raise InputError("calibration needs at least two runs of one configuration")
    common = (runs_per_side, confidence, multiple, floor_pct)
    stats = []
    for m in METRICS:
        stats.append(
            _noise([float(r.metrics[f"{m}_us"]) for r in reports], f"overall.{m}", *common, floor_us)
        )
    hidden = _noise(
        [float(r.metrics["communication_hidden_pct"]) for r in reports],
        "overall.communication_hidden_pct",
        runs_per_side,
        confidence,
        multiple,
        0.0,
        floor_points,
    )
    stats.append(hidden)
    rows = []
    for section, scope in (("by_phase", "phase"), ("by_op", "operation")):
        for name in sorted({row["name"] for r in reports for row in getattr(r, section)}):
            for m in METRICS:
                values = [_row_value(r, section, name, m) for r in reports]
                rows.append(_noise(values, f"{scope}.{m}:{name}", *common, floor_us))
    by = {s["statistic"]: s for s in stats}
    thresholds = Thresholds(
        p99_threshold_pct=by["overall.p99"]["threshold_pct"],
        p95_threshold_pct=by["overall.p95"]["threshold_pct"],
        median_threshold_pct=by["overall.median"]["threshold_pct"],
        p99_absolute_threshold_us=by["overall.p99"]["threshold_abs"],
        p95_absolute_threshold_us=by["overall.p95"]["threshold_abs"],
        median_absolute_threshold_us=by["overall.median"]["threshold_abs"],
        hidden_drop_threshold_points=hidden["threshold_abs"],
        breakdown_threshold_pct=max((r["threshold_pct"] for r in rows), default=floor_pct),
        breakdown_absolute_threshold_us=max((r["threshold_abs"] for r in rows), default=floor_us),
    )
    canary = reports[0].section("canary") or {}
    calibration = {
        "runs": len(reports),
        "runs_per_side": runs_per_side,
        "multiple": multiple,
        "floors": {"pct": floor_pct, "us": floor_us, "points": floor_points},
        "canary_sha256": canary.get("sha256"),
        "backend": reports[0].backend,
        "statistics": stats + rows,
    }
    return Policy(
        thresholds,
        min_runs=runs_per_side,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        calibration=calibration,
    )
