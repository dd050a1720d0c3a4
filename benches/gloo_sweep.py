#!/usr/bin/env python3
"""What one gloo collective costs on this host, in isolation
(``docs/model-truth.md``): the physics the calibrated model has to capture.

For 2 and 4 local gloo processes, each of all_reduce, all_gather,
reduce_scatter, all_to_all and broadcast at 64 KiB to 8 MiB (the full
tensor; all_gather's output, reduce_scatter's input) is run 12 times after
a barrier; the median of the last 10, read on rank 0, is printed in µs.
Needs torch.

    python benches/gloo_sweep.py [--ranks 2,4]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from typing import Any

SIZES = (1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 23)
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


def _one(dist: Any, op: str, big: Any, small: Any) -> None:
    if op == "all_reduce":
        dist.all_reduce(big)
    elif op == "all_gather":
        dist.all_gather_into_tensor(big, small)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(small, big)
    elif op == "all_to_all":
        dist.all_to_all_single(big.clone(), big)
    else:
        dist.broadcast(big, 0)


def _work(rank: int, world: int, port: int, queue: Any) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    medians = {}
    for size in SIZES:
        big = torch.ones(size // 4)
        small = torch.ones(size // 4 // world)
        for op in OPS:
            times = []
            for _ in range(12):
                dist.barrier()
                t0 = time.perf_counter()
                _one(dist, op, big, small)
                times.append(time.perf_counter() - t0)
            medians[(op, size)] = statistics.median(times[2:]) * 1e6
    if rank == 0:
        queue.put(medians)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    import torch.multiprocessing as mp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", default="2,4", help="Comma-separated process counts.")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    print(f"{'ranks':>5} {'op':<15}" + "".join(f"{s >> 10:>9} KiB" for s in SIZES))
    for world in (int(x) for x in args.ranks.split(",")):
        queue = ctx.Queue()
        port = _free_port()
        procs = [ctx.Process(target=_work, args=(r, world, port, queue)) for r in range(world)]
        for p in procs:
            p.start()
        medians = queue.get()
        for p in procs:
            p.join()
        for op in OPS:
            print(f"{world:>5} {op:<15}" + "".join(f"{medians[(op, s)]:>13.0f}" for s in SIZES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
