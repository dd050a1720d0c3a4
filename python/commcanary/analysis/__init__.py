"""Diagnoses of a job's evidence, computed in Rust.

* :func:`diagnose_hang` — who hung, and where: Flight Recorder dumps,
  profiler traces, stack dumps and exception texts in, a
  ``commcanary.hang.v1`` :class:`HangReport` out.
"""

from __future__ import annotations

from commcanary.analysis.hang import HANG_FORMAT, HangReport, diagnose_hang

__all__ = ["HANG_FORMAT", "HangReport", "diagnose_hang"]
