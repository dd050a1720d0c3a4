"""Recording a running program's collectives: ``record_collective``.

A process records with the recorder its environment selects:
``COMMCANARY_TRACE_DIR`` (a shard file per process in that directory, what
``commcanary capture`` sets), else ``COMMCANARY_TRACE_OUT`` (one shard next
to that path), else nothing (every call is a cheap no-op). A shard is JSON
Lines: a header line (format ``commcanary.capture-shard.v1``, the capture
session, the process's rank and pid, the workload name) and one line per
recorded call, each written whole and flushed as it is recorded, so a
process that is killed leaves every call it finished recording usable.
Arrival times are wall-clock (``time.time_ns()``, one clock per host), so
shards of one host merge into measured per-rank arrivals
(:mod:`commcanary.capture.merge`).

Besides calls, a shard carries *notes*: lines with a ``kind``, which readers
of calls skip. ``progress`` (the process's per-group counters and the calls
it is inside, written by :mod:`commcanary.capture.live` as they change),
``evidence`` (what an evidence request wrote) and ``end`` (the process
exited normally). ``commcanary agent`` reads them while the job runs.

The rank label is the first non-empty of ``COMMCANARY_RANK``, ``RANK``,
``OMPI_COMM_WORLD_RANK``, ``SLURM_PROCID``, ``LOCAL_RANK``. On several hosts,
``COMMCANARY_CLOCK_OFFSET_US`` (µs added to this host's clock) puts every
shard on one clock.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from commcanary import formats
from commcanary.errors import OptionError

__all__ = [
    "SHARD_FORMAT",
    "ShardRecorder",
    "current_phase",
    "current_step",
    "record_collective",
    "recorder",
    "step",
]

SHARD_FORMAT = formats.CAPTURE_SHARD_FORMAT
_RANK_VARIABLES = ("COMMCANARY_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "LOCAL_RANK")


def _rank_label() -> str:
    for name in _RANK_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return "unknown"


class ShardRecorder:
    """Appends recorded calls to one shard file (thread-safe)."""

    def __init__(self, path: Path, *, session: str, rank: str, workload: str) -> None:
        self.path = path
        self.session = session
        self.rank = rank
        self._lock = threading.Lock()
        self._seq = 0
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL, 0o600)
        offset = os.environ.get("COMMCANARY_CLOCK_OFFSET_US", "").strip()
        header: dict[str, Any] = {
            "format": SHARD_FORMAT,
            "capture_session_id": session,
            "rank": rank,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "workload": {"name": workload},
        }
        if offset:
            value = float(offset)
            if not math.isfinite(value):
                raise OptionError("COMMCANARY_CLOCK_OFFSET_US", "must be a finite number of microseconds")
            header["clock_offset_us"] = value
        self._write(header)

    def _write(self, obj: Mapping[str, Any]) -> None:
        # One write(2) per line: a line is whole on disk or absent, unless the
        # process dies inside the call (a torn line the merge refuses).
        os.write(self._fd, orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE))

    def note(self, kind: str, fields: Mapping[str, Any]) -> None:
        """Append a note line (``kind`` and ``wall_ns`` added here)."""
        line = {**fields, "kind": kind, "wall_ns": time.time_ns()}
        with self._lock:
            self._write(line)

    def record(self, event: dict[str, Any]) -> None:
        """Append one event (``id`` and ``collective_seq`` are assigned here)."""
        with self._lock:
            event["id"] = f"event-{self._seq:06d}"
            event["collective_seq"] = self._seq
            event["capture_session_id"] = self.session
            event["recorder_rank"] = self.rank
            self._seq += 1
            self._write(event)


_step: list[int] = []
_phases = threading.local()


def step(number: int | None = None) -> int:
    """Marks the start of a training or serving step: collectives recorded
    from now on carry it (``step``), unless a call names its own. Without
    ``number`` the step after the previous one (0 first). Returns it."""
    with _lock:
        value = (_step[0] + 1 if _step else 0) if number is None else int(number)
        if value < 0:
            raise OptionError("number", "must be non-negative")
        _step[:] = [value]
    from commcanary.capture import flight

    flight.mark_step(value)
    return value


def current_step() -> int | None:
    """The step :func:`step` last marked, if any."""
    return _step[0] if _step else None


def current_phase() -> str | None:
    """The innermost phase range open on this thread (see
    :func:`commcanary.capture.torch.install`), if any."""
    stack: list[str] = getattr(_phases, "stack", [])
    return stack[-1] if stack else None


def push_phase(name: str) -> None:
    """Opens a phase range on this thread."""
    if not hasattr(_phases, "stack"):
        _phases.stack = []
    _phases.stack.append(name)


def pop_phase() -> None:
    """Closes the innermost phase range on this thread."""
    stack: list[str] = getattr(_phases, "stack", [])
    if stack:
        stack.pop()


class _NoRecorder:
    def record(self, event: dict[str, Any]) -> None:
        del event

    def note(self, kind: str, fields: Mapping[str, Any]) -> None:
        del kind, fields


_NO_RECORDER = _NoRecorder()


_lock = threading.Lock()
_state: dict[str, Any] = {}


def recorder() -> ShardRecorder | _NoRecorder:
    """This process's recorder, created on first use from the environment (a
    forked child gets its own shard)."""
    with _lock:
        if _state.get("pid") == os.getpid():
            current: ShardRecorder | _NoRecorder = _state["recorder"]
            return current
        directory = os.environ.get("COMMCANARY_TRACE_DIR")
        single = os.environ.get("COMMCANARY_TRACE_OUT")
        session = os.environ.get("COMMCANARY_CAPTURE_SESSION_ID") or str(uuid.uuid4())
        workload = os.environ.get("COMMCANARY_WORKLOAD_NAME") or "instrumented-workload"
        rank = _rank_label()
        made: ShardRecorder | _NoRecorder
        tag = "".join(c if c.isalnum() else "_" for c in rank)[:32]
        name = f"rank-{tag}-pid-{os.getpid()}-rec-{uuid.uuid4().hex}.shard.jsonl"
        if directory:
            made = ShardRecorder(Path(directory) / name, session=session, rank=rank, workload=workload)
        elif single:
            target = Path(single)
            made = ShardRecorder(
                target.with_name(f"{target.name}.{name}"), session=session, rank=rank, workload=workload
            )
        else:
            made = _NO_RECORDER
        if isinstance(made, ShardRecorder):
            atexit.register(_end, made, os.getpid())
        _state.update(pid=os.getpid(), recorder=made)
        return made


def _end(made: ShardRecorder, pid: int) -> None:
    """The ``end`` note of a process that exits normally (a killed one
    leaves none: how a reader tells a death from an exit)."""
    if pid == os.getpid():
        with contextlib.suppress(OSError):
            made.note("end", {})


def _non_negative(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise OptionError(name, "must be a non-negative finite number")
    return float(value)


def record_collective(
    op: str,
    ranks: Sequence[int] | int,
    byte_count: int | None = None,
    *,
    bytes: int | None = None,
    dtype: str | None = None,
    phase: str = "unknown",
    group: str = "default",
    compute_before_us: float = 0.0,
    compute_overlap_us: float = 0.0,
    collective_id: str | int | None = None,
    sender_rank: int | None = None,
    receiver_rank: int | None = None,
    root_rank: int | None = None,
    tag: str | None = None,
    duration_us: float | None = None,
    step: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    called_at_ns: int | None = None,
    use_current_step: bool = True,
) -> None:
    """Record one collective (or one side of a transfer) called now.

    Exactly one of ``byte_count`` / ``bytes``. ``collective_id`` names the
    instance across ranks (each member records it with the same id); with
    several recording processes it is what the merge pairs. ``duration_us``
    is how long the call took on this rank, when known; ``called_at_ns``
    (``time.time_ns()`` at the call) when the call is recorded after it
    returned, else the call is taken to be now. ``use_current_step=False``
    keeps a call without ``step`` stepless instead of taking the step
    :func:`step` marked last (a call recorded long after it was made).
    """
    now_ns = time.time_ns() if called_at_ns is None else int(called_at_ns)
    sink = _state["recorder"] if _state.get("pid") == os.getpid() else recorder()
    if sink is _NO_RECORDER:
        return
    size = byte_count if bytes is None else bytes
    if (byte_count is None) == (bytes is None):
        raise OptionError("byte_count", "or bytes must be given, not both")
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise OptionError("bytes", "must be a positive integer")
    if not isinstance(op, str) or not op:
        raise OptionError("op", "must be a non-empty string")
    members = list(range(ranks)) if isinstance(ranks, int) else [int(r) for r in ranks]
    if not members or len(set(members)) != len(members) or min(members) < 0:
        raise OptionError("ranks", "must be distinct non-negative integers")
    for name, rank in (
        ("sender_rank", sender_rank),
        ("receiver_rank", receiver_rank),
        ("root_rank", root_rank),
    ):
        if rank is not None and rank not in members:
            raise OptionError(name, "must be one of the ranks")
    if step is None and _step and use_current_step:
        step = _step[0]
    if phase == "unknown":
        phase = current_phase() or phase
    event: dict[str, Any] = {
        "op": op,
        "bytes": size,
        "ranks": members,
        "group": group,
        "phase": phase,
        "wall_ns": now_ns,
        "compute_before_us": _non_negative("compute_before_us", compute_before_us),
        "compute_overlap_us": _non_negative("compute_overlap_us", compute_overlap_us),
    }
    optional = {
        "dtype": dtype,
        "collective_id": None if collective_id is None else str(collective_id),
        "sender_rank": sender_rank,
        "receiver_rank": receiver_rank,
        "root_rank": root_rank,
        "tag": tag,
        "duration_us": _non_negative("duration_us", duration_us),
        "step": step,
        "metadata": dict(metadata) if metadata is not None else None,
    }
    event.update({k: v for k, v in optional.items() if v is not None})
    sink.record(event)
