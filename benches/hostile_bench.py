#!/usr/bin/env python3
"""Wall time and peak RSS of every hostile-input case
(``docs/resource-limits.md``), each in its own process: the cases of
``tests/test_hostile_suite.py``, built in a temporary directory. Targets:
each ≤ 2 s and ≤ 200 MiB; the gzip bomb ≤ 10 s.

    python benches/hostile_bench.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_hostile_suite import CASES, PREVIOUS, run_cli


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="Runs per case; the fastest is reported.")
    args = ap.parse_args()
    print(f"{'case':<28} {'exit':>4} {'wall s':>7} {'peak MiB':>9}")
    for name, (build, _code, _fragment) in CASES.items():
        with tempfile.TemporaryDirectory(prefix="commcanary-hostile-") as tmp:
            d = Path(tmp)
            argv = build(d)
            (d / "out.json").write_bytes(PREVIOUS)
            best, rss, status = float("inf"), 0.0, 0
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                status, _err, peak = run_cli(argv, d)
                best = min(best, time.perf_counter() - t0)
                rss = max(rss, peak)
            print(f"{name:<28} {status:>4} {best:>7.2f} {rss:>9.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
