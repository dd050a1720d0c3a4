"""The communication calls in a rank's Kineto traces, read independently of commcanary.

Used by the scorer to place the true iteration boundaries of marker-free runs on the calls the
traces hold: a call is a ``c10d::*`` op (the calling thread's record of every torch.distributed
call, gloo or NCCL), else a ``record_param_comms`` event (NCCL-only traces), else a ``gloo:*``
range; its wall-clock start is ``baseTimeNanoseconds + ts * 1000`` (CLOCK_REALTIME ns, the same
clock as the program's ``time.time_ns()``).
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRACE_NAME = re.compile(r"^rank(\d+)(\.window(\d+))?\.json(\.gz)?$")


@dataclass(frozen=True)
class CommCall:
    start_ns: int
    end_ns: int
    name: str
    dims: str
    file: str


def load_trace(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc: dict[str, Any] = json.loads(raw)
    return doc


def trace_files(evidence: Path) -> list[Path]:
    """The Kineto traces of a run's evidence (top level, named ``rank{r}[.window{k}].json``)."""
    return sorted(p for p in evidence.iterdir() if p.is_file() and TRACE_NAME.match(p.name))


def comm_calls(path: Path) -> tuple[int | None, list[CommCall]]:
    """(rank from ``distributedInfo``, the trace's communication calls in start order)."""
    doc = load_trace(path)
    base = int(doc.get("baseTimeNanoseconds", 0))
    info = doc.get("distributedInfo") or {}
    rank = info.get("rank")
    events = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X" and isinstance(e.get("name"), str)]
    for prefix in ("c10d::", "record_param_comms", "gloo:"):
        chosen = [e for e in events if e["name"].startswith(prefix)]
        if chosen:
            break
    calls = []
    for e in chosen:
        start = base + round(float(e["ts"]) * 1000)
        end = start + round(float(e.get("dur", 0)) * 1000)
        dims = json.dumps((e.get("args") or {}).get("Input Dims"), separators=(",", ":"))
        calls.append(CommCall(start, end, e["name"], dims, path.name))
    calls.sort(key=lambda c: c.start_ns)
    return (int(rank) if rank is not None else None), calls


def rank_calls(evidence: Path) -> dict[int, list[CommCall]]:
    """Every rank's communication calls over all its trace files, in start order."""
    out: dict[int, list[CommCall]] = {}
    for p in trace_files(evidence):
        rank, calls = comm_calls(p)
        if rank is None:
            m = TRACE_NAME.match(p.name)
            assert m is not None
            rank = int(m.group(1))
        out.setdefault(rank, []).extend(calls)
    for calls in out.values():
        calls.sort(key=lambda c: c.start_ns)
    return out


def has_profiler_steps(path: Path) -> bool:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return b"ProfilerStep#" in raw
