"""One rank of a physical replay: executes its program on real process
groups and times every occurrence it takes part in.

Run by the launcher (:mod:`commcanary.physical`) as
``python -m commcanary.physical.worker DIR RANK WORLD PORT ENGINE ...``. Each
iteration starts at a common instant: rank 0 picks it a little ahead on the
host's monotonic clock (shared by every process of one host) and broadcasts
it. The program's timeline then advances by each occurrence's gap (scaled by
the compute fill scale); a member enters at that due time plus its arrival
offset, filling the wait by sleeping or spinning, or at once when earlier
work has made it late. Entry and exit are read around the call (for a
transfer, around ``send`` or ``recv``). Times are µs from the iteration's
start; a rank writes ``rank{R}.npz`` with its entry and exit per occurrence
(NaN where it is not a member) for every iteration, warm-up included.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from commcanary.physical.program import Program, elements, read_program

#: How far ahead rank 0 places an iteration's start, ns.
START_AHEAD_NS = 50_000_000
#: Fault injection for tests: ``RANK:K`` makes that rank exit abruptly
#: before its K-th occurrence, as a crashed process would.
FAULT_VAR = "COMMCANARY_PHYSICAL_FAULT"


def _wait_until(target_ns: int, spin: bool) -> None:
    while True:
        left = target_ns - time.monotonic_ns()
        if left <= 0:
            return
        if not spin and left > 200_000:
            time.sleep((left - 100_000) / 1e9)
        elif not spin:
            time.sleep(0)


class _Runner:
    """The rank's groups and buffers, and one call per occurrence."""

    def __init__(self, program: Program, rank: int, engine: str, bytes_scale: float = 1.0) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.rank, self.program = torch, dist, rank, program
        # The canary's compute is filled, not run: a rank needs no intra-op
        # pool, and on a host shared by many ranks each pool's spinning
        # threads take the cores the other ranks' collectives need.
        torch.set_num_threads(1)
        self.device = (
            torch.device("cuda", rank % max(1, torch.cuda.device_count())) if engine == "nccl" else None
        )
        if self.device is not None:
            torch.cuda.set_device(self.device)
        # Every process creates every group, in the same order.
        self.groups = [dist.new_group(ranks) for _name, ranks in program.groups]
        self.buffers: dict[int, tuple[Any, Any]] = {}
        self.bytes_scale = bytes_scale

    def _tensors(self, s: int) -> tuple[Any, Any]:
        if s not in self.buffers:
            sig = self.program.signatures[s]
            dtype, n = elements(sig, self.bytes_scale)
            torch = self.torch
            kind = getattr(torch, dtype)
            size = len(sig["ranks"])
            big = torch.ones(max(n, size), dtype=kind, device=self.device)
            small = torch.ones(max(1, big.numel() // size), dtype=kind, device=self.device)
            self.buffers[s] = (big, small)
        return self.buffers[s]

    def run(self, s: int) -> None:
        sig = self.program.signatures[s]
        op, dist = sig["op"], self.dist
        g = self.program.group_of[s]
        group = self.groups[g] if g >= 0 else None
        big, small = self._tensors(s)
        size = len(sig["ranks"])
        if op == "all_reduce":
            dist.all_reduce(big, group=group)
        elif op == "all_gather":
            dist.all_gather_into_tensor(big[: small.numel() * size], small, group=group)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(small, big[: small.numel() * size], group=group)
        elif op == "all_to_all":
            dist.all_to_all_single(
                big[: small.numel() * size].clone(), big[: small.numel() * size], group=group
            )
        elif op == "broadcast":
            dist.broadcast(big, src=int(sig.get("root_rank", sig["ranks"][0])), group=group)
        elif op == "reduce":
            dist.reduce(big, dst=int(sig.get("root_rank", sig["ranks"][0])), group=group)
        elif op == "gather":
            root = int(sig.get("root_rank", sig["ranks"][0]))
            out = [small.clone() for _ in range(size)] if self.rank == root else None
            dist.gather(small, out, dst=root, group=group)
        elif op == "scatter":
            root = int(sig.get("root_rank", sig["ranks"][0]))
            parts = [small.clone() for _ in range(size)] if self.rank == root else None
            dist.scatter(small, parts, src=root, group=group)
        else:  # a transfer
            sender = int(sig.get("sender_rank", sig["ranks"][0]))
            receiver = int(sig.get("receiver_rank", sig["ranks"][-1]))
            if self.rank == sender:
                dist.send(big, dst=receiver)
            else:
                dist.recv(big, src=sender)


def _iteration_start(runner: _Runner, offset_ns: int) -> int:
    """The next iteration's start on this rank's clock: rank 0's instant,
    ahead of now, moved by this rank's clock offset from rank 0."""
    torch, dist = runner.torch, runner.dist
    start = torch.tensor([time.monotonic_ns() + START_AHEAD_NS], dtype=torch.int64, device=runner.device)
    dist.broadcast(start, src=0)
    return int(start.item()) + offset_ns


def clock_offset_ns(runner: _Runner, rounds: int = 7) -> int:
    """This rank's monotonic clock minus rank 0's: 0 when every rank runs on
    one host (one clock), else the median over ``rounds`` barriers of the
    difference of the instants each rank leaves it (an estimate, good to the
    barrier's exit skew)."""
    import socket

    dist = runner.dist
    hosts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(hosts, socket.gethostname())
    if len(set(hosts)) == 1:
        return 0
    diffs = []
    for _ in range(rounds):
        dist.barrier()
        t = runner.torch.tensor([time.monotonic_ns()], dtype=runner.torch.int64, device=runner.device)
        zero = t.clone()
        dist.broadcast(zero, src=0)
        diffs.append(int(t.item()) - int(zero.item()))
    return int(np.median(diffs))


def execute(program: Program, rank: int, engine: str, options: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """Run ``program`` as ``rank`` in the initialised process group; returns
    each iteration's readiness, entry and exit per occurrence (µs from its
    start), and the process's CPU time inside each call (µs, every thread:
    the backend's own threads do the work). A rank is ready at its due time
    plus its arrival offset; it enters then, or later when earlier work kept
    it busy."""
    import torch.distributed as dist

    runner = _Runner(program, rank, engine, float(options.get("bytes_scale", 1.0)))
    offset = clock_offset_ns(runner)
    spin = options["compute_fill"] == "spin"
    scale = float(options["compute_fill_scale"])
    mine = [rank in program.signatures[s]["ranks"] for s in range(len(program.signatures))]
    rounds = int(options["warmup"]) + int(options["iterations"])
    fault = os.environ.get(FAULT_VAR, "")
    die_at = int(fault.split(":")[1]) if fault.split(":")[0] == str(rank) else -1
    serialize = bool(options.get("serialize_groups", False))
    group_of = [sig.get("group") for sig in program.signatures]
    n = program.occurrences
    ready = np.full((rounds, n), np.nan)
    enter = np.full((rounds, n), np.nan)
    leave = np.full((rounds, n), np.nan)
    cpu = np.full((rounds, n), np.nan)
    for it in range(rounds):
        dist.barrier()
        origin = _iteration_start(runner, offset)
        _wait_until(origin, spin=True)
        due = float(origin)
        previous = None
        for k in range(n):
            s = int(program.signature[k])
            due += float(program.gap_us[k]) * scale * 1000.0
            if serialize and group_of[s] != previous:
                # Groups never overlap: everyone finishes the last group first.
                if previous is not None:
                    dist.barrier()
                previous = group_of[s]
            if not mine[s]:
                continue
            if 0 <= die_at <= k:
                os._exit(9)
            at = int(program.offsets_at[k]) + program.signatures[s]["ranks"].index(rank)
            target = int(due + float(program.offsets_us[at]) * 1000.0)
            _wait_until(target, spin)
            c0, t0 = time.process_time_ns(), time.monotonic_ns()
            runner.run(s)
            if runner.device is not None:
                runner.torch.cuda.synchronize()
            t1, c1 = time.monotonic_ns(), time.process_time_ns()
            ready[it, k] = (min(target, t0) - origin) / 1000.0
            enter[it, k] = (t0 - origin) / 1000.0
            leave[it, k] = (t1 - origin) / 1000.0
            cpu[it, k] = (c1 - c0) / 1000.0
    dist.barrier()
    return ready, enter, leave, cpu


def run(directory: Path, rank: int, world: int, port: int, engine: str, options: dict[str, Any]) -> None:
    """Join the local job, execute the program in ``directory`` as ``rank``
    and write its times."""
    import datetime

    import torch.distributed as dist

    program = read_program(directory)
    dist.init_process_group(
        engine,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=float(options["timeout_s"])),
    )
    ready, enter, leave, cpu = execute(program, rank, engine, options)
    np.savez(directory / f"rank{rank}.npz", ready=ready, enter=enter, exit=leave, cpu=cpu)
    dist.destroy_process_group()


def main(argv: list[str]) -> int:
    import json

    directory, rank, world, port, engine = Path(argv[0]), int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    options = json.loads((directory / "options.json").read_text())
    run(directory, rank, world, port, engine, options)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
