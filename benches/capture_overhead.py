"""Overhead of recording with ``commcanary.capture.record_collective``.

Runs the same program twice in child processes: ``--calls`` calls of
``record_collective`` with capture off (no recorder: the call returns at
once) and on (``COMMCANARY_TRACE_DIR`` set: every call is validated and
appended to this process's shard as one line). Prints the time per call in
each mode, their ratio, and the overhead per recorded collective next to the
issue's target (<= 20 us), median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

PROGRAM = """
import sys, time
from commcanary.capture import record_collective
n = int(sys.argv[1])
t = time.perf_counter()
for i in range(n):
    record_collective("all_reduce", [0, 1, 2, 3], bytes=1 << 20, dtype="float32", collective_id=i, group="world")
print(time.perf_counter() - t)
"""


def per_call(calls: int, capture: bool) -> float:
    env = dict(os.environ, RANK="0")
    env.pop("COMMCANARY_TRACE_DIR", None)
    env.pop("COMMCANARY_TRACE_OUT", None)
    with tempfile.TemporaryDirectory() as d:
        if capture:
            env["COMMCANARY_TRACE_DIR"] = d
        out = subprocess.run(
            [sys.executable, "-c", PROGRAM, str(calls)], env=env, capture_output=True, text=True, check=True
        )
    return float(out.stdout) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=100_000, help="record_collective calls per run")
    parser.add_argument("--repeat", type=int, default=5, help="runs per mode (median reported)")
    a = parser.parse_args()
    off = statistics.median(per_call(a.calls, False) for _ in range(a.repeat))
    on = statistics.median(per_call(a.calls, True) for _ in range(a.repeat))
    overhead = on - off
    print(f"capture off  {off:7.2f} us per call")
    print(f"capture on   {on:7.2f} us per call  ({on / off:.1f}x the program without capture)")
    print(
        f"overhead     {overhead:7.2f} us per recorded collective  target <= 20 us: {'PASS' if overhead <= 20 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
