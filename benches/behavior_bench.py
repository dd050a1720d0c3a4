#!/usr/bin/env python3
"""Whole-command benchmark of behaviour verification and behaviour search.

Times, with the installed CLI:

* ``compile --behavior-search`` (limits 2..128) on the walkthrough's 56-event
  example and on generated traces (``--generator``, by default ``examples/make_synthetic_trace.py``) of the ``--search-sizes``;
* ``verify-behavior`` of a plain compile against its trace for the
  ``--verify-sizes``.

Each row prints median and best wall seconds, peak RSS, and the ratio of the
median to the reference figure the issue quotes (CommCanary 0.3.0: 55 s for
the search on the example, more than 600 s for a search on 10^3 events,
verify-behavior 4.0 s on 10^3 and 34 s on 10^4 events). Timings are wall
clock on this machine; compare within one run only.

Usage::

    python benches/behavior_bench.py [--search-sizes 1000,10000] [--verify-sizes 10000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from compile_bench import HERE, find_generator, run_measured

EXAMPLE = HERE.parent / "examples" / "traces" / "llama70b_tp8_trace_long.json"
#: Reference wall seconds quoted by the issue, by (command, events).
REFERENCE = {
    ("search", 56): 55.0,
    ("search", 1000): 600.0,
    ("verify-behavior", 1000): 4.0,
    ("verify-behavior", 10000): 34.0,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--search-sizes", default="1000,10000")
    ap.add_argument("--verify-sizes", default="10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--data", default=str(HERE / "results" / "traces"))
    ap.add_argument("--generator", default=None)
    args = ap.parse_args()
    cli = shutil.which("commcanary")
    if cli is None:
        sys.exit("install commcanary first (pip install .)")
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    work = data.parent / "behavior"
    work.mkdir(parents=True, exist_ok=True)
    generator: Path | None = None

    def trace_of(size: int) -> Path:
        nonlocal generator
        trace = data / f"gen-{size}-s{args.seed}.json"
        if not trace.exists():
            generator = generator or find_generator(args.generator)
            gen = [sys.executable, str(generator), str(size), str(trace), "--seed", str(args.seed)]
            subprocess.run(gen, check=True, capture_output=True)
        return trace

    rows: list[tuple[str, int, list[str], tuple[int, ...]]] = []
    searches = [(56, EXAMPLE)] + [(int(s), trace_of(int(s))) for s in args.search_sizes.split(",") if s]
    for size, trace in searches:
        out = work / f"search-{size}.canary.json"
        argv = [
            cli,
            "compile",
            str(trace),
            "-o",
            str(out),
            "--behavior-search",
            "--timing-sample-limit",
            "128",
        ]
        rows.append(("search", size, argv, (0,)))
    for size in (int(s) for s in args.verify_sizes.split(",") if s):
        trace = trace_of(size)
        canary = work / f"plain-{size}.canary.json"
        run_measured([cli, "compile", str(trace), "-o", str(canary)])
        argv = [cli, "verify-behavior", str(trace), str(canary), "-o", str(work / f"verify-{size}.json")]
        rows.append(("verify-behavior", size, argv, (0, 1)))

    header = f"{'events':>9} {'command':<18} {'median s':>9} {'best s':>8} {'peak MiB':>9} {'reference s':>12} {'speed-up':>9}"
    print(header)
    print("-" * len(header))
    for label, size, argv, codes in rows:
        walls, rss = [], []
        for _ in range(args.repeat):
            wall, peak, _ = run_measured(argv, ok_codes=codes)
            walls.append(wall)
            rss.append(peak)
        median = statistics.median(walls)
        ref = REFERENCE.get((label, size))
        ref_text = f"{ref:>12.1f}" if ref else f"{'-':>12}"
        ratio = f"{ref / median:>8.0f}x" if ref else f"{'-':>9}"
        print(f"{size:>9} {label:<18} {median:>9.3f} {min(walls):>8.3f} {max(rss):>9.1f} {ref_text} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
