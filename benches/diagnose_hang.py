"""Whole-command benchmark of ``commcanary diagnose hang`` on a synthetic
large job, next to torch's own Flight Recorder analyzer on the same dumps.

Builds (once, under ``--workdir``) one pickled NCCL-flavoured Flight
Recorder dump per rank for ``--ranks`` ranks (default 1,024), each of
``--entries`` entries (default 2,000) on 8 process groups per rank: the
default group and seven families of subgroups (blocks of 2, 4, ..., 128
consecutive ranks), one all_reduce per group per step, ``pg_config`` filled
(torch's analyzer needs it). In the last step one rank skips its
blocks-of-8 all_reduce; where every rank blocks follows from running the
step's collectives against each other. Then times, as child processes, the
median of ``--repeat`` runs of ``commcanary diagnose hang DIR`` (peak RSS
from ``os.wait4``) and one run of ``python -m
torch.distributed.flight_recorder.fr_trace DIR -p fr_trace_rank_`` (when
torch is installed; bounded by ``--torch-timeout``), checks that
commcanary's root is the rank that skipped, and prints the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FAMILIES = 8  # the default group, then blocks of 2 ** k ranks for k = 1..7
BASE_NS = 1_790_000_000_000_000_000
SKIP_FAMILY = 3


def group_of(rank: int, family: int, world: int) -> tuple[str, str, list[int]]:
    """(global name, desc, ranks) of ``rank``'s group in ``family``."""
    if family == 0:
        return "0", "default_pg", list(range(world))
    size = 2**family
    offset = 1 + sum(world // 2**k for k in range(1, family))
    block = rank // size
    return str(offset + block), f"blocks{size}_{block}", list(range(block * size, (block + 1) * size))


def last_step_positions(world: int, culprit: int) -> dict[int, int]:
    """Where each rank blocks in the last step (index into its program)."""
    programs = {
        r: [f for f in range(FAMILIES) if not (r == culprit and f == SKIP_FAMILY)] for r in range(world)
    }
    pos = dict.fromkeys(range(world), 0)
    moved = True
    while moved:
        moved = False
        for r in range(world):
            if pos[r] >= len(programs[r]):
                continue
            family = programs[r][pos[r]]
            members = group_of(r, family, world)[2]
            if all(pos[m] < len(programs[m]) and programs[m][pos[m]] == family for m in members):
                for m in members:
                    pos[m] += 1
                moved = True
    return pos


def entry(rank: int, record: int, family: int, seq: int, world: int, done: bool) -> dict[str, Any]:
    name, desc, _ = group_of(rank, family, world)
    t = BASE_NS + record * 2_000_000 + rank * 100
    elems = 1 << (10 + family)
    return {
        "record_id": record,
        "pg_id": family,
        "process_group": (name, desc),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": "nccl:all_reduce",
        "time_created_ns": t,
        "time_discovered_started_ns": t + 5_000,
        "time_discovered_completed_ns": t + 400_000 if done else None,
        "duration_ms": 0.39 if done else None,
        "input_sizes": [[elems]],
        "input_dtypes": ["Float"],
        "output_sizes": [[elems]],
        "output_dtypes": ["Float"],
        "state": "completed" if done else "started",
        "retired": done,
        "timeout_ms": 600_000,
        "is_p2p": False,
        "thread_id": "140000000000000",
        "thread_name": "pt_main_thread",
        "frames": [
            {
                "name": "all_reduce",
                "filename": "/venv/site-packages/torch/distributed/distributed_c10d.py",
                "line": 2800,
            },
            {"name": "train_step", "filename": "/job/train.py", "line": 100 + family},
        ],
    }


def dump(rank: int, world: int, entries: int, culprit: int, blocked_at: int) -> dict[str, Any]:
    steps = entries // FAMILIES
    out: list[dict[str, Any]] = []
    seq = [0] * FAMILIES
    for step in range(steps):
        last = step == steps - 1
        program = [f for f in range(FAMILIES) if not (last and rank == culprit and f == SKIP_FAMILY)]
        for i, family in enumerate(program):
            if last and i > blocked_at:
                break
            seq[family] += 1
            done = not (last and i == blocked_at)
            out.append(entry(rank, len(out), family, seq[family], world, done))
    config = {}
    status = {}
    for family in range(FAMILIES):
        name, desc, ranks = group_of(rank, family, world)
        config[name] = {"name": name, "desc": desc, "ranks": str(ranks)}
        pending = sum(1 for e in out if e["pg_id"] == family and not e["retired"])
        status[str(family)] = {
            "last_enqueued_collective": seq[family],
            "last_started_collective": seq[family],
            "last_completed_collective": seq[family] - pending,
        }
    return {
        "version": "2.10",
        "pg_config": config,
        "pg_status": status,
        "comm_lib_version": "2.27.3",
        "entries": out,
    }


def build(workdir: Path, world: int, entries: int) -> tuple[Path, int]:
    culprit = world // 2 + 5
    target = workdir / f"fr_{world}x{entries}"
    marker = target / "done.json"
    if marker.exists():
        return target, culprit
    target.mkdir(parents=True, exist_ok=True)
    positions = last_step_positions(world, culprit)
    started = time.perf_counter()
    for rank in range(world):
        data = dump(rank, world, entries, culprit, positions[rank])
        (target / f"fr_trace_rank_{rank}").write_bytes(pickle.dumps(data, protocol=4))
    marker.write_text(json.dumps({"culprit": culprit}))
    print(f"built {world} dumps in {time.perf_counter() - started:.1f} s: {target}", file=sys.stderr)
    return target, culprit


def timed_rss(argv: list[str]) -> tuple[float, int, int, str, float]:
    """Runs ``argv``: (wall seconds, peak RSS bytes, exit code, stdout, CPU
    seconds (user + system)), from ``os.wait4``."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out:
        started = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1)])
        _, status, usage = os.wait4(pid, 0)
        elapsed = time.perf_counter() - started
        out.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        return elapsed, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status), out.read(), cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/commcanary-bench"))
    parser.add_argument("--torch-timeout", type=float, default=900.0)
    parser.add_argument("--no-torch", action="store_true", help="Skip torch's analyzer.")
    args = parser.parse_args()
    directory, culprit = build(args.workdir, args.ranks, args.entries)
    exe = str(Path(sys.executable).with_name("commcanary"))
    out_json = args.workdir / "hang.json"
    runs = [
        timed_rss([exe, "diagnose", "hang", str(directory), "-o", str(out_json), "--no-cache"])
        for _ in range(args.repeat)
    ]
    seconds = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[4] for r in runs)
    rss = max(r[1] for r in runs)
    doc = json.loads(out_json.read_bytes())
    roots = [r["rank"] for r in doc["root"]]
    print(
        f"commcanary diagnose hang: {args.ranks} ranks x {args.entries} entries, {FAMILIES} groups per rank: "
        f"{seconds:.2f} s median of {args.repeat}, peak RSS {rss / 2**20:.0f} MiB, root {roots} (expected [{culprit}]), "
        f"exit {runs[0][2]}"
    )
    walls = ", ".join(f"{r[0]:.2f}" for r in runs)
    print(
        f"  runs: {walls} s; CPU {cpu:.2f} s (user + system, median), {cpu / seconds:.2f} cores busy on average"
    )
    print(f"  target: <= 5 s and <= 1024 MiB: {'met' if seconds <= 5 and rss <= 2**30 else 'NOT met'}")
    if roots != [culprit]:
        print("  WRONG ROOT", file=sys.stderr)
        return 1
    if args.no_torch:
        return 0
    try:
        import torch  # noqa: F401
    except ImportError:
        print("  torch not installed: fr_trace not timed")
        return 0
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.flight_recorder.fr_trace",
        str(directory),
        "-p",
        "fr_trace_rank_",
    ]
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=args.torch_timeout)
        torch_s = time.perf_counter() - started
        status = f"exit {done.returncode}"
    except subprocess.TimeoutExpired:
        torch_s = float("inf")
        status = f"did not finish in {args.torch_timeout:.0f} s"
    ratio = torch_s / seconds if torch_s != float("inf") else float("inf")
    shown = f"{torch_s:.1f} s" if torch_s != float("inf") else f"> {args.torch_timeout:.0f} s"
    print(f"torch fr_trace on the same dumps: {shown} ({status}); commcanary is {ratio:.1f}x faster")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
