"""A job's timeline for Perfetto: :func:`timeline` over per-rank profiler
traces (or, without them, Flight Recorder dumps), optionally with a
``commcanary.hang.v1`` document's marks.

The Chrome-trace JSON is written in Rust (``core/src/export/timeline.rs``):
one process per rank, one track per process group plus a ``steps`` track,
a slice per call, flows joining each collective instance's members, and
instant marks for the straggler findings and the hang. Open it in
https://ui.perfetto.dev or ``chrome://tracing``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commcanary import _core
from commcanary.formats import TIMELINE_FORMAT

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["TIMELINE_FORMAT", "Timeline", "hang_marks", "timeline"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Timeline:
    """A written timeline: its Chrome-trace bytes and what is in it."""

    data: bytes = field(repr=False)
    events: int
    ranks: int
    straggler_marks: int
    hang_marks: int

    @property
    def lines(self) -> tuple[str, ...]:
        """What a person reads first."""
        return (
            f"timeline: {self.ranks} ranks, {self.events} events, {self.straggler_marks} straggler mark(s), "
            f"{self.hang_marks} hang mark(s); open it in https://ui.perfetto.dev or chrome://tracing",
        )

    def document(self) -> dict[str, Any]:
        """The Chrome-trace JSON, parsed (``traceEvents``, ``otherData``)."""
        parsed: dict[str, Any] = json.loads(self.data)
        return parsed

    def write(self, path: PathLike) -> Path:
        """Write the timeline atomically."""
        _core.write_atomic(os.fspath(path), self.data)
        return Path(path)


def hang_marks(path: PathLike) -> list[tuple[int, str | None, str]]:
    """The marks a ``commcanary.hang.v1`` document puts on a timeline: each
    root, and each present rank of each partial collective, as ``(rank,
    pg_name, label)`` (read by the core)."""
    return _core.read_hang_document(os.fspath(path))[0]


def timeline(
    paths: PathLike | Iterable[PathLike],
    *,
    hang: PathLike | None = None,
    cache_dir: PathLike | None = None,
    client: Client | None = None,
) -> Timeline:
    """The timeline of a job's per-rank Kineto traces (files or directories)
    or of one merged ``commcanary.trace.v1`` (or, where ``paths`` hold no
    profiler trace, of the ranks' Flight Recorder dumps: calls in flight
    are marked ``in_flight``),
    with straggler marks (when two or more ranks and steps are known) and,
    given ``hang`` (a ``commcanary.hang.v1`` document), the hang's marks.

    Raises :class:`~commcanary.errors.InputError` when there is no profiler
    trace and no dump, no collective call, dumps of different runs, or ``hang`` is not a hang document or is
    one of another job (its world size, a group's ranks or a marked rank
    disagree with the traces). With a Dask ``client``, the traces (or dumps)
    are read by tasks on its workers; the timeline is the same bytes.
    """
    items = [os.fspath(p) for p in ([paths] if isinstance(paths, str | os.PathLike) else list(paths))]
    marks, hang_job = _core.read_hang_document(os.fspath(hang)) if hang is not None else ([], None)
    cache = os.fspath(cache_dir) if cache_dir is not None else None
    reads = None
    if client is not None:
        from commcanary.distributed import evidence_reads

        reads = evidence_reads(client, items, "timeline", cache)
    result = _core.job_timeline(items, marks=marks, hang_job=hang_job, cache_dir=cache, reads=reads)
    return Timeline(
        data=result["bytes"],
        events=result["events"],
        ranks=result["ranks"],
        straggler_marks=result["straggler_marks"],
        hang_marks=result["hang_marks"],
    )
