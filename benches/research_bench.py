#!/usr/bin/env python3
"""Whole-command benchmark of the research controls: ``reduce`` and every
``baseline`` method, on traces of the workload-shaped generator
(``../shared/bench/gen_trace.py`` by default, ``--generator`` otherwise).

For each ``--reduce-sizes`` size it times ``commcanary reduce TRACE -o OUT``
(default budget 256) and prints the reduction line; for each
``--baseline-sizes`` size, ``commcanary baseline --method M`` for each
method. Median and best wall seconds and peak RSS per command, as child
processes. Timings are wall clock on this machine; compare within one run.

Usage::

    python benches/research_bench.py [--reduce-sizes 1000,10000] [--baseline-sizes 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from compile_bench import HERE, ROOT, run_measured

METHODS = ("isolated", "random", "frequency", "cluster", "stratified")


def trace_of(generator: Path, data: Path, size: int, seed: int) -> Path:
    trace = data / f"gen-{size}-s{seed}.json"
    if not trace.exists():
        gen = [sys.executable, str(generator), str(size), str(trace), "--seed", str(seed)]
        subprocess.run(gen, check=True, capture_output=True)
    return trace


def timed(argv: list[str], repeat: int) -> tuple[float, float, float, str]:
    runs = [run_measured(argv) for _ in range(repeat)]
    walls = [r[0] for r in runs]
    return statistics.median(walls), min(walls), max(r[1] for r in runs), runs[-1][2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reduce-sizes", default="1000,10000")
    ap.add_argument("--baseline-sizes", default="100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--data", default=str(HERE / "results" / "traces"))
    ap.add_argument("--generator", default=str(ROOT.parent / "shared" / "bench" / "gen_trace.py"))
    args = ap.parse_args()
    cli = shutil.which("commcanary")
    if cli is None:
        sys.exit("install commcanary first (pip install .)")
    generator = Path(args.generator)
    if not generator.is_file():
        sys.exit(f"trace generator {generator} not found; pass --generator PATH")
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    work = data.parent / "research"
    work.mkdir(parents=True, exist_ok=True)
    print(f"{'events':>8} {'command':<22} {'median s':>9} {'best s':>8} {'peak MiB':>9}  result")
    for size in (int(s) for s in args.reduce_sizes.split(",") if s):
        trace = trace_of(generator, data, size, args.seed)
        out = work / f"reduced-{size}.json"
        median, best, rss, stdout = timed([cli, "reduce", str(trace), "-o", str(out)], args.repeat)
        print(f"{size:>8} {'reduce':<22} {median:>9.3f} {best:>8.3f} {rss:>9.1f}  {stdout.strip()}")
    for size in (int(s) for s in args.baseline_sizes.split(",") if s):
        trace = trace_of(generator, data, size, args.seed)
        for method in METHODS:
            out = work / f"{method}-{size}.json"
            argv = [cli, "baseline", str(trace), "-o", str(out), "--method", method]
            median, best, rss, stdout = timed(argv, args.repeat)
            print(
                f"{size:>8} {'baseline ' + method:<22} {median:>9.3f} {best:>8.3f} {rss:>9.1f}  {stdout.strip()}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
