"""Following a shard directory as it grows, from saved offsets.

Every ``*.shard.jsonl`` directly in the watched directory is read from its
saved offset to its last complete line, at most :data:`CHUNK_BYTES` per file
per poll. A line's bytes are consumed only once it ends with a newline, so a
line being written is read whole on a later poll. What is not usable is
skipped and counted, never fatal:

* ``corrupt``: not JSON, not an object, over the line bound
  (``max_json_string_bytes``), or a call whose fields the capture reader
  refuses (:func:`commcanary.capture.merge.check_event`);
* ``torn``: the unfinished last line of a process that died writing it (read
  once the process is known dead);
* ``other_session``: a shard of another capture session than the job's
  (the whole shard).

A shard whose header names another version of the capture format is refused
(:class:`ShardRefused`): the agent cannot tell what its lines mean.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from commcanary.agent.state import LiveJob
from commcanary.capture import SHARD_FORMAT
from commcanary.capture.merge import check_event
from commcanary.errors import InputError

__all__ = ["CHUNK_BYTES", "Follower", "ShardRefused"]

#: Bytes read per shard per poll, at most.
CHUNK_BYTES = 8 << 20
_FAMILY = SHARD_FORMAT.rsplit(".", 1)[0] + "."


class ShardRefused(InputError):
    """A shard of a capture format version this agent does not read."""


class Follower:
    """Reads what is new in the watched directory into a :class:`LiveJob`."""

    def __init__(self, directory: Path, job: LiveJob, offsets: dict[str, int] | None = None) -> None:
        from commcanary.limits import current

        self.directory = directory
        self.job = job
        self.offsets: dict[str, int] = dict(offsets or {})
        self.ignored: set[str] = {n for n, o in self.offsets.items() if o < 0}
        policy = current()
        self.max_line = int(policy["max_json_string_bytes"])
        self.max_ranks = int(policy["max_ranks"])

    def shards(self) -> list[Path]:
        return sorted(p for p in self.directory.glob("*.shard.jsonl") if p.is_file())

    def poll(self, seen: float) -> int:
        """Reads every shard's new lines; returns how many lines were read."""
        total = 0
        for path in self.shards():
            if path.name not in self.ignored:
                total += self._read(path, seen)
        return total

    def _read(self, path: Path, seen: float) -> int:
        offset = self.offsets.get(path.name, 0)
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(CHUNK_BYTES)
        except OSError:
            return 0
        end = data.rfind(b"\n")
        proc = self.job.processes.get(path.name)
        if end < 0:
            if data and proc is not None and proc.dead and len(data) < CHUNK_BYTES:
                self.job.skip("torn")  # the dead process's unfinished line
                self.offsets[path.name] = offset + len(data)
            return 0
        lines = data[:end].split(b"\n")
        used = 0
        for line in lines:
            used += len(line) + 1
            if proc is None:
                proc = self._header(path, line)
                if proc is None:
                    self.offsets[path.name] = -1
                    self.ignored.add(path.name)
                    return 0
                continue
            row = self._parse(path, line)
            if row is None:
                self.job.skip("corrupt")
                continue
            self.job.take(path.name, row, seen)
        self.offsets[path.name] = offset + used
        return len(lines)

    def _header(self, path: Path, line: bytes) -> Any:
        try:
            header = orjson.loads(line) if len(line) <= self.max_line else None
        except orjson.JSONDecodeError:
            header = None
        if not isinstance(header, dict):
            self.job.skip("corrupt")
            return None
        fmt = header.get("format")
        if isinstance(fmt, str) and fmt.startswith(_FAMILY) and fmt != SHARD_FORMAT:
            raise ShardRefused(f"{path}: field 'format' is {fmt}: this agent reads {SHARD_FORMAT} shards")
        if fmt != SHARD_FORMAT or not isinstance(header.get("pid"), int):
            self.job.skip("corrupt")
            return None
        session = str(header.get("capture_session_id", ""))
        if self.job.session is not None and session != self.job.session:
            self.job.skip("other_session")
            return None
        return self.job.add_process(path.name, header)

    def _parse(self, path: Path, line: bytes) -> dict[str, Any] | None:
        if len(line) > self.max_line:
            return None
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(row, dict):
            return None
        kind = row.get("kind")
        if kind is not None:
            return row if isinstance(kind, str) and _note_ok(row) else None
        try:
            check_event(path, 0, row, self.max_ranks)
        except InputError:
            return None
        return row


def _note_ok(row: dict[str, Any]) -> bool:
    """Whether a note's fields are what the capture writes."""
    if row["kind"] == "evidence":
        files = row.get("files", [])
        return (
            isinstance(row.get("request", ""), str)
            and isinstance(row.get("dir", ""), str)
            and isinstance(files, list)
            and all(isinstance(f, str) for f in files)
        )
    if row["kind"] != "progress":
        return True
    groups, inside = row.get("groups", {}), row.get("inside", [])
    if not isinstance(groups, dict) or not isinstance(inside, list) or len(groups) > 4096:
        return False
    for value in groups.values():
        if not isinstance(value, dict):
            return False
        for name in ("enqueued", "completed"):
            if not isinstance(value.get(name), int) or isinstance(value.get(name), bool):
                return False
    return all(isinstance(c, dict) and isinstance(c.get("group"), str) for c in inside)


def alive(pid: int) -> str:
    """``running``, ``stopped`` (SIGSTOP, a debugger) or ``dead`` (gone, or a
    zombie) for a process of this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except PermissionError:
        return "running"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "running"
    state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else ""
    return {"Z": "dead", "X": "dead", "T": "stopped", "t": "stopped"}.get(state, "running")
