"""Format identifiers written and read by this version of commcanary.

Each identifier is defined here once; the modules that write a format import
its identifier from here, and ``commcanary --version`` lists :data:`FORMATS`.
"""

from __future__ import annotations

CANONICAL_JSON = "commcanary.canonical-json.v1"
REPLAY_MODEL = "deterministic-scheduler-v4"
TRACE_FORMAT = "commcanary.trace.v1"
CANARY_FORMAT = "commcanary.canary.v3"
#: A canary whose program is a step loop (``compile`` on a trace with iterations).
CANARY_LOOP_FORMAT = "commcanary.canary.v4"
REPORT_FORMAT = "commcanary.report.v3"
COMPARISON_FORMAT = "commcanary.compare.v3"
REPORT_VERIFICATION_FORMAT = "commcanary.report_verification.v1"
FIDELITY_VERIFICATION_FORMAT = "commcanary.fidelity_verification.v1"
BEHAVIOR_VERIFICATION_FORMAT = "commcanary.behavior_verification.v1"
BEHAVIOR_SEARCH_EVIDENCE_FORMAT = "commcanary.behavior_search_evidence.v1"
HANG_FORMAT = "commcanary.hang.v1"
STRAGGLERS_FORMAT = "commcanary.stragglers.v1"
STEPS_FORMAT = "commcanary.steps.v1"
TIMELINE_FORMAT = "commcanary.timeline.v1"
SIGNATURE_FORMAT = "commcanary.signature.v1"
#: ``backend.mode`` of a report measured on real collectives (``replay --physical``).
MEASURED_MODE = "physical-measurement"

#: Every format this version reads or writes, by role.
FORMATS: dict[str, str] = {
    "trace": TRACE_FORMAT,
    "canary": CANARY_FORMAT,
    "canary_step_loop": CANARY_LOOP_FORMAT,
    "report": REPORT_FORMAT,
    "comparison": COMPARISON_FORMAT,
    "report_verification": REPORT_VERIFICATION_FORMAT,
    "fidelity_verification": FIDELITY_VERIFICATION_FORMAT,
    "behavior_verification": BEHAVIOR_VERIFICATION_FORMAT,
    "behavior_search_evidence": BEHAVIOR_SEARCH_EVIDENCE_FORMAT,
    "hang_diagnosis": HANG_FORMAT,
    "straggler_diagnosis": STRAGGLERS_FORMAT,
    "step_recovery": STEPS_FORMAT,
    "timeline": TIMELINE_FORMAT,
    "signature": SIGNATURE_FORMAT,
}
