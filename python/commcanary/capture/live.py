"""What a captured process tells a reader of its shard while it runs, and
the evidence it writes when asked (``commcanary agent``).

Armed by the wrapped ``init_process_group`` in every process that records
into a shard directory (``COMMCANARY_TRACE_DIR``):

* **progress**: a thread reads the Flight Recorder's per-group counters
  (``pg_status``: microseconds, no entries) every :data:`POLL_S` and looks
  at the calls the process is inside (every wrapped ``torch.distributed``
  call registers itself with :func:`enter` and :func:`leave`, so a blocked
  ``send`` or ``recv``, which gloo's ring does not count, shows too). When
  either changed it appends a ``progress`` note to the shard: per group the
  last collective enqueued and completed, and the calls open for longer than
  half a poll (at most :data:`MAX_INSIDE`). A process that makes no progress
  writes nothing more, so a stalled job's shards stop growing.
* **evidence on demand**: a signal (``COMMCANARY_EVIDENCE_SIGNAL``, SIGUSR2
  unless set; ``none`` turns it off) writes every thread's Python stack and
  the whole Flight Recorder dump, even while the main thread is blocked
  inside a collective. The stacks are written by ``faulthandler`` from the
  signal handler itself (C level: no interpreter needed), into a log the
  process keeps open; a thread woken through the signal wakeup descriptor
  copies them out, dumps the ring and appends an ``evidence`` note naming
  the files. Where they go: the directory named by the request file
  ``evidence-request.json`` in the shard directory (what the agent writes
  before signalling: ``{"id": ..., "dir": ...}``), else
  ``COMMCANARY_EVIDENCE_DIR``, else ``evidence/`` in the shard directory.
* **evidence when terminated** (``COMMCANARY_EVIDENCE_ON_TERM=1``, what
  ``capture --shards`` sets): SIGTERM, which a launcher such as ``torchrun``
  sends to the other ranks once one has failed, writes the same evidence
  (into ``evidence/terminated/`` unless a request names a directory) before
  the process exits with status 143, as the signal's default would end it.
  The survivors' dumps are what tells which rank the others were waiting
  for when it died. An uncaught exception (a peer's connection closed)
  writes ``rankR_exception.txt`` and ``fr_after_error/`` into
  ``evidence/error/`` the same way.

A program that installed its own handler for the signal, or its own wakeup
descriptor, keeps it: the signal is then left alone, or the request is
served when the main thread next runs Python. Nothing here raises into the
program.
"""

from __future__ import annotations

import contextlib
import faulthandler
import itertools
import os
import select
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import orjson

from commcanary.capture import recorder
from commcanary.capture.evidence import _Recorder

__all__ = ["MAX_INSIDE", "POLL_S", "REQUEST_FILE", "enter", "evidence_signal", "leave", "start"]

#: Seconds between looks at the counters and the open calls.
POLL_S = 0.5
#: Open calls a progress note lists at most (the oldest).
MAX_INSIDE = 16
#: The request file an agent writes in the shard directory before signalling.
REQUEST_FILE = "evidence-request.json"

_open: dict[int, tuple[str, str, int, int]] = {}
#: token → (group, me and the peer as group ranks, numel, dtype, position) of an open send or receive.
_transfers: dict[int, tuple[str, int, int, int, str, int]] = {}
_tokens = itertools.count()
_started: list[int] = []


def enter(group: str, op: str, peer: int | None = None) -> int:
    """A wrapped call begins; returns its token for :func:`leave`."""
    token = next(_tokens)
    _open[token] = (group, op, -1 if peer is None else peer, time.time_ns())
    return token


def transfer(token: int, group: str, me: int, peer: int, numel: int, dtype: str, position: int) -> None:
    """What an open send or receive moves, in its group's ranks: the evidence
    a signal writes lists it as a pending transfer (gloo's ring has none)."""
    _transfers[token] = (group, me, peer, numel, dtype, position)


def leave(token: int) -> None:
    """The call is done (an async one: when its work was waited for)."""
    _open.pop(token, None)
    _transfers.pop(token, None)


#: Flight Recorder dtype names of torch's.
_FR_DTYPES = {
    "float32": "Float",
    "float64": "Double",
    "float16": "Half",
    "bfloat16": "BFloat16",
    "int64": "Long",
    "int32": "Int",
    "int16": "Short",
    "int8": "Char",
    "uint8": "Byte",
    "bool": "Bool",
}


def with_open_transfers(dump_json: bytes) -> bytes | None:
    """The ring's JSON dump with this process's open sends and receives
    added as pending p2p entries (``commcanary:send 0->3``: the wrapper's
    record, not the backend's), so a reader pairs them across ranks; ``None``
    when none is open."""
    open_now = [(token, _transfers[token], _open[token]) for token in list(_transfers) if token in _open]
    if not open_now:
        return None
    doc = orjson.loads(dump_json)
    entries: list[dict[str, Any]] = list(doc.get("entries") or [])
    names = {str(e["process_group"][0]): list(e["process_group"]) for e in entries if e.get("process_group")}
    record = max((int(e.get("record_id", -1)) for e in entries), default=-1) + 1
    for _, (group, me, peer, numel, dtype, position), (_, op, _, start) in sorted(
        open_now, key=lambda t: t[2][3]
    ):
        arrow = f"{me}->{peer}" if op == "send" else f"{me}<-{peer}"
        entries.append(
            {
                "record_id": record,
                "pg_id": 0,
                "process_group": names.get(group, [group, "undefined"]),
                "collective_seq_id": 0,
                "p2p_seq_id": position,
                "op_id": record,
                "profiling_name": f"commcanary:{op} {arrow}",
                "time_created_ns": start,
                "input_sizes": [[numel]],
                "input_dtypes": [_FR_DTYPES.get(dtype, dtype)],
                "output_sizes": [[numel]],
                "output_dtypes": [_FR_DTYPES.get(dtype, dtype)],
                "state": "scheduled",
                "time_discovered_started_ns": None,
                "time_discovered_completed_ns": None,
                "retired": False,
                "timeout_ms": 0,
                "is_p2p": True,
            }
        )
        record += 1
    doc["entries"] = entries
    return orjson.dumps(doc)


def _inside(now_ns: int) -> list[dict[str, Any]]:
    """The calls open for more than half a poll, oldest first."""
    horizon = now_ns - int(POLL_S * 5e8)
    calls = sorted(
        (start, group, op, peer) for group, op, peer, start in list(_open.values()) if start < horizon
    )
    out = []
    for start, group, op, peer in calls[:MAX_INSIDE]:
        row: dict[str, Any] = {"group": group, "op": op, "since_ns": start}
        if peer >= 0:
            row["peer"] = peer
        out.append(row)
    return out


class _Ring(_Recorder):
    """This process's Flight Recorder (:class:`commcanary.capture.evidence._Recorder`),
    its counters by group name and its dump with the open transfers."""

    def __init__(self, dist: Any) -> None:
        import importlib

        super().__init__(dist, importlib.import_module("torch._C._distributed_c10d"))

    def group_counters(self) -> dict[str, dict[str, int]]:
        return {
            group: {"enqueued": enqueued, "completed": completed}
            for group, (enqueued, completed) in self.counters().items()
        }

    def dump(self) -> bytes:
        """The whole dump: torch's pickle, or, while a send or receive is
        open, the JSON dump with it added (:func:`with_open_transfers`)."""
        merged = with_open_transfers(self._call("_dump_fr_trace_json")) if _transfers else None
        return merged if merged is not None else super().dump()


def _progress(ring: _Ring | None) -> None:
    last: Any = None
    while True:
        time.sleep(POLL_S)
        groups: dict[str, dict[str, int]] = {}
        if ring is not None:
            with contextlib.suppress(Exception):  # the groups are being destroyed
                groups = ring.group_counters()
        inside = _inside(time.time_ns())
        state = (groups, inside)
        if state != last:
            last = state
            with contextlib.suppress(Exception):
                recorder().note("progress", {"groups": groups, "inside": inside})


class _Responder:
    """Writes the evidence a signal asks for."""

    def __init__(self, directory: Path, rank: int, ring: _Ring | None, signum: int) -> None:
        self.directory = directory
        self.rank = rank
        self.ring = ring
        self.signum = signum
        self.log = directory / f".stacks-{os.getpid()}.log"
        self.log_fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.read_at = 0
        self.requested = threading.Event()
        self.terminating = threading.Event()
        self.served = 0

    def on_signal(self, signum: int, frame: Any) -> None:
        """The Python-level handler (the main thread, when it runs Python)."""
        del frame
        (self.terminating if signum == signal.SIGTERM else self.requested).set()

    def _target(self, terminated: bool) -> tuple[str, Path]:
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            request = orjson.loads((self.directory / REQUEST_FILE).read_bytes()[:4096])
            ident, where = str(request["id"])[:64], Path(str(request["dir"]))
            if ident and where.is_absolute():
                return ident, where
        ident = "terminated" if terminated else f"signal-{time.time_ns()}"
        fallback = os.environ.get("COMMCANARY_EVIDENCE_DIR")
        return ident, Path(fallback) if fallback else self.directory / "evidence" / ident

    def serve(self, terminated: bool = False) -> None:
        time.sleep(0.05)  # the handler's stacks are written before it wakes us; let a burst settle
        ident, where = self._target(terminated)
        files = []
        with contextlib.suppress(OSError):
            with open(self.log, "rb") as log:
                log.seek(self.read_at)
                stacks = log.read()
                self.read_at += len(stacks)
            if stacks:
                why = (
                    "terminated (SIGTERM)"
                    if terminated
                    else f"evidence requested ({signal.Signals(self.signum).name}, {ident})"
                )
                header = f"# rank {self.rank}: {why}\n"
                _write(where / f"rank{self.rank}_stacks.txt", header.encode() + stacks)
                files.append(f"rank{self.rank}_stacks.txt")
        if self.ring is not None:
            with contextlib.suppress(Exception):
                _write(where / "fr_on_demand" / f"fr_trace_rank_{self.rank}", self.ring.dump())
                files.append(f"fr_on_demand/fr_trace_rank_{self.rank}")
        self.served += 1
        with contextlib.suppress(Exception):
            recorder().note(
                "evidence",
                {
                    "request": ident,
                    "rank": self.rank,
                    "dir": str(where),
                    "files": files,
                    "terminated": terminated,
                },
            )

    def serve_error(self, text: str) -> None:
        """An uncaught exception: its text and the ring, as the process leaves."""
        ident, where = ("error", self.directory / "evidence" / "error")
        fallback = os.environ.get("COMMCANARY_EVIDENCE_DIR")
        if fallback:
            where = Path(fallback)
        files = []
        with contextlib.suppress(OSError):
            _write(where / f"rank{self.rank}_exception.txt", text.encode())
            files.append(f"rank{self.rank}_exception.txt")
        if self.ring is not None:
            with contextlib.suppress(Exception):
                _write(where / "fr_after_error" / f"fr_trace_rank_{self.rank}", self.ring.dump())
                files.append(f"fr_after_error/fr_trace_rank_{self.rank}")
        with contextlib.suppress(Exception):
            recorder().note(
                "evidence", {"request": ident, "rank": self.rank, "dir": str(where), "files": files}
            )


_responder: list[_Responder] = []


def record_uncaught(kind: type[BaseException] | None, value: BaseException | None, tb: Any) -> None:
    """Writes an uncaught exception's evidence, once (the main thread's
    ``sys.excepthook``, and ``torch.multiprocessing.spawn``'s worker wrapper)."""
    if not _responder or kind is None or value is None or issubclass(kind, KeyboardInterrupt):
        return
    responder = _responder.pop()
    with contextlib.suppress(Exception):
        responder.serve_error("".join(traceback.format_exception(kind, value, tb)))


def _write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, target)


def _listen(responder: _Responder, wakeup: int | None) -> None:
    while True:
        asked = False
        if wakeup is not None:
            with contextlib.suppress(OSError, ValueError):
                ready, _, _ = select.select([wakeup], [], [], 1.0)
                if ready:
                    received = os.read(wakeup, 4096)
                    asked = responder.signum in received
                    if signal.SIGTERM in received:
                        responder.terminating.set()
        else:
            responder.requested.wait(1.0)
        if responder.requested.is_set():
            responder.requested.clear()
            asked = True
        if responder.terminating.is_set():
            # Terminated (a launcher stopping the job after a rank failed):
            # the stacks and the ring as they were, then the exit SIGTERM's
            # default would have made (the handler cannot be given back from
            # this thread).
            with contextlib.suppress(Exception):
                responder.serve(terminated=True)
            os._exit(128 + signal.SIGTERM)
        if asked:
            with contextlib.suppress(Exception):
                responder.serve()


def evidence_signal() -> int | None:
    """The signal that asks for evidence (``COMMCANARY_EVIDENCE_SIGNAL``, SIGUSR2 unless set); ``None`` when off."""
    name = os.environ.get("COMMCANARY_EVIDENCE_SIGNAL", "SIGUSR2").strip().upper()
    if name in ("", "NONE", "OFF", "0"):
        return None
    with contextlib.suppress(AttributeError, ValueError):
        return int(getattr(signal.Signals, name if name.startswith("SIG") else f"SIG{name}"))
    return None


def _arm_signal(directory: Path, rank: int, ring: _Ring | None) -> _Responder | None:
    signum = evidence_signal()
    if signum is None or threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signum) not in (signal.SIG_DFL, None):
        return None  # the program's own
    responder = _Responder(directory, rank, ring, signum)
    signal.signal(signum, responder.on_signal)
    wakeup: int | None = None
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    if previous != -1:  # the program's (asyncio's): keep it, serve from the handler
        signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)
    else:
        wakeup = read_end
    faulthandler.register(signum, file=responder.log_fd, all_threads=True, chain=True)
    if os.environ.get("COMMCANARY_EVIDENCE_ON_TERM") == "1":
        _responder.append(responder)
        previous_hook = sys.excepthook

        def on_uncaught(kind: type[BaseException], value: BaseException, tb: Any) -> None:
            record_uncaught(kind, value, tb)
            previous_hook(kind, value, tb)

        sys.excepthook = on_uncaught
    if (
        os.environ.get("COMMCANARY_EVIDENCE_ON_TERM") == "1"
        and wakeup is not None
        and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None)
    ):
        signal.signal(signal.SIGTERM, responder.on_signal)
        faulthandler.register(signal.SIGTERM, file=responder.log_fd, all_threads=True, chain=True)
    threading.Thread(
        target=_listen, args=(responder, wakeup), name="commcanary-evidence-on-demand", daemon=True
    ).start()
    return responder


def start(dist: Any) -> bool:
    """Arms progress notes and evidence on demand in this process (once),
    when it records into a shard directory."""
    directory = os.environ.get("COMMCANARY_TRACE_DIR")
    if not directory or os.getpid() in _started:
        return False
    _started.append(os.getpid())
    ring: _Ring | None = None
    if int(os.environ.get("TORCH_FR_BUFFER_SIZE", "0") or 0) > 0:
        try:
            candidate = _Ring(dist)
            candidate.counters()
            ring = candidate
        except Exception:  # the ring is off or this torch has none: open calls only
            ring = None
    rank = int(dist.get_rank())
    os.environ.setdefault("COMMCANARY_RANK", str(rank))
    recorder()  # the shard exists (with its header) before the first note
    try:
        _arm_signal(Path(directory), rank, ring)
    except Exception as error:  # never break the program being captured
        print(f"commcanary capture: rank {rank}: no evidence on demand: {error}", file=sys.stderr)
    threading.Thread(target=_progress, args=(ring,), name="commcanary-progress", daemon=True).start()
    return True
