"""Constructed per-rank PyTorch profiler traces of small (or large) gloo jobs.

The events follow what torch writes for the gloo backend (see the fixture
``gloo_tp4_decode``): per call a ``c10d::allreduce_`` or
``c10d::_allgather_base_`` ``cpu_op`` on the main thread (the arrival), its
``gloo:all_reduce`` / ``gloo:all_gather`` ``user_annotation`` execution range
on a worker thread (the end), a ``ProfilerStep#N`` range per step, and the
``distributedInfo`` header with ``pg_config``. Times follow a simple
schedule: each rank computes ``compute_us`` (plus a deterministic jitter)
before each call, a collective starts when its last member arrives and lasts
``base_us + bytes / bw``. ``late`` delays a rank's first call of a step
(it arrives late); ``slow`` lengthens one instance on one rank (it arrives on
time and the collective takes longer, that rank leaving last).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

BASE_NS = 1_790_000_000_000_000_000
MAIN_TID, WORKER_TID = 100, 200


@dataclass(frozen=True)
class Op:
    """One call per step: ``op`` is ``all_reduce`` or ``all_gather``,
    ``group`` an index into the job's groups, ``elems`` float32 elements
    (the all_gather's input; its output is ``elems * group size``)."""

    op: str
    group: int
    elems: int


@dataclass
class Job:
    world: int = 4
    steps: int = 20
    #: (name, desc, ranks); group 0 must be the world.
    groups: list[tuple[str, str, list[int]]] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    compute_us: float = 1000.0
    base_us: float = 50.0
    bytes_per_us: float = 2000.0
    #: (rank, step) → extra µs before the step's first call.
    late: dict[tuple[int, int], float] = field(default_factory=dict)
    #: (rank, step, op index) → extra µs inside that collective.
    slow: dict[tuple[int, int, int], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.groups:
            self.groups = [("0", "default_pg", list(range(self.world)))]
        if not self.ops:
            self.ops = [Op("all_reduce", 0, 65536)]


def _jitter(*key: int) -> float:
    """Deterministic noise in [0, 20) µs."""
    h = 2166136261
    for k in key:
        h = ((h ^ (k & 0xFFFFFFFF)) * 16777619) & 0xFFFFFFFF
    return (h % 2000) / 100.0


def schedule(job: Job) -> dict[int, list[tuple[int, int, float, float]]]:
    """Per rank: (step, op index, arrival, end) of every call, µs."""
    free = [0.0] * job.world
    calls: dict[int, list[tuple[int, int, float, float]]] = {r: [] for r in range(job.world)}
    for step in range(job.steps):
        for k, op in enumerate(job.ops):
            members = job.groups[op.group][2]
            arrival = {}
            for r in members:
                delay = job.late.get((r, step), 0.0) if k == 0 else 0.0
                arrival[r] = free[r] + job.compute_us + _jitter(r, step, k) + delay
            start = max(arrival.values())
            nbytes = 4 * op.elems * (len(members) if op.op == "all_gather" else 1)
            took = job.base_us + nbytes / job.bytes_per_us
            extra = {r: job.slow.get((r, step, k), 0.0) for r in members}
            longest = max(extra.values())
            for r in members:
                # A slow member holds the others up; they finish their
                # part halfway through its extra time, it leaves last.
                end = start + took + (longest if extra[r] else longest / 2) + _jitter(step, k, r) / 10
                calls[r].append((step, k, arrival[r], end))
                free[r] = end
    return calls


def _events(job: Job, rank: int, calls: list[tuple[int, int, float, float]]) -> list[dict[str, object]]:
    events: list[dict[str, object]] = []
    by_step: dict[int, list[float]] = {}
    for step, k, arrival, end in calls:
        op = job.ops[k]
        by_step.setdefault(step, []).extend([arrival, end])
        if op.op == "all_reduce":
            cpu = {
                "name": "c10d::allreduce_",
                "args": {
                    "Concrete Inputs": ["", "", "", "", "False", "-1"],
                    "Input type": ["TensorList", "", "", "", "Scalar", "Scalar"],
                    "Input Dims": [[[op.elems]], [], [], [], [], []],
                },
            }
            dims = [[op.elems]]
        else:
            n = len(job.groups[op.group][2])
            cpu = {
                "name": "c10d::_allgather_base_",
                "args": {
                    "Concrete Inputs": ["", "", "", "False", "-1"],
                    "Input type": ["float", "float", "", "Scalar", "Scalar"],
                    "Input Dims": [[op.elems * n], [op.elems], [], [], []],
                },
            }
            dims = [[op.elems]]
        events.append(
            {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": MAIN_TID, "ts": arrival, "dur": 10.0, **cpu}
        )
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"gloo:{op.op}",
                "pid": 1,
                "tid": WORKER_TID,
                "ts": arrival + 1.0,
                "dur": end - arrival - 1.0,
                "args": {"Concrete Inputs": [""], "Input type": ["float"], "Input Dims": dims},
            }
        )
    for step, times in by_step.items():
        start, stop = min(times) - job.compute_us / 2, max(times) + 1.0
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step}",
                "pid": 1,
                "tid": MAIN_TID,
                "ts": start,
                "dur": stop - start,
            }
        )
    return events


def write_job(directory: Path, job: Job, *, markers: bool = True) -> list[Path]:
    """Writes ``rank{r}.json`` per rank; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank, calls in schedule(job).items():
        events = _events(job, rank, calls)
        if not markers:
            events = [e for e in events if not str(e["name"]).startswith("ProfilerStep#")]
        header = {
            "schemaVersion": 1,
            "distributedInfo": {
                "backend": "gloo",
                "rank": rank,
                "world_size": job.world,
                "pg_count": len(job.groups),
                "pg_config": [
                    {"pg_name": n, "pg_desc": d, "backend_config": "cpu:gloo", "pg_size": len(r), "ranks": r}
                    for n, d, r in job.groups
                    if rank in r
                ],
            },
            "baseTimeNanoseconds": BASE_NS,
            "traceEvents": events,
        }
        path = directory / f"rank{rank}.json"
        path.write_text(json.dumps(header))
        paths.append(path)
    return paths


def write_job_gz(directory: Path, job: Job) -> list[Path]:
    """As :func:`write_job`, gzipped."""
    out = []
    for p in write_job(directory, job):
        gz = p.with_suffix(".json.gz")
        gz.write_bytes(gzip.compress(p.read_bytes(), 1))
        p.unlink()
        out.append(gz)
    return out
