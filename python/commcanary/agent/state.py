"""The live view of a running job, built line by line from its shards.

:class:`LiveJob` takes each shard's header and lines as the follower reads
them (:mod:`commcanary.agent.follow`) and keeps, bounded whatever the job's
length:

* **per process** (one shard): its rank, pid and host, its last call
  completed (op, group, instance, when), what its last ``progress`` note
  said (per group the last collective enqueued and completed, the calls it
  is inside), whether it ended (an ``end`` note) or died;
* **per group**: its members, when it last progressed (a member completed a
  call of it, by a call line or a counter), which members wait inside a call
  of it and since when;
* **per instance**: a collective is complete when every member's line has
  arrived (paired by ``collective_id``, a send with its recv); then it
  counts, and its time (last arrival to last end, waiting excluded), bus
  bandwidth (nccl-tests' factors, from the core) and each member's arrival
  lag feed the metrics. At most :data:`MAX_PENDING` instances wait for their
  members; older ones are dropped and counted (a member that never records).
* **per step**: once every live process has moved past a step, the step's
  last rank to arrive and by how much (its excess over the latest other
  member, the worst over the step's instances), judged late and material by
  the rules ``diagnose stragglers`` applies (:func:`commcanary._core.straggler_rules`),
  over the last :data:`STEP_WINDOW` steps. A rank late in at least
  :data:`REPEAT_LATE` of the last :data:`REPEAT_WINDOW` steps is a repeated
  offender.

Times the agent observed (``seen``) are its own wall clock, so a restart
can resume them; times of calls are the shards' (one clock per host).
Everything round-trips through :meth:`LiveJob.to_json` and
:meth:`LiveJob.from_json`: the agent saves it with the shards' offsets.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from commcanary import _core

__all__ = [
    "DURATION_BUCKETS_S",
    "MAX_PENDING",
    "REPEAT_LATE",
    "REPEAT_WINDOW",
    "STEP_WINDOW",
    "LiveJob",
    "Process",
]

#: Instances waiting for members, at most.
MAX_PENDING = 20_000
#: Steps the straggler rule looks back over.
STEP_WINDOW = 64
#: A rank late in this many of the last :data:`REPEAT_WINDOW` steps is flagged.
REPEAT_LATE = 3
#: See :data:`REPEAT_LATE`.
REPEAT_WINDOW = 20
#: Unfinished steps kept, at most (a process that stopped marking steps).
MAX_OPEN_STEPS = 64
#: Bus-bandwidth samples per (group, op, size bucket) for the gauge.
BANDWIDTH_SAMPLES = 32
#: The duration histogram's upper bounds, seconds.
DURATION_BUCKETS_S = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0)

_RULES = _core.straggler_rules()


def _bucket(size: int) -> int:
    return 1 << (max(size, 1).bit_length() - 1)


def _sigma(values: list[float]) -> float:
    """1.4826 times the median absolute deviation."""
    if not values:
        return 0.0
    mid = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - mid) for v in values)


@dataclass
class Process:
    """One recording process (one shard)."""

    shard: str
    rank: str
    pid: int
    host: str
    session: str
    ended: bool = False
    dead: bool = False
    stopped: bool = False
    last_call: dict[str, Any] | None = None
    counters: dict[str, list[int]] = field(default_factory=dict)
    inside: list[dict[str, Any]] = field(default_factory=list)
    #: group → when (agent's clock) this process was first seen waiting in it.
    waiting_since: dict[str, float] = field(default_factory=dict)
    max_step: int = -1
    calls: int = 0
    evidence: list[str] = field(default_factory=list)
    #: [request, directory, files] of its last evidence notes.
    evidence_files: list[list[Any]] = field(default_factory=list)

    def waiting_groups(self) -> set[str]:
        groups = {g for g, (enq, done) in self.counters.items() if enq > done}
        return groups | {str(c.get("group")) for c in self.inside}


@dataclass
class _Pending:
    group: str
    op: str
    size: int
    expected: int
    step: int
    lines: dict[str, tuple[int, float | None]] = field(
        default_factory=dict
    )  # rank → (arrival ns, duration µs)


class LiveJob:
    """The live view of one job (see the module doc)."""

    def __init__(self) -> None:
        self.session: str | None = None
        self.processes: dict[str, Process] = {}
        self.members: dict[str, set[str]] = {}
        self.progressed: dict[str, float] = {}
        self.completed: dict[tuple[str, str], int] = {}
        self.pending: dict[tuple[str, str], _Pending] = {}
        self.dropped = 0
        self.collectives: dict[tuple[str, str], int] = {}
        self.bytes_total: dict[tuple[str, str], int] = {}
        self.bus_bytes: dict[tuple[str, str], float] = {}
        self.busy_s: dict[tuple[str, str], float] = {}
        self.histogram: dict[tuple[str, str], list[int]] = {}
        self.duration_sum: dict[tuple[str, str], float] = {}
        self.bandwidth: dict[tuple[str, str, int], deque[float]] = {}
        self.arrival_lag: dict[tuple[str, str], float] = {}
        self.steps: dict[int, dict[str, Any]] = {}
        self.finished_steps: deque[dict[str, Any]] = deque(maxlen=STEP_WINDOW)
        self.excess_window: deque[list[float]] = deque(maxlen=STEP_WINDOW)
        self.late_history: deque[list[str]] = deque(maxlen=REPEAT_WINDOW)
        self.late_total: dict[str, int] = {}
        self.lines = 0
        self.skipped: dict[str, int] = {}

    # ------------------------------------------------------------------ input

    def skip(self, reason: str) -> None:
        """Counts a line that was not used (``corrupt``, ``torn``, ``other_session``)."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def add_process(self, shard: str, header: dict[str, Any]) -> Process:
        proc = Process(
            shard=shard,
            rank=str(header.get("rank", "unknown")),
            pid=int(header.get("pid", 0)),
            host=str(header.get("host", "")),
            session=str(header.get("capture_session_id", "")),
        )
        if self.session is None:
            self.session = proc.session
        self.processes[shard] = proc
        return proc

    def take(self, shard: str, line: dict[str, Any], seen: float) -> None:
        """One line of a shard (its header was taken), observed at ``seen``."""
        proc = self.processes[shard]
        self.lines += 1
        kind = line.get("kind")
        if kind == "progress":
            self._progress(proc, line, seen)
        elif kind == "end":
            proc.ended = True
            proc.inside, proc.waiting_since = [], {}
        elif kind == "evidence":
            proc.evidence = [*proc.evidence[-15:], str(line.get("request", ""))]
            files = [str(f) for f in (line.get("files") or [])][:8]
            proc.evidence_files = [
                *proc.evidence_files[-7:],
                [str(line.get("request", "")), str(line.get("dir", "")), files],
            ]
        elif kind is None:
            self._call(proc, line, seen)

    def _progress(self, proc: Process, line: dict[str, Any], seen: float) -> None:
        groups = line.get("groups") or {}
        counters = {
            str(g): [int(v.get("enqueued", -1)), int(v.get("completed", -1))] for g, v in groups.items()
        }
        for group, (_, done) in counters.items():
            before = proc.counters.get(group)
            if before is None or done > before[1]:
                self.progressed[group] = seen
        proc.counters = counters
        proc.inside = [dict(c) for c in (line.get("inside") or [])][:16]
        waiting = proc.waiting_groups()
        proc.waiting_since = {g: proc.waiting_since.get(g, seen) for g in waiting}
        for group in waiting:  # a group that stalls before its first completion
            self.progressed.setdefault(group, seen)

    def _call(self, proc: Process, line: dict[str, Any], seen: float) -> None:
        group, op = str(line["group"]), str(line["op"])
        ranks = [str(r) for r in line.get("ranks") or []]
        self.members.setdefault(group, set()).update(ranks)
        arrival = int(line["wall_ns"])
        duration = line.get("duration_us")
        end_ns = arrival + int((duration or 0.0) * 1000)
        step = int(line["step"]) if isinstance(line.get("step"), int) else -1
        proc.calls += 1
        proc.max_step = max(proc.max_step, step)
        proc.last_call = {
            "op": op,
            "group": group,
            "collective_id": line.get("collective_id"),
            "end_ns": end_ns,
            "step": step,
        }
        self.progressed[group] = seen
        key = (group, proc.rank)
        self.completed[key] = self.completed.get(key, 0) + 1
        ident = line.get("collective_id")
        if ident is None:
            return
        p2p = op in ("send", "recv")
        pkey = (group, str(ident))
        pending = self.pending.get(pkey)
        if pending is None:
            pending = _Pending(
                group, "send_recv" if p2p else op, int(line["bytes"]), 2 if p2p else max(len(ranks), 1), step
            )
            self.pending[pkey] = pending
            if len(self.pending) > MAX_PENDING:
                del self.pending[next(iter(self.pending))]
                self.dropped += 1
        pending.lines[proc.rank] = (arrival, None if duration is None else float(duration))
        if len(pending.lines) >= pending.expected:
            del self.pending[pkey]
            self._complete(pending)
        self._finish_steps()

    def _complete(self, inst: _Pending) -> None:
        key = (inst.group, inst.op)
        self.collectives[key] = self.collectives.get(key, 0) + 1
        self.bytes_total[key] = self.bytes_total.get(key, 0) + inst.size
        arrivals = {rank: a for rank, (a, _) in inst.lines.items()}
        first = min(arrivals.values())
        for rank, a in arrivals.items():
            self.arrival_lag[(inst.group, rank)] = (a - first) / 1e9
        if all(d is not None for _, d in inst.lines.values()):
            last_arrival = max(arrivals.values())
            last_end = max(a + int((d or 0.0) * 1000) for a, d in inst.lines.values())
            seconds = max(last_end - last_arrival, 0) / 1e9
            counts = self.histogram.setdefault(key, [0] * (len(DURATION_BUCKETS_S) + 1))
            index = next(
                (i for i, b in enumerate(DURATION_BUCKETS_S) if seconds <= b), len(DURATION_BUCKETS_S)
            )
            counts[index] += 1
            self.duration_sum[key] = self.duration_sum.get(key, 0.0) + seconds
            if seconds > 0:
                n = len(self.members.get(inst.group, ())) if inst.op != "send_recv" else 2
                moved = inst.size * _core.bus_factor(inst.op, max(n, 1))
                self.bus_bytes[key] = self.bus_bytes.get(key, 0.0) + moved
                self.busy_s[key] = self.busy_s.get(key, 0.0) + seconds
                samples = self.bandwidth.setdefault(
                    (inst.group, inst.op, _bucket(inst.size)), deque(maxlen=BANDWIDTH_SAMPLES)
                )
                samples.append(moved / seconds)
        if inst.step >= 0 and len(arrivals) > 1:
            step = self.steps.setdefault(inst.step, {"first_ns": first, "excess": {}})
            step["first_ns"] = min(step["first_ns"], first)
            ordered = sorted(arrivals.values())
            for rank, a in arrivals.items():
                latest_other = ordered[-2] if a == ordered[-1] else ordered[-1]
                excess = (a - latest_other) / 1e9
                step["excess"][rank] = max(step["excess"].get(rank, -math.inf), excess)
            while len(self.steps) > MAX_OPEN_STEPS:
                del self.steps[min(self.steps)]

    # ------------------------------------------------------------------ steps

    def _finish_steps(self) -> None:
        """Judges every step all live processes have moved past."""
        live = [p.max_step for p in self.processes.values() if not (p.ended or p.dead)]
        if not live:
            return
        horizon = min(live)
        for number in sorted(s for s in self.steps if s < horizon):
            step = self.steps.pop(number)
            following = self.steps.get(number + 1)
            duration = (following["first_ns"] - step["first_ns"]) / 1e9 if following else None
            self._judge(number, step, duration)

    def _judge(self, number: int, step: dict[str, Any], duration: float | None) -> None:
        excess: dict[str, float] = step["excess"]
        if not excess:
            return
        rank = max(excess, key=lambda r: (excess[r], r))
        lateness = excess[rank]
        history = [v for row in self.excess_window for v in row]
        durations = [s["duration_s"] for s in self.finished_steps if s.get("duration_s") is not None]
        late = material = False
        threshold = None
        if len(self.excess_window) >= 8 and durations:
            median_step = statistics.median(durations)
            noise = max(_sigma(history), _RULES["noise_floor"] * median_step)
            usual = [
                s["duration_s"]
                for s in self.finished_steps
                if s.get("duration_s") is not None and not s["late"]
            ]
            step_sigma = _sigma(usual) if len(usual) >= 4 else _sigma(durations)
            threshold = statistics.median(history) + max(
                _RULES["late_z"] * noise, _RULES["material_z"] * step_sigma
            )
            late = lateness > threshold
            material = late and lateness > _RULES["material_z"] * step_sigma
        self.excess_window.append(list(excess.values()))
        flagged = late and material
        self.late_history.append([rank] if flagged else [])
        if flagged:
            self.late_total[rank] = self.late_total.get(rank, 0) + 1
        self.finished_steps.append(
            {
                "step": number,
                "last_rank": rank,
                "lateness_s": lateness,
                "duration_s": duration,
                "threshold_s": threshold,
                "late": flagged,
            }
        )

    def repeated(self) -> list[str]:
        """Ranks late in at least :data:`REPEAT_LATE` of the last steps."""
        counts: dict[str, int] = {}
        for row in self.late_history:
            for rank in row:
                counts[rank] = counts.get(rank, 0) + 1
        return sorted(r for r, n in counts.items() if n >= REPEAT_LATE)

    # ------------------------------------------------------------------ hangs

    def stalled(self, now: float, after_s: float) -> dict[str, list[str]]:
        """Groups with no progress for ``after_s`` while a live member has
        waited inside one of their calls that long: group → waiting ranks."""
        out: dict[str, list[str]] = {}
        for proc in self.processes.values():
            if proc.ended or proc.dead:
                continue
            for group, since in proc.waiting_since.items():
                if now - since >= after_s and now - self.progressed.get(group, since) >= after_s:
                    out.setdefault(group, []).append(proc.rank)
        return {g: sorted(set(r)) for g, r in sorted(out.items())}

    def died(self) -> list[Process]:
        """Processes gone without an ``end`` note."""
        return [p for p in self.processes.values() if p.dead and not p.ended]

    def waiting(self) -> bool:
        return any(p.waiting_since for p in self.processes.values() if not (p.ended or p.dead))

    # ------------------------------------------------------------------ persistence

    def to_json(self) -> dict[str, Any]:
        def pairs(d: dict[Any, Any]) -> list[list[Any]]:
            return [[*k, v] if isinstance(k, tuple) else [k, v] for k, v in d.items()]

        return {
            "session": self.session,
            "processes": {k: vars(p) for k, p in self.processes.items()},
            "members": {g: sorted(m) for g, m in self.members.items()},
            "progressed": self.progressed,
            "completed": pairs(self.completed),
            "pending": [
                [
                    g,
                    i,
                    p.group,
                    p.op,
                    p.size,
                    p.expected,
                    p.step,
                    [[r, a, d] for r, (a, d) in p.lines.items()],
                ]
                for (g, i), p in self.pending.items()
            ],
            "dropped": self.dropped,
            "collectives": pairs(self.collectives),
            "bytes_total": pairs(self.bytes_total),
            "bus_bytes": pairs(self.bus_bytes),
            "busy_s": pairs(self.busy_s),
            "histogram": pairs(self.histogram),
            "duration_sum": pairs(self.duration_sum),
            "bandwidth": [[*k, list(v)] for k, v in self.bandwidth.items()],
            "arrival_lag": pairs(self.arrival_lag),
            "steps": [[n, s] for n, s in self.steps.items()],
            "finished_steps": list(self.finished_steps),
            "excess_window": list(self.excess_window),
            "late_history": list(self.late_history),
            "late_total": self.late_total,
            "lines": self.lines,
            "skipped": self.skipped,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> LiveJob:
        job = cls()

        def keyed(rows: list[list[Any]], width: int = 2) -> dict[Any, Any]:
            return {tuple(r[:width]) if width > 1 else r[0]: r[width] for r in rows}

        job.session = doc.get("session")
        job.processes = {k: Process(**v) for k, v in doc["processes"].items()}
        job.members = {g: set(m) for g, m in doc["members"].items()}
        job.progressed = dict(doc["progressed"])
        job.completed = keyed(doc["completed"])
        for g, i, group, op, size, expected, step, lines in doc["pending"]:
            job.pending[(g, i)] = _Pending(group, op, size, expected, step, {r: (a, d) for r, a, d in lines})
        job.dropped = int(doc["dropped"])
        job.collectives = keyed(doc["collectives"])
        job.bytes_total = keyed(doc["bytes_total"])
        job.bus_bytes = keyed(doc["bus_bytes"])
        job.busy_s = keyed(doc["busy_s"])
        job.histogram = keyed(doc["histogram"])
        job.duration_sum = keyed(doc["duration_sum"])
        job.bandwidth = {(g, o, b): deque(v, maxlen=BANDWIDTH_SAMPLES) for g, o, b, v in doc["bandwidth"]}
        job.arrival_lag = keyed(doc["arrival_lag"])
        job.steps = {
            int(n): {"first_ns": s["first_ns"], "excess": dict(s["excess"])} for n, s in doc["steps"]
        }
        job.finished_steps = deque(doc["finished_steps"], maxlen=STEP_WINDOW)
        job.excess_window = deque(doc["excess_window"], maxlen=STEP_WINDOW)
        job.late_history = deque(doc["late_history"], maxlen=REPEAT_WINDOW)
        job.late_total = dict(doc["late_total"])
        job.lines = int(doc["lines"])
        job.skipped = dict(doc["skipped"])
        return job
