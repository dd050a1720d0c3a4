"""Whole-command benchmark of ``commcanary diagnose stragglers``, ``steps``
and ``timeline`` on a synthetic large job.

Builds (once, under ``--workdir``) one gloo-style Kineto trace per rank for
``--ranks`` ranks (default 64) of ``--steps`` steps (default 2,000), each
step five collectives per rank: four all_reduces on the world and an
all_gather on the rank's block of eight, so 10^4 collectives per rank by
default; one rank arrives late on a few steps and one is slow inside one
all_reduce (``tests/kineto_jobs.py`` writes the events). Then times, as
child processes, the median of ``--repeat`` runs of each command with
``--no-cache`` (every trace parsed each time), with peak RSS and CPU time
from ``os.wait4``, and checks the findings are the injected ones. Each command is timed again
with a warm parse cache (``--cache-dir``, filled by one run first): the
traces' parsed profiles are read back instead of reparsed, as on a second
look at the same job.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import kineto_jobs
from diagnose_hang import timed_rss


def injected(
    ranks: int, steps: int
) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int, int], float]]:
    """Late arrivals (rank, step) and one slow collective (rank, step, op),
    placed at fixed fractions of the job."""
    late = {
        (5, steps // 5): 30_000.0,
        (5, 7 * steps // 10): 60_000.0,
        (5 * ranks // 8, 9 * steps // 20): 45_000.0,
    }
    slow = {(17 % ranks, 3 * steps // 5, 2): 40_000.0}
    return late, slow


def job(ranks: int, steps: int) -> kineto_jobs.Job:
    blocks = [
        (str(1 + b), f"block8_{b}", list(range(8 * b, min(8 * b + 8, ranks)))) for b in range(ranks // 8)
    ]
    groups = [("0", "default_pg", list(range(ranks))), *blocks]
    ops = [kineto_jobs.Op("all_reduce", 0, 262144) for _ in range(4)]
    ops += [kineto_jobs.Op("all_gather", 1 + b, 65536) for b in range(len(blocks))]
    late, slow = injected(ranks, steps)
    return kineto_jobs.Job(world=ranks, steps=steps, groups=groups, ops=ops, late=late, slow=slow)


def timed(argv: list[str]) -> tuple[float, int, int, float, str]:
    """(wall s, peak RSS bytes, exit code, CPU s, stdout) of ``argv``."""
    wall, rss, code, out, cpu = timed_rss(argv)
    return wall, rss, code, cpu, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "commcanary-stragglers-bench"
    )
    args = parser.parse_args()
    if args.ranks % 8:
        parser.error("--ranks must be a multiple of 8")
    traces = args.workdir / f"job-{args.ranks}x{args.steps}"
    if not (traces / f"rank{args.ranks - 1}.json").exists():
        started = time.perf_counter()
        kineto_jobs.write_job(traces, job(args.ranks, args.steps))
        print(
            f"wrote {args.ranks} traces in {time.perf_counter() - started:.1f} s: {traces}", file=sys.stderr
        )
    size = sum(p.stat().st_size for p in traces.glob("rank*.json"))
    per_rank = 5 * args.steps
    print(f"job: {args.ranks} ranks x {per_rank} collectives per rank, {size / 2**20:.0f} MiB of traces")
    exe = str(Path(sys.executable).with_name("commcanary"))
    out = args.workdir / "out"
    out.mkdir(exist_ok=True)
    commands = {
        "diagnose stragglers": [
            exe,
            "diagnose",
            "stragglers",
            str(traces),
            "--no-cache",
            "-o",
            str(out / "s.json"),
        ],
        "steps": [exe, "steps", str(traces), "--no-cache", "-o", str(out / "steps.json")],
        "timeline": [exe, "timeline", str(traces), "--no-cache", "-o", str(out / "timeline.json")],
    }
    cache = args.workdir / "cache"
    for name, argv in list(commands.items()):
        warm = [a for a in argv if a != "--no-cache"] + ["--cache-dir", str(cache)]
        commands[f"{name} (parse cache warm)"] = warm
    timed(commands["steps (parse cache warm)"])  # fills the cache
    for name, argv in commands.items():
        runs = [timed(argv) for _ in range(args.repeat)]
        codes = {r[2] for r in runs}
        wall = statistics.median(r[0] for r in runs)
        rss = max(r[1] for r in runs)
        cpu = statistics.median(r[3] for r in runs)
        print(
            f"{name}: {wall:.2f} s median of {args.repeat} (runs {', '.join(f'{r[0]:.2f}' for r in runs)}), "
            f"CPU {cpu:.2f} s ({cpu / wall:.2f} cores busy), peak RSS {rss / 2**20:.0f} MiB, exit {sorted(codes)}"
        )
    doc = json.loads((out / "s.json").read_bytes())
    found = sorted((f["rank"], f["step"], f["kind"]) for f in doc["findings"])
    late, slow = injected(args.ranks, args.steps)
    expected = sorted(
        [(r, s, "late_arrival") for r, s in late] + [(r, s, "slow_collective") for r, s, _ in slow]
    )
    print(f"findings: {found}")
    print("findings are the injected ones" if found == expected else f"MISMATCH: expected {expected}")
    tl = (out / "timeline.json").stat().st_size
    print(f"timeline: {tl / 2**20:.0f} MiB")
    return 0 if found == expected else 1


if __name__ == "__main__":
    raise SystemExit(main())
