"""Exporters: a canary, or a job, in other tools' formats.

The walk over the canary's occurrences and every entry are written in Rust.

* :func:`export_param` — PARAM comms-replay JSON: the reference single list
  and PARAM's per-rank files.
* :func:`timeline` — a job's per-rank timeline as Chrome-trace JSON for
  Perfetto, with straggler and hang marks.
"""

from __future__ import annotations

from commcanary.exporters.param import ParamExport, export_param
from commcanary.exporters.timeline import Timeline, timeline

__all__ = ["ParamExport", "Timeline", "export_param", "timeline"]
