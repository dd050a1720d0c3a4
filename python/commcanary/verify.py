"""Report verification: recompute a report from its canary.

``verify_report(report, canary)`` first validates the report's structure (any
number that disagrees with the embedded samples raises
:class:`commcanary.errors.InputError` naming the section, row and field), then
re-runs the declared model over the canary with the report's own settings and
compares every section: ``canary``, ``simulation_model``, ``replay_protocol``,
``backend``, ``workload``, ``canary_summary``, ``metrics``, ``by_phase``,
``by_op``, ``calibration`` and, when embedded, ``samples``. The recomputation
does not read the report's numbers; it only reads its declared settings.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from commcanary import _core

__all__ = ["REPORT_VERIFICATION_FORMAT", "verify_report"]

from commcanary.formats import MEASURED_MODE, REPORT_VERIFICATION_FORMAT


def verify_report(report: str | os.PathLike[str], canary: str | os.PathLike[str]) -> dict[str, Any]:
    """Verify the report file against the canary file; returns the verification document."""
    checks = []
    for one in _core.verify_report_files(os.fspath(report), os.fspath(canary)):
        check: dict[str, Any] = {"name": one["name"], "status": "pass" if one["passed"] else "fail"}
        if not one["passed"]:
            expected, actual = one["expected"], one["actual"]
            check["expected"] = orjson.loads(expected) if expected is not None else None
            check["actual"] = orjson.loads(actual) if actual is not None else None
        checks.append(check)
    ok = all(c["status"] == "pass" for c in checks)
    backend = orjson.loads(_core.read_report_file(os.fspath(report), samples=False).sections()["backend"])
    if backend.get("mode") == MEASURED_MODE:
        # A measurement cannot be re-run: structure and reconciliation only.
        return {
            "format": REPORT_VERIFICATION_FORMAT,
            "status": "measured_reconciled" if ok else "failed",
            "assurance_state": "measured_not_recomputable",
            "note": (
                f"a measured report ({backend.get('engine')} on {backend.get('host')}) cannot be recomputed; "
                "checked: the canary it names, its structure, and that its metrics and breakdowns "
                "recompute from its samples and every sample satisfies the scheduler's equations"
            ),
            "checks": checks,
        }
    return {
        "format": REPORT_VERIFICATION_FORMAT,
        "status": "model_recomputed" if ok else "failed",
        "assurance_state": "model_recomputed" if ok else "structurally_valid",
        "checks": checks,
    }
