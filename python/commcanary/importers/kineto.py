"""One rank's PyTorch profiler (Kineto) trace as a ``commcanary.trace.v1`` trace.

The rules (which events are collectives, what is skipped, how bytes and group
ranks are derived, what the workload notes say is not claimed) are the core's;
see ``rust/commcanary-core/src/import/kineto.rs``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from commcanary import _core

__all__ = ["KinetoImport", "import_kineto"]


@dataclass(frozen=True)
class KinetoImport:
    """An imported trace and what the import kept and skipped."""

    trace: _core.Trace
    imported: int
    control: int
    empty: int
    nested: int

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the trace atomically as canonical ``commcanary.trace.v1`` JSON."""
        self.trace.write(os.fspath(path))
        return Path(path)


def import_kineto(
    path: str | os.PathLike[str],
    *,
    workload_name: str = "kineto-import",
    phase: str | None = None,
    process_group: str | None = None,
    max_input_bytes: int | None = None,
    max_json_items: int | None = None,
) -> KinetoImport:
    """Import one rank's Kineto trace (plain or gzip Chrome-trace JSON).

    ``phase`` labels every event; ``process_group`` keeps one group's
    collectives; the two limits raise the input bounds for this call.
    Raises :class:`commcanary.errors.InputError` for anything that is not an
    importable profile, including group membership it would have to guess.
    """
    trace, counts = _core.import_kineto_file(
        os.fspath(path),
        workload_name=workload_name,
        phase=phase,
        process_group=process_group,
        max_input_bytes=max_input_bytes,
        max_json_items=max_json_items,
    )
    return KinetoImport(trace, counts["imported"], counts["control"], counts["empty"], counts["nested"])
