"""Diagnoses of a job's evidence, computed in Rust.

* :func:`diagnose_hang` — who hung, and where: Flight Recorder dumps,
  profiler traces, stack dumps and exception texts in, a
  ``commcanary.hang.v1`` :class:`HangReport` out.
* :func:`diagnose_stragglers` — who is slow, and what it costs: per-rank
  profiler traces in, a ``commcanary.stragglers.v1``
  :class:`StragglerReport` out.
"""

from __future__ import annotations

from commcanary.analysis.hang import HANG_FORMAT, HangReport, diagnose_hang
from commcanary.analysis.stragglers import STRAGGLERS_FORMAT, StragglerReport, diagnose_stragglers

__all__ = [
    "HANG_FORMAT",
    "STRAGGLERS_FORMAT",
    "HangReport",
    "StragglerReport",
    "diagnose_hang",
    "diagnose_stragglers",
]
