"""Atomic artifact writing.

An artifact is written to a temporary file in the target directory, flushed,
fsynced and renamed over the target, so a reader never sees a partial file and
a failed command leaves nothing behind. The target's directory must exist; a
symlink or directory at the target is refused.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from commcanary.errors import OutputError

__all__ = ["check_output_path", "write_bytes_atomic"]


def check_output_path(path: str | os.PathLike[str]) -> Path:
    """Validate that ``path`` can receive an artifact, before any work is done."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"cannot write {target}: directory {parent} does not exist")
    if target.is_symlink():
        raise OutputError(f"cannot write {target}: final path is a symlink")
    if target.is_dir():
        raise OutputError(f"cannot write {target}: it is a directory")
    return target


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and return the path."""
    target = check_output_path(path)
    parent = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from exc
        raise
    try:
        dir_fd = os.open(parent, os.O_RDONLY)
    except OSError:
        return target
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
    return target
