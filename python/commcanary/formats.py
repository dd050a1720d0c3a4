"""Format identifiers written and read by this version of commcanary.

Each identifier is defined once, in the core (``commcanary-core``'s
``document`` table and its constants); this module names them for Python,
reading every value from :mod:`commcanary._core`, and ``commcanary
--version`` lists :data:`FORMATS`. ``tests/test_formats_from_core.py``
asserts that each is the core's object.
"""

from __future__ import annotations

from commcanary import _core

#: The canonical JSON every document is written as.
CANONICAL_JSON: str = _core.CANONICAL_JSON
#: The replay model's version.
REPLAY_MODEL: str = _core.REPLAY_MODEL

#: Every format this version reads or writes, by role (the core's table).
FORMATS: dict[str, str] = dict(_core.FORMATS)

TRACE_FORMAT: str = FORMATS["trace"]
CANARY_FORMAT: str = FORMATS["canary"]
#: A canary whose program is a step loop (``compile`` on a trace with iterations).
CANARY_LOOP_FORMAT: str = FORMATS["canary_step_loop"]
REPORT_FORMAT: str = FORMATS["report"]
COMPARISON_FORMAT: str = FORMATS["comparison"]
REPORT_VERIFICATION_FORMAT: str = FORMATS["report_verification"]
FIDELITY_VERIFICATION_FORMAT: str = FORMATS["fidelity_verification"]
BEHAVIOR_VERIFICATION_FORMAT: str = FORMATS["behavior_verification"]
BEHAVIOR_SEARCH_EVIDENCE_FORMAT: str = FORMATS["behavior_search_evidence"]
HANG_FORMAT: str = FORMATS["hang_diagnosis"]
STRAGGLERS_FORMAT: str = FORMATS["straggler_diagnosis"]
STEPS_FORMAT: str = FORMATS["step_recovery"]
#: ``commcanary comm-perf``: NCCL Inspector's records against nccl-tests.
COMM_PERF_FORMAT: str = FORMATS["communication_performance"]
TIMELINE_FORMAT: str = FORMATS["timeline"]
SIGNATURE_FORMAT: str = FORMATS["signature"]
BACKEND_FORMAT: str = FORMATS["backend"]
MODEL_VALIDATION_FORMAT: str = FORMATS["model_validation"]
CAPTURE_SHARD_FORMAT: str = FORMATS["capture_shard"]
CAPTURE_FAILURE_FORMAT: str = FORMATS["capture_failure"]
COMPILE_MANY_FORMAT: str = FORMATS["compile_many"]
#: ``backend.mode`` of a report measured on real collectives (``replay --physical``).
MEASURED_MODE: str = _core.MEASURED_MODE
