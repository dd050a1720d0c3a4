"""Constructed Flight Recorder dumps of small jobs, healthy or with one fault.

The dumps follow the format torch writes (``version``, ``pg_config``,
``pg_status`` keyed by the per-process ``pg_id`` counting ``op_id``s,
``entries`` with ``record_id``, ``process_group``, ``collective_seq_id``,
``p2p_seq_id``, ``op_id``, ``profiling_name``, sizes, dtypes, ``state``,
``retired``, times), in the gloo flavour (empty ``pg_config``, state always
``scheduled``, no start or completion times) or the NCCL flavour (filled
``pg_config``, ``started``/``completed`` states, ``time_discovered_*_ns``,
``duration_ms``, a ``nccl:coalesced`` record after each p2p batch).

Each step issues, per rank: optionally (``p2p=True``) a coalesced send/recv
exchange with its tensor-parallel partner, then two all_reduces and a
broadcast on the default group around an all_gather on its pair group. A
fault changes the fault rank's last step. Where every rank blocks is found
by running the programs against each other: a collective completes when
every member issued the same call at that sequence number; a p2p batch
completes when every partner has posted its matching call.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASE_NS = 1_790_000_000_000_000_000


@dataclass(frozen=True)
class Call:
    group: str
    op: str
    in_sizes: tuple[tuple[int, ...], ...]
    out_sizes: tuple[tuple[int, ...], ...]
    dtype: str = "Float"
    peer: int = -1  # group rank of the p2p partner

    @property
    def p2p(self) -> bool:
        return self.op in ("send", "recv")


@dataclass(frozen=True)
class Job:
    world: int = 4
    steps: int = 6
    backend: str = "gloo"
    p2p: bool = False
    fault: str | None = None  # skip | size | dtype | op | skip_send | stall
    fault_rank: int = 3
    base_ns: int = BASE_NS
    tp_name: str = "tp_pair"

    def groups(self) -> dict[str, tuple[str, list[int]]]:
        out = {"0": ("default_pg", list(range(self.world)))}
        for k in range(self.world // 2):
            out[str(k + 1)] = (f"{self.tp_name}_{k}", [2 * k, 2 * k + 1])
        return out

    def program(self, rank: int) -> list[list[Call]]:
        """Batches of calls (a p2p batch, or one collective), in order."""
        out: list[list[Call]] = []
        for step in range(self.steps):
            batches = self._step(rank)
            if step == self.steps - 1 and rank == self.fault_rank and self.fault:
                batches = self._faulty(batches)
            out.extend(batches)
        return out

    def _step(self, rank: int) -> list[list[Call]]:
        pair = str(rank // 2 + 1)
        ar = Call("0", "all_reduce", ((128, 2048),), ((128, 2048),))
        batches: list[list[Call]] = []
        if self.p2p:
            peer = 1 - rank % 2
            batches.append(
                [
                    Call(pair, "send", ((256,),), ((256,),), peer=peer),
                    Call(pair, "recv", ((256,),), ((256,),), peer=peer),
                ]
            )
        batches += [
            [ar],
            [Call(pair, "all_gather", ((1024,),), ((2, 1024),))],
            [ar],
            [Call("0", "broadcast", ((64,),), ((64,),))],
        ]
        return batches

    def _faulty(self, batches: list[list[Call]]) -> list[list[Call]]:
        first = next(i for i, b in enumerate(batches) if b[0].op == "all_reduce")
        if self.fault == "skip":
            return batches[:first] + batches[first + 1 :]
        if self.fault == "stall":
            return batches[:first]
        if self.fault == "skip_send":
            return [[c for c in b if c.op != "send"] for b in batches]
        changed = {
            "size": Call("0", "all_reduce", ((64, 2048),), ((64, 2048),)),
            "dtype": Call("0", "all_reduce", ((128, 2048),), ((128, 2048),), dtype="BFloat16"),
            "op": Call("0", "broadcast", ((128, 2048),), ((128, 2048),)),
        }[self.fault or ""]
        return [*batches[:first], [changed], *batches[first + 1 :]]


def _collective_index(batches: list[list[Call]], upto: int, group: str) -> int:
    return sum(1 for b in batches[:upto] for c in b if not c.p2p and c.group == group)


def run(job: Job, ranks: list[int]) -> tuple[dict[int, int], dict[int, set[int]]]:
    """Per rank: the batch it blocks in (== len when it finished) and, inside
    that batch, which calls completed."""
    groups = job.groups()
    progs = {r: job.program(r) for r in ranks}
    pos = dict.fromkeys(ranks, 0)

    def coll_ready(r: int, c: Call) -> bool:
        k = _collective_index(progs[r], pos[r], c.group)
        for m in groups[c.group][1]:
            if m not in progs:
                return False
            km = _collective_index(progs[m], pos[m], c.group)
            at = (
                pos[m] < len(progs[m])
                and not progs[m][pos[m]][0].p2p
                and progs[m][pos[m]][0].group == c.group
            )
            if km > k:
                continue  # already past it (cannot happen without completing)
            if not (at and km == k and progs[m][pos[m]][0] == c):
                return False
        return True

    def p2p_done(r: int, c: Call) -> bool:
        partner = groups[c.group][1][c.peer]
        if partner not in progs:
            return False
        want = "recv" if c.op == "send" else "send"
        local = groups[c.group][1].index(r)
        mine = sum(1 for b in progs[r][: pos[r]] for x in b if x.op == c.op and x.group == c.group)
        posted = sum(
            1
            for b in progs[partner][: pos[partner] + 1]
            for x in b
            if x.op == want and x.group == c.group and x.peer == local
        )
        return posted > mine

    progressed = True
    while progressed:
        progressed = False
        for r in ranks:
            if pos[r] >= len(progs[r]):
                continue
            batch = progs[r][pos[r]]
            ok = all(p2p_done(r, c) if c.p2p else coll_ready(r, c) for c in batch)
            if ok:
                pos[r] += 1
                progressed = True
    done_in_batch = {}
    for r in ranks:
        if pos[r] < len(progs[r]):
            done_in_batch[r] = {i for i, c in enumerate(progs[r][pos[r]]) if c.p2p and p2p_done(r, c)}
    return pos, done_in_batch


def dumps(job: Job, *, absent: tuple[int, ...] = ()) -> dict[int, dict[str, Any]]:
    """One dump per rank that has one."""
    ranks = [r for r in range(job.world) if r not in absent]
    pos, done = run(job, ranks)
    return {r: _dump(job, r, pos[r], done.get(r, set())) for r in ranks}


def _dump(job: Job, rank: int, blocked: int, done_in_batch: set[int]) -> dict[str, Any]:
    groups = job.groups()
    nccl = job.backend == "nccl"
    batches = job.program(rank)
    mine = [g for g, (_, ranks) in groups.items() if rank in ranks]
    pg_id = {g: i for i, g in enumerate(mine)}
    counters: dict[tuple[str, str], int] = {}
    entries: list[dict[str, Any]] = []

    def bump(kind: str, group: str) -> int:
        counters[(kind, group)] = counters.get((kind, group), 0) + 1
        return counters[(kind, group)]

    for b, batch in enumerate(batches[: blocked + 1]):
        for i, c in enumerate(batch):
            complete = b < blocked or (c.p2p and i in done_in_batch)
            entries.append(_entry(job, rank, c, len(entries), pg_id[c.group], bump, complete))
        if nccl and batch[0].p2p:
            marker = Call(batch[0].group, "coalesced", (), ())
            entries.append(_entry(job, rank, marker, len(entries), pg_id[marker.group], bump, b < blocked))
    status = {}
    for g, i in pg_id.items():
        ops = [e for e in entries if e["process_group"][0] == g]
        pending = sum(1 for e in ops if not e["retired"])
        enq = max((e["op_id"] for e in ops), default=0)
        status[str(i)] = {
            "last_enqueued_collective": enq,
            "last_started_collective": enq if nccl else -1,
            "last_completed_collective": enq - pending,
        }
    if nccl:
        config = {g: {"name": g, "desc": d, "ranks": str(r)} for g, (d, r) in groups.items() if rank in r}
    else:
        config = {"": {"name": "", "desc": "", "ranks": "[]"}}
    return {
        "version": "2.10",
        "pg_config": config,
        "pg_status": status,
        "comm_lib_version": "2.27.3" if nccl else "",
        "entries": entries,
    }


def _entry(job: Job, rank: int, c: Call, record: int, pg: int, bump: Any, complete: bool) -> dict[str, Any]:
    nccl = job.backend == "nccl"
    groups = job.groups()
    is_p2p = c.p2p or c.op == "coalesced"
    op_id = bump("op", c.group)
    seq = 0 if is_p2p else bump("coll", c.group)
    p2p_seq = bump("p2p", c.group) if c.p2p else 0
    name = f"{job.backend}:{c.op}"
    if c.p2p:
        local = groups[c.group][1].index(rank)
        name += f" {local}->{c.peer}" if c.op == "send" else f" {local}<-{c.peer}"
    t = job.base_ns + record * 3_000_000 + rank * 1_000
    return {
        "record_id": record,
        "pg_id": pg,
        "process_group": (c.group, groups[c.group][0]),
        "collective_seq_id": seq,
        "p2p_seq_id": p2p_seq,
        "op_id": op_id,
        "profiling_name": name,
        "time_created_ns": t,
        "time_discovered_started_ns": t + 10_000 if nccl else None,
        "time_discovered_completed_ns": t + 500_000 if nccl and complete else None,
        "duration_ms": 0.49 if nccl and complete else None,
        "input_sizes": [list(s) for s in c.in_sizes],
        "input_dtypes": [c.dtype] * len(c.in_sizes),
        "output_sizes": [list(s) for s in c.out_sizes],
        "output_dtypes": [c.dtype] * len(c.out_sizes),
        "state": ("completed" if complete else "started") if nccl else "scheduled",
        "retired": complete,
        "timeout_ms": 600_000 if nccl else 10_000,
        "is_p2p": is_p2p,
        "thread_id": "1",
        "thread_name": "python",
        "frames": [
            {
                "name": c.op,
                "filename": "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
                "line": 100,
            },
            {"name": "train_step", "filename": "/job/train.py", "line": 40 + record % 4},
        ],
    }


def write(by_rank: dict[int, dict[str, Any]], directory: Path, *, encoding: str = "pickle") -> list[Path]:
    """``fr_trace_rank_<r>`` (pickle) or ``fr_trace_rank_<r>.json`` files."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank, d in sorted(by_rank.items()):
        if encoding == "pickle":
            path = directory / f"fr_trace_rank_{rank}"
            path.write_bytes(pickle.dumps(d, protocol=4))
        else:
            path = directory / f"fr_trace_rank_{rank}.json"
            path.write_text(json.dumps(as_json(d)))
        paths.append(path)
    return paths


def as_json(d: dict[str, Any]) -> dict[str, Any]:
    """The JSON encoding torch writes: no frames, ``pg_status`` numbers as
    strings, absent times as 0."""
    out = dict(d)
    out["pg_status"] = {k: {n: str(v) for n, v in s.items()} for k, s in d["pg_status"].items()}
    out["entries"] = [
        {k: (0 if v is None and k.startswith("time_") else v) for k, v in e.items() if k != "frames"}
        for e in d["entries"]
    ]
    return out
