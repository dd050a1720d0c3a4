#!/usr/bin/env python3
"""Does a small collective's cost on this host depend on how continuously
its group runs? (``docs/model-truth.md``, what limits the p95.)

Replays one canary per gap on 4 real gloo processes: 72 all_reduces of
``--bytes`` over all four ranks, ``GAP`` µs of sleep before each. The
gaps go round by round (each round every gap once), so the host's drift
falls on every gap alike. Prints per gap the median, quartiles and the
share of calls above ``--slow-us`` over all rounds, and each round's
median. Needs torch.

    python benches/host_duty.py [--gaps 0,1700,6700,27000] [--rounds 3] [--bytes 131072]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

import commcanary
from commcanary.physical import replay_physical


def canary(directory: Path, gap_us: float, size: int, calls: int) -> Path:
    events = [
        {"op": "all_reduce", "ranks": [0, 1, 2, 3], "bytes": size, "group": "tp", "gap_us": gap_us}
        for _ in range(calls)
    ]
    trace = directory / f"gap{gap_us:g}.trace.json"
    trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": events}))
    return commcanary.compile(trace, lossless_timing=True).write(directory / f"gap{gap_us:g}.canary.json")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--gaps", default="0,1700,6700,27000", help="Sleep before each call, µs, comma-separated."
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bytes", type=int, default=131072)
    ap.add_argument("--calls", type=int, default=72)
    ap.add_argument("--slow-us", type=float, default=2600.0, help="A call above this counts as slow.")
    args = ap.parse_args()
    gaps = [float(g) for g in args.gaps.split(",")]
    values: dict[float, list[np.ndarray]] = {g: [] for g in gaps}
    with tempfile.TemporaryDirectory(prefix="commcanary-host-duty-") as tmp:
        canaries = {g: canary(Path(tmp), g, args.bytes, args.calls) for g in gaps}
        for _ in range(args.rounds):
            for g in gaps:
                samples = replay_physical(canaries[g], iterations=1, warmup=1).report.samples
                assert samples is not None
                values[g].append(np.asarray(samples["collective_us"], dtype=np.float64))
    print(f"4-rank gloo all_reduce of {args.bytes} bytes, {args.calls} calls x {args.rounds} rounds per gap")
    print(f"{'gap us':>8} {'median':>8} {'p25':>8} {'p75':>8} {'slow':>6}  per-round medians")
    for g in gaps:
        v = np.concatenate(values[g])
        rounds = " ".join(f"{np.median(r):.0f}" for r in values[g])
        p25, p50, p75 = np.percentile(v, [25, 50, 75])
        print(f"{g:>8.0f} {p50:>8.0f} {p25:>8.0f} {p75:>8.0f} {np.mean(v > args.slow_us):>6.2f}  {rounds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
