"""The agent's readers of untrusted bytes: up to three growing shards (split
from the input at NUL bytes, each read in two polls as if half written
first), then the live view's metrics and status, and the last part read as a
peer's evidence tar. Only a refusal of another format version may be raised."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness

with _harness.instrumented():
    from commcanary.agent.follow import Follower, ShardRefused
    from commcanary.agent.metrics import render_metrics, status
    from commcanary.agent.peers import extract_evidence
    from commcanary.agent.state import LiveJob


def one(data: bytes) -> None:
    parts = data.split(b"\0")[:3]
    paths = [_harness.scratch(f"rank{i}.shard.jsonl", part[: len(part) // 2]) for i, part in enumerate(parts)]
    for i in range(len(parts), 3):
        _harness.scratch(f"rank{i}.shard.jsonl")
    job = LiveJob()
    follower = Follower(paths[0].parent, job)
    try:
        follower.poll(1.0)
        for path, part in zip(paths, parts, strict=False):
            path.write_bytes(part)
        follower.poll(2.0)
    except ShardRefused:
        return
    render_metrics(job, 3.0, {})
    status(job, 3.0, {})
    job.stalled(time.time(), 1.0)
    into = _harness.SCRATCH / "peer"
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir()
    with contextlib.suppress(tarfile.TarError, EOFError):
        extract_evidence(parts[-1], into)


if __name__ == "__main__":
    _harness.fuzz(one)
