"""Importers: other tools' traces as commcanary traces.

Parsing happens in Rust, from the file's bytes into columns; the result is
the same :class:`commcanary.Trace` that :func:`commcanary.load_trace` returns,
ready to compile, inspect as numpy arrays, or write.

* :func:`import_kineto` — PyTorch profiler (Kineto) traces of one rank or a job.
* :func:`import_nccl_profiler` — the NCCL profiler plugin's log directory.
* :func:`read_flight_recorder` — one PyTorch Flight Recorder dump (pickle or
  JSON) as columns; the hang diagnosis reads dumps the same way.
"""

from __future__ import annotations

from commcanary.importers.flight_recorder import FlightRecorderDump, read_flight_recorder
from commcanary.importers.kineto import (
    KinetoImport,
    PartialCollective,
    default_cache_dir,
    import_kineto,
    kineto_files,
)
from commcanary.importers.nccl_profiler import NcclProfilerImport, import_nccl_profiler

__all__ = [
    "FlightRecorderDump",
    "KinetoImport",
    "NcclProfilerImport",
    "PartialCollective",
    "default_cache_dir",
    "import_kineto",
    "import_nccl_profiler",
    "kineto_files",
    "read_flight_recorder",
]
