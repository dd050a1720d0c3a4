#!/usr/bin/env python3
"""How the gate over repeated runs behaves on real measurements: A/A false
failures, A/B detection and interval coverage, on a canary replayed physically
on gloo processes of this host.

Usage::

    python benches/gate_noise.py [--workdir /tmp/commcanary-gate-noise] [--aa 20] [--ab 20]
        [--runs-per-side 3] [--calibration-runs 8] [--bytes-scale 4] [--nproc 4] [--iterations 4]
        [--json OUT]

Stages (every run is a ``commcanary replay --physical gloo`` process; a run
already in the work directory is reused, so an interrupted harness resumes):

1. A 4-rank canary: 4 MiB all_reduce and 256 KiB all_gather, alternating,
   with 2 ms and 1 ms of compute before them.
2. Calibration: ``--calibration-runs`` baseline runs, then
   ``commcanary gate calibrate`` writes the policy (``--runs-per-side``).
3. For each of ``--aa`` rounds: the runs of two fresh baseline sides and one
   candidate side (every message ``--bytes-scale`` times larger: a real
   slowdown), interleaved run by run so that a drift of the host moves every
   side alike.
4. Every round: an A/A comparison (the two baseline sides) and an A/B one
   (the first baseline side against the candidate side), both under the
   policy. The reference effect on the median is measured from every
   baseline and every candidate run pooled (at least 10 each); the A/B
   interval should contain it.

With ``--small-scale K`` each round also measures a small regression (every
message K times larger) as a fourth side, interleaved with the other three,
judged against the first baseline side: a regression below the smallest
detectable one.

Prints the verdict counts, the policy's thresholds and smallest detectable
regressions, and the coverage; ``--json`` writes every comparison's verdict
and interval.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-m", "commcanary"]


def _canary(work: Path) -> Path:
    events = []
    for _ in range(6):
        events.append(
            {"op": "all_reduce", "ranks": [0, 1, 2, 3], "bytes": 4 << 20, "group": "w", "gap_us": 2000.0}
        )
        events.append(
            {"op": "all_gather", "ranks": [0, 1, 2, 3], "bytes": 256 << 10, "group": "w", "gap_us": 1000.0}
        )
    trace = work / "trace.json"
    trace.write_text(
        json.dumps({"format": "commcanary.trace.v1", "workload": {"name": "gate-noise"}, "events": events})
    )
    canary = work / "canary.json"
    if not canary.exists():
        subprocess.run(
            [*CLI, "compile", str(trace), "-o", str(canary)], check=True, stdout=subprocess.DEVNULL
        )
    return canary


def _run(canary: Path, out: Path, args: argparse.Namespace, bytes_scale: float) -> Path:
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [
        *CLI,
        "replay",
        str(canary),
        "--physical",
        "gloo",
        "--nproc",
        str(args.nproc),
        "--iterations",
        str(args.iterations),
        "--bytes-scale",
        str(bytes_scale),
        "-o",
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-400:]}")
    return out


def _compare(base: list[Path], cand: list[Path], policy: Path, out: Path) -> dict[str, Any]:
    command = [*CLI, "compare", "--policy", str(policy), "-o", str(out)]
    for p in base:
        command += ["--baseline", str(p)]
    for p in cand:
        command += ["--candidate", str(p)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1, 5):
        raise SystemExit(f"compare exited {done.returncode}: {done.stderr[-400:]}")
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def _median(path: Path) -> float:
    return float(json.loads(path.read_text())["metrics"]["median_us"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/commcanary-gate-noise"))
    parser.add_argument("--aa", type=int, default=20, help="Rounds (one A/A and one A/B comparison each).")
    parser.add_argument("--runs-per-side", type=int, default=3)
    parser.add_argument("--calibration-runs", type=int, default=8)
    parser.add_argument("--bytes-scale", type=float, default=4.0, help="The candidate's message scale.")
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument(
        "--small-scale",
        type=float,
        default=None,
        help="Also measure a small regression (messages this many times larger) per round, "
        "interleaved with the other sides, and judge it against the first baseline side.",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    canary = _canary(work)
    start = time.perf_counter()
    calibration = [
        _run(canary, work / "cal" / f"a{i:02d}.json", args, 1.0) for i in range(args.calibration_runs)
    ]
    policy = work / "policy.json"
    calibrate = [*CLI, "gate", "calibrate", *map(str, calibration), "-o", str(policy)]
    calibrate += ["--runs-per-side", str(args.runs_per_side)]
    printed = subprocess.run(calibrate, capture_output=True, text=True, check=True).stdout
    print(printed, end="")
    rounds = []
    n = args.runs_per_side
    scales = [("a1", 1.0), ("a2", 1.0), ("b", args.bytes_scale)]
    if args.small_scale is not None:
        scales.append(("c", args.small_scale))
    for r in range(args.aa):
        sides: dict[str, list[Path]] = {side: [] for side, _ in scales}
        # Interleaved (a1, a2, b, [c,] a1, a2, b, ...): a drift of the host moves every side alike.
        for i in range(n):
            for side, scale in scales:
                sides[side].append(_run(canary, work / f"round{r:02d}" / f"{side}-{i}.json", args, scale))
        rounds.append(sides)
        print(
            f"round {r + 1}/{args.aa} measured ({time.perf_counter() - start:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    a_runs = [p for s in rounds for p in s["a1"] + s["a2"]]
    b_runs = [p for s in rounds for p in s["b"]]
    a_mean = sum(map(_median, a_runs)) / len(a_runs)
    b_mean = sum(map(_median, b_runs)) / len(b_runs)
    effect_pct = (b_mean - a_mean) / a_mean * 100
    results = []
    for r, sides in enumerate(rounds):
        aa = _compare(sides["a1"], sides["a2"], policy, work / f"round{r:02d}" / "aa.json")
        ab = _compare(sides["a1"], sides["b"], policy, work / f"round{r:02d}" / "ab.json")
        median = next(e for e in ab["evaluations"] if e["metric"] == "overall.median")
        iv = median["interval"]
        covered = iv["low_pct"] is not None and iv["low_pct"] <= effect_pct <= iv["high_pct"]
        small = None
        if "c" in sides:
            small = _compare(sides["a1"], sides["c"], policy, work / f"round{r:02d}" / "ac.json")["verdict"]
        results.append(
            {
                "round": r,
                "aa": aa["verdict"],
                "ab": ab["verdict"],
                "small": small,
                "ab_median_pct": median["relative_delta_pct"],
                "ab_median_interval_pct": [iv["low_pct"], iv["high_pct"]],
                "covers_effect": covered,
            }
        )

    def count(key: str, verdict: str) -> int:
        return sum(1 for x in results if x[key] == verdict)

    verdicts = ("pass", "warn", "inconclusive", "fail")
    print(
        f"\nreference effect on the median: {effect_pct:+.1f}% ({len(a_runs)} baseline runs, {len(b_runs)} candidate runs)"
    )
    print("comparison  " + "  ".join(f"{v:>12}" for v in verdicts))
    rows = [("aa", "A/A"), ("ab", "A/B")] + ([("small", "A/small")] if args.small_scale is not None else [])
    for key, name in rows:
        print(f"{name:10}  " + "  ".join(f"{count(key, v):>12}" for v in verdicts))
    if args.small_scale is not None:
        c_runs = [p for s in rounds for p in s["c"]]
        c_effect = (sum(map(_median, c_runs)) / len(c_runs) - a_mean) / a_mean * 100
        print(f"small regression (--bytes-scale {args.small_scale:g}) on the median: {c_effect:+.1f}%")
    coverage = sum(1 for x in results if x["covers_effect"])
    print(f"A/B median intervals containing the reference effect: {coverage}/{len(results)}")
    print(f"wall time {time.perf_counter() - start:.0f} s")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {"effect_pct": effect_pct, "policy": json.loads(policy.read_text()), "rounds": results},
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
