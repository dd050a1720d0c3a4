"""Comparing two replay reports: the CI gate.

A metric *fails* only when the candidate is worse than the baseline by more
than the absolute threshold **and** by more than the percentage threshold (the
absolute floor keeps fast operations from turning noise into red builds); it
*warns* at half of both. Hidden communication fails when its drop in points
exceeds the threshold, warns above half of it. Breakdown rows (per phase, per
operation) use the breakdown thresholds, which default to the p99 ones.

The verdict is ``fail`` if any evaluation fails, else ``warn`` if any warns
(or the reports are incompatible and ``allow_mismatch`` was given), else
``pass``. Every reason names what caused it and carries a machine-readable
``code``; warnings are listed even when the verdict is ``fail``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from commcanary.errors import InputError, OptionError
from commcanary.formats import COMPARISON_FORMAT, MEASURED_MODE
from commcanary.replay import Report

__all__ = ["COMPARISON_FORMAT", "Thresholds", "compare"]

METRICS = ("median", "p95", "p99")
#: Failure and warning reasons name the metrics in this order.
REASON_ORDER = ("p99", "p95", "median")
SCOPES = (("by_phase", "phase"), ("by_op", "operation"))


@dataclass(frozen=True)
class Thresholds:
    """Comparison thresholds; breakdown ones default to the p99 ones.

    Every threshold must be non-negative (a breakdown one may be ``None``);
    otherwise construction raises :class:`commcanary.errors.OptionError`
    naming the field.
    """

    p99_threshold_pct: float = 15.0
    p95_threshold_pct: float = 10.0
    median_threshold_pct: float = 8.0
    p99_absolute_threshold_us: float = 1.0
    p95_absolute_threshold_us: float = 1.0
    median_absolute_threshold_us: float = 1.0
    hidden_drop_threshold_points: float = 5.0
    breakdown_threshold_pct: float | None = None
    breakdown_absolute_threshold_us: float | None = None

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is not None and not value >= 0:
                raise OptionError(name, "must be non-negative")

    def resolved(self) -> dict[str, float]:
        """All nine thresholds with the breakdown ones resolved."""
        values = asdict(self)
        if values["breakdown_threshold_pct"] is None:
            values["breakdown_threshold_pct"] = self.p99_threshold_pct
        if values["breakdown_absolute_threshold_us"] is None:
            values["breakdown_absolute_threshold_us"] = self.p99_absolute_threshold_us
        return {k: float(v) for k, v in values.items()}


def _pct(base: float, cand: float) -> float | None:
    if base == 0:
        return 0.0 if cand == 0 else None
    return round((cand - base) / base * 100, 2)


def _status(base: float, cand: float) -> str:
    if base == 0 and cand == 0:
        return "both_zero"
    if base == 0:
        return "new_nonzero_regression" if cand > 0 else "undefined"
    return "finite"


def _exceeds(pct: float | None, base: float, cand: float, t_pct: float, t_abs: float) -> bool:
    if cand - base <= t_abs:
        return False
    if pct is None:
        return cand > base
    return pct > t_pct


def _result(pct: float | None, base: float, cand: float, t_pct: float, t_abs: float) -> str:
    if _exceeds(pct, base, cand, t_pct, t_abs):
        return "fail"
    if _exceeds(pct, base, cand, t_pct / 2, t_abs / 2):
        return "warn"
    return "pass"


def _short(digest: Any) -> str:
    return str(digest)[:12] if digest else "none"


def _compatibility(base: Report, cand: Report) -> list[tuple[str, str]]:
    """Each incompatibility as (the reason the document records, the phrase an error uses)."""
    found = []
    bc, cc = base.section("canary") or {}, cand.section("canary") or {}
    b_exec, c_exec = bc.get("execution_semantic_sha256"), cc.get("execution_semantic_sha256")
    if b_exec and c_exec:
        if b_exec != c_exec:
            found.append(
                (
                    "reports were produced from different executable canary fingerprints",
                    f"replay different canaries (execution_semantic_sha256 {_short(b_exec)} vs {_short(c_exec)})",
                )
            )
    elif bc.get("sha256") != cc.get("sha256"):
        found.append(
            (
                "reports were produced from different canary fingerprints",
                f"replay different canaries (sha256 {_short(bc.get('sha256'))} vs {_short(cc.get('sha256'))})",
            )
        )
    b_model = (base.section("simulation_model") or {}).get("version")
    c_model = (cand.section("simulation_model") or {}).get("version")
    if b_model != c_model:
        measured = [(r.backend or {}).get("mode") == MEASURED_MODE for r in (base, cand)]
        phrase = (
            "compare a model report with a measured one: calibrate the model against the measurement "
            "(commcanary calibrate) and replay with its backend file, or pass --allow-mismatch"
            if measured[0] != measured[1]
            else f"use different simulation model versions ({b_model} vs {c_model})"
        )
        found.append(("reports use different simulation model versions", phrase))
    b_protocol = (base.section("replay_protocol") or {}).get("sha256")
    c_protocol = (cand.section("replay_protocol") or {}).get("sha256")
    if b_protocol != c_protocol:
        found.append(
            (
                "reports use different replay protocol fingerprints",
                f"use different replay protocol fingerprints ({_short(b_protocol)} vs {_short(c_protocol)})",
            )
        )
    return found


def _mismatch_error(base: Report, cand: Report, found: list[tuple[str, str]]) -> InputError:
    names = f"{base.source or 'the baseline'} and {cand.source or 'the candidate'}"
    phrases = [phrase for _, phrase in found]
    # A model against a measurement differs in everything; say that, and what to do.
    kinds = [p for p in phrases if p.startswith("compare a model report with a measured one")]
    return InputError(f"{names} {' and '.join(kinds or phrases)}")


def _breakdown(base_rows: list[dict[str, Any]], cand_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    b = {r["name"]: r for r in base_rows}
    c = {r["name"]: r for r in cand_rows}
    rows = []
    for name in sorted(set(b) | set(c)):
        br, cr = b.get(name), c.get(name)
        row: dict[str, Any] = {
            "name": name,
            "baseline_count": br["count"] if br else 0,
            "candidate_count": cr["count"] if cr else 0,
            "status": "matched" if br and cr else ("added" if cr else "removed"),
        }
        for m in METRICS:
            bv = float(br[f"{m}_us"]) if br else 0.0
            cv = float(cr[f"{m}_us"]) if cr else 0.0
            row[f"baseline_{m}_us"] = bv
            row[f"candidate_{m}_us"] = cv
            row[f"{m}_pct"] = _pct(bv, cv)
            row[f"{m}_relative_status"] = _status(bv, cv)
            row[f"{m}_absolute_us"] = round(cv - bv, 3)
        rows.append(row)
    return rows


def _regression_order(row: dict[str, Any]) -> tuple[bool, float, float, float]:
    return (
        row["p99_relative_status"] == "new_nonzero_regression",
        row["p99_pct"] if row["p99_pct"] is not None else 0.0,
        row["p99_absolute_us"],
        row["median_pct"] if row["median_pct"] is not None else 0.0,
    )


def _worst_first(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Breakdown rows in the comparison's order: worst regression first
    (names break ties, as the rows are built by name)."""
    return sorted(rows, key=_regression_order, reverse=True)


def _reason(code: str, level: str, message: str, metric: str | None = None) -> dict[str, Any]:
    reason: dict[str, Any] = {"code": code, "level": level, "message": message}
    if metric is not None:
        reason["metric"] = metric
    return reason


@dataclass
class _Evaluation:
    """Everything :func:`compare` computes before it words reasons."""

    thresholds: dict[str, float]
    mismatch: list[str]
    delta: dict[str, Any] = field(default_factory=dict)
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    hidden_drop: float = 0.0
    hidden_result: str = "pass"
    breakdown: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    row_results: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    uncertainty: dict[str, int] = field(default_factory=dict)

    def overall(self, m: str) -> dict[str, Any]:
        return next(e for e in self.evaluations if e["metric"] == f"overall.{m}")

    def verdict(self) -> str:
        outcomes = [e["threshold_result"] for e in self.evaluations]
        if "fail" in outcomes:
            return "fail"
        return "warn" if "warn" in outcomes or self.mismatch else "pass"


def _evaluate_overall(ev: _Evaluation, bm: dict[str, Any], cm: dict[str, Any]) -> None:
    """Overall quantiles and the hidden-communication drop."""
    t = ev.thresholds
    for m in METRICS:
        bv, cv = float(bm[f"{m}_us"]), float(cm[f"{m}_us"])
        ev.delta[f"{m}_pct"] = _pct(bv, cv)
        ev.delta[f"{m}_relative_status"] = _status(bv, cv)
        ev.delta[f"{m}_absolute_us"] = round(cv - bv, 3)
    b_hidden, c_hidden = float(bm["communication_hidden_pct"]), float(cm["communication_hidden_pct"])
    ev.delta["communication_hidden_pct_points"] = round(c_hidden - b_hidden, 2)
    for m in METRICS:
        bv, cv = float(bm[f"{m}_us"]), float(cm[f"{m}_us"])
        t_pct, t_abs = t[f"{m}_threshold_pct"], t[f"{m}_absolute_threshold_us"]
        ev.evaluations.append(
            {
                "metric": f"overall.{m}",
                "baseline": round(bv, 3),
                "candidate": round(cv, 3),
                "absolute_delta": ev.delta[f"{m}_absolute_us"],
                "relative_delta_pct": ev.delta[f"{m}_pct"],
                "relative_status": ev.delta[f"{m}_relative_status"],
                "threshold_pct": t_pct,
                "absolute_threshold_us": t_abs,
                "threshold_result": _result(ev.delta[f"{m}_pct"], bv, cv, t_pct, t_abs),
            }
        )
    drop = max(0.0, b_hidden - c_hidden)
    t_hidden = t["hidden_drop_threshold_points"]
    ev.hidden_drop = drop
    ev.hidden_result = "fail" if drop > t_hidden else ("warn" if drop > t_hidden / 2 else "pass")
    ev.evaluations.append(
        {
            "metric": "overall.communication_hidden_pct_drop",
            "baseline": round(b_hidden, 2),
            "candidate": round(c_hidden, 2),
            "drop_points": round(drop, 2),
            "threshold_points": t_hidden,
            "threshold_result": ev.hidden_result,
        }
    )


def _evaluate_breakdown(ev: _Evaluation, baseline: Report, candidate: Report) -> None:
    """Per-phase and per-operation rows, against the breakdown thresholds."""
    ev.breakdown = {
        "by_phase": _breakdown(baseline.by_phase, candidate.by_phase),
        "by_op": _breakdown(baseline.by_op, candidate.by_op),
    }
    bt_pct, bt_abs = (
        ev.thresholds["breakdown_threshold_pct"],
        ev.thresholds["breakdown_absolute_threshold_us"],
    )
    for section, scope in SCOPES:
        for row in ev.breakdown[section]:
            results = {}
            for m in METRICS:
                bv, cv = row[f"baseline_{m}_us"], row[f"candidate_{m}_us"]
                result = _result(row[f"{m}_pct"], bv, cv, bt_pct, bt_abs)
                results[m] = result
                ev.evaluations.append(
                    {
                        "metric": f"{scope}.{m}",
                        "name": row["name"],
                        "baseline": bv,
                        "candidate": cv,
                        "absolute_delta": row[f"{m}_absolute_us"],
                        "relative_delta_pct": row[f"{m}_pct"],
                        "relative_status": row[f"{m}_relative_status"],
                        "threshold_pct": bt_pct,
                        "absolute_threshold_us": bt_abs,
                        "threshold_result": result,
                    }
                )
            ev.row_results[(scope, row["name"])] = results


def _evaluate_uncertainty(ev: _Evaluation, baseline: Report, candidate: Report) -> None:
    """Events whose rank-local compute fields were uncertain at capture: a warning each side."""
    for side, report in (("baseline", baseline), ("candidate", candidate)):
        summary = report.section("canary_summary") or {}
        n = int((summary.get("capture_uncertainty") or {}).get("compute_fields_uncertain_events", 0))
        ev.uncertainty[f"{side}_compute_fields_uncertain_events"] = n
        if n > 0:
            ev.evaluations.append(
                {"metric": f"uncertainty.{side}.compute_fields", "count": n, "threshold_result": "warn"}
            )


def _failure_reasons(ev: _Evaluation) -> list[dict[str, Any]]:
    """Failures, in the reference tool's order and wording."""
    reasons = []
    for m in REASON_ORDER:
        e = ev.overall(m)
        if e["threshold_result"] != "fail":
            continue
        if e["relative_delta_pct"] is None:
            message = (
                f"{m} regression is new nonzero latency ({e['absolute_delta']:.3f} us absolute delta from "
                "a zero baseline)"
            )
            reasons.append(_reason("new_nonzero_latency", "fail", message, f"overall.{m}"))
        else:
            message = f"{m} regression {e['relative_delta_pct']:.1f}% exceeds {e['threshold_pct']:.1f}%"
            reasons.append(_reason("latency_regression", "fail", message, f"overall.{m}"))
    if ev.hidden_result == "fail":
        t_hidden = ev.thresholds["hidden_drop_threshold_points"]
        message = (
            f"communication hidden percentage dropped {ev.hidden_drop:.2f} points, exceeding {t_hidden:.2f}"
        )
        reasons.append(
            _reason("hidden_communication_drop", "fail", message, "overall.communication_hidden_pct_drop")
        )
    bt_pct = ev.thresholds["breakdown_threshold_pct"]
    for section, scope in SCOPES:
        for row in _worst_first(ev.breakdown[section]):
            for m in REASON_ORDER:
                if ev.row_results[(scope, row["name"])][m] == "fail":
                    pct = row[f"{m}_pct"]
                    what = (
                        f"{m} regression is new nonzero latency"
                        if pct is None
                        else f"{m} regression {pct:.1f}% exceeds {bt_pct:.1f}%"
                    )
                    reasons.append(
                        _reason(
                            "breakdown_regression", "fail", f"{scope} '{row['name']}' {what}", f"{scope}.{m}"
                        )
                    )
                    break
    return reasons


def _overall_warnings(ev: _Evaluation) -> list[dict[str, Any]]:
    reasons = []
    for m in REASON_ORDER:
        e = ev.overall(m)
        if e["threshold_result"] == "warn":
            pct = e["relative_delta_pct"]
            amount = "new nonzero latency" if pct is None else f"{pct:.1f}% ({e['absolute_delta']:+.3f} us)"
            message = (
                f"{m} regression {amount} exceeds half of both thresholds ({e['threshold_pct'] / 2:.1f}% and "
                f"{e['absolute_threshold_us'] / 2:.3f} us) but not both failure thresholds "
                f"({e['threshold_pct']:.1f}% and {e['absolute_threshold_us']:.3f} us)"
            )
            reasons.append(_reason("latency_regression_warning", "warn", message, f"overall.{m}"))
    if ev.hidden_result == "warn":
        t_hidden = ev.thresholds["hidden_drop_threshold_points"]
        message = (
            f"communication hidden percentage dropped {ev.hidden_drop:.2f} points, above the warning level "
            f"{t_hidden / 2:.2f} (fails above {t_hidden:.2f})"
        )
        reasons.append(
            _reason(
                "hidden_communication_drop_warning", "warn", message, "overall.communication_hidden_pct_drop"
            )
        )
    return reasons


def _warning_reasons(ev: _Evaluation) -> list[dict[str, Any]]:
    """Warnings, named by what caused them; listed under a failure too."""
    reasons = _overall_warnings(ev)
    bt_pct, bt_abs = (
        ev.thresholds["breakdown_threshold_pct"],
        ev.thresholds["breakdown_absolute_threshold_us"],
    )
    for section, scope in SCOPES:
        for row in _worst_first(ev.breakdown[section]):
            results_row = ev.row_results[(scope, row["name"])]
            if "fail" in results_row.values():
                continue
            for m in REASON_ORDER:
                if results_row[m] == "warn":
                    pct = row[f"{m}_pct"]
                    amount = "new nonzero latency" if pct is None else f"{pct:.1f}%"
                    message = (
                        f"{scope} '{row['name']}' {m} regression {amount} exceeds half of both breakdown "
                        f"thresholds ({bt_pct / 2:.1f}% and {bt_abs / 2:.3f} us) but not both failure thresholds "
                        f"({bt_pct:.1f}% and {bt_abs:.3f} us)"
                    )
                    reasons.append(_reason("breakdown_regression_warning", "warn", message, f"{scope}.{m}"))
                    break
    for message in ev.mismatch:
        reasons.append(_reason("incompatible_reports", "warn", message))
    for side in ("baseline", "candidate"):
        n = ev.uncertainty[f"{side}_compute_fields_uncertain_events"]
        if n:
            reasons.append(
                _reason(
                    "uncertain_compute_fields",
                    "warn",
                    f"{side} has {n} events with uncertain rank-local compute fields",
                )
            )
    return reasons


def _compatibility_section(ev: _Evaluation, baseline: Report, candidate: Report) -> dict[str, Any]:
    b_canary, c_canary = baseline.section("canary") or {}, candidate.section("canary") or {}
    return {
        "compatible": not ev.mismatch,
        "reasons": ev.mismatch,
        "baseline_canary_sha256": b_canary.get("sha256"),
        "candidate_canary_sha256": c_canary.get("sha256"),
        "baseline_execution_semantic_sha256": b_canary.get("execution_semantic_sha256"),
        "candidate_execution_semantic_sha256": c_canary.get("execution_semantic_sha256"),
        "baseline_replay_protocol_sha256": (baseline.section("replay_protocol") or {}).get("sha256"),
        "candidate_replay_protocol_sha256": (candidate.section("replay_protocol") or {}).get("sha256"),
    }


def _document(ev: _Evaluation, baseline: Report, candidate: Report) -> dict[str, Any]:
    """The comparison document, members in the format's order."""
    reasons = _failure_reasons(ev) + _warning_reasons(ev)
    if not reasons:
        reasons.append(_reason("within_thresholds", "pass", "candidate is within configured thresholds"))
    by_phase = _worst_first(ev.breakdown["by_phase"])
    by_op = _worst_first(ev.breakdown["by_op"])
    return {
        "format": COMPARISON_FORMAT,
        "verdict": ev.verdict(),
        "reasons": reasons,
        "thresholds": ev.thresholds,
        "compatibility": _compatibility_section(ev, baseline, candidate),
        "uncertainty": ev.uncertainty,
        "baseline": {"backend": baseline.backend, "metrics": baseline.metrics},
        "candidate": {"backend": candidate.backend, "metrics": candidate.metrics},
        "delta": ev.delta,
        "breakdown_delta": {"by_phase": by_phase, "by_op": by_op},
        "worst_regressions": {
            "phase": by_phase[0] if by_phase else None,
            "operation": by_op[0] if by_op else None,
        },
        "evaluations": ev.evaluations,
    }


def compare(
    baseline: Report, candidate: Report, thresholds: Thresholds | None = None, *, allow_mismatch: bool = False
) -> dict[str, Any]:
    """Compare two reports; returns the comparison document.

    Raises :class:`commcanary.errors.InputError` naming both reports when
    they are incompatible (different canaries, model versions or replay
    protocols), unless ``allow_mismatch`` is set (then the verdict is at least
    ``warn``).
    """
    found = _compatibility(baseline, candidate)
    if found and not allow_mismatch:
        raise _mismatch_error(baseline, candidate, found)
    ev = _Evaluation((thresholds or Thresholds()).resolved(), [reason for reason, _ in found])
    _evaluate_overall(ev, baseline.metrics, candidate.metrics)
    _evaluate_breakdown(ev, baseline, candidate)
    _evaluate_uncertainty(ev, baseline, candidate)
    return _document(ev, baseline, candidate)
