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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from commcanary import _core
from commcanary.distributed.storage import FetchError, fetched, is_url

__all__ = ["compile_trace", "dump_partial", "each", "kineto_partial", "looks_like_kineto"]

#: Test-only: a path; the first task to create it kills its worker process
#: (the way a node dies mid-task), so tests see Dask run the task elsewhere.
INJECT_WORKER_CRASH = "COMMCANARY_INJECT_WORKER_CRASH"

#: What :func:`kineto_partial` returns: fingerprint, profile, error, how served.
KinetoPartial = tuple[bytes | None, bytes | None, str | None, str]


def _missing_here(path: str) -> str:
    """Why this worker cannot see ``path`` (without the path)."""
    return (
        f"not found on Dask worker {socket.gethostname()} "
        "(the workers read the inputs themselves: give paths on storage they share)"
    )


@contextmanager
def _readable(path: str) -> Iterator[tuple[str | None, str | None]]:
    """``(local path, None)`` for a path or URL this worker can read (a
    URL's file fetched into a local copy for the duration), else ``(None,
    why)`` with a path-free reason."""
    if not is_url(path):
        yield (path, None) if os.path.exists(path) else (None, _missing_here(path))
        return
    try:
        with fetched(path) as local:
            yield (local, None)
    except FetchError as exc:
        yield (None, str(exc))


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
    with _readable(path) as (local, missing):
        if local is None:
            return (None, None, f"{label}: {missing}", "parsed")
        partial: KinetoPartial = _core.kineto_partial(local, label, rank=rank, cache_dir=cache_dir)
    return partial


def looks_like_kineto(url: str) -> bool:
    """Whether the file at ``url`` starts like a Kineto trace (its first
    64 KiB, decompressed, read from the storage): how a directory URL's
    files are sorted from the other JSON a job directory holds."""
    from commcanary.distributed.storage import head
    from commcanary.importers.kineto import head_looks_like_kineto

    data = head(url)
    return True if data is None else head_looks_like_kineto(data)


def dump_partial(path: str) -> tuple[bytes | None, int | None, str | None]:
    """One Flight Recorder dump decoded (the core's codec), or its error."""
    with _readable(path) as (local, missing):
        if local is None:
            return (None, None, missing)  # path-free, as the core's errors are: the client names the file
        partial: tuple[bytes | None, int | None, str | None] = _core.dump_partial(local)
    return partial


def compile_trace(
    path: str, label: str, options: dict[str, Any]
) -> tuple[bytes | None, dict[str, Any] | None, str | None]:
    """One trace compiled: ``(canary bytes, summary, None)``, or ``(None,
    None, error line)`` when the trace cannot be compiled as asked; the
    line names the trace as ``label`` (the path as the user gave it)."""
    from commcanary.errors import CommCanaryError, InternalError

    with _readable(path) as (local, missing):
        if local is None:
            return (None, None, f"{label}: {missing}")
        try:
            compiled = _core.compile_file(local, **options)
        except InternalError:
            raise
        except CommCanaryError as exc:
            return (None, None, str(exc).replace(local, label))
    return (bytes(compiled.to_bytes()), dict(compiled.summary()), None)


def each(task: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
    """``task(*args)`` for each of ``calls``, in order: one Dask task for a
    few files, so a job of thousands of small files does not pay the
    scheduler's per-task cost for each."""
    return [task(*args) for args in calls]


# The sharded job import's worker steps (``_core``'s ``sharded_*``; the plan
# is in ``commcanary.distributed.import_kineto``). A batch is what
# :func:`read_ranks` returned for a few files; it stays on its worker, and
# the steps that need its profiles run there.

#: One file of a batch: its partial (fingerprint, profile, error, served),
#: its head (the profile without calls, then a flags byte) and its named
#: candidate sets, the last two ``None`` on an error.
RankRead = tuple[KinetoPartial, bytes | None, bytes | None]


def read_ranks(calls: list[tuple[str, str, int | None, str | None]]) -> list[RankRead]:
    """Each file read as :func:`kineto_partial` reads it, with its head and
    named candidate sets (``_core.kineto_rank``)."""
    out: list[RankRead] = []
    for path, label, rank, cache_dir in calls:
        _crash_if_asked(label)
        with _readable(path) as (local, missing):
            if local is None:
                out.append(((None, None, f"{label}: {missing}", "parsed"), None, None))
                continue
            partial, head, sets = _core.kineto_rank(local, label, rank=rank, cache_dir=cache_dir)
        out.append((partial, head, sets))
    return out


#: What the client frames a job from, per file: its partial with the head in
#: the profile's place, the head's facts (its last :data:`HEAD_FACTS_BYTES`),
#: the named candidate sets, and the size of the profile that stays on the
#: worker.
RankHead = tuple[KinetoPartial, bytes, bytes, int]

#: Bytes of the facts (span, steps, flags) that end an encoded head.
HEAD_FACTS_BYTES = 33


def heads_of(batch: list[RankRead]) -> list[RankHead]:
    """Each file's :data:`RankHead`."""
    out: list[RankHead] = []
    for (fingerprint, profile, error, served), head, sets in batch:
        if profile is None or head is None or sets is None:
            out.append(((fingerprint, None, error, served), b"", b"", 0))
        else:
            cut = len(head) - HEAD_FACTS_BYTES
            out.append(((fingerprint, head[:cut], error, served), head[cut:], sets, len(profile)))
    return out


def partials_of(batch: list[RankRead]) -> list[KinetoPartial]:
    """The files' partials, for a job the sharded plan does not take."""
    return [partial for partial, _, _ in batch]


def batch_split(
    shape: bytes,
    batch: list[RankRead],
    entries: list[tuple[int, int]],
    of_group: list[int],
    shards: int,
    bounds: list[int],
) -> dict[int, list[bytes]]:
    """Every rank of the batch cut into pieces, gathered by unit (a range of
    steps of a shard)."""
    out: dict[int, list[bytes]] = {}
    ranks = [(slot, _profile(batch, i)) for slot, i in entries]
    for unit, piece in _core.sharded_split(shape, ranks, of_group, shards, bounds):
        out.setdefault(unit, []).append(bytes(piece))
    return out


def join_files(batches: list[list[RankRead]], indices: list[int], labels: list[str]) -> bytes:
    """A rank's files (``indices[k]`` of ``batches[k]``, in the order the
    client's frame joined them) joined into the rank's profile."""
    profiles = [_profile(batch, i) for batch, i in zip(batches, indices, strict=True)]
    return bytes(_core.kineto_join(profiles, labels))


def split_one(
    shape: bytes, slot: int, profile: bytes, of_group: list[int], shards: int, bounds: list[int]
) -> dict[int, list[bytes]]:
    """A joined rank cut into pieces, by unit."""
    out: dict[int, list[bytes]] = {}
    for unit, piece in _core.sharded_split(shape, [(slot, profile)], of_group, shards, bounds):
        out.setdefault(unit, []).append(bytes(piece))
    return out


def shard_ids(split: dict[int, list[bytes]]) -> list[int]:
    """The units a batch has pieces for."""
    return sorted(split)


#: The splits of the batches holding a group of units' pieces.
Splits = list[dict[int, list[bytes]]]

#: A unit: the ids of the ranges it runs together.
Unit = list[int]


def shards_votes(shape: bytes, splits: Splits, units: list[Unit]) -> list[tuple[bytes, bytes]]:
    """Each unit's first-pass votes and its check."""
    return [(bytes(v), bytes(c)) for v, c in _core.sharded_votes(shape, [_pieces(splits, u) for u in units])]


def shards_prepare(
    shape: bytes, splits: Splits, units: list[Unit], labels: bytes
) -> list[tuple[bytes, bytes]]:
    """Each unit's second pass, its complete instances to place, and its check."""
    pieces = [_pieces(splits, u) for u in units]
    return [(bytes(p), bytes(c)) for p, c in _core.sharded_prepare(shape, pieces, labels)]


def shards_events(
    shape: bytes, splits: Splits, units: list[Unit], labels: bytes, phase: str | None, placements: list[bytes]
) -> list[bytes]:
    """Each unit's events at its placements."""
    pieces = [_pieces(splits, u) for u in units]
    return [bytes(b) for b in _core.sharded_events(shape, pieces, labels, placements, phase)]


def _profile(batch: list[RankRead], i: int) -> bytes:
    profile = batch[i][0][1]
    if profile is None:  # the client frames only jobs whose every file was read
        raise RuntimeError("a rank without a profile reached a sharded step")
    return profile


def _pieces(splits: Splits, unit: Unit) -> list[bytes]:
    """A unit's pieces, every range's of every batch."""
    return [piece for split in splits for unit_id in unit for piece in split.get(unit_id, [])]
