"""The NCCL profiler plugin's logs as a ``commcanary.trace.v1`` trace.

``libnccl-profiler-commcanary.so`` (``rust/commcanary-nccl-profiler``) writes
one set of segment files per process into ``COMMCANARY_NCCL_DIR``. The import
reads a whole directory in Rust: every process's records joined into
collectives and point-to-point operations (completion inferred from their
kernel-channel and proxy children, device time from the GPU's own stamps),
communicators as groups, and one event per collective instance across ranks,
matched by communicator and NCCL's sequence number. The rules live in
``rust/commcanary-core/src/import/nccl_profiler/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from commcanary import _core
from commcanary.importers.kineto import KinetoImport, job_import

if TYPE_CHECKING:
    from commcanary._types import NcclProcess

__all__ = ["CommProgress", "NcclProcess", "NcclProfilerImport", "import_nccl_profiler"]


@dataclass(frozen=True)
class CommProgress:
    """How far NCCL got on one communicator in one process."""

    group: str
    enqueued: int
    last_enqueued: int
    last_completed: int
    observed: int


@dataclass(frozen=True)
class ProcessLogs:
    """One process's logs: who it was, and what the plugin could not keep."""

    label: str
    rank: int
    abi: int
    segments: int
    sealed: int
    dropped: int
    torn: int
    orphans: int
    comms: tuple[CommProgress, ...]


@dataclass(frozen=True)
class NcclProfilerImport:
    """The job trace, its counts, and each process's logs (in rank order)."""

    job: KinetoImport
    processes: tuple[ProcessLogs, ...]

    @property
    def trace(self) -> _core.Trace:
        return self.job.trace

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the trace atomically as canonical ``commcanary.trace.v1`` JSON."""
        self.job.write(path)


def _process(p: NcclProcess) -> ProcessLogs:
    comms = tuple(
        CommProgress(c["group"], c["enqueued"], c["last_enqueued"], c["last_completed"], c["observed"])
        for c in p["comms"]
    )
    return ProcessLogs(
        p["label"],
        p["rank"],
        p["abi"],
        p["segments"],
        p["sealed"],
        p["dropped"],
        p["torn"],
        p["orphans"],
        comms,
    )


def import_nccl_profiler(
    directory: str | os.PathLike[str], *, workload_name: str = "nccl-profiler-import", strict: bool = False
) -> NcclProfilerImport:
    """Import a directory of NCCL profiler plugin logs.

    ``strict`` refuses collectives seen on some member ranks only. Raises
    :class:`commcanary.errors.InputError` naming the file for damaged or
    inconsistent logs.
    """
    trace, counts, partial, processes = _core.import_nccl_profiler(
        os.fspath(directory), workload_name=workload_name, strict=strict
    )
    return NcclProfilerImport(job_import(trace, counts, partial), tuple(_process(p) for p in processes))
