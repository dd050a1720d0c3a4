"""A healthy job watched for a long time: no false alarm, and the agent's memory stays flat.

    python benches/agent_soak.py [--minutes M] [--hang-after S] [--json OUT]

Runs ``tests/programs/live_job.py`` (4 gloo ranks: DDP, an all_reduce on a second group, a ring of
sends and receives, ``--step-sleep 0.05``) under ``commcanary capture --shards`` for M minutes with
``commcanary agent --hang-after S`` watching, samples the agent's resident memory every 30 s
(``/proc/PID/status``), and reports the alarms raised (a healthy job must raise none), the
collectives the agent counted, the shards' size and the memory series: first sample after the
warm-up, last, largest, and the slope of a least-squares line over the second half (MiB per
10 minutes; flat is about 0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

JOB = Path(__file__).resolve().parents[1] / "tests" / "programs" / "live_job.py"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_mib(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
    return int(found.group(1)) / 1024 if found else float("nan")


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return str(reply.read().decode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--hang-after", type=float, default=10.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agent-soak-"))
    shards, archive = work / "shards", work / "archive"
    exe = Path(sys.executable)
    commcanary = exe.with_name("commcanary")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    steps = int(args.minutes * 60 / 0.06) + 1000  # more than it can run: the soak stops it
    port = _port()
    with contextlib.ExitStack() as stack:
        job_log = stack.enter_context(open(work / "capture.log", "wb"))
        agent_log = stack.enter_context(open(work / "agent.log", "wb"))
        job = subprocess.Popen(
            [str(commcanary), "capture", "-o", str(work / "trace.json"), "--shards", str(shards), "--",
             str(exe), "-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-port", str(_port()),
             str(JOB), "--steps", str(steps), "--step-sleep", "0.05"],
            stdout=job_log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        while not shards.is_dir():
            time.sleep(0.1)
        agent = subprocess.Popen(
            [str(commcanary), "agent", "--watch", str(shards), "--listen", f"127.0.0.1:{port}",
             "--hang-after", str(args.hang_after), "--archive", str(archive)],
            stdout=agent_log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        start = time.monotonic()
        samples: list[tuple[float, float]] = []
        while time.monotonic() - start < args.minutes * 60:
            time.sleep(30)
            samples.append((round(time.monotonic() - start), round(_rss_mib(agent.pid), 2)))
            print(f"{samples[-1][0]:6.0f} s  agent RSS {samples[-1][1]:.1f} MiB", flush=True)
        text = _metrics(port)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        agent.send_signal(signal.SIGTERM)
        agent.wait(30)
    alarms = sorted(p.name for p in archive.glob("alarm-*"))
    counted = sum(float(v) for v in re.findall(r"^commcanary_collectives_total\{[^}]*\} (\S+)$", text, re.M))
    late = re.findall(r'^commcanary_rank_late_steps_total\{rank="(\d+)"\} (\S+)$', text, re.M)
    second = [(t, m) for t, m in samples if t >= samples[-1][0] / 2] if samples else []
    slope = 0.0
    if len(second) >= 2:
        mt = sum(t for t, _ in second) / len(second)
        mm = sum(m for _, m in second) / len(second)
        den = sum((t - mt) ** 2 for t, _ in second)
        slope = sum((t - mt) * (m - mm) for t, m in second) / den * 600 if den else 0.0
    shard_bytes = sum(p.stat().st_size for p in shards.glob("*.shard.jsonl"))
    report = {
        "minutes": args.minutes,
        "hang_after_s": args.hang_after,
        "alarms": alarms,
        "collectives_counted": counted,
        "late_steps": {r: float(n) for r, n in late},
        "shard_bytes": shard_bytes,
        "rss_mib": samples,
        "rss_first_after_warmup_mib": samples[1][1] if len(samples) > 1 else None,
        "rss_last_mib": samples[-1][1] if samples else None,
        "rss_max_mib": max((m for _, m in samples), default=None),
        "rss_slope_second_half_mib_per_10min": round(slope, 3),
    }
    print(json.dumps({k: v for k, v in report.items() if k != "rss_mib"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
