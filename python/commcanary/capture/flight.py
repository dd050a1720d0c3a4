"""Every collective a process runs, read from its Flight Recorder ring.

DDP's gradient buckets, its buffer broadcasts and FSDP's all_gathers and
reduce_scatters are issued from C++, past the Python functions that
:mod:`commcanary.capture.torch` wraps. torch's Flight Recorder sees them all:
each process keeps a ring of its last ``TORCH_FR_BUFFER_SIZE`` collectives
(group, per-group sequence number, sizes, dtypes, creation time). When the
ring is on, :func:`start` runs a low-priority thread that reads the ring's
new entries (``_dump_fr_trace_json``) and records each collective once:

* **identity**: the group's name and global ranks, the op from the entry's
  profiling name, bytes and dtype from its input tensors, and the
  ``collective_id`` ``GROUP:fr<seq>``, which every member derives alike (the
  backends number a group's collectives in issue order);
* **time**: the entry's creation time as the call's arrival; its duration
  when the backend timed it (NCCL), or when the Python call that issued it
  was synchronous;
* **Python's view, once**: a wrapped ``torch.distributed`` call does not
  record itself while the ring is read; it leaves an annotation (its root,
  phase, step and duration) that the entry it created takes. An entry
  created while a wrapped call on its group is still running waits for that
  call's annotation;
* **steps**: ``torch.profiler``'s ``step()`` and
  :func:`commcanary.capture.step` mark when each step began; an entry takes
  the step it was created in.

Point-to-point transfers stay with the wrappers (gloo's ring does not record
them; NCCL's p2p entries are skipped so nothing is counted twice).

When: a whole read costs what the ring holds (about 20 ms for 2,000 entries
here, most of it torch building the dump, with the interpreter held), so the
ring is read only when half of it is new, or when anything is and
``MAX_WAIT_S`` has passed: every ``POLL_S`` the thread reads the groups'
counters alone (``pg_status``: microseconds) and reads the ring when they
have moved by half its capacity since the last read, or at all in
``MAX_WAIT_S`` (30 s; ``COMMCANARY_FLUSH_S`` overrides it, and ``capture
--shards`` sets 1 s, so a live reader of the shard sees each collective
within about a second, what ``commcanary agent`` needs, with a smaller ring
that costs less to read); and once more before ``destroy_process_group``
and at exit.
Entries overwritten before they were read (a job issuing more than about
``capacity`` collectives per second) are counted and reported on stderr.
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from commcanary.capture import record_collective

__all__ = [
    "MAX_WAIT_S",
    "POLL_S",
    "FlightReader",
    "active",
    "annotate",
    "close",
    "flush",
    "mark_step",
    "start",
]

#: Seconds between reads of the groups' counters.
POLL_S = 0.5
#: Longest wait, in seconds, before new entries are read whatever their
#: number (``COMMCANARY_FLUSH_S`` overrides it: ``capture --shards`` sets 1).
MAX_WAIT_S = 30.0


def _max_wait_s() -> float:
    try:
        value = float(os.environ.get("COMMCANARY_FLUSH_S", "") or MAX_WAIT_S)
    except ValueError:
        return MAX_WAIT_S
    return value if 0.1 <= value <= 3600 else MAX_WAIT_S


#: Element sizes and torch names of the dtypes the recorder writes.
_DTYPES = {
    "Float": (4, "float32"),
    "Double": (8, "float64"),
    "Half": (2, "float16"),
    "BFloat16": (2, "bfloat16"),
    "Long": (8, "int64"),
    "Int": (4, "int32"),
    "Short": (2, "int16"),
    "Char": (1, "int8"),
    "Byte": (1, "uint8"),
    "Bool": (1, "bool"),
    "ComplexFloat": (8, "complex64"),
    "ComplexDouble": (16, "complex128"),
    "Float8_e4m3fn": (1, "float8_e4m3fn"),
    "Float8_e5m2": (1, "float8_e5m2"),
}
#: Profiling-name fragments, most specific first, and the op they are.
_OPS = (
    ("reduce_scatter", "reduce_scatter"),
    ("reducescatter", "reduce_scatter"),
    ("all_gather", "all_gather"),
    ("allgather", "all_gather"),
    ("all_reduce", "all_reduce"),
    ("allreduce", "all_reduce"),
    ("all_to_all", "all_to_all"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("reduce", "reduce"),
)
_CONTROL = ("barrier", "monitored_barrier")


def op_of(profiling_name: str) -> str | None:
    """The op of a recorder entry (``gloo:all_reduce`` → ``all_reduce``);
    ``None`` for control ops and names it does not know."""
    name = profiling_name.rsplit(":", 1)[-1].lower()
    if any(c in name for c in _CONTROL):
        return None
    for fragment, op in _OPS:
        if fragment in name:
            return op
    return None


def entry_bytes(entry: dict[str, Any]) -> tuple[int, str | None]:
    """(bytes, dtype) of an entry's input tensors."""
    total = 0
    dtype: str | None = None
    for shape, name in zip(entry.get("input_sizes") or [], entry.get("input_dtypes") or [], strict=False):
        size, torch_name = _DTYPES.get(str(name), (4, str(name).lower()))
        dtype = dtype or torch_name
        total += math.prod(int(d) for d in shape) * size
    return total, dtype


class _Call:
    """A wrapped Python call on a group: open while it runs, then its
    annotation until an entry takes it."""

    __slots__ = ("end_ns", "group", "info", "op", "start_ns")

    def __init__(self, group: str, op: str, start_ns: int) -> None:
        self.group = group
        self.op = op
        self.start_ns = start_ns
        self.end_ns: int | None = None
        self.info: dict[str, Any] = {}


class FlightReader:
    """Reads one process's ring and records what is new."""

    def __init__(self, dump: Callable[[], bytes], ranks_of: Callable[[str], list[int] | None]) -> None:
        self._dump = dump
        self._ranks_of = ranks_of
        self._lock = threading.Lock()
        self._calls: list[_Call] = []
        self._steps: list[tuple[int, int]] = []
        self._next_record = 0
        self._waiting: list[dict[str, Any]] = []
        self.recorded = 0
        self.lost = 0

    # ------------------------------------------------------------ the wrappers' side

    def open_call(self, group: str, op: str, start_ns: int, info: dict[str, Any]) -> _Call:
        """A wrapped call begins; ``info`` (root, phase, step, bytes, dtype)
        is known now, so every rank's entry takes the same whenever it is read."""
        call = _Call(group, op, start_ns)
        call.info = dict(info)
        with self._lock:
            self._calls.append(call)
        return call

    def close_call(self, call: _Call, duration_us: float | None) -> None:
        """The call is done (an async one: when its work was waited for)."""
        with self._lock:
            call.info["duration_us"] = duration_us
            call.end_ns = time.time_ns()

    def mark_step(self, step: int, at_ns: int | None = None) -> None:
        with self._lock:
            self._steps.append((time.time_ns() if at_ns is None else at_ns, step))

    # ------------------------------------------------------------ the reader

    def _step_at(self, ns: int) -> int | None:
        k = bisect.bisect_right(self._steps, (ns, sys.maxsize)) - 1
        return self._steps[k][1] if k >= 0 else None

    def _claim(self, group: str, op: str, created: int, final: bool) -> tuple[bool, _Call | None]:
        """(wait, call): the annotation this entry takes, or whether a call
        that may have created it is still running. On the last read a call
        still running (an async work never waited for) gives its annotation
        as it stands, so every rank records the entry alike."""
        for call in self._calls:
            if call.group != group or call.start_ns > created:
                continue
            if call.end_ns is None and not final:
                return True, None
            if (call.end_ns is None or created <= call.end_ns) and call.op == op:
                self._calls.remove(call)
                return False, call
        return False, None

    def _forget_old_calls(self, horizon_ns: int) -> None:
        # Annotations no entry took (the ring was off or overwritten).
        self._calls = [c for c in self._calls if c.end_ns is None or c.end_ns >= horizon_ns]

    def poll(self, final: bool = False) -> int:
        """Reads the ring once; returns how many entries were new."""
        doc = orjson.loads(self._dump())
        entries = sorted(doc.get("entries") or [], key=lambda e: int(e.get("record_id", -1)))
        fresh = [e for e in entries if int(e.get("record_id", -1)) >= self._next_record]
        if fresh:
            first = int(fresh[0]["record_id"])
            if first > self._next_record:
                self.lost += first - self._next_record
            self._next_record = int(fresh[-1]["record_id"]) + 1
        with self._lock:
            todo, self._waiting = self._waiting + fresh, []
            for entry in todo:
                if not self._take(entry, final):
                    self._waiting.append(entry)
            if todo:
                oldest = min(int(e.get("time_created_ns", 0)) for e in todo)
                self._forget_old_calls(oldest - 60_000_000_000)
        return len(fresh)

    def _take(self, entry: dict[str, Any], final: bool) -> bool:
        """Records one entry; ``False`` when it must wait for its call."""
        if entry.get("is_p2p"):
            return True
        op = op_of(str(entry.get("profiling_name", "")))
        if op is None:
            return True
        names = entry.get("process_group") or ["0"]
        group = str(names[0])
        created = int(entry.get("time_created_ns", 0))
        wait, call = self._claim(group, op, created, final)
        if wait:
            return False
        ranks = self._ranks_of(group)
        if not ranks:
            return True
        size, dtype = entry_bytes(entry)
        info = call.info if call is not None else {}
        completed = int(entry.get("time_discovered_completed_ns") or 0)
        duration = info.get("duration_us")
        if duration is None and completed > created:
            duration = (completed - created) / 1000
        step = info.get("step")
        if step is None:
            step = self._step_at(created)
        root = info.get("root_rank")
        record_collective(
            op,
            ranks,
            bytes=max(size or info.get("bytes", 1), 1),
            dtype=dtype or info.get("dtype"),
            group=group,
            phase=info.get("phase", "unknown"),
            collective_id=f"{group}:fr{int(entry.get('collective_seq_id', 0))}",
            root_rank=root if root in ranks else None,
            duration_us=duration,
            step=step,
            called_at_ns=created,
            metadata={"source": "flight_recorder", "wrapped": call is not None},
            use_current_step=False,
        )
        self.recorded += 1
        return True


_reader: FlightReader | None = None
_state_lock = threading.Lock()


def active() -> FlightReader | None:
    """This process's reader, when the ring is being read."""
    return _reader if _reader is not None and _reader_pid == os.getpid() else None


_reader_pid = -1


def annotate(call_group: str, op: str, start_ns: int, info: dict[str, Any]) -> _Call | None:
    """Opens a wrapped call's annotation (``None`` when the ring is not read)."""
    reader = active()
    return reader.open_call(call_group, op, start_ns, info) if reader is not None else None


def close(call: _Call, duration_us: float | None) -> None:
    """Closes a wrapped call's annotation with its duration: the entry it
    created takes it."""
    reader = active()
    if reader is not None:
        reader.close_call(call, duration_us)


def mark_step(step: int) -> None:
    """Marks the start of ``step`` now (entries created from now on take it)."""
    reader = active()
    if reader is not None:
        reader.mark_step(step)


def _capacity() -> int:
    try:
        return int(os.environ.get("TORCH_FR_BUFFER_SIZE", "0"))
    except ValueError:
        return 0


def start(dist: Any) -> FlightReader | None:
    """Starts reading this process's ring (once), when the recorder is on
    and the process records (``commcanary capture``)."""
    global _reader, _reader_pid
    capacity = _capacity()
    if capacity <= 0 or not os.environ.get("COMMCANARY_TRACE_DIR"):
        return None
    with _state_lock:
        if active() is not None:
            return _reader
        import importlib

        c10d: Any = importlib.import_module("torch._C._distributed_c10d")
        dump_json = getattr(c10d, "_dump_fr_trace_json", None)
        if dump_json is None:
            return None
        backend = "nccl" if "nccl" in str(dist.get_backend()).lower() else "gloo"

        def dump(collectives: bool = True) -> bytes:
            try:
                return bytes(dump_json(backend=backend, includeCollectives=collectives))
            except TypeError:  # torch before 2.15: one recorder, no backend argument
                return bytes(dump_json(includeCollectives=collectives))

        def enqueued() -> int:
            """Collectives enqueued so far, over every group (the counters alone)."""
            status = orjson.loads(dump(False)).get("pg_status") or {}
            return sum(int(row.get("last_enqueued_collective", -1)) + 1 for row in status.values())

        names: dict[str, list[int]] = {}

        def ranks_of(group: str) -> list[int] | None:
            if group not in names:
                with contextlib.suppress(Exception):
                    from torch.distributed.distributed_c10d import _world

                    for pg in list(_world.pg_map):
                        names[str(pg.group_name)] = [int(r) for r in dist.get_process_group_ranks(pg)]
            return names.get(group)

        reader = FlightReader(dump, ranks_of)
        try:
            reader.poll()  # the ring works here, or the reader is not started
        except Exception:
            return None
        _reader, _reader_pid = reader, os.getpid()
    threading.Thread(
        target=_run, args=(reader, enqueued, capacity), name="commcanary-flight-reader", daemon=True
    ).start()
    atexit.register(flush)
    return reader


def _run(reader: FlightReader, enqueued: Callable[[], int], capacity: int) -> None:
    """Reads the ring when half of it is new, or anything is after ``MAX_WAIT_S``."""
    with contextlib.suppress(Exception):  # lowest priority for this thread only (Linux)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    read_at, last_read = 0, time.monotonic()
    max_wait = _max_wait_s()
    with contextlib.suppress(Exception):
        read_at = enqueued()
    while True:
        time.sleep(POLL_S)
        try:
            now = enqueued()
            fresh = now - read_at
            if fresh >= capacity // 2 or (fresh > 0 and time.monotonic() - last_read >= max_wait):
                reader.poll()
                read_at, last_read = now, time.monotonic()
        except Exception:  # the group is being destroyed
            continue


def flush() -> None:
    """Reads what is left (before the groups go, and at exit); reports
    entries the ring overwrote before they were read."""
    reader = active()
    if reader is None:
        return
    with contextlib.suppress(Exception):
        reader.poll(final=True)
    if reader.lost and not getattr(reader, "_reported", False):
        reader._reported = True  # type: ignore[attr-defined]
        print(
            f"commcanary capture: {reader.lost} collective(s) were overwritten in the Flight Recorder ring "
            "before they were read (raise TORCH_FR_BUFFER_SIZE)",
            file=sys.stderr,
        )
