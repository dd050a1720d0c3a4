"""Live hang detection on real faulty jobs: ``commcanary agent`` beside ``commcanary capture``.

    python benches/agent_live.py [--scenarios N] [--hang-after S] [--seed K] [--world W] [--json OUT]

Each scenario runs ``tests/programs/live_job.py`` (gloo, ``torchrun --nproc-per-node W``: DDP, an
explicit all_reduce on a second group, a ring of sends and receives) under ``commcanary capture
--shards DIR`` with an agent watching DIR, and injects one fault at a seeded rank and step, the
kinds in turn: a skipped collective, a skipped send, a desync (another size), a killed rank, a
frozen rank (SIGSTOP for longer than the alarm needs). It waits for the agent's alarm, then stops
the job, and scores:

* **latency**: the alarm's time minus the fault's (the rank writes when it injects it); the
  target is at most ``hang-after + 5`` s;
* **root**: the ranks the alarm's ``hang.json`` names as root, against the faulty rank (a
  document that names it, and only it, is right);
* **evidence**: every rank that was alive and not stopped when the job stalled has a Flight
  Recorder dump and its stacks (or its traceback, when it ended on an error) in the archive.

Prints a table and the totals; ``--json`` keeps every scenario.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "tests" / "programs" / "live_job.py"
FAULTS = ("skip", "send", "desync", "kill", "freeze")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_one(
    index: int, fault: str, rank: int, step: int, world: int, hang_after: float, root: Path
) -> dict[str, Any]:
    work = root / f"s{index:03d}-{fault}-r{rank}"
    shards, truth = work / "shards", work / "truth"
    work.mkdir(parents=True)
    exe = Path(sys.executable)
    commcanary = exe.with_name("commcanary")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    with contextlib.ExitStack() as logs:
        return _run(
            work, shards, truth, exe, commcanary, env, logs, fault, rank, step, world, hang_after, index
        )


def _run(
    work: Path,
    shards: Path,
    truth: Path,
    exe: Path,
    commcanary: Path,
    env: dict[str, str],
    logs: contextlib.ExitStack,
    fault: str,
    rank: int,
    step: int,
    world: int,
    hang_after: float,
    index: int,
) -> dict[str, Any]:
    master, port = _port(), _port()
    while port == master:  # both chosen before either binds: never the same
        port = _port()
    job = subprocess.Popen(
        [
            str(commcanary), "capture", "-o", str(work / "trace.json"), "--shards", str(shards), "--",
            str(exe), "-m", "torch.distributed.run", "--nproc-per-node", str(world), "--master-port", str(master),
            str(JOB), "--steps", "400", "--step-sleep", "0.02", "--fault", fault, "--fault-rank", str(rank),
            "--fault-step", str(step), "--freeze-s", str(hang_after + 40), "--truth", str(truth),
        ],
        stdout=logs.enter_context(open(work / "capture.log", "wb")),  # noqa: SIM115
        stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    while not shards.is_dir():
        time.sleep(0.1)
    agent = subprocess.Popen(
        [str(commcanary), "agent", "--watch", str(shards), "--listen", f"127.0.0.1:{port}",
         "--hang-after", str(hang_after), "--archive", str(work / "agent")],
        stdout=logs.enter_context(open(work / "agent.log", "wb")),  # noqa: SIM115
        stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90 + hang_after
    alarm: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        found = sorted((work / "agent").glob("alarm-*/alarm.json"))
        if found:
            with contextlib.suppress(ValueError, OSError):
                alarm = json.loads(found[0].read_text())
                if alarm.get("diagnosis"):
                    break
        if job.poll() is not None and not found and time.monotonic() > deadline - 80:
            time.sleep(hang_after + 6)  # a job that died: give the agent its time
            found = sorted((work / "agent").glob("alarm-*/alarm.json"))
            if found:
                alarm = json.loads(found[0].read_text())
            break
        time.sleep(0.2)
    _kill_tree(job)
    agent.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        agent.wait(10)
    _kill_tree(agent)
    truth_files = sorted(truth.glob("fault_rank*.json"))
    injected = json.loads(truth_files[0].read_text()) if truth_files else None
    row: dict[str, Any] = {
        "index": index,
        "fault": fault,
        "rank": rank,
        "step": step,
        "injected": injected is not None,
    }
    if alarm is None:
        row.update(alarm=False, right=False)
        return row
    latency = alarm["raised_at"] - injected["wall_ns"] / 1e9 if injected else None
    folder = next((work / "agent").glob("alarm-*"))
    named: list[int] = []
    with contextlib.suppress(OSError, ValueError, KeyError):
        named = sorted({int(r["rank"]) for r in json.loads((folder / "hang.json").read_text())["root"]})
    complete = evidence_complete(folder / "evidence", alarm, rank, fault)
    row.update(
        alarm=True,
        latency_s=None if latency is None else round(latency, 2),
        named=named,
        right=named == [rank],
        verdict=alarm["diagnosis"]["verdict"],
        first_line=alarm["diagnosis"]["lines"][0] if alarm["diagnosis"]["lines"] else "",
        evidence_complete=complete,
        states={p["rank"]: p["state"] for p in alarm["processes"]},
    )
    return row


def evidence_complete(evidence: Path, alarm: dict[str, Any], faulty: int, fault: str) -> bool:
    """Every rank that was alive and not stopped when the job stalled left a Flight Recorder dump
    and its stacks (or, when it ended on an error, the traceback), whatever asked for them: the
    agent's signal, a launcher's SIGTERM or the error itself."""
    for p in alarm["processes"]:
        rank = int(p["rank"])
        if rank == faulty and fault in ("kill", "freeze"):
            continue
        dumps = list(evidence.glob(f"fr_*/fr_trace_rank_{rank}"))
        texts = [evidence / f"rank{rank}_stacks.txt", evidence / f"rank{rank}_exception.txt"]
        if not dumps or not any(t.is_file() for t in texts):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=int, default=30)
    parser.add_argument("--hang-after", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", type=Path, help="Keep every run's directory here.")
    parser.add_argument(
        "--faults", default=",".join(FAULTS), help="The fault kinds, in turn (comma-separated)."
    )
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="agent-live-"))
    rows = []
    for i in range(args.scenarios):
        rng = random.Random(f"{args.seed}:{i}")
        kinds = args.faults.split(",")
        fault = kinds[i % len(kinds)]
        rank, step = rng.randrange(args.world), rng.randrange(5, 25)
        row = run_one(i, fault, rank, step, args.world, args.hang_after, root)
        rows.append(row)
        print(
            f"{i:3d} {fault:7s} rank {rank} step {step:2d}: alarm {row['alarm']!s:5s} "
            f"latency {row.get('latency_s')} named {row.get('named')} right {row['right']} "
            f"evidence {row.get('evidence_complete')} | {row.get('first_line', '')[:90]}",
            flush=True,
        )
    ran = [r for r in rows if r["injected"]]
    if len(ran) < len(rows):
        print(
            f"{len(rows) - len(ran)} scenario(s) never reached their fault (the job did not start): not scored"
        )
    rows = ran
    right = sum(r["right"] for r in rows)
    alarms = [r for r in rows if r["alarm"]]
    in_time = [r for r in alarms if r.get("latency_s") is not None and r["latency_s"] <= args.hang_after + 5]
    complete = [r for r in alarms if r.get("evidence_complete")]
    print(
        f"\n{len(rows)} scenarios, hang-after {args.hang_after:g} s: alarms {len(alarms)}, "
        f"within hang-after + 5 s {len(in_time)}, right root {right} ({100 * right / max(len(rows), 1):.1f}%), "
        f"evidence complete {len(complete)}"
    )
    for fault in args.faults.split(","):
        mine = [r for r in rows if r["fault"] == fault]
        print(f"  {fault:7s} {sum(r['right'] for r in mine)}/{len(mine)} right")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
