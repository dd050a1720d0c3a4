"""Artifacts on disk, content-addressed: an upload is streamed into a
temporary file (bounded as it arrives, hashed with BLAKE3 as it is
written), checked, then moved under ``objects/`` by its digest. A file is
kept once however often it is pushed, and a file that is there is whole:
a server killed mid-upload leaves only a temporary file, removed at the
next start."""

from __future__ import annotations

import os
import shutil
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import blake3

from commcanary.server.config import ServerConfig

__all__ = ["Received", "Store", "TooLarge"]

_GZIP_MAGIC = b"\x1f\x8b"
_BLOCK = 1 << 20
#: Below this many decompressed bytes no ratio is too high (a small
#: repetitive file compresses well and harms no one).
_RATIO_FLOOR = 64 << 20


class TooLarge(Exception):
    """An upload over a limit: the message says which."""


@dataclass
class Received:
    """An upload on disk, not yet kept."""

    path: Path
    digest: str
    size: int


class Store:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config

    def clean(self) -> int:
        """Removes what an interrupted upload or analysis left; how many
        entries."""
        n = 0
        for p in self.config.tmp_dir.iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            n += 1
        return n

    def path_of(self, digest: str) -> Path:
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError("not a digest")
        return self.config.objects_dir / digest[:2] / digest

    async def receive(self, chunks: AsyncIterator[bytes], limit: int | None = None) -> Received:
        """The upload written to a temporary file: :class:`TooLarge` past
        ``limit`` (the configured one by default; what arrived is removed,
        nothing more is read)."""
        limit = self.config.max_upload_bytes if limit is None else min(limit, self.config.max_upload_bytes)
        fd, name = _temporary(self.config.tmp_dir)
        path = Path(name)
        hasher = blake3.blake3()
        size = 0
        try:
            with os.fdopen(fd, "wb") as out:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > limit:
                        raise TooLarge(f"the upload is over the limit of {limit} bytes")
                    hasher.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return Received(path, hasher.hexdigest(), size)

    def check_inflation(self, received: Received) -> None:
        """:class:`TooLarge` when a gzip upload inflates past the limits
        (a gzip bomb), read block by block without keeping the output."""
        with open(received.path, "rb") as f:
            if f.read(2) != _GZIP_MAGIC:
                return
            f.seek(0)
            inflater = zlib.decompressobj(wbits=47)
            total = 0
            while block := f.read(_BLOCK):
                while block:
                    total += len(inflater.decompress(block, _BLOCK))
                    block = inflater.unconsumed_tail
                    self._check_inflated(total, received.size)
                if inflater.eof and inflater.unused_data:
                    # Another gzip member follows (a concatenated file).
                    rest = inflater.unused_data
                    inflater = zlib.decompressobj(wbits=47)
                    total += len(inflater.decompress(rest, _BLOCK))
                    self._check_inflated(total, received.size)

    def _check_inflated(self, total: int, size: int) -> None:
        if total > self.config.max_inflated_bytes:
            raise TooLarge(f"the upload inflates past the limit of {self.config.max_inflated_bytes} bytes")
        if total > _RATIO_FLOOR and total > self.config.max_inflate_ratio * size:
            raise TooLarge(
                f"the upload inflates more than {self.config.max_inflate_ratio} times (a gzip bomb?)"
            )

    def keep(self, received: Received) -> Path:
        """Moves an upload to its place by digest (once: a copy already
        there is kept and the upload removed)."""
        target = self.path_of(received.digest)
        target.parent.mkdir(mode=0o700, exist_ok=True)
        if target.exists():
            received.path.unlink(missing_ok=True)
        else:
            os.replace(received.path, target)
            dir_fd = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        return target

    def page_of(self, digest: str) -> Path:
        """Where the page rendered at analysis time for the document stored
        as ``digest`` is kept (``pages/``)."""
        return self.config.data_dir / "pages" / (self.path_of(digest).name + ".html")

    def keep_page(self, digest: str, html: str) -> None:
        """Keeps the page of a diagnosis the server ran (stored as
        ``digest``), for what only the run had (a straggler diagnosis'
        member table: its per-rank timeline)."""
        path = self.page_of(digest)
        path.parent.mkdir(mode=0o700, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(html, encoding="utf-8")
        os.replace(partial, path)

    @staticmethod
    def discard(received: Received) -> None:
        received.path.unlink(missing_ok=True)


def _temporary(directory: Path) -> tuple[int, str]:
    import tempfile

    return tempfile.mkstemp(prefix="upload-", dir=directory)
