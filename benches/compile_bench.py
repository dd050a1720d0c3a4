#!/usr/bin/env python3
"""Whole-command benchmark of ``commcanary compile`` on generated traces.

Generates traces with a generator called as ``GENERATOR N OUT --seed S``
(``--generator PATH``; by default ``examples/make_synthetic_trace.py``, the
tensor-parallel decode shape of the bundled example), then runs the installed CLI several times per size and prints a table: median
and best wall seconds, peak RSS of the command, events per second, canary
events and byte ratio. It also times ``commcanary --help`` and the floor of a
compile: reading + validating the trace in Rust plus SHA-256 of its bytes.

Usage::

    python benches/compile_bench.py [--sizes 1000,10000,100000,1000000] [--repeat 3]
        [--quantum 0.00390625] [--lossless] [--data DIR] [--generator PATH]

Timings are wall-clock on whatever machine runs this; compare ratios within
one run, never across machines. Nothing here is asserted by tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def find_generator(explicit: str | None) -> Path:
    """The trace generator: ``--generator PATH``, else the bundled example generator."""
    candidate = Path(explicit) if explicit else ROOT / "examples" / "make_synthetic_trace.py"
    if not candidate.is_file():
        sys.exit(f"trace generator {candidate} not found; pass --generator PATH")
    return candidate


def run_measured(argv: list[str], ok_codes: tuple[int, ...] = (0,)) -> tuple[float, float, str]:
    """Run a command; return (wall seconds, peak RSS MiB, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in ok_codes:
        sys.exit(f"command failed: {' '.join(argv)}\n{err}")
    return wall, usage.ru_maxrss / 1024.0, out


def floor_seconds(trace: Path) -> float:
    """Parse + validate in Rust, plus hashing the raw bytes: the unavoidable work."""
    code = (
        "import hashlib, sys, time\n"
        "from commcanary import _core\n"
        "t = time.perf_counter()\n"
        "_core.load_trace(sys.argv[1])\n"
        "hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest()\n"
        "print(time.perf_counter() - t)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(trace)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--quantum", default=None, help="--start-quantum-us passed to the generator")
    ap.add_argument(
        "--lossless", action="store_true", help="compile with --lossless-timing --timing-sample-limit 256"
    )
    ap.add_argument("--data", default=str(HERE / "results" / "traces"))
    ap.add_argument("--generator", default=None)
    args = ap.parse_args()

    cli = shutil.which("commcanary")
    if cli is None:
        sys.exit("install commcanary first (pip install .)")
    generator = find_generator(args.generator)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    out_dir = data.parent / "canaries"
    out_dir.mkdir(parents=True, exist_ok=True)

    help_times = [run_measured([cli, "--help"])[0] for _ in range(5)]
    print(f"commcanary --help: median {statistics.median(help_times):.3f} s (best {min(help_times):.3f} s)")
    mode = "lossless (--lossless-timing --timing-sample-limit 256)" if args.lossless else "default"
    quantum = args.quantum or "2^-8 (generator default)"
    print(f"compile mode: {mode}; start quantum: {quantum}; repeats: {args.repeat}")
    print()
    header = (
        f"{'events':>9} {'trace MB':>9} {'median s':>9} {'best s':>8} {'peak MiB':>9} "
        f"{'events/s':>11} {'canary ev':>10} {'byte ratio':>10} {'floor s':>8}"
    )
    print(header)
    print("-" * len(header))
    for size in (int(s) for s in args.sizes.split(",")):
        suffix = f"-q{args.quantum}" if args.quantum else ""
        trace = data / f"gen-{size}-s{args.seed}{suffix}.json"
        if not trace.exists():
            gen = [sys.executable, str(generator), str(size), str(trace), "--seed", str(args.seed)]
            if args.quantum:
                gen += ["--start-quantum-us", args.quantum]
            subprocess.run(gen, check=True, capture_output=True)
        output = out_dir / f"gen-{size}.canary.json"
        argv = [cli, "compile", str(trace), "-o", str(output)]
        if args.lossless:
            argv += ["--lossless-timing", "--timing-sample-limit", "256"]
        walls, rss, line = [], [], ""
        for _ in range(args.repeat):
            wall, peak, out = run_measured(argv)
            walls.append(wall)
            rss.append(peak)
            line = out.splitlines()[0]
        canary_events = line.split(" into ")[1].split(" ")[0]
        byte_ratio = line.split("byte ratio=")[1].split("x")[0]
        median = statistics.median(walls)
        floor = floor_seconds(trace)
        print(
            f"{size:>9} {trace.stat().st_size / 1e6:>9.1f} {median:>9.3f} {min(walls):>8.3f} {max(rss):>9.1f} "
            f"{size / median:>11,.0f} {canary_events:>10} {byte_ratio:>10} {floor:>8.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
