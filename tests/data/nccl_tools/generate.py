"""Writes this directory's NCCL Inspector and nccl-tests files from their
published formats (README.md says which). Deterministic: run it again and
the bytes are the same.

    python tests/data/nccl_tools/generate.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
WORLD = "0x7f8c496ae9f661"
PAIR = "0x1d2c3b4a596877"


def inspector_record(
    comm: str, rank: int, n_ranks: int, coll: str, sn: int, size: int, us: int
) -> dict[str, object]:
    algobw = size / us / 1e3
    factor = {"AllReduce": 2 * (n_ranks - 1) / n_ranks, "AllGather": (n_ranks - 1) / n_ranks}[coll]
    return {
        "header": {"id": comm, "rank": rank, "n_ranks": n_ranks, "nnodes": 1},
        "metadata": {
            "inspector_output_format_version": "v4.0",
            "git_rev": "",
            "rec_mechanism": "profiler_plugin",
            "dump_timestamp_us": 1748030377748202 + sn * 1000 + rank,
            "hostname": "node-a",
            "pid": 41000 + rank,
        },
        "coll_perf": {
            "coll": coll,
            "coll_sn": sn,
            "coll_msg_size_bytes": size,
            "coll_exec_time_us": us,
            "coll_timing_source": "kernel_gpu",
            "coll_algobw_gbs": round(algobw, 6),
            "coll_busbw_gbs": round(algobw * factor, 6),
        },
    }


def inspector() -> None:
    out = HERE / "inspector"
    out.mkdir(exist_ok=True)
    for rank in range(4):
        lines = []
        for sn in range(20):
            # 64 MiB all_reduce on 4 ranks: about 1.6 ms; instance 13 is slow on rank 2.
            us = 1600 + 7 * ((sn * 5 + rank) % 4)
            if sn == 13 and rank == 2:
                us = 8200
            lines.append(inspector_record(WORLD, rank, 4, "AllReduce", sn, 64 << 20, us))
            if rank < 2:
                lines.append(
                    inspector_record(PAIR, rank, 2, "AllGather", sn, 8 << 20, 190 + 3 * ((sn + rank) % 3))
                )
        text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in lines)
        (out / f"node-a-{41000 + rank}.log").write_text(text)


def nccl_tests() -> None:
    sizes = [1 << k for k in range(20, 29)]  # 1 MiB .. 256 MiB
    results = []
    for size in sizes:
        # A plausible curve on 4 ranks: approaching 120 GB/s bus bandwidth.
        bus = 120.0 * size / (size + (8 << 20))
        alg = bus / 1.5
        us = size / alg / 1e3
        place = {"time": round(us, 6), "alg_bw": round(alg, 6), "bus_bw": round(bus, 6), "nwrong": 0.0}
        results.append(
            {
                "size": size,
                "count": size // 4,
                "type": "float",
                "redop": "sum",
                "root": "    -1",
                "out_of_place": place,
                "in_place": dict(place, bus_bw=round(bus * 0.99, 6)),
                "actual_iterations": 20,
                "experiment_name": "",
            }
        )
    doc = {
        "version": 2,
        "start_time": "2026-12-01 10:00:00",
        "args": ["./build/all_reduce_perf", "-b", "1M", "-e", "256M", "-f", "2", "-g", "1", "-J", "ar.json"],
        "env": [],
        "nccl_version": 22703,
        "config": {
            "nthreads": 1,
            "ngpus": 1,
            "minimum_bytes": 1 << 20,
            "maximum_bytes": 1 << 28,
            "step_factor": 2,
            "warmup_iters": 5,
            "iterations": 20,
            "aggregated_iterations": 1,
            "validation": 1,
            "graph": 0,
            "blocking_collectives": "false",
            "per_iter_timing": "false",
            "parallel_init": "false",
            "devices": [
                {
                    "rank": r,
                    "group": 0,
                    "pid": 5000 + r,
                    "hostname": "node-a",
                    "device": r,
                    "device_hex": f"0000:{r:02x}:00",
                    "device_info": "NVIDIA H100 80GB HBM3",
                }
                for r in range(4)
            ],
        },
        "results": results,
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {
            "bandwidth": round(sum(r["out_of_place"]["bus_bw"] for r in results) / len(results), 6),
            "okay": "unchecked",
        },
        "errors": [""],
        "end_time": "2026-12-01 10:00:09",
    }
    (HERE / "all_reduce_perf.json").write_text(json.dumps(doc, separators=(",", ":")))


if __name__ == "__main__":
    inspector()
    nccl_tests()
