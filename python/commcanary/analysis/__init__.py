"""Diagnoses of a job's evidence, computed in Rust.

* :func:`diagnose_hang` — who hung, and where: Flight Recorder dumps,
  profiler traces, stack dumps and exception texts in, a
  ``commcanary.hang.v1`` :class:`HangReport` out.
* :func:`diagnose_stragglers` — who is slow, and what it costs: per-rank
  profiler traces in, a ``commcanary.stragglers.v1``
  :class:`StragglerReport` out.
* :func:`recover_steps` — iteration boundaries from the collective sequence
  alone: per-rank profiler traces in, a ``commcanary.steps.v1``
  :class:`StepsReport` out.
"""

from __future__ import annotations

from commcanary.analysis.hang import HANG_FORMAT, HangReport, diagnose_hang
from commcanary.analysis.steps import STEPS_FORMAT, StepsReport, recover_steps
from commcanary.analysis.stragglers import STRAGGLERS_FORMAT, StragglerReport, diagnose_stragglers

__all__ = [
    "HANG_FORMAT",
    "STEPS_FORMAT",
    "STRAGGLERS_FORMAT",
    "HangReport",
    "StepsReport",
    "StragglerReport",
    "diagnose_hang",
    "diagnose_stragglers",
    "recover_steps",
]
