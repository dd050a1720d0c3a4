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

from dataclasses import asdict, dataclass
from typing import Any

from commcanary.errors import InputError
from commcanary.replay import Report

__all__ = ["COMPARISON_FORMAT", "Thresholds", "compare"]

COMPARISON_FORMAT = "commcanary.compare.v3"
METRICS = ("median", "p95", "p99")


@dataclass(frozen=True)
class Thresholds:
    """Comparison thresholds; breakdown ones default to the p99 ones."""

    p99_threshold_pct: float = 15.0
    p95_threshold_pct: float = 10.0
    median_threshold_pct: float = 8.0
    p99_absolute_threshold_us: float = 1.0
    p95_absolute_threshold_us: float = 1.0
    median_absolute_threshold_us: float = 1.0
    hidden_drop_threshold_points: float = 5.0
    breakdown_threshold_pct: float | None = None
    breakdown_absolute_threshold_us: float | None = None

    def resolved(self) -> dict[str, float]:
        """All nine thresholds with the breakdown ones resolved."""
        values = asdict(self)
        for name, value in values.items():
            if value is not None and not value >= 0:
                raise InputError(f"{name.replace('-', '_')} must be non-negative")
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


def _compatibility(base: Report, cand: Report) -> list[str]:
    reasons = []
    bc, cc = base.section("canary") or {}, cand.section("canary") or {}
    if bc.get("execution_semantic_sha256") and cc.get("execution_semantic_sha256"):
        if bc["execution_semantic_sha256"] != cc["execution_semantic_sha256"]:
            reasons.append("reports were produced from different executable canary fingerprints")
    elif bc.get("sha256") != cc.get("sha256"):
        reasons.append("reports were produced from different canary fingerprints")
    if (base.section("simulation_model") or {}).get("version") != (
        cand.section("simulation_model") or {}
    ).get("version"):
        reasons.append("reports use different simulation model versions")
    if (base.section("replay_protocol") or {}).get("sha256") != (cand.section("replay_protocol") or {}).get(
        "sha256"
    ):
        reasons.append("reports use different replay protocol fingerprints")
    return reasons


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


def _reason(code: str, level: str, message: str, metric: str | None = None) -> dict[str, Any]:
    reason: dict[str, Any] = {"code": code, "level": level, "message": message}
    if metric is not None:
        reason["metric"] = metric
    return reason


def compare(
    baseline: Report, candidate: Report, thresholds: Thresholds | None = None, *, allow_mismatch: bool = False
) -> dict[str, Any]:
    """Compare two reports; returns the comparison document.

    Raises :class:`commcanary.errors.InputError` for incompatible reports
    unless ``allow_mismatch`` is set (then the verdict is at least ``warn``).
    """
    t = (thresholds or Thresholds()).resolved()
    mismatch = _compatibility(baseline, candidate)
    if mismatch and not allow_mismatch:
        raise InputError("; ".join(mismatch))
    bm, cm = baseline.metrics, candidate.metrics

    delta: dict[str, Any] = {}
    evaluations: list[dict[str, Any]] = []
    for m in METRICS:
        bv, cv = float(bm[f"{m}_us"]), float(cm[f"{m}_us"])
        pct = _pct(bv, cv)
        delta[f"{m}_pct"] = pct
        delta[f"{m}_relative_status"] = _status(bv, cv)
        delta[f"{m}_absolute_us"] = round(cv - bv, 3)
    hidden_points = round(float(cm["communication_hidden_pct"]) - float(bm["communication_hidden_pct"]), 2)
    delta["communication_hidden_pct_points"] = hidden_points
    for m in METRICS:
        bv, cv = float(bm[f"{m}_us"]), float(cm[f"{m}_us"])
        t_pct, t_abs = t[f"{m}_threshold_pct"], t[f"{m}_absolute_threshold_us"]
        evaluations.append(
            {
                "metric": f"overall.{m}",
                "baseline": round(bv, 3),
                "candidate": round(cv, 3),
                "absolute_delta": delta[f"{m}_absolute_us"],
                "relative_delta_pct": delta[f"{m}_pct"],
                "relative_status": delta[f"{m}_relative_status"],
                "threshold_pct": t_pct,
                "absolute_threshold_us": t_abs,
                "threshold_result": _result(delta[f"{m}_pct"], bv, cv, t_pct, t_abs),
            }
        )
    drop = max(0.0, float(bm["communication_hidden_pct"]) - float(cm["communication_hidden_pct"]))
    t_hidden = t["hidden_drop_threshold_points"]
    hidden_result = "fail" if drop > t_hidden else ("warn" if drop > t_hidden / 2 else "pass")
    evaluations.append(
        {
            "metric": "overall.communication_hidden_pct_drop",
            "baseline": round(float(bm["communication_hidden_pct"]), 2),
            "candidate": round(float(cm["communication_hidden_pct"]), 2),
            "drop_points": round(drop, 2),
            "threshold_points": t_hidden,
            "threshold_result": hidden_result,
        }
    )
    breakdown = {
        "by_phase": _breakdown(baseline.by_phase, candidate.by_phase),
        "by_op": _breakdown(baseline.by_op, candidate.by_op),
    }
    bt_pct, bt_abs = t["breakdown_threshold_pct"], t["breakdown_absolute_threshold_us"]
    row_results: dict[tuple[str, str], dict[str, str]] = {}
    for section, scope in (("by_phase", "phase"), ("by_op", "operation")):
        for row in breakdown[section]:
            results = {}
            for m in METRICS:
                bv, cv = row[f"baseline_{m}_us"], row[f"candidate_{m}_us"]
                result = _result(row[f"{m}_pct"], bv, cv, bt_pct, bt_abs)
                results[m] = result
                evaluations.append(
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
            row_results[(scope, row["name"])] = results
    uncertainty = {}
    for side, report in (("baseline", baseline), ("candidate", candidate)):
        summary = report.section("canary_summary") or {}
        n = int((summary.get("capture_uncertainty") or {}).get("compute_fields_uncertain_events", 0))
        uncertainty[f"{side}_compute_fields_uncertain_events"] = n
        if n > 0:
            evaluations.append(
                {"metric": f"uncertainty.{side}.compute_fields", "count": n, "threshold_result": "warn"}
            )

    outcomes = [e["threshold_result"] for e in evaluations]
    verdict = "fail" if "fail" in outcomes else ("warn" if "warn" in outcomes or mismatch else "pass")

    reasons: list[dict[str, Any]] = []
    # Failures, in the reference tool's order and wording.
    for m in ("p99", "p95", "median"):
        ev = next(e for e in evaluations if e["metric"] == f"overall.{m}")
        if ev["threshold_result"] == "fail":
            if ev["relative_delta_pct"] is None:
                message = (
                    f"{m} regression is new nonzero latency ({ev['absolute_delta']:.3f} us absolute delta from "
                    "a zero baseline)"
                )
                reasons.append(_reason("new_nonzero_latency", "fail", message, f"overall.{m}"))
            else:
                message = f"{m} regression {ev['relative_delta_pct']:.1f}% exceeds {ev['threshold_pct']:.1f}%"
                reasons.append(_reason("latency_regression", "fail", message, f"overall.{m}"))
    if hidden_result == "fail":
        message = f"communication hidden percentage dropped {drop:.2f} points, exceeding {t_hidden:.2f}"
        reasons.append(
            _reason("hidden_communication_drop", "fail", message, "overall.communication_hidden_pct_drop")
        )
    for section, scope in (("by_phase", "phase"), ("by_op", "operation")):
        for row in sorted(breakdown[section], key=lambda r: r["name"]):
            for m in ("p99", "p95", "median"):
                if row_results[(scope, row["name"])][m] == "fail":
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
    # Warnings: named by what caused them, listed under a failure too.
    for m in ("p99", "p95", "median"):
        ev = next(e for e in evaluations if e["metric"] == f"overall.{m}")
        if ev["threshold_result"] == "warn":
            pct = ev["relative_delta_pct"]
            amount = "new nonzero latency" if pct is None else f"{pct:.1f}% ({ev['absolute_delta']:+.3f} us)"
            message = (
                f"{m} regression {amount} exceeds half of both thresholds ({ev['threshold_pct'] / 2:.1f}% and "
                f"{ev['absolute_threshold_us'] / 2:.3f} us) but not both failure thresholds "
                f"({ev['threshold_pct']:.1f}% and {ev['absolute_threshold_us']:.3f} us)"
            )
            reasons.append(_reason("latency_regression_warning", "warn", message, f"overall.{m}"))
    if hidden_result == "warn":
        message = (
            f"communication hidden percentage dropped {drop:.2f} points, above the warning level "
            f"{t_hidden / 2:.2f} (fails above {t_hidden:.2f})"
        )
        reasons.append(
            _reason(
                "hidden_communication_drop_warning", "warn", message, "overall.communication_hidden_pct_drop"
            )
        )
    for section, scope in (("by_phase", "phase"), ("by_op", "operation")):
        for row in sorted(breakdown[section], key=lambda r: r["name"]):
            results_row = row_results[(scope, row["name"])]
            if "fail" in results_row.values():
                continue
            for m in ("p99", "p95", "median"):
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
    for message in mismatch:
        reasons.append(_reason("incompatible_reports", "warn", message))
    for side in ("baseline", "candidate"):
        n = uncertainty[f"{side}_compute_fields_uncertain_events"]
        if n:
            reasons.append(
                _reason(
                    "uncertain_compute_fields",
                    "warn",
                    f"{side} has {n} events with uncertain rank-local compute fields",
                )
            )
    if not reasons:
        reasons.append(_reason("within_thresholds", "pass", "candidate is within configured thresholds"))

    def sorted_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(rows, key=_regression_order, reverse=True)

    by_phase, by_op = sorted_rows(breakdown["by_phase"]), sorted_rows(breakdown["by_op"])
    return {
        "format": COMPARISON_FORMAT,
        "verdict": verdict,
        "reasons": reasons,
        "thresholds": t,
        "compatibility": {
            "compatible": not mismatch,
            "reasons": mismatch,
            "baseline_canary_sha256": (baseline.section("canary") or {}).get("sha256"),
            "candidate_canary_sha256": (candidate.section("canary") or {}).get("sha256"),
            "baseline_execution_semantic_sha256": (baseline.section("canary") or {}).get(
                "execution_semantic_sha256"
            ),
            "candidate_execution_semantic_sha256": (candidate.section("canary") or {}).get(
                "execution_semantic_sha256"
            ),
            "baseline_replay_protocol_sha256": (baseline.section("replay_protocol") or {}).get("sha256"),
            "candidate_replay_protocol_sha256": (candidate.section("replay_protocol") or {}).get("sha256"),
        },
        "uncertainty": uncertainty,
        "baseline": {"backend": baseline.backend, "metrics": bm},
        "candidate": {"backend": candidate.backend, "metrics": cm},
        "delta": delta,
        "breakdown_delta": {"by_phase": by_phase, "by_op": by_op},
        "worst_regressions": {
            "phase": by_phase[0] if by_phase else None,
            "operation": by_op[0] if by_op else None,
        },
        "evaluations": evaluations,
    }
