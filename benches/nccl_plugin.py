"""The NCCL profiler plugin's cost on the calling thread, and what it writes.

    python benches/nccl_plugin.py [--profile release|quick] [--events N] [--repeat R] [--json OUT]

Builds ``libnccl-profiler-commcanary.so`` in the given cargo profile and the C
harness (``rust/commcanary-nccl-profiler/tests/harness/harness.c``, ``cc -O2``),
then drives N events (ABI v6) from 1 and from 8 threads, R times each. The
harness times each measured start/stop pair (a kernel-launch event: one
``startEvent`` and one ``stopEvent``) between two ``CLOCK_MONOTONIC`` reads on
the calling thread, so a pair's figure includes one clock read (reported
beside it). Printed per run: median and p99 ns per pair, records logged and
dropped, and log bytes per record. Rings are sized so nothing drops.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "rust" / "commcanary-nccl-profiler" / "tests" / "harness" / "harness.c"


def build(profile: str, work: Path) -> tuple[Path, Path]:
    subprocess.run(
        ["cargo", "build", "-q", "-p", "commcanary-nccl-profiler", "--lib", "--profile", profile],
        cwd=ROOT,
        check=True,
    )
    folder = "debug" if profile == "dev" else profile
    lib = work / "libnccl-profiler-commcanary.so"
    shutil.copy(ROOT / "target" / folder / "libnccl_profiler_commcanary.so", lib)
    exe = work / "harness"
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(exe), str(HARNESS), "-ldl"], check=True)
    return lib, exe


def run(lib: Path, exe: Path, work: Path, threads: int, events: int) -> dict[str, float]:
    logs = work / f"logs-{threads}"
    shutil.rmtree(logs, ignore_errors=True)
    env = dict(os.environ, COMMCANARY_NCCL_DIR=str(logs), COMMCANARY_NCCL_RING="524288")
    out = subprocess.run(
        [str(exe), str(lib), "6", str(threads), str(events), str(work / "digests.bin")],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout)
    result["log_bytes"] = sum(f.stat().st_size for f in logs.iterdir())
    result["bytes_per_call"] = round(result["log_bytes"] / result["calls"], 1)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="release", help="cargo profile of the plugin (release, quick)")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        lib, exe = build(args.profile, work)
        rows: dict[str, list[dict[str, float]]] = {"1": [], "8": []}
        for _ in range(args.repeat):
            for threads in (1, 8):
                rows[str(threads)].append(run(lib, exe, work, threads, args.events))
        summary = {}
        for threads, runs in rows.items():
            summary[threads] = {
                "pair_median_ns": statistics.median(r["pair_median_ns"] for r in runs),
                "pair_p99_ns": statistics.median(r["pair_p99_ns"] for r in runs),
                "clock_read_median_ns": statistics.median(r["clock_read_median_ns"] for r in runs),
                "calls": runs[0]["calls"],
                "bytes_per_call": runs[0]["bytes_per_call"],
                "runs": [(r["pair_median_ns"], r["pair_p99_ns"]) for r in runs],
            }
            s = summary[threads]
            print(
                f"{threads} thread(s), {args.events} events, {s['calls']} calls, {args.repeat} runs: "
                f"pair median {s['pair_median_ns']} ns, p99 {s['pair_p99_ns']} ns "
                f"(one clock read: {s['clock_read_median_ns']} ns); log {s['bytes_per_call']} bytes per call"
            )
        if args.json:
            args.json.write_text(json.dumps({"profile": args.profile, "threads": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
