"""Comparing repeated runs: the gate with confidence intervals.

Each side is several reports of one configuration (one canary, model,
protocol and backend). Every statistic the one-run gate checks (median, p95
and p99 exposed latency, the hidden share of communication, and each phase's
and operation's quantiles) is judged by the core (``_core.judge_runs``): the
change between the sides' means over runs, a seeded bootstrap interval over
runs (and over each measured run's samples, where runs carry them) and the interval
rule: ``fail`` when the interval lies wholly beyond the threshold,
``pass``/``warn`` when it lies wholly inside (``warn`` when the estimate is
beyond half of it), ``inconclusive`` when it straddles it.

The comparison's verdict is ``fail`` if any statistic fails, else
``inconclusive`` if any is (or a measured side has fewer runs than
``min_runs``), else ``warn`` or ``pass`` as the one-run gate words them. The
document is the one-run document (values are the sides' means) with a
``runs`` section and an ``interval`` on each evaluation. Model replays have no
noise: their runs are identical, their intervals points, and their verdict
the one-run verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from commcanary import _core
from commcanary.compare import (
    METRICS,
    SCOPES,
    Thresholds,
    _compatibility,
    _document,
    _evaluate_breakdown,
    _evaluate_overall,
    _evaluate_uncertainty,
    _Evaluation,
    _mismatch_error,
    _reason,
)
from commcanary.errors import InputError, OptionError
from commcanary.formats import MEASURED_MODE
from commcanary.replay import Report

if TYPE_CHECKING:
    import numpy.typing as npt

    from commcanary.gate_policy import Policy

__all__ = ["DEFAULT_MIN_RUNS", "compare_runs"]

#: Runs a measured side needs before its interval means anything.
DEFAULT_MIN_RUNS = 3
QUANTILE = {"median": 50.0, "p95": 95.0, "p99": 99.0}
#: The members of a measured report's backend that describe the run, not the
#: configuration: where it ran, and what was measured of it.
_RUN_MEMBERS = frozenset({"host", "torch_version", "rank_cpu_share"})


def _is_measured(report: Report) -> bool:
    return (report.backend or {}).get("mode") == MEASURED_MODE


def _configuration(report: Report) -> tuple[Any, ...]:
    canary = report.section("canary") or {}
    backend = {k: v for k, v in (report.backend or {}).items() if k not in _RUN_MEMBERS}
    return (
        canary.get("sha256"),
        (report.section("simulation_model") or {}).get("version"),
        (report.section("replay_protocol") or {}).get("sha256"),
        sorted(backend.items(), key=lambda kv: kv[0]),
    )


def _check_side(name: str, reports: Sequence[Report]) -> None:
    if not reports:
        raise InputError(f"the {name} side has no reports")
    if len({_is_measured(r) for r in reports}) > 1:
        raise InputError(f"the {name} side mixes model and measured reports: give runs of one configuration")
    first = _configuration(reports[0])
    for report in reports[1:]:
        if _configuration(report) != first:
            raise InputError(
                f"the {name} side mixes configurations: {report.source or 'a report'} differs from "
                f"{reports[0].source or 'the first'} in its canary, model, protocol or backend"
            )


class _Centre:
    """A side as the one-run gate reads a report: each value the mean over runs."""

    def __init__(self, reports: Sequence[Report]) -> None:
        first = reports[0]
        self.source = first.source
        self.backend = first.backend
        self._first = first
        self.metrics = dict(first.metrics)
        for key, value in first.metrics.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.metrics[key] = sum(float(r.metrics.get(key, 0.0)) for r in reports) / len(reports)
        self.by_phase = self._rows(reports, "by_phase")
        self.by_op = self._rows(reports, "by_op")

    @staticmethod
    def _rows(reports: Sequence[Report], section: str) -> list[dict[str, Any]]:
        names = sorted({row["name"] for r in reports for row in getattr(r, section)})
        rows = []
        for name in names:
            found = [next((x for x in getattr(r, section) if x["name"] == name), None) for r in reports]
            row: dict[str, Any] = {"name": name, "count": max((x["count"] for x in found if x), default=0)}
            for m in METRICS:
                row[f"{m}_us"] = sum(float(x[f"{m}_us"]) if x else 0.0 for x in found) / len(found)
            rows.append(row)
        return rows

    def section(self, name: str) -> Any:
        return self._first.section(name)


def _row_value(report: Report, section: str, name: str, metric: str) -> float:
    row = next((x for x in getattr(report, section) if x["name"] == name), None)
    return float(row[f"{metric}_us"]) if row else 0.0


def _samples(
    columns: Sequence[dict[str, npt.NDArray[Any]] | None], column: str | None, name: str | None
) -> list[npt.NDArray[Any]] | None:
    """Each run's exposed latencies (those of one phase or op when ``column`` is
    given) from its sample columns, or ``None`` when some run carries none."""
    out = []
    for samples in columns:
        if samples is None:
            return None
        exposed = samples["exposed_us"]
        out.append(exposed if column is None else exposed[samples[column] == name])
    return out


class _Judge:
    """Judges statistics with the comparison's bootstrap options."""

    def __init__(
        self,
        baselines: Sequence[Report],
        candidates: Sequence[Report],
        confidence: float,
        resamples: int,
        seed: int,
    ) -> None:
        self.b, self.c = baselines, candidates
        self.confidence, self.resamples, self.seed = confidence, resamples, seed
        # Each measured run's sample columns, built once (``Report.samples``
        # assembles them on every access). A model run's samples are exact, not
        # a draw, so a model side resamples runs only: no columns.
        self.columns = [
            [r.samples for r in side] if side and _is_measured(side[0]) else None
            for side in (baselines, candidates)
        ]

    def _side_samples(self, side: int, column: str | None, name: str | None) -> list[npt.NDArray[Any]] | None:
        columns = self.columns[side]
        return None if columns is None else _samples(columns, column, name)

    def latency(
        self, metric: str, t_pct: float, t_abs: float, section: str | None = None, name: str | None = None
    ) -> dict[str, Any]:
        import numpy as np

        if section is None:
            values = [np.array([float(r.metrics[f"{metric}_us"]) for r in side]) for side in (self.b, self.c)]
            column = None
        else:
            values = [
                np.array([_row_value(r, section, str(name), metric) for r in side])
                for side in (self.b, self.c)
            ]
            column = "phase" if section == "by_phase" else "op"
        return dict(
            _core.judge_runs(
                values[0],
                values[1],
                threshold_abs=t_abs,
                threshold_pct=t_pct,
                baseline_samples=self._side_samples(0, column, name if section else None),
                candidate_samples=self._side_samples(1, column, name if section else None),
                quantile=QUANTILE[metric],
                confidence=self.confidence,
                resamples=self.resamples,
                seed=self.seed,
            )
        )

    def hidden(self, t_points: float) -> dict[str, Any]:
        import numpy as np

        b, c = (
            np.array([float(r.metrics["communication_hidden_pct"]) for r in side])
            for side in (self.b, self.c)
        )
        return dict(
            _core.judge_runs(
                b,
                c,
                threshold_abs=t_points,
                decrease=True,
                confidence=self.confidence,
                resamples=self.resamples,
                seed=self.seed,
            )
        )


def _interval(judged: dict[str, Any], digits: int = 3) -> dict[str, Any]:
    def r(v: float | None, d: int) -> float | None:
        return None if v is None else round(v, d)

    return {
        "low": r(judged["low"], digits),
        "high": r(judged["high"], digits),
        "low_pct": r(judged["low_pct"], 2),
        "high_pct": r(judged["high_pct"], 2),
    }


def _judge_all(ev: _Evaluation, judge: _Judge) -> list[dict[str, Any]]:
    """Replaces every evaluation's point result by its judged one; returns the
    reasons of the inconclusive ones."""
    t = ev.thresholds
    inconclusive = []
    for e in ev.evaluations:
        metric = e["metric"]
        scope, _, m = metric.partition(".")
        if scope == "overall" and m in METRICS:
            judged = judge.latency(m, t[f"{m}_threshold_pct"], t[f"{m}_absolute_threshold_us"])
            what, threshold = (
                f"{m}",
                f"{t[f'{m}_threshold_pct']:.1f}% and {t[f'{m}_absolute_threshold_us']:.3f} us",
            )
        elif metric == "overall.communication_hidden_pct_drop":
            judged = judge.hidden(t["hidden_drop_threshold_points"])
            ev.hidden_result = judged["verdict"]
            what, threshold = (
                "hidden communication",
                f"a drop of {t['hidden_drop_threshold_points']:.2f} points",
            )
        elif scope in ("phase", "operation"):
            section = dict((s, sec) for sec, s in SCOPES)[scope]
            bt_pct, bt_abs = t["breakdown_threshold_pct"], t["breakdown_absolute_threshold_us"]
            judged = judge.latency(m, bt_pct, bt_abs, section, e["name"])
            ev.row_results[(scope, e["name"])][m] = judged["verdict"]
            what, threshold = f"{scope} '{e['name']}' {m}", f"{bt_pct:.1f}% and {bt_abs:.3f} us"
        else:
            continue
        e["threshold_result"] = judged["verdict"]
        e["interval"] = _interval(judged)
        if judged["verdict"] == "inconclusive":
            iv = e["interval"]
            span = (
                f"[{iv['low_pct']:+.1f}%, {iv['high_pct']:+.1f}%]"
                if iv["low_pct"] is not None and iv["high_pct"] is not None
                else f"[{iv['low']:+.3f}, {iv['high']:+.3f}]"
            )
            inconclusive.append(
                _reason(
                    "inconclusive_regression",
                    "inconclusive",
                    f"{what} change interval {span} straddles the failure threshold ({threshold}): "
                    "the runs cannot tell a regression from noise; more runs per side would settle it",
                    metric,
                )
            )
    return inconclusive


#: A side whose runs drift more than this many times the policy's calibrated
#: drift is noisier than the policy allows.
NOISE_ALLOWANCE = 2.0


def _noisier_than_calibrated(
    policy: Policy, baselines: Sequence[Report], candidates: Sequence[Report]
) -> list[dict[str, Any]]:
    """One reason per measured side whose overall quantiles drift more than
    :data:`NOISE_ALLOWANCE` times what the policy was calibrated on."""
    import numpy as np

    calibrated = {s["statistic"]: s for s in (policy.calibration or {}).get("statistics", [])}
    reasons = []
    for name, side in (("baseline", baselines), ("candidate", candidates)):
        if not _is_measured(side[0]) or len(side) < 2:
            continue
        for m in METRICS:
            reference = calibrated.get(f"overall.{m}", {}).get("drift_pct")
            if not reference:
                continue
            values = np.array([float(r.metrics[f"{m}_us"]) for r in side])
            drift = _core.run_noise(values, runs=len(side))["drift_pct"]
            if drift is not None and drift > NOISE_ALLOWANCE * reference:
                reasons.append(
                    _reason(
                        "noisier_than_calibrated",
                        "inconclusive",
                        f"the {name} side's {m} drifts {drift:.1f}% between runs, more than "
                        f"{NOISE_ALLOWANCE:g} times the {reference:.1f}% the policy was calibrated on: "
                        "the host is noisier than when the policy was made",
                        f"overall.{m}",
                    )
                )
                break
    return reasons


def compare_runs(
    baselines: Sequence[Report],
    candidates: Sequence[Report],
    thresholds: Thresholds | None = None,
    *,
    allow_mismatch: bool = False,
    min_runs: int = DEFAULT_MIN_RUNS,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    policy: Policy | None = None,
) -> dict[str, Any]:
    """Compare repeated runs of a baseline and a candidate; returns the comparison document.

    A ``policy`` (:class:`commcanary.gate_policy.Policy`) sets the thresholds,
    ``min_runs``, ``confidence``, ``resamples`` and ``seed`` (those arguments
    are then ignored), and the document records its SHA-256.

    Raises :class:`commcanary.errors.InputError` when a side is empty or mixes
    configurations (or model and measured reports), and when the sides are
    incompatible (different canaries, models or protocols; a model report
    against a measured one) unless ``allow_mismatch`` is set.
    """
    if policy is not None:
        thresholds, min_runs = policy.thresholds, policy.min_runs
        confidence, resamples, seed = policy.confidence, policy.resamples, policy.seed
    if min_runs < 1:
        raise OptionError("min_runs", "must be at least 1")
    _check_side("baseline", baselines)
    _check_side("candidate", candidates)
    base, cand = baselines[0], candidates[0]
    found = _compatibility(base, cand)
    if found and not allow_mismatch:
        raise _mismatch_error(base, cand, found)
    ev = _Evaluation((thresholds or Thresholds()).resolved(), [reason for reason, _ in found])
    centre_b, centre_c = _Centre(baselines), _Centre(candidates)
    _evaluate_overall(ev, centre_b.metrics, centre_c.metrics)
    _evaluate_breakdown(ev, centre_b, centre_c)  # type: ignore[arg-type]
    _evaluate_uncertainty(ev, base, cand)
    inconclusive = _judge_all(ev, _Judge(baselines, candidates, confidence, resamples, seed))
    short = [
        (name, len(side))
        for name, side in (("baseline", baselines), ("candidate", candidates))
        if _is_measured(side[0]) and len(side) < min_runs
    ]
    for name, n in short:
        inconclusive.append(
            _reason(
                "too_few_runs",
                "inconclusive",
                f"the {name} side has {n} measured run(s), fewer than the {min_runs} its interval needs",
            )
        )
    if policy is not None:
        inconclusive += _noisier_than_calibrated(policy, baselines, candidates)
    doc = _document(ev, centre_b, centre_c)  # type: ignore[arg-type]
    results = [e["threshold_result"] for e in ev.evaluations]
    if "fail" in results:
        verdict = "fail"
    elif inconclusive:
        verdict = "inconclusive"
    else:
        verdict = doc["verdict"]
    doc["verdict"] = verdict
    reasons = [r for r in doc["reasons"] if r["code"] != "within_thresholds"]
    fails = [r for r in reasons if r["level"] == "fail"]
    rest = [r for r in reasons if r["level"] != "fail"]
    doc["reasons"] = fails + inconclusive + rest or [
        _reason(
            "within_thresholds",
            "pass",
            "candidate is within configured thresholds at every statistic's interval",
        )
    ]
    doc["runs"] = {
        "baseline": len(baselines),
        "candidate": len(candidates),
        "min_runs": min_runs,
        "method": "bootstrap over runs and, where runs carry samples, over each run's samples",
        "confidence": confidence,
        "resamples": resamples,
        "seed": seed,
        "policy_sha256": None if policy is None else policy.sha256,
        "reports": {
            "baseline": [r.source for r in baselines],
            "candidate": [r.source for r in candidates],
        },
    }
    return doc
