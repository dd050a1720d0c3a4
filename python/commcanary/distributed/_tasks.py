"""The functions a Dask worker runs, one per input file.

Each is a module-level function (pickled by reference: the worker imports
``commcanary``, whose version the client checked before any work), takes
paths, does its work in Rust with the interpreter released, and returns a
compact result: bytes in the core's own codecs and short strings, never a
Python object per event. A file's own fault (unreadable, malformed) is
returned as a value, so the client reports it exactly where and how the
single-process command does; only a fault of the worker itself raises.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

from commcanary import _core

__all__ = ["compile_trace", "dump_partial", "each", "kineto_partial"]

#: Test-only: a path; the first task to create it kills its worker process
#: (the way a node dies mid-task), so tests see Dask run the task elsewhere.
INJECT_WORKER_CRASH = "COMMCANARY_INJECT_WORKER_CRASH"

#: What :func:`kineto_partial` returns: fingerprint, profile, error, how served.
KinetoPartial = tuple[bytes | None, bytes | None, str | None, str]


def _missing_here(path: str) -> str | None:
    """Why this worker cannot see ``path`` (without the path), or ``None``."""
    if os.path.exists(path):
        return None
    return (
        f"not found on Dask worker {socket.gethostname()} "
        "(the workers read the inputs themselves: give paths on storage they share)"
    )


def _crash_if_asked(label: str) -> None:
    marker = os.environ.get(INJECT_WORKER_CRASH)
    if not marker:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.write(fd, label.encode())
    os.close(fd)
    os._exit(17)


def kineto_partial(path: str, label: str, rank: int | None, cache_dir: str | None) -> KinetoPartial:
    """One rank file's fingerprint and profile (the cache's codec)."""
    _crash_if_asked(label)
    missing = _missing_here(path)
    if missing is not None:
        return (None, None, f"{label}: {missing}", "parsed")
    partial: KinetoPartial = _core.kineto_partial(path, label, rank=rank, cache_dir=cache_dir)
    return partial


def dump_partial(path: str) -> tuple[bytes | None, int | None, str | None]:
    """One Flight Recorder dump decoded (the core's codec), or its error."""
    missing = _missing_here(path)
    if missing is not None:
        return (None, None, missing)  # path-free, as the core's errors are: the client names the file
    partial: tuple[bytes | None, int | None, str | None] = _core.dump_partial(path)
    return partial


def compile_trace(
    path: str, label: str, options: dict[str, Any]
) -> tuple[bytes | None, dict[str, Any] | None, str | None]:
    """One trace compiled: ``(canary bytes, summary, None)``, or ``(None,
    None, error line)`` when the trace cannot be compiled as asked; the
    line names the trace as ``label`` (the path as the user gave it)."""
    from commcanary.errors import CommCanaryError, InternalError

    missing = _missing_here(path)
    if missing is not None:
        return (None, None, f"{label}: {missing}")
    try:
        compiled = _core.compile_file(path, **options)
    except InternalError:
        raise
    except CommCanaryError as exc:
        return (None, None, str(exc).replace(path, label))
    return (bytes(compiled.to_bytes()), dict(compiled.summary()), None)


def each(task: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
    """``task(*args)`` for each of ``calls``, in order: one Dask task for a
    few files, so a job of thousands of small files does not pay the
    scheduler's per-task cost for each."""
    return [task(*args) for args in calls]
