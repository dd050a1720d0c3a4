"""Capture shards (``commcanary capture``): up to three shards, split from
the input at NUL bytes, merged as the capture merges them. A merge that
succeeds must give a trace the Rust loader accepts."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness

with _harness.instrumented():
    import commcanary
    from commcanary.capture.merge import merge_shards
    from commcanary.errors import CommCanaryError
    from commcanary.fidelity import canonical


def one(data: bytes) -> None:
    parts = data.split(b"\0")[:3]
    paths = [_harness.scratch(f"rank{i}.shard.jsonl", part) for i, part in enumerate(parts)]
    for i in range(len(parts), 3):
        _harness.scratch(f"rank{i}.shard.jsonl")
    merged = merge_shards(paths, session="s", workload_name="fuzz")
    if merged.trace["events"]:
        trace = _harness.scratch("merged.json", canonical(merged.trace))
        try:
            commcanary.load_trace(trace)
        except CommCanaryError as exc:
            raise AssertionError(f"the merge wrote a trace the loader refuses: {exc}") from None


if __name__ == "__main__":
    _harness.fuzz(one)
