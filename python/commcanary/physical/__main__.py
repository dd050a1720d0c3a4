"""A physical replay under an existing launcher, for jobs on several hosts:

    torchrun --nnodes N --nproc-per-node G ... -m commcanary.physical CANARY -o REPORT [--physical nccl]

Every process the launcher starts (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``
and ``MASTER_PORT`` in its environment) joins the job, executes the
canary's program as its rank (:func:`commcanary.physical.worker.execute`:
the same code the local launcher runs, with each host's clock offset from
rank 0's estimated), and sends its times to rank 0, which writes the
measured report. Exit 0 on success, 3 on bad input (on every rank).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from commcanary._types import Measurement


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m commcanary.physical", description=__doc__.split("\n\n")[0])
    ap.add_argument("canary")
    ap.add_argument("-o", "--output", required=True, help="Where rank 0 writes the measured report.")
    ap.add_argument(
        "--physical", choices=("gloo", "nccl"), default=None, help="Default: nccl with GPUs, else gloo."
    )
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--compute-fill", choices=("sleep", "spin"), default="sleep")
    ap.add_argument("--compute-fill-scale", type=float, default=1.0)
    ap.add_argument("--bytes-scale", type=float, default=1.0)
    args = ap.parse_args(argv)
    import datetime

    import torch
    import torch.distributed as dist

    from commcanary.errors import CommCanaryError
    from commcanary.physical import host_cpus, load_program, measured_run
    from commcanary.physical.worker import execute

    engine = args.physical or ("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    try:
        program = load_program(args.canary)
        if world < program.world:
            raise CommCanaryError(
                f"the launcher started {world} processes; the canary has {program.world} ranks"
            )
    except CommCanaryError as exc:
        print(f"commcanary: {exc}", file=sys.stderr)
        return 3
    options = {
        "iterations": args.iterations,
        "warmup": args.warmup,
        "compute_fill": args.compute_fill,
        "compute_fill_scale": args.compute_fill_scale,
        "bytes_scale": args.bytes_scale,
    }
    dist.init_process_group(engine, init_method="env://", timeout=datetime.timedelta(minutes=30))
    ready, enter, leave, cpu = execute(program, rank, engine, options)
    hosts: list[object] = [None] * world
    dist.all_gather_object(hosts, platform.node())
    times: list[object] | None = [None] * world if rank == 0 else None
    dist.gather_object((ready, enter, leave, cpu), times, dst=0)
    if rank == 0 and times is not None:
        names = sorted({str(h) for h in hosts})
        host = names[0] if len(names) == 1 else f"{len(names)} hosts"
        measurement: Measurement = {
            "engine": engine,
            "host": host,
            "torch_version": str(torch.__version__),
            "nproc": world,
            "iterations": args.iterations,
            "warmup": args.warmup,
            "compute_fill": args.compute_fill,
            "compute_fill_scale": args.compute_fill_scale,
            "bytes_scale": args.bytes_scale,
        }
        ready, enter, leave, cpu = ([t[j] for t in times] for j in range(4))  # type: ignore[index]
        one_host = len(names) == 1
        run = measured_run(
            args.canary,
            ready,
            enter,
            leave,
            measurement,
            host_cpus=host_cpus() if one_host else 0,
            cpu=cpu if one_host and engine == "gloo" else None,
        )
        run.report.write(args.output)
        print(f"measured on {engine}: {run.report.summary_line()}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
