"""Flight Recorder dumps (pickle or JSON): the Python adapter over the Rust
reader, then a hang diagnosis of the dump alone."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness

with _harness.instrumented():
    from commcanary.analysis.hang import diagnose_hang
    from commcanary.importers.flight_recorder import read_flight_recorder


def one(data: bytes) -> None:
    dump = _harness.scratch("fr_trace_rank_0", data)
    read = read_flight_recorder(dump)
    assert len(read) == len(read.entries["record_id"])
    diagnose_hang([dump])


if __name__ == "__main__":
    _harness.fuzz(one)
