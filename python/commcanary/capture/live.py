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
from pathlib import Path
from typing import Any

import orjson

from commcanary.capture import recorder

__all__ = ["MAX_INSIDE", "POLL_S", "REQUEST_FILE", "enter", "leave", "start"]

#: Seconds between looks at the counters and the open calls.
POLL_S = 0.5
#: Open calls a progress note lists at most (the oldest).
MAX_INSIDE = 16
#: The request file an agent writes in the shard directory before signalling.
REQUEST_FILE = "evidence-request.json"

_open: dict[int, tuple[str, str, int, int]] = {}
_tokens = itertools.count()
_started: list[int] = []


def enter(group: str, op: str, peer: int | None = None) -> int:
    """A wrapped call begins; returns its token for :func:`leave`."""
    token = next(_tokens)
    _open[token] = (group, op, -1 if peer is None else peer, time.time_ns())
    return token


def leave(token: int) -> None:
    """The call is done (an async one: when its work was waited for)."""
    _open.pop(token, None)


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


class _Ring:
    """This process's Flight Recorder, for the backend the job runs on."""

    def __init__(self, dist: Any) -> None:
        import importlib

        self._c10d = importlib.import_module("torch._C._distributed_c10d")
        self._backend = "nccl" if "nccl" in str(dist.get_backend()).lower() else "gloo"

    def _call(self, name: str, **kwargs: Any) -> bytes:
        fn = getattr(self._c10d, name)
        try:
            return bytes(fn(backend=self._backend, **kwargs))
        except TypeError:  # torch before 2.15: one recorder, no backend argument
            return bytes(fn(**kwargs))

    def counters(self) -> dict[str, dict[str, int]]:
        doc = orjson.loads(self._call("_dump_fr_trace_json", includeCollectives=False))
        return {
            str(pg): {
                "enqueued": int(row.get("last_enqueued_collective", -1)),
                "completed": int(row.get("last_completed_collective", -1)),
            }
            for pg, row in (doc.get("pg_status") or {}).items()
        }

    def dump(self) -> bytes:
        return self._call("_dump_fr_trace")


def _progress(ring: _Ring | None) -> None:
    last: Any = None
    while True:
        time.sleep(POLL_S)
        groups: dict[str, dict[str, int]] = {}
        if ring is not None:
            with contextlib.suppress(Exception):  # the groups are being destroyed
                groups = ring.counters()
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
        self.served = 0

    def on_signal(self, signum: int, frame: Any) -> None:
        """The Python-level handler (the main thread, when it runs Python)."""
        del signum, frame
        self.requested.set()

    def _target(self) -> tuple[str, Path]:
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            request = orjson.loads((self.directory / REQUEST_FILE).read_bytes()[:4096])
            ident, where = str(request["id"])[:64], Path(str(request["dir"]))
            if ident and where.is_absolute():
                return ident, where
        ident = f"signal-{time.time_ns()}"
        fallback = os.environ.get("COMMCANARY_EVIDENCE_DIR")
        return ident, Path(fallback) if fallback else self.directory / "evidence" / ident

    def serve(self) -> None:
        time.sleep(0.05)  # the handler's stacks are written before it wakes us; let a burst settle
        ident, where = self._target()
        files = []
        with contextlib.suppress(OSError):
            with open(self.log, "rb") as log:
                log.seek(self.read_at)
                stacks = log.read()
                self.read_at += len(stacks)
            if stacks:
                header = (
                    f"# rank {self.rank}: evidence requested ({signal.Signals(self.signum).name}, {ident})\n"
                )
                _write(where / f"rank{self.rank}_stacks.txt", header.encode() + stacks)
                files.append(f"rank{self.rank}_stacks.txt")
        if self.ring is not None:
            with contextlib.suppress(Exception):
                _write(where / "fr_on_demand" / f"fr_trace_rank_{self.rank}", self.ring.dump())
                files.append(f"fr_on_demand/fr_trace_rank_{self.rank}")
        self.served += 1
        with contextlib.suppress(Exception):
            recorder().note(
                "evidence", {"request": ident, "rank": self.rank, "dir": str(where), "files": files}
            )


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
                    asked = responder.signum in os.read(wakeup, 4096)
        else:
            responder.requested.wait(1.0)
        if responder.requested.is_set():
            responder.requested.clear()
            asked = True
        if asked:
            with contextlib.suppress(Exception):
                responder.serve()


def _signal_number() -> int | None:
    name = os.environ.get("COMMCANARY_EVIDENCE_SIGNAL", "SIGUSR2").strip().upper()
    if name in ("", "NONE", "OFF", "0"):
        return None
    with contextlib.suppress(AttributeError, ValueError):
        return int(getattr(signal.Signals, name if name.startswith("SIG") else f"SIG{name}"))
    return None


def _arm_signal(directory: Path, rank: int, ring: _Ring | None) -> _Responder | None:
    signum = _signal_number()
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
