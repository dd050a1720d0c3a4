"""Inputs on storage the workers share: local paths, and URLs that fsspec
opens (``s3://``, ``gs://``, ``abfs://``, ``http(s)://``, ``file://``, ...).

A URL is listed on the client (names only: fsspec's ``find``/``glob``/
``info`` calls, never a file's bytes) and read by the worker whose task
names it: streamed in blocks into a temporary file on the worker's local
disk, read there by the same Rust reader a path gets, then removed. A
worker therefore holds one block of a remote file in memory, not the file,
and the client holds none of it.

Which URLs are files: a URL whose name ends in one of the command's input
suffixes (``.json``, ``.json.gz``) names a file; a URL with ``*``, ``?``
or ``[`` is a glob, expanded; any other URL is a directory (an object
store's prefix), and its files with those suffixes are taken, sorted by
name, as a local directory's are. An object store has no directories to
ask about, and asking an HTTP server whether a file is a directory would
download it, so the rule goes by name.

The protocols a URL can use are those of the fsspec implementations
installed on the client and on every worker (``commcanary[dask]`` brings
``fsspec[http]``; ``s3fs``, ``gcsfs`` and ``adlfs`` add the clouds).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from commcanary.errors import InputError

__all__ = ["FetchError", "fetched", "head", "is_url", "list_url", "url_exists", "url_name"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
_GLOB = re.compile(r"[*?\[]")
#: Bytes a worker copies at a time from a remote file to its local copy.
FETCH_BLOCK_BYTES = 8 << 20


def is_url(raw: str | os.PathLike[str]) -> bool:
    """Whether ``raw`` is a URL (``scheme://...``, a scheme of two letters
    or more) rather than a local path."""
    return isinstance(raw, str) and _SCHEME.match(raw) is not None


def url_name(url: str) -> str:
    """The last part of a URL's path: the file's name."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return first or type(exc).__name__


def _filesystem(url: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise InputError(f"{url}: URL inputs need fsspec: pip install 'commcanary[dask]'") from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except Exception as exc:
        # An unknown protocol, its implementation not installed here, a malformed URL.
        raise InputError(f"{url}: cannot open this URL here: {_reason(exc)}") from None
    return fs, str(path)


def list_url(url: str, suffixes: tuple[str, ...], *, directories: bool = True) -> list[str]:
    """The files ``url`` names (see the module's rule; without
    ``directories``, a URL that is not a glob names one file whatever its
    name, taken unchecked), as URLs, sorted by name; :class:`InputError`
    for a file that does not exist, a directory or glob without such files,
    or storage that cannot be listed."""
    fs, path = _filesystem(url)
    try:
        if _GLOB.search(path):
            found = [p for p in fs.glob(path) if str(p).endswith(suffixes)]
            what = "matches no"
        elif not directories:
            return [url]  # one file, whatever its name: the caller checks it exists
        elif path.endswith(suffixes):
            if not fs.exists(path):
                raise InputError(f"{url} does not exist")
            return [url]
        else:
            found = [p for p in fs.find(path.rstrip("/"), maxdepth=1) if str(p).endswith(suffixes)]
            what = "is a directory with no"
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(f"{url} does not exist") from None
    except Exception as exc:  # the storage's own faults: refused, unreachable, malformed listing
        raise InputError(f"{url}: cannot list it: {_reason(exc)}") from None
    if not found:
        if what != "matches no" and not _exists(fs, path):
            raise InputError(f"{url} does not exist")
        raise InputError(f"{url} {what} {' or '.join(suffixes)} file")
    return sorted({fs.unstrip_protocol(p) if not is_url(str(p)) else str(p) for p in found}, key=url_name)


def head(url: str, size: int = 1 << 16) -> bytes | None:
    """The first ``size`` bytes of the file at ``url``, decompressed when it
    is gzip (by its magic), or ``None`` when it cannot be read (the reader
    then reports why)."""
    import gzip

    fs, path = _filesystem(url)
    try:
        with fs.open(path, "rb", block_size=size) as raw:
            start = raw.read(size)
        if start[:2] != b"\x1f\x8b":
            return bytes(start)
        with fs.open(path, "rb", block_size=size) as raw, gzip.GzipFile(fileobj=raw) as unzipped:
            return unzipped.read(size)
    except Exception:  # the reader reports what is wrong with it
        return None


def _exists(fs: Any, path: str) -> bool:
    try:
        return bool(fs.exists(path))
    except Exception:
        return True  # cannot tell: the caller's other line stands


def url_exists(url: str) -> bool:
    """Whether the file at ``url`` exists (one metadata call)."""
    fs, path = _filesystem(url)
    try:
        return bool(fs.exists(path))
    except Exception as exc:
        raise InputError(f"{url}: cannot reach it: {_reason(exc)}") from None


@contextmanager
def fetched(url: str, where: str | None = None) -> Iterator[str]:
    """A local copy of the file at ``url`` (yielded as its path), streamed in
    blocks of :data:`FETCH_BLOCK_BYTES` into this machine's temporary
    directory and removed on exit. Raises :class:`FetchError` (a path-free
    line naming ``where`` it was read from, by default this Dask worker)
    when the file cannot be read from here."""
    where = where or f"Dask worker {socket.gethostname()}"
    try:
        fs, path = _filesystem(url)
    except InputError as exc:  # fsspec or the protocol missing on this side
        raise FetchError(f"cannot be read from {where}: {str(exc).removeprefix(url + ': ')}") from None
    name = url_name(url)
    suffix = ".json.gz" if name.endswith(".gz") else ".json"
    fd, local = tempfile.mkstemp(prefix="commcanary-fetch-", suffix=suffix)
    try:
        try:
            with os.fdopen(fd, "wb") as out, fs.open(path, "rb", block_size=FETCH_BLOCK_BYTES) as remote:
                shutil.copyfileobj(remote, out, FETCH_BLOCK_BYTES)
        except FileNotFoundError:
            raise FetchError(f"not found from {where}") from None
        except Exception as exc:
            raise FetchError(f"cannot be read from {where}: {_reason(exc)}") from None
        yield local
    finally:
        with suppress(OSError):
            os.unlink(local)


class FetchError(Exception):
    """A remote input this worker cannot read; the message is path-free."""
