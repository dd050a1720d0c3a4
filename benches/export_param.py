"""Whole-command benchmark of ``commcanary export-param`` on a canary that
expands to many occurrences.

Builds (once, under ``--workdir``) a trace of ``--events`` events: a decode
step of ten collectives on two groups (all_reduce, all_gather,
reduce_scatter, all_to_all, broadcast, a transfer) repeated with exact gaps,
so the canary is small and its expansion is ``--events`` occurrences; then
times ``commcanary export-param CANARY -o OUT`` (and ``--per-rank-dir``) as
child processes, median of ``--repeat`` runs, with peak RSS from
``os.wait4``. Prints occurrences per second next to the issue's target
(10^6 occurrences in <= 3 s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

STEP = [
    {"op": "all_reduce", "bytes": 4 << 20, "ranks": [0, 1, 2, 3], "group": "world", "dtype": "float32"},
    {"op": "all_reduce", "bytes": 4 << 20, "ranks": [0, 1, 2, 3], "group": "world", "dtype": "float32"},
    {"op": "all_gather", "bytes": 1 << 18, "ranks": [0, 1], "group": "tp0", "dtype": "float32"},
    {"op": "all_gather", "bytes": 1 << 18, "ranks": [2, 3], "group": "tp1", "dtype": "float32"},
    {"op": "reduce_scatter", "bytes": 1 << 18, "ranks": [0, 1], "group": "tp0", "dtype": "float32"},
    {"op": "reduce_scatter", "bytes": 1 << 18, "ranks": [2, 3], "group": "tp1", "dtype": "float32"},
    {"op": "all_to_all", "bytes": 1 << 18, "ranks": [0, 1, 2, 3], "group": "world", "dtype": "float32"},
    {
        "op": "point_to_point",
        "bytes": 1 << 19,
        "ranks": [0, 2],
        "group": "world",
        "sender_rank": 0,
        "receiver_rank": 2,
        "dtype": "float32",
    },
    {
        "op": "broadcast",
        "bytes": 1024,
        "ranks": [0, 1, 2, 3],
        "group": "world",
        "root_rank": 0,
        "dtype": "int64",
    },
    {"op": "all_reduce", "bytes": 256, "ranks": [0, 1, 2, 3], "group": "world", "dtype": "float32"},
]


def make_trace(path: Path, events: int) -> None:
    with path.open("w") as f:
        f.write('{"format":"commcanary.trace.v1","workload":{"name":"export-bench"},"events":[')
        for i in range(events):
            e = dict(STEP[i % len(STEP)], gap_us=25.0 if i else 0.0, compute_overlap_us=0.0)
            f.write(("," if i else "") + json.dumps(e))
        f.write("]}")


def timed(cmd: list[str]) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"failed: {' '.join(cmd)}: {proc.stderr.read().decode() if proc.stderr else ''}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000, help="occurrences the canary expands to")
    parser.add_argument("--repeat", type=int, default=3, help="runs per command (median reported)")
    parser.add_argument(
        "--workdir", type=Path, default=Path("/tmp/commcanary-bench/export"), help="scratch dir"
    )
    parser.add_argument("--commcanary", default=shutil.which("commcanary") or "commcanary", help="the CLI")
    a = parser.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    trace = a.workdir / f"step-{a.events}.trace.json"
    canary = a.workdir / f"step-{a.events}.canary.json"
    if not canary.exists():
        print(f"building a {a.events}-event trace and its canary ...", file=sys.stderr)
        make_trace(trace, a.events)
        subprocess.run(
            [a.commcanary, "compile", str(trace), "-o", str(canary)], check=True, stdout=sys.stderr
        )
    print(f"canary: {canary.stat().st_size} bytes, expanding to {a.events} occurrences")
    for label, extra in (
        ("single list", ["-o", str(a.workdir / "out.json")]),
        ("per-rank files", ["--per-rank-dir", str(a.workdir / "ranks")]),
    ):
        runs = [timed([a.commcanary, "export-param", str(canary), *extra]) for _ in range(a.repeat)]
        wall = statistics.median(r[0] for r in runs)
        rss = max(r[1] for r in runs)
        verdict = "PASS" if wall <= 3.0 * a.events / 1_000_000 else "FAIL"
        print(
            f"{label:16} {wall:7.3f} s  {a.events / wall / 1e6:5.2f} M occurrences/s  {rss:7.1f} MiB  "
            f"target <= {3.0 * a.events / 1e6:.1f} s: {verdict}"
        )


if __name__ == "__main__":
    main()
