"""The hang evidence a captured process leaves behind
(``commcanary capture --evidence DIR``), for ``commcanary diagnose hang DIR``.

gloo in torch 2.13-2.15 never writes a Flight Recorder dump by itself, and a
hung job is usually killed before anyone runs ``py-spy``. In each process
that initialises ``torch.distributed`` (``COMMCANARY_EVIDENCE_DIR`` set by
``capture``), :func:`start` arms:

* a watchdog thread that reads the recorder's per-group counters (its
  ``pg_status``: the last collective enqueued and completed, without the
  entries) every ``POLL_S``. Once a collective has been enqueued and not
  completed, with no counter moving, for ``COMMCANARY_HANG_AFTER_S``
  seconds, it writes ``rank{r}_stacks.txt`` (every thread's stack, by
  ``faulthandler``) and ``fr_during_hang/fr_trace_rank_{r}`` (the whole
  dump, as torch pickles it). It fires again only after the counters move,
  so the files are those of the last stall. DDP's bucket all_reduces, which
  never pass through Python, count: the recorder sees them;
* an uncaught exception in the main thread writes
  ``rank{r}_exception.txt`` (the traceback) and
  ``fr_after_error/fr_trace_rank_{r}`` before Python reports it.

``capture`` turns the recorder on (``TORCH_FR_BUFFER_SIZE``) unless the
environment already says otherwise; on NCCL it also asks torch for its own
dump on a watchdog timeout (``TORCH_NCCL_DUMP_ON_TIMEOUT``, into
``fr_on_timeout/``). Nothing here raises into the program: a write that
fails is reported once on stderr.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["POLL_S", "parent_environment", "record_uncaught", "start"]

#: How often the watchdog reads the recorder's counters, seconds.
POLL_S = 0.5
#: Entries the recorder keeps per rank when the environment does not say.
DEFAULT_BUFFER = 2000

_active: _Evidence | None = None


def parent_environment(directory: Path, hang_after_s: float, env: dict[str, str]) -> dict[str, str]:
    """The variables ``capture`` adds to the program's environment so its
    processes leave evidence in ``directory`` after ``hang_after_s`` of no
    progress (the recorder's and NCCL's settings already in ``env`` win)."""
    ours = {"COMMCANARY_EVIDENCE_DIR": str(directory), "COMMCANARY_HANG_AFTER_S": repr(hang_after_s)}
    torch_defaults = {
        "TORCH_FR_BUFFER_SIZE": str(DEFAULT_BUFFER),
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_DUMP_TEMP_FILE": str(directory / "fr_on_timeout" / "fr_trace_rank_"),
    }
    return ours | {k: v for k, v in torch_defaults.items() if k not in env}


class _Recorder:
    """This process's Flight Recorder, for the backend the job runs on."""

    def __init__(self, dist: Any, torch_c10d: Any) -> None:
        backend = str(dist.get_backend()).lower()
        self._backend = "nccl" if "nccl" in backend else "gloo"
        self._c10d = torch_c10d

    def _call(self, name: str, **kwargs: Any) -> bytes:
        fn = getattr(self._c10d, name)
        try:
            return bytes(fn(backend=self._backend, **kwargs))
        except TypeError:  # torch before 2.15: one recorder, no backend argument
            return bytes(fn(**kwargs))

    def counters(self) -> dict[str, tuple[int, int]]:
        """``{pg_id: (last enqueued, last completed)}``."""
        doc = json.loads(self._call("_dump_fr_trace_json", includeCollectives=False))
        out: dict[str, tuple[int, int]] = {}
        for pg, row in (doc.get("pg_status") or {}).items():
            out[str(pg)] = (
                int(row.get("last_enqueued_collective", -1)),
                int(row.get("last_completed_collective", -1)),
            )
        return out

    def dump(self) -> bytes:
        """The whole dump, pickled (what torch writes to its dump files)."""
        return self._call("_dump_fr_trace")


class _Evidence:
    """Where one process writes, and what it has written."""

    def __init__(self, directory: Path, rank: int, recorder: _Recorder) -> None:
        self.directory = directory
        self.rank = rank
        self.recorder = recorder
        self._warned = False

    def _write(self, relative: str, data: bytes) -> None:
        target = self.directory / relative
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.partial")
            partial.write_bytes(data)
            os.replace(partial, target)
        except OSError as error:
            self._warn(f"cannot write {target}: {error}")

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            print(f"commcanary capture: rank {self.rank}: {message}", file=sys.stderr)

    def dump_to(self, subdir: str) -> None:
        try:
            data = self.recorder.dump()
        except Exception as error:  # the recorder may be off or gone
            self._warn(f"no Flight Recorder dump: {error}")
            return
        self._write(f"{subdir}/fr_trace_rank_{self.rank}", data)

    def stacks(self, after_s: float) -> None:
        target = self.directory / f"rank{self.rank}_stacks.txt"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with open(target, "w", encoding="utf-8") as out:
                out.write(f"# rank {self.rank}: a collective has not completed for {after_s:g} s\n")
                out.flush()
                faulthandler.dump_traceback(file=out, all_threads=True)
        except OSError as error:
            self._warn(f"cannot write {target}: {error}")

    def exception(self, kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        text = "".join(traceback.format_exception(kind, value, tb))
        self._write(f"rank{self.rank}_exception.txt", text.encode())
        self.dump_to("fr_after_error")


def _watch(evidence: _Evidence, after_s: float) -> None:
    """Fires once per stall: a collective enqueued and not completed, with
    no counter moving, for ``after_s``."""
    last: dict[str, tuple[int, int]] | None = None
    since = time.monotonic()
    fired = False
    while True:
        time.sleep(POLL_S)
        try:
            now = evidence.recorder.counters()
        except Exception:  # the group is being destroyed, or the recorder is off
            continue
        if now != last:
            last, since, fired = now, time.monotonic(), False
            continue
        waiting = any(enqueued > completed for enqueued, completed in now.values())
        if waiting and not fired and time.monotonic() - since >= after_s:
            fired = True
            evidence.stacks(after_s)
            evidence.dump_to("fr_during_hang")


def record_uncaught(
    kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
) -> None:
    """Writes the exception text and the after-error dump, once, when the
    evidence is armed (the main thread's ``sys.excepthook``, and the worker
    wrapper of ``torch.multiprocessing.spawn``, which catches first)."""
    global _active
    evidence, _active = _active, None
    if evidence is not None and kind is not None and value is not None:
        evidence.exception(kind, value, tb)


def start(dist: Any) -> None:
    """Arms this process's evidence (once), when ``capture`` asked for it
    and ``torch.distributed`` is initialised."""
    global _active
    directory = os.environ.get("COMMCANARY_EVIDENCE_DIR")
    if _active is not None or not directory or not dist.is_initialized():
        return
    import importlib

    c10d = importlib.import_module("torch._C._distributed_c10d")
    evidence = _Evidence(Path(directory), int(dist.get_rank()), _Recorder(dist, c10d))
    _active = evidence
    after_s = float(os.environ.get("COMMCANARY_HANG_AFTER_S", "60"))
    threading.Thread(
        target=_watch, args=(evidence, after_s), name="commcanary-hang-watch", daemon=True
    ).start()
    previous = sys.excepthook

    def on_uncaught(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        record_uncaught(kind, value, tb)
        previous(kind, value, tb)

    sys.excepthook = on_uncaught
