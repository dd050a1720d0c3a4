#!/usr/bin/env python3
"""Whole-command benchmark of the regression gate: replay, verify-report, compare.

For each size it compiles a generated trace (``--generator``, by default ``examples/make_synthetic_trace.py``, as in
``compile_bench.py``), then times, with the installed CLI:

* ``replay CANARY --include-samples`` (baseline) and a candidate replay with
  ``--latency-floor-us 12``;
* ``verify-report`` of the baseline report against the canary;
* ``compare`` of the two reports.

It prints median and best wall seconds and peak RSS per command and size.
Timings are wall-clock on this machine; compare within one run only.

Usage::

    python benches/gate_bench.py [--sizes 10000,100000,1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from compile_bench import HERE, find_generator, run_measured


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--data", default=str(HERE / "results" / "traces"))
    ap.add_argument("--generator", default=None)
    args = ap.parse_args()
    cli = shutil.which("commcanary")
    if cli is None:
        sys.exit("install commcanary first (pip install .)")
    generator = find_generator(args.generator)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    work = data.parent / "gate"
    work.mkdir(parents=True, exist_ok=True)

    header = f"{'events':>9} {'command':<28} {'median s':>9} {'best s':>8} {'peak MiB':>9} {'output MB':>10}"
    print(header)
    print("-" * len(header))
    for size in (int(s) for s in args.sizes.split(",")):
        trace = data / f"gen-{size}-s{args.seed}.json"
        if not trace.exists():
            gen = [sys.executable, str(generator), str(size), str(trace), "--seed", str(args.seed)]
            subprocess.run(gen, check=True, capture_output=True)
        canary = work / f"gen-{size}.canary.json"
        run_measured([cli, "compile", str(trace), "-o", str(canary)])
        base, cand = work / f"gen-{size}.base.json", work / f"gen-{size}.cand.json"
        verification, comparison = work / f"gen-{size}.verify.json", work / f"gen-{size}.compare.json"
        commands = [
            (
                "replay --include-samples",
                [cli, "replay", str(canary), "-o", str(base), "--include-samples"],
                base,
                (0,),
            ),
            (
                "replay (candidate)",
                [
                    cli,
                    "replay",
                    str(canary),
                    "-o",
                    str(cand),
                    "--include-samples",
                    "--latency-floor-us",
                    "12",
                ],
                cand,
                (0,),
            ),
            (
                "verify-report",
                [cli, "verify-report", str(base), str(canary), "-o", str(verification)],
                verification,
                (0,),
            ),
            ("compare", [cli, "compare", str(base), str(cand), "-o", str(comparison)], comparison, (0, 1)),
        ]
        for label, argv, output, codes in commands:
            walls, rss = [], []
            for _ in range(args.repeat):
                wall, peak, _ = run_measured(argv, ok_codes=codes)
                walls.append(wall)
                rss.append(peak)
            print(
                f"{size:>9} {label:<28} {statistics.median(walls):>9.3f} {min(walls):>8.3f} "
                f"{max(rss):>9.1f} {output.stat().st_size / 1e6:>10.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
