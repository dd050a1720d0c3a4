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
from typing import Any

from commcanary import _core
from commcanary.errors import InputError
from commcanary.formats import HANG_FORMAT, TIMELINE_FORMAT

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


def _field(path: PathLike, where: str, value: Any, kind: type) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(f"{os.fspath(path)}: {where}: expected {kind.__name__}")
    return value


def hang_marks(path: PathLike) -> list[tuple[int, str | None, str]]:
    """The marks a ``commcanary.hang.v1`` document puts on a timeline: each
    root, and each present rank of each partial collective, as ``(rank,
    pg_name, label)``."""
    try:
        doc = json.loads(_core.read_input_file(os.fspath(path)))
    except ValueError as error:
        raise InputError(f"{os.fspath(path)}: not JSON: {error}") from None
    if not isinstance(doc, dict) or doc.get("format") != HANG_FORMAT:
        raise InputError(f"{os.fspath(path)}: format: expected {HANG_FORMAT}")
    marks: list[tuple[int, str | None, str]] = []
    for i, root in enumerate(_field(path, "root", doc.get("root"), list)):
        where = f"root[{i}]"
        _field(path, where, root, dict)
        rank = _field(path, f"{where}.rank", root.get("rank"), int)
        group = _field(path, f"{where}.group", root.get("group"), dict).get("name")
        op = _field(path, f"{where}.op", root.get("op"), str)
        reason = _field(path, f"{where}.reason", root.get("reason"), str)
        marks.append((rank, group if isinstance(group, str) else None, f"root: {op}: {reason}"))
    for i, partial in enumerate(_field(path, "partial_collectives", doc.get("partial_collectives"), list)):
        where = f"partial_collectives[{i}]"
        _field(path, where, partial, dict)
        group = _field(path, f"{where}.group", partial.get("group"), dict).get("name")
        op = _field(path, f"{where}.op", partial.get("op"), str)
        missing = _field(path, f"{where}.missing_ranks", partial.get("missing_ranks"), list)
        for j, rank in enumerate(_field(path, f"{where}.present_ranks", partial.get("present_ranks"), list)):
            _field(path, f"{where}.present_ranks[{j}]", rank, int)
            label = f"stuck in {op}, waiting for rank(s) {', '.join(map(str, missing))}"
            marks.append((rank, group if isinstance(group, str) else None, label))
    return marks


def _hang_job(path: PathLike) -> tuple[int, list[tuple[str, list[int]]]]:
    """The job a ``commcanary.hang.v1`` document describes: its world size
    and each group's ranks (the core refuses traces of another job)."""
    doc = json.loads(_core.read_input_file(os.fspath(path)))
    world = _field(path, "world_size", doc.get("world_size"), int)
    groups: list[tuple[str, list[int]]] = []
    for i, g in enumerate(_field(path, "groups", doc.get("groups"), list)):
        _field(path, f"groups[{i}]", g, dict)
        name = _field(path, f"groups[{i}].name", g.get("name"), str)
        ranks = _field(path, f"groups[{i}].ranks", g.get("ranks"), list)
        groups.append((name, [_field(path, f"groups[{i}].ranks[{j}]", r, int) for j, r in enumerate(ranks)]))
    return world, groups


def timeline(
    paths: PathLike | Iterable[PathLike], *, hang: PathLike | None = None, cache_dir: PathLike | None = None
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
    disagree with the traces).
    """
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    marks = hang_marks(hang) if hang is not None else []
    result = _core.job_timeline(
        [os.fspath(p) for p in items],
        marks=marks,
        hang_job=_hang_job(hang) if hang is not None else None,
        cache_dir=os.fspath(cache_dir) if cache_dir is not None else None,
    )
    return Timeline(
        data=result["bytes"],
        events=result["events"],
        ranks=result["ranks"],
        straggler_marks=result["straggler_marks"],
        hang_marks=result["hang_marks"],
    )
