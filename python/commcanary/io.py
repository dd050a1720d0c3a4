"""Atomic artifact writing, and the checks made before any work is done.

Artifacts are written by the Rust core: a temporary file in the target
directory, flushed, fsynced and renamed over the target, so a reader never sees
a partial file and a failed command leaves nothing behind. The target's
directory must exist; a symlink or a directory at the target is refused
(:func:`check_output_path`), and so is a target that is one of the command's
own inputs or another of its outputs (:func:`check_distinct_paths`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

from commcanary import _core
from commcanary.errors import OptionError, OutputError

__all__ = ["check_distinct_paths", "check_output_path", "same_file", "write_bytes_atomic"]

PathArg: TypeAlias = "str | os.PathLike[str]"


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


def same_file(a: PathArg, b: PathArg) -> bool:
    """Whether ``a`` and ``b`` name the same file: equal after resolving links
    (:meth:`Path.resolve`), or, when both exist, the same inode
    (:func:`os.path.samefile`: hard links, case-insensitive file systems)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def check_distinct_paths(
    outputs: Sequence[tuple[str, str, PathArg | None]],
    inputs: Sequence[tuple[str, PathArg | None]],
) -> None:
    """Refuse an output that would overwrite an input or another output.

    ``outputs`` are ``(option, label, path)``: the option's API name (what
    :class:`OptionError` names), how the file is described to a later output
    (``"the --output file"``) and its path. ``inputs`` are ``(label, path)``
    (``"the input TRACE"``). ``None`` paths are skipped. Raises
    :class:`OptionError` naming the output's option, for example
    ``output: t.json is the input TRACE; choose another path``.
    """
    # Each path is resolved and stat-ed once and looked up by both keys, so
    # a command over thousands of files checks them in linear time; the
    # rule is :func:`same_file`'s.
    by_path: dict[Path, str] = {}
    by_inode: dict[tuple[int, int], str] = {}

    def keys(path: PathArg) -> tuple[Path, tuple[int, int] | None]:
        try:
            st = os.stat(path)
            inode = (st.st_dev, st.st_ino)
        except (OSError, ValueError):
            inode = None
        return Path(path).resolve(), inode

    def remember(label: str, path: PathArg) -> None:
        resolved, inode = keys(path)
        by_path.setdefault(resolved, label)
        if inode is not None:
            by_inode.setdefault(inode, label)

    for label, path in inputs:
        if path is not None:
            remember(label, path)
    for option, label, path in outputs:
        if path is None:
            continue
        resolved, inode = keys(path)
        other = by_path.get(resolved) or (by_inode.get(inode) if inode is not None else None)
        if other is not None:
            raise OptionError(option, f"{os.fspath(path)} is {other}; choose another path")
        remember(label, path)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and return the path."""
    _core.write_atomic(os.fspath(path), data)
    return Path(path)
