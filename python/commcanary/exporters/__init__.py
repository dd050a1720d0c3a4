"""Exporters: a canary in other tools' formats.

The walk over the canary's occurrences and every entry are written in Rust.

* :func:`export_param` — PARAM comms-replay JSON: the reference single list
  and PARAM's per-rank files.
"""

from __future__ import annotations

from commcanary.exporters.param import ParamExport, export_param

__all__ = ["ParamExport", "export_param"]
