"""PyTorch Flight Recorder dumps, read in Rust into columns.

A dump is a pickle (``_dump_fr_trace``, ``_dump_nccl_trace``, the files
written on a NCCL timeout) or JSON (``_dump_fr_trace_json``). The pickle is
untrusted input: the Rust reader builds only plain containers, strings and
numbers and refuses every global, so a dump that tries to import
``os.system`` is an :class:`~commcanary.errors.InputError` and nothing runs.
The entries come back as numpy columns, never as per-entry Python objects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from commcanary import _core

if TYPE_CHECKING:
    from commcanary._types import FlightRecorderEntries, GroupConfig, GroupStatus

__all__ = ["FlightRecorderDump", "read_flight_recorder"]


@dataclass(frozen=True)
class FlightRecorderDump:
    """One rank's dump: its header and its ring entries as columns."""

    version: str
    comm_lib_version: str
    encoding: str
    pg_config: tuple[GroupConfig, ...]
    pg_status: tuple[GroupStatus, ...]
    entries: FlightRecorderEntries = field(repr=False)

    def __len__(self) -> int:
        return len(self.entries["record_id"])


def read_flight_recorder(path: str | os.PathLike[str]) -> FlightRecorderDump:
    """Read one dump; ``entries`` maps each field to a numpy array (numbers,
    flags) or a list (names, shapes, dtypes), in ring order."""
    raw = _core.read_flight_recorder_file(os.fspath(path))
    return FlightRecorderDump(
        version=raw["version"],
        comm_lib_version=raw["comm_lib_version"],
        encoding=raw["encoding"],
        pg_config=tuple(raw["pg_config"]),
        pg_status=tuple(raw["pg_status"]),
        entries=raw["entries"],
    )
