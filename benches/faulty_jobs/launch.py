"""Running one scenario as a real torchrun-launched gloo job on this host, and writing its ground truth.

Layout of a run directory (``RUN``)::

    RUN/scenario.json       the drawn scenario
    RUN/evidence/           what a user of the job would have, and nothing else:
        rank{r}.window{k}.json | rank{r}.json   Kineto traces
        rank{r}_stacks.txt, rank{r}_exception.txt
        fr_during_hang/ fr_after_error/ fr_final/   Flight Recorder dumps (pickle + .json)
        launcher.log        every torchrun agent's output, line-interleaved as one job log
    RUN/program_log/        the ranks' own logs (the ground truth's source), never evidence
    RUN/launcher/           each agent's exact output (agent{r}.log), torchrun's log dirs, launch.json
    RUN/ground_truth.json   written from program_log/ and launcher/ only (never from the traces)

Every rank gets its own torchrun agent (``--nnodes W --node_rank r --nproc_per_node 1``, static
rendezvous on 127.0.0.1 at a free port), as on a multi-node job: a single agent would SIGTERM
the surviving workers the moment one worker dies (a SIGKILLed rank, or a gloo abort on a size
mismatch), and the survivors' evidence would be lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from faulty_jobs.scenario import EXPECTED_CATEGORY, EXPECTED_DESYNC_KIND, HANG_FAULTS, STRAGGLER_FAULTS

BENCHES_DIR = Path(__file__).resolve().parent.parent

# environment variables of an enclosing torchrun/SLURM job that must not leak into ours
_SCRUB = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCH_FR_DUMP_TEMP_FILE",
    "TORCH_NCCL_DUMP_ON_TIMEOUT",
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def deadline_for(scn: dict[str, Any]) -> float:
    """Seconds after which the launcher kills a run that has not ended (a bug, not a fault)."""
    stop = float(scn["fault"].get("stop_s", 0.0))
    return 60.0 + 6.0 * float(scn["world"]) + 3.0 * float(scn["timeout_s"]) + 2.0 * stop


def _pump(src: IO[bytes], own: IO[bytes], combined: IO[bytes], lock: threading.Lock) -> None:
    for line in iter(src.readline, b""):
        own.write(line)
        own.flush()
        with lock:
            combined.write(line)
            combined.flush()


def _worker_pids(plog: Path) -> list[int]:
    pids = []
    for p in sorted(plog.glob("rank*.json")):
        doc = _read_json(p)
        if isinstance(doc, dict) and isinstance(doc.get("info", {}).get("pid"), int):
            pids.append(int(doc["info"]["pid"]))
    return pids


def _stop_all(agent_pids: list[int], worker_pids: list[int]) -> None:
    """Stop a run that outlived its deadline: SIGTERM the agents (torchrun stops its workers), then
    SIGKILL the agents' and the workers' sessions (torchrun starts each worker in a session of its
    own, with a frozen rank's helper in it)."""
    for pid in agent_pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    time.sleep(5)
    for pid in (*agent_pids, *worker_pids):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def _run_agents(
    commands: list[list[str]],
    env: dict[str, str],
    cwd: Path,
    combined_path: Path,
    ldir: Path,
    plog: Path,
    limit: float,
) -> tuple[dict[int, dict[str, Any]], bool]:
    """Start every agent, copy each one's output to ``ldir/agent{r}.log`` and, line by line, to the
    combined log; wait for all (killing their sessions after ``limit`` s)."""
    lock = threading.Lock()
    t0 = time.monotonic()
    exits: dict[int, dict[str, Any]] = {}
    deadline_hit = False
    with contextlib.ExitStack() as stack:
        combined = stack.enter_context(open(combined_path, "wb"))
        procs: list[subprocess.Popen[bytes]] = []
        pumps: list[threading.Thread] = []
        for r, cmd in enumerate(commands):
            own = stack.enter_context(open(ldir / f"agent{r}.log", "wb"))
            p = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(cwd),
                start_new_session=True,
            )
            assert p.stdout is not None
            procs.append(p)
            th = threading.Thread(target=_pump, args=(p.stdout, own, combined, lock), daemon=True)
            th.start()
            pumps.append(th)
        while len(exits) < len(procs):
            for r, p in enumerate(procs):
                if r not in exits and p.poll() is not None:
                    exits[r] = {
                        "agent_exit_code": p.returncode,
                        "agent_exit_s": round(time.monotonic() - t0, 3),
                    }
            if len(exits) < len(procs) and time.monotonic() - t0 > limit:
                deadline_hit = True
                _stop_all([p.pid for r, p in enumerate(procs) if r not in exits], _worker_pids(plog))
                for r, p in enumerate(procs):
                    if r not in exits:
                        p.wait()
                        exits[r] = {
                            "agent_exit_code": p.returncode,
                            "agent_exit_s": None,
                            "killed_by_launcher": True,
                        }
            time.sleep(0.1)
        for th in pumps:
            th.join(timeout=10)
        for p in procs:
            if p.stdout is not None:
                p.stdout.close()
    return exits, deadline_hit


def run_scenario(scn: dict[str, Any], run_dir: Path, log: IO[str] | None = None) -> dict[str, Any]:
    """Run ``scn`` into ``run_dir`` (which must not exist) and return its ground truth."""
    run_dir.mkdir(parents=True)
    evidence, plog, ldir = run_dir / "evidence", run_dir / "program_log", run_dir / "launcher"
    for d in (evidence, plog, ldir):
        d.mkdir()
    scn_path = run_dir / "scenario.json"
    scn_path.write_text(json.dumps(scn, indent=1, sort_keys=True) + "\n")
    world = int(scn["world"])
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        OMP_NUM_THREADS="1",
        TORCH_FR_BUFFER_SIZE=str(scn["fr_buffer_size"]),
        GLOO_SOCKET_IFNAME="lo",
        PYTHONPATH=os.pathsep.join([str(BENCHES_DIR), *filter(None, [env.get("PYTHONPATH")])]),
        PYTHONUNBUFFERED="1",
        PYTHONWARNINGS="ignore::FutureWarning",
    )
    commands: list[list[str]] = []
    for r in range(world):
        commands.append(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes",
                str(world),
                "--node_rank",
                str(r),
                "--nproc_per_node",
                "1",
                "--master_addr",
                "127.0.0.1",
                "--master_port",
                str(port),
                "--max_restarts",
                "0",
                "--tee",
                "3",
                "--log-line-prefix-template",
                "[rank${rank}]:",
                "--log-dir",
                str(ldir / f"torchrun_node{r}"),
                "-m",
                "faulty_jobs.job",
                "--scenario",
                str(scn_path),
                "--evidence",
                str(evidence),
                "--program-log",
                str(plog),
            ]
        )
    limit = deadline_for(scn)
    t_start_ns = time.time_ns()
    t0 = time.monotonic()
    exits, deadline_hit = _run_agents(commands, env, run_dir, evidence / "launcher.log", ldir, plog, limit)
    # the frozen rank's helper may still be sleeping when a rank exits: let it finish
    helper_wait_end = time.monotonic() + float(scn["fault"].get("stop_s", 0.0)) + 2
    while time.monotonic() < helper_wait_end and scn["fault"]["kind"] == "frozen":
        if (plog / f"rank{scn['fault']['rank']}_freeze_helper.json").exists():
            break
        time.sleep(0.2)
    wall_s = round(time.monotonic() - t0, 3)
    for r in range(world):
        text = (ldir / f"agent{r}.log").read_text(errors="replace")
        m = re.findall(r"exitcode\s*:\s*(-?\d+)", text)
        exits[r]["worker_exitcode_reported"] = int(m[-1]) if m else None
    launch = {
        "commands": commands,
        "port": port,
        "env": {k: env[k] for k in ("OMP_NUM_THREADS", "TORCH_FR_BUFFER_SIZE", "GLOO_SOCKET_IFNAME")},
        "start_ns": t_start_ns,
        "wall_s": wall_s,
        "deadline_s": limit,
        "deadline_hit": deadline_hit,
        "agents": {str(r): exits[r] for r in range(world)},
    }
    (ldir / "launch.json").write_text(json.dumps(launch, indent=1) + "\n")
    shutil.rmtree(plog / ".exit_barrier", ignore_errors=True)
    truth = build_ground_truth(scn, run_dir, launch)
    (run_dir / "ground_truth.json").write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")
    if log is not None:
        log.write(f"  ran in {wall_s:.1f} s: {truth['outcome']['summary']}\n")
    return truth


# ---------------------------------------------------------------------------- ground truth


def _robust_sigma(values: list[float]) -> float | None:
    if len(values) < 3:
        return None
    med = statistics.median(values)
    return 1.4826 * statistics.median([abs(v - med) for v in values])


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def build_ground_truth(scn: dict[str, Any], run_dir: Path, launch: dict[str, Any]) -> dict[str, Any]:
    """The run's ground truth, from the ranks' own logs and the launcher's facts only."""
    world = int(scn["world"])
    plog = run_dir / "program_log"
    fault = scn["fault"]
    kind: str = fault["kind"]
    logs: dict[int, dict[str, Any] | None] = {r: _read_json(plog / f"rank{r}.json") for r in range(world)}
    ranks: dict[str, Any] = {}
    step_of: dict[int, int | None] = {}
    fault_events: list[dict[str, Any]] = []
    for r in range(world):
        lg = logs[r]
        agent = launch["agents"][str(r)]
        if lg is None:
            ranks[str(r)] = {"status": "no program log", "agent": agent}
            continue
        status = lg["status"]
        exc = lg["info"].get("exception")
        if status in ("running", "starting"):
            # the process ended without writing its final status: it died (gloo abort, launcher kill)
            status = "died without a final record"
        for it in lg["iterations"]:
            if it.get("profiler_step") is not None:
                step_of.setdefault(int(it["index"]), int(it["profiler_step"]))
        for e in lg["events"]:
            if e["kind"] == "fault_injected":
                fault_events.append({"rank": r, **e})
        last_completed = next((c for c in reversed(lg["comms"]) if c["status"] == "completed"), None)
        unfinished = [c for c in lg["comms"] if c["status"] != "completed"]
        ranks[str(r)] = {
            "status": status,
            "pid": lg["info"].get("pid"),
            "exception": exc,
            "blocked_in": unfinished[0] if unfinished else None,
            "blocked_in_library_call": (exc or {}).get("in_library_call"),
            "last_completed_call": last_completed,
            "watchdog_fired": lg["info"].get("watchdog_fired"),
            "kill_ns": lg["info"].get("kill_ns"),
            "agent": agent,
            "iterations": lg["iterations"],
            "comms": lg["comms"],
            "events": [e for e in lg["events"] if e["kind"] not in ("compute_block",)],
            "compute_blocks": [e for e in lg["events"] if e["kind"] == "compute_block"],
        }
    helper = None
    if kind == "frozen":
        helper = _read_json(plog / f"rank{fault['rank']}_freeze_helper.json")

    # ---- what happened
    timeouts = sorted(
        int(r) for r, v in ranks.items() if v.get("exception") and "Timed out" in v["exception"]["message"]
    )
    conn_errors = sorted(
        int(r)
        for r, v in ranks.items()
        if v.get("exception")
        and re.search(r"Connection (reset|closed)|Read error", v["exception"]["message"])
    )
    excepted = sorted(int(r) for r, v in ranks.items() if v.get("exception"))
    completed = sorted(int(r) for r, v in ranks.items() if v["status"] == "completed")
    died = sorted(
        int(r) for r, v in ranks.items() if v["status"].startswith(("died", "killed", "no program"))
    )
    if len(completed) == world:
        summary = "completed"
    else:
        parts = []
        if timeouts:
            parts.append(f"timeouts on ranks {timeouts}")
        other = [r for r in excepted if r not in timeouts]
        if other:
            parts.append(f"other exceptions on ranks {other}")
        if died:
            parts.append(f"ranks {died} died")
        if completed:
            parts.append(f"ranks {completed} completed")
        summary = "failed: " + "; ".join(parts)
    blocked_iters = [v["blocked_in"]["iteration"] for v in ranks.values() if v.get("blocked_in")]
    blocked_iters = [i for i in blocked_iters if i is not None]

    # ---- the fault as injected
    injected: dict[str, Any] = {"kind": kind, "planned": fault}
    effective = True
    why_not = None
    if kind == "none":
        effective = summary == "completed"
        why_not = None if effective else "the job failed without a fault"
    elif kind in STRAGGLER_FAULTS:
        delays = [e for e in fault_events if e.get("fault") == kind]
        injected.update(
            rank=fault["rank"],
            pairs=[
                {
                    "rank": e["rank"],
                    "iteration": e["iteration"],
                    "profiler_step": step_of.get(e["iteration"]),
                    "measured_delay_ms": e["measured_delay_ms"],
                    "start_ns": e["start_ns"],
                    "end_ns": e["end_ns"],
                }
                for e in delays
            ],
        )
        effective = len(delays) == len(fault["iterations"]) and summary == "completed"
        why_not = (
            None if effective else f"{len(delays)} of {len(fault['iterations'])} delays injected; {summary}"
        )
    else:
        evs = [e for e in fault_events if e.get("fault") == kind]
        injected.update(
            rank=fault["rank"],
            iteration=fault["iteration"],
            profiler_step=step_of.get(int(fault["iteration"])),
            site=fault.get("site"),
            events=evs,
        )
        if kind == "killed":
            injected["kill_ns"] = ranks[str(fault["rank"])].get("kill_ns")
        if kind == "frozen":
            injected["freeze_helper"] = helper
            blocks = [
                b
                for b in ranks[str(fault["rank"])].get("compute_blocks", [])
                if b["iteration"] == fault["iteration"]
            ]
            if helper and blocks:
                injected["sigstop_inside_compute_block"] = (
                    blocks[0]["start_ns"] <= helper["sigstop_ns"] <= blocks[0]["end_ns"]
                )
        if not evs:
            effective, why_not = False, "the fault was never injected"
        elif summary == "completed":
            effective, why_not = False, "the job completed despite the fault"
        elif kind == "frozen" and not (helper and helper.get("sigcont_ns")):
            effective, why_not = False, "no SIGSTOP/SIGCONT record"
    injected["effective"] = effective
    injected["not_effective_because"] = why_not

    # ---- step-time noise
    fault_iters: set[int] = set()
    if kind in STRAGGLER_FAULTS:
        fault_iters = set(fault["iterations"])
    elif kind in HANG_FAULTS:
        fault_iters = set(range(int(fault["iteration"]), int(scn["iterations"])))
    durations: list[float] = []
    per_rank_sigma: dict[str, float | None] = {}
    for rk, v in ranks.items():
        ds = [
            (it["end_ns"] - it["start_ns"]) / 1e6
            for it in v.get("iterations", [])
            if it.get("end_ns") and it["index"] not in fault_iters and it["index"] != 0
        ]
        per_rank_sigma[rk] = _robust_sigma(ds)
        durations.extend(ds)
    sigma = _robust_sigma(durations)
    noise = {
        "robust_sigma_ms": sigma,
        "median_iteration_ms": statistics.median(durations) if durations else None,
        "per_rank_robust_sigma_ms": per_rank_sigma,
        "definition": "1.4826 * MAD of every rank's iteration durations (end - start, program clock), "
        "iterations with an injected fault (for a hang fault: the fault iteration and later) and "
        "iteration 0 excluded",
    }

    expected: dict[str, Any] = {"hang": kind in HANG_FAULTS}
    if kind in HANG_FAULTS:
        expected.update(
            root_ranks=[fault["rank"]],
            category=EXPECTED_CATEGORY[kind],
            desync_kind=EXPECTED_DESYNC_KIND.get(kind),
            step_iteration=fault["iteration"],
            step_profiler=step_of.get(int(fault["iteration"])),
            first_blocked_iteration=min(blocked_iters) if blocked_iters else None,
        )
    return {
        "format": "commcanary-bench.faulty-job-truth.v1",
        "scenario": scn,
        "launch": launch,
        "outcome": {
            "summary": summary,
            "completed_ranks": completed,
            "timeout_ranks": timeouts,
            "connection_error_ranks": conn_errors,
            "exception_ranks": excepted,
            "died_ranks": died,
        },
        "fault": injected,
        "expected": expected,
        "iteration_profiler_steps": {str(k): v for k, v in sorted(step_of.items())},
        "noise": noise,
        "ranks": ranks,
        "notes": [
            "Iterations are 0-based program iterations; profiler_step is the profiler's step_num logged at "
            "the iteration's start (the N of ProfilerStep#N), null with markers off.",
            "comms are the calls the program itself issued; DistributedDataParallel's own broadcasts and "
            "bucket all_reduces are not listed one by one (events ddp_forward / ddp_backward bracket them).",
            "Times are time.time_ns() (CLOCK_REALTIME) of the rank's process.",
        ],
    }
