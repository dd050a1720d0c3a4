"""A real gloo training job for the agent's tests and benches: DDP over every rank, an explicit
all_reduce on a second group, a ring of sends and receives, steps from ``torch.profiler``.

    torchrun --nproc-per-node N live_job.py --steps S [--fault KIND --fault-rank R --fault-step K]
             [--step-sleep SECONDS] [--freeze-s SECONDS] [--straggle-s SECONDS]

Faults (at step K, on rank R): ``skip`` (R skips the explicit all_reduce), ``send`` (R skips its
send of the ring), ``desync`` (R all_reduces a tensor of another size), ``kill`` (R SIGKILLs
itself), ``freeze`` (a helper SIGSTOPs R for --freeze-s, then SIGCONTs it), ``sleep`` (R sleeps
--straggle-s before its step's work, every step from K on). The collective timeout is 10 minutes:
a hang stays a hang until the test stops the job. Each rank writes ``ROOT_TRUTH`` (the fault, when
injected) to --truth DIR when given.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--fault", default="none")
    parser.add_argument("--fault-rank", type=int, default=1)
    parser.add_argument("--fault-step", type=int, default=5)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--freeze-s", type=float, default=60.0)
    parser.add_argument("--straggle-s", type=float, default=0.2)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--truth", type=Path)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    side = dist.new_group(list(range(world)))
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(args.width, args.width), nn.ReLU(), nn.Linear(args.width, 10)),
        bucket_cap_mb=0.25,
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(32, args.width)
    target = torch.randint(0, 10, (32,))
    token = torch.zeros(64)
    faulty = rank == args.fault_rank

    def inject(what: str) -> None:
        if args.truth is not None:
            args.truth.mkdir(parents=True, exist_ok=True)
            (args.truth / f"fault_rank{rank}.json").write_text(
                json.dumps({"fault": what, "rank": rank, "step": step, "wall_ns": time.time_ns()})
            )

    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=10**9, warmup=0, active=1),
    ) as prof:
        for step in range(args.steps):
            at_fault = faulty and step == args.fault_step
            if faulty and args.fault == "sleep" and step >= args.fault_step:
                time.sleep(args.straggle_s)
            if at_fault and args.fault == "kill":
                inject("kill")
                os.kill(os.getpid(), signal.SIGKILL)
            if at_fault and args.fault == "freeze":
                inject("freeze")
                subprocess.Popen(
                    [
                        "sh",
                        "-c",
                        f"kill -STOP {os.getpid()}; sleep {args.freeze_s}; kill -CONT {os.getpid()}",
                    ],
                    start_new_session=True,
                )
                time.sleep(0.5)
            loss = nn.functional.cross_entropy(model(data), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            value = loss.detach().reshape(1)
            if at_fault and args.fault == "skip":
                inject("skip")
            elif at_fault and args.fault == "desync":
                inject("desync")
                dist.all_reduce(torch.zeros(7), group=side)
            else:
                dist.all_reduce(value, group=side)
            nxt, prv = (rank + 1) % world, (rank - 1) % world
            if world > 1:
                skip_send = at_fault and args.fault == "send"
                if skip_send:
                    inject("send")
                if rank % 2 == 0:
                    if not skip_send:
                        dist.send(token, nxt)
                    dist.recv(token, prv)
                else:
                    dist.recv(token, prv)
                    if not skip_send:
                        dist.send(token, nxt)
            if args.step_sleep:
                time.sleep(args.step_sleep)
            prof.step()
    dist.destroy_process_group()
    sys.exit(0)


if __name__ == "__main__":
    main()
