"""Atomic artifact writing.

Artifacts are written by the Rust core: a temporary file in the target
directory, flushed, fsynced and renamed over the target, so a reader never sees
a partial file and a failed command leaves nothing behind. The target's
directory must exist; a symlink or a directory at the target is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from commcanary import _core
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
    _core.write_atomic(os.fspath(path), data)
    return Path(path)
