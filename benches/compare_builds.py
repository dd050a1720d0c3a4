"""Whole-command timings of two builds in one run: the previous build against this one.

    python benches/compare_builds.py --old OLD_PYTHON_DIR [--events 100000] [--repeat 5]

``OLD_PYTHON_DIR`` is a ``python/`` directory of an earlier checkout with its
built extension inside (``git archive REV python | tar -x -C DIR`` plus that
build's ``_core.abi3.so``). Each command runs alternately under the old and the
new build (the installed one) so machine noise hits both alike; the table gives
each side's median wall time and new/old. Inputs are generated with
``examples/make_synthetic_trace.py``, and a one-rank NCCL profiler trace of as
many events (``record_param_comms`` frontend/backend pairs, their kernels and
CPU ops between them) for ``import-kineto``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "examples" / "make_synthetic_trace.py"
CLI = [sys.executable, "-m", "commcanary"]


def run(args: list[str], pythonpath: str | None) -> float:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    start = time.perf_counter()
    proc = subprocess.run(CLI + args, env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # 1: a valid negative result (a failing verdict)
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return elapsed


def write_nccl_profile(path: Path, events: int) -> None:
    """A one-rank NCCL profile of about ``events`` events, deterministic."""
    ops = ("allreduce", "_allgather_base", "_reduce_scatter_base", "broadcast", "barrier")
    parts: list[str] = []
    ts = 1000.0
    for i in range(max(1, events // 10)):
        op = ops[i % len(ops)]
        args = (
            f'"Collective name":"{op}","dtype":"BFloat16","In msg nelems":{4096 << (i % 6)},'
            f'"Out msg nelems":{4096 << (i % 6)},"Group size":8,"Process Group Name":"{i % 2}",'
            f'"Process Group Ranks":"[0, 1, 2, 3, 4, 5, 6, 7]","Seq":{i},"Rank":0'
        )
        for outer, (start, dur) in enumerate(((ts, 40.0), (ts + 1.0, 38.0))):
            parts.append(
                f'{{"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":7,"tid":9,"ts":{start},'
                f'"dur":{dur},"args":{{{args},"External id":{2 * i + outer}}}}}'
            )
        parts.append(
            f'{{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_RING_LL_Sum_bf16","pid":0,'
            f'"tid":7,"ts":{ts + 5},"dur":30.5,"args":{{"External id":{2 * i}}}}}'
        )
        for k in range(7):
            parts.append(
                f'{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":7,"tid":9,"ts":{ts + 45 + 5 * k},"dur":4.0,'
                f'"args":{{"External id":{10**9 + 7 * i + k}}}}}'
            )
        ts += 100.0
    path.write_text(
        '{"distributedInfo":{"backend":"nccl","rank":0,"world_size":8},'
        '"baseTimeNanoseconds":1700000000000000000,"traceEvents":[' + ",".join(parts) + "]}"
    )


def commands(work: Path, trace: Path) -> dict[str, list[str]]:
    canary, report, other = work / "c.json", work / "r.json", work / "o.json"
    return {
        "import-kineto (one file)": ["import-kineto", str(work / "nccl.json"), "-o", str(work / "k.json")],
        "compile": ["compile", str(trace), "-o", str(canary)],
        "replay --include-samples": ["replay", str(canary), "-o", str(report), "--include-samples"],
        "replay (floor 9)": ["replay", str(canary), "-o", str(other), "--latency-floor-us", "9"],
        "compare": ["compare", str(report), str(other), "-o", str(work / "cmp.json")],
        "verify-report": ["verify-report", str(report), str(canary), "-o", str(work / "v.json")],
        "verify-fidelity": ["verify-fidelity", str(trace), str(canary), "-o", str(work / "f.json")],
        "verify-behavior": ["verify-behavior", str(trace), str(canary), "-o", str(work / "b.json")],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="python/ directory of the previous build.")
    parser.add_argument("--events", type=int, default=100_000, help="Events in the generated trace.")
    parser.add_argument("--repeat", type=int, default=5, help="Runs per command and build.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        trace = work / "trace.json"
        subprocess.run(
            [sys.executable, str(GENERATOR), "--events", str(args.events), "-o", str(trace)], check=True
        )
        write_nccl_profile(work / "nccl.json", args.events)
        print(f"{args.events} events, {args.repeat} runs each; median seconds", file=sys.stderr)
        print(f"{'command':28} {'old':>8} {'new':>8} {'new/old':>8}")
        for name, argv in commands(work, trace).items():
            old_work, new_work = work / "old", work / "new"
            old_work.mkdir(exist_ok=True)
            new_work.mkdir(exist_ok=True)
            old_t, new_t = [], []
            for _ in range(args.repeat):
                # Old first, so the new build overwrites the shared outputs it reads next.
                old_t.append(run(argv, str(args.old)))
                new_t.append(run(argv, None))
            o, n = statistics.median(old_t), statistics.median(new_t)
            print(f"{name:28} {o:8.3f} {n:8.3f} {n / o:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
