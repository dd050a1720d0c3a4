"""Capture shards → one ``commcanary.trace.v1`` trace.

Every shard must belong to the capture's session. With one shard each
recorded call is an event of that process's view. With several, calls are
paired by ``collective_id``: one instance is one event, with each member's
arrival measured on the host's wall clock (``rank_arrival_us``), the
largest member's compute before it and the smallest member's compute during
it; a send and its recv make one ``point_to_point``. An instance some member
never recorded (a killed or hung process) is counted and reported as
partial and kept out of the events, as ``import-kineto`` does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commcanary import _core, formats
from commcanary.capture import SHARD_FORMAT
from commcanary.errors import InputError

__all__ = ["CaptureMerge", "check_event", "merge_shards", "read_shard"]

_IDENTITY = ("op", "bytes", "ranks", "group", "phase", "dtype", "root_rank", "tag")


@dataclass(frozen=True)
class CaptureMerge:
    """A merged capture: the trace document and what was left out."""

    trace: dict[str, Any]
    shards: int
    partial: int
    first_partial: str | None


def read_shard(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and events of one shard, every field checked (a torn last
    line is an error).

    Bounded by the resource policy before anything is read: the file by
    ``max_input_bytes``, each line (one JSON record) by
    ``max_json_string_bytes``, each event's ranks by ``max_ranks``.
    """
    from commcanary.limits import current, refusal

    policy = current()
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if size > policy["max_input_bytes"]:
        raise InputError(f"{path} ({size} bytes) {refusal('max_input_bytes')}")
    try:
        data = path.read_bytes()[: policy["max_input_bytes"] + 1]
    except OSError as exc:
        raise InputError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if data and not data.endswith(b"\n"):
        raise InputError(f"{path}: the last line is torn (the recording process was killed while writing it)")
    lines = data.split(b"\n")[:-1]
    if not lines:
        raise InputError(f"{path}: is an empty capture shard")
    rows = [_parse_line(path, n, line, policy["max_json_string_bytes"]) for n, line in enumerate(lines, 1)]
    header = rows[0]
    if header.get("format") != SHARD_FORMAT:
        raise InputError(f"{path}: field 'format' must be {SHARD_FORMAT}")
    offset = header.get("clock_offset_us", 0.0)
    if not (_is_number(offset) and abs(offset) <= _MAX_US):
        raise InputError(
            f"{path}: field 'clock_offset_us' must be a number of microseconds within ±{_MAX_US:.0e}"
        )
    events = []
    for n, row in enumerate(rows[1:], 2):
        if "kind" in row:  # a note (progress, evidence, end): not a call
            if not isinstance(row["kind"], str):
                raise InputError(f"{path}: line {n}: field 'kind' must be a string")
            continue
        check_event(path, n, row, policy["max_ranks"])
        events.append(row)
    return header, events


def _parse_line(path: Path, n: int, line: bytes, max_bytes: int) -> dict[str, Any]:
    from commcanary.limits import refusal

    if len(line) > max_bytes:
        raise InputError(f"{path}: line {n} ({len(line)} bytes) {refusal('max_json_string_bytes')}")
    try:
        row = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path}: line {n} is not JSON: {exc}") from None
    if not isinstance(row, dict):
        raise InputError(f"{path}: line {n} is not a JSON object")
    return row


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


#: The longest duration or clock offset a shard may state (µs; 11.6 days).
_MAX_US = 1e12
#: Wall-clock instants are below this (ns; year 2116), so sums stay in i64.
_MAX_WALL_NS = 1 << 62
#: The largest step number a trace holds.
_MAX_STEP = 1 << 53


def _is_int(v: object) -> bool:
    """An integer (not a bool) that fits in i64."""
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)


def _is_number(v: object) -> bool:
    return _is_int(v) or (isinstance(v, float) and math.isfinite(v))


def _rank_label(header: dict[str, Any]) -> int | None:
    """The header's ``rank`` (the recorder writes it as a decimal string)."""
    label = header.get("rank")
    text = str(label) if _is_int(label) or isinstance(label, str) else ""
    if text.isascii() and text.isdecimal() and len(text) <= 9:
        return int(text)
    return None


def check_event(path: Path, n: int, e: dict[str, Any], max_ranks: int) -> None:
    """Refuses an event line whose fields are not what the recorder writes."""

    def bad(field: str, rule: str) -> InputError:
        return InputError(f"{path}: line {n}: field '{field}' {rule}")

    for field in ("op", "group", "phase", "id"):
        if not isinstance(e.get(field), str) or not e[field]:
            raise bad(field, "must be a non-empty string")
    if not _is_int(e.get("bytes")) or e["bytes"] <= 0:
        raise bad("bytes", "must be a positive integer")
    if not (_is_int(e.get("wall_ns")) and 0 <= e["wall_ns"] < _MAX_WALL_NS):
        raise bad("wall_ns", f"must be an integer from 0 to {_MAX_WALL_NS} (nanoseconds)")
    for field in ("compute_before_us", "compute_overlap_us", "duration_us"):
        if (field in e or field != "duration_us") and not (
            _is_number(e.get(field)) and 0 <= e[field] <= _MAX_US
        ):
            raise bad(field, f"must be a number of microseconds from 0 to {_MAX_US:.0e}")
    ranks = e.get("ranks")
    if not isinstance(ranks, list) or not ranks or len(ranks) > max_ranks:
        raise bad("ranks", f"must be a list of 1 to max_ranks={max_ranks} ranks")
    if not all(_is_int(r) and r >= 0 for r in ranks) or len(set(ranks)) != len(ranks):
        raise bad("ranks", "must be distinct non-negative integers")
    for field in ("sender_rank", "receiver_rank", "root_rank"):
        if field in e and not (_is_int(e[field]) and e[field] in ranks):
            raise bad(field, "must be one of the ranks")
    if "sender_rank" in e and e.get("sender_rank") == e.get("receiver_rank"):
        raise bad("receiver_rank", "must differ from sender_rank")
    for field in ("collective_id", "dtype", "tag"):
        if field in e and not (isinstance(e[field], str) and e[field]):
            raise bad(field, "must be a non-empty string")
    if "step" in e and not (_is_int(e["step"]) and 0 <= e["step"] <= _MAX_STEP):
        raise bad("step", f"must be an integer from 0 to {_MAX_STEP}")
    if "metadata" in e and not isinstance(e["metadata"], dict):
        raise bad("metadata", "must be an object")


def _rank_of(path: Path, header: dict[str, Any]) -> int:
    rank = _rank_label(header)
    if rank is None:
        label = str(header.get("rank", ""))[:40]
        raise InputError(f"{path}: field 'rank' is '{label}'; set RANK (or COMMCANARY_RANK) in every process")
    return rank


def merge_shards(paths: Sequence[Path], *, session: str, workload_name: str) -> CaptureMerge:
    """Merge the shards of one capture session into a trace."""
    contributions: list[tuple[int, dict[str, Any]]] = []
    for path in sorted(paths):
        header, recorded = read_shard(path)
        if header.get("capture_session_id") != session:
            raise InputError(
                f"{path}: belongs to capture session {header.get('capture_session_id')!r}, not this capture's {session!r}"
            )
        rank = _rank_of(path, header) if len(paths) > 1 else (_rank_label(header) or 0)
        shift = round(float(header.get("clock_offset_us", 0.0)) * 1000)
        for e in recorded:
            e["wall_ns"] = int(e["wall_ns"]) + shift
        contributions.extend((rank, e) for e in recorded)
    single = len(paths) == 1
    buckets: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, (rank, e) in enumerate(contributions):
        key = e.get("collective_id")
        buckets.setdefault(str(key) if key is not None and not single else f"#{i}", []).append((rank, e))
    events: list[dict[str, Any]] = []
    partial: list[str] = []
    for key, members in buckets.items():
        event = _instance(key, members, single)
        if isinstance(event, str):
            partial.append(event)
        else:
            events.append(event)
    return _document(events, partial, len(paths), session, workload_name)


def _instance(key: str, members: list[tuple[int, dict[str, Any]]], single: bool) -> dict[str, Any] | str:
    first = members[0][1]
    p2p = first["op"] in ("send", "recv") and "sender_rank" in first and "receiver_rank" in first
    for _, e in members[1:]:
        same = [f for f in _IDENTITY if f not in ("op",) and e.get(f) != first.get(f)]
        if same or (not p2p and e["op"] != first["op"]):
            raise InputError(f"collective {key}: ranks recorded it differently ({', '.join(same) or 'op'})")
    expected = {first["sender_rank"], first["receiver_rank"]} if p2p else set(first["ranks"])
    seen = {rank for rank, _ in members}
    if len(seen) != len(members):
        raise InputError(f"collective {key}: a rank recorded it twice")
    if not single and seen != expected:
        missing = sorted(expected - seen)
        return f"{first['op']} {key} on group {first['group']}, seen on ranks {sorted(seen)}, missing ranks {missing}"
    start = min(e["wall_ns"] for _, e in members)
    if max(e["wall_ns"] for _, e in members) - start > _MAX_US * 1000:
        raise InputError(
            f"collective {key}: its members' calls are more than {_MAX_US:.0e} microseconds apart"
        )
    by_rank = {rank: e for rank, e in members}
    out: dict[str, Any] = {
        k: first[k]
        for k in ("op", "bytes", "ranks", "group", "phase", "dtype", "root_rank", "tag", "step")
        if k in first
    }
    out.update(
        id=f"collective-{key}" if not single else first["id"],
        wall_ns=start,
        compute_before_us=max(e["compute_before_us"] for _, e in members),
        compute_overlap_us=min(e["compute_overlap_us"] for _, e in members),
        metadata={"capture_collective_id": first.get("collective_id"), "recorder_ranks": sorted(seen)},
    )
    shard_meta = [e.get("metadata") or {} for _, e in members]
    if all(m.get("source") == "flight_recorder" for m in shard_meta):
        # Read from the processes' Flight Recorder rings; `wrapped` when the
        # program called it from Python (the wrapper annotated the entry).
        out["metadata"]["capture_source"] = "flight_recorder"
        out["metadata"]["capture_wrapped"] = all(m.get("wrapped") is True for m in shard_meta)
    if p2p:
        out.update(
            op="point_to_point", sender_rank=first["sender_rank"], receiver_rank=first["receiver_rank"]
        )
    elif out["op"] not in _core.KNOWN_OPS:
        out["custom_op"] = True  # recorded under a name the replay model does not know
        out["ranks"] = sorted(expected)
    if not single:
        out["rank_arrival_us"] = [round((by_rank[r]["wall_ns"] - start) / 1000, 3) for r in out["ranks"]]
        if all(by_rank[r].get("duration_us") is not None for r in out["ranks"]):
            # When each member was done, relative to the start: its time
            # inside, for the straggler and timeline views.
            out["metadata"]["capture_rank_end_us"] = [
                round((by_rank[r]["wall_ns"] - start) / 1000 + by_rank[r]["duration_us"], 3)
                for r in out["ranks"]
            ]
    return out


def _document(
    events: list[dict[str, Any]], partial: list[str], shards: int, session: str, name: str
) -> CaptureMerge:
    import datetime

    events.sort(key=lambda e: (e["wall_ns"], e["id"]))
    origin = events[0]["wall_ns"] if events else 0
    if events and events[-1]["wall_ns"] - origin > _MAX_US * 1000:
        raise InputError(f"the shards' calls span more than {_MAX_US:.0e} microseconds of wall clock")
    for e in events:
        e["start_us"] = round((e.pop("wall_ns") - origin) / 1000, 3)
    notes = f"Captured from {shards} recording process(es); arrivals on the host's wall clock. " + (
        f"{len(partial)} collective(s) were recorded by some member ranks only and are not events; first: {partial[0]}."
        if partial
        else "Every collective was recorded by all of its member ranks."
    )
    trace = {
        "format": formats.TRACE_FORMAT,
        "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "workload": {"name": name, "notes": notes, "partial_collectives": len(partial)},
        "system": {"capture_mode": "sharded", "shards": shards, "capture_session_id": session},
        "events": events,
    }
    return CaptureMerge(trace, shards, len(partial), partial[0] if partial else None)
