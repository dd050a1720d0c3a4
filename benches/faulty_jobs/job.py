"""The per-rank program of a faulty job: a small real torch.distributed (gloo) training loop.

Run by ``torchrun`` (one agent per rank, see ``launch.py``) as
``python -m faulty_jobs.job --scenario RUN/scenario.json --evidence RUN/evidence --program-log RUN/program_log``.

What it writes, as a user's job would (``--evidence``):

* ``rank{r}.window{k}.json`` -- Kineto traces, one per profiler window, each written as soon as
  its window ends (so traces exist before a hang); the window in progress is written by
  ``prof.stop()`` after an exception (never for a killed rank). With markers off there is no
  ``ProfilerStep`` at all: windows are separate ``profile()`` sessions (``mode: windows``) or one
  session for the whole loop, written at the end or after the exception (``rank{r}.json``).
* ``rank{r}_stacks.txt`` -- faulthandler dump of every thread, by a watchdog thread once a
  communication call (or DDP's forward/backward) has not returned for ``watchdog_s``;
* ``fr_during_hang/fr_trace_rank_{r}`` (+ ``.json``) -- Flight Recorder dump by the same watchdog
  (gloo in torch 2.15 never dumps by itself), ``fr_after_error/`` after the exception,
  ``fr_final/`` after a job that completed;
* ``rank{r}_exception.txt`` -- the exception's traceback.

What it records for the ground truth (``--program-log``, never shown to the diagnosis):
``rank{r}.json``: every iteration (start/end wall ns, the profiler's ``step_num``), every
communication call the program issues (op, group, bytes, dtype, start/end ns, status), every
fault injected, the exception, the watchdog; flushed atomically at every iteration end and right
before a self-inflicted SIGKILL. ``rank{r}_freeze_helper.json``: when SIGSTOP and SIGCONT were sent.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import faulthandler
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerAction, ProfilerActivity, profile

from faulty_jobs.scenario import group_ranks, iteration_program, pp_coords

_T_IMPORTS_DONE_NS = time.time_ns()  # when this rank had imported torch and the program

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "int64": torch.int64,
    "int32": torch.int32,
}


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class ProgramLog:
    """The rank's own record of what it did (the ground truth's only source besides the launcher)."""

    def __init__(self, rank: int, path: Path) -> None:
        self.rank = rank
        self.path = path
        self.iterations: list[dict[str, Any]] = []
        self.comms: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None
        # a library call that communicates (DDP's forward/backward) while it runs: the watchdog
        # watches it like a call of the program's own
        self.library_call: dict[str, Any] | None = None
        self.iteration: int | None = None
        self.status = "starting"
        self.info: dict[str, Any] = {"pid": os.getpid(), "t_imports_done_ns": _T_IMPORTS_DONE_NS}
        self.last_progress = time.monotonic()
        self.armed = False
        self.lock = threading.Lock()

    def progress(self) -> None:
        self.last_progress = time.monotonic()

    def begin_comm(self, **kw: Any) -> dict[str, Any]:
        rec = dict(kw)
        rec["iteration"] = self.iteration
        rec["status"] = "in_flight"
        rec["start_ns"] = time.time_ns()
        with self.lock:
            self.current = rec
            self.comms.append(rec)
        self.progress()
        return rec

    def end_comm(self, rec: dict[str, Any]) -> None:
        rec["end_ns"] = time.time_ns()
        rec["status"] = "completed"
        with self.lock:
            self.current = None
        self.progress()

    def event(self, kind: str, **kw: Any) -> dict[str, Any]:
        rec = {"kind": kind, "t_ns": time.time_ns(), "iteration": self.iteration, **kw}
        with self.lock:
            self.events.append(rec)
        return rec

    def flush(self, status: str | None = None) -> None:
        if status is not None:
            self.status = status
        with self.lock:
            doc = {
                "rank": self.rank,
                "status": self.status,
                "info": dict(self.info),
                "iterations": [dict(i) for i in self.iterations],
                "comms": [dict(c) for c in self.comms],
                "events": [dict(e) for e in self.events],
                "in_flight": dict(self.current) if self.current else None,
                "flushed_ns": time.time_ns(),
            }
        _write_json_atomic(self.path, doc)


def dump_flight_recorder(evidence: Path, subdir: str, rank: int, log: ProgramLog) -> None:
    """Write this process's Flight Recorder buffer, pickle and JSON, the way torch names them."""
    d = evidence / subdir
    d.mkdir(parents=True, exist_ok=True)
    try:
        pickled = torch._C._distributed_c10d._dump_fr_trace()
        (d / f"fr_trace_rank_{rank}").write_bytes(pickled)
        as_json = torch._C._distributed_c10d._dump_fr_trace_json()
        (d / f"fr_trace_rank_{rank}.json").write_bytes(as_json)
        log.event("fr_dumped", where=subdir)
    except Exception as e:
        log.event("fr_dump_failed", where=subdir, error=repr(e))


class Watchdog:
    """Once a communication call has been in flight for ``seconds``: faulthandler stacks of every
    thread, and a Flight Recorder dump (once per process)."""

    def __init__(self, log: ProgramLog, evidence: Path, rank: int, seconds: float) -> None:
        self.log, self.evidence, self.rank, self.seconds = log, evidence, rank, seconds
        self.stop = threading.Event()
        self.fired = False
        threading.Thread(target=self._run, name="hang_watchdog", daemon=True).start()

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            cur = self.log.current or self.log.library_call
            if not self.log.armed or cur is None or time.time_ns() - cur["start_ns"] <= self.seconds * 1e9:
                continue
            self.fired = True
            self.log.event("watchdog_fired", in_flight=dict(cur) if cur else None)
            with open(self.evidence / f"rank{self.rank}_stacks.txt", "w") as f:
                f.write(
                    f"# rank {self.rank}: a call has not returned for {self.seconds:g} s, stacks of all threads\n"
                )
                f.flush()
                faulthandler.dump_traceback(file=f, all_threads=True)
            dump_flight_recorder(self.evidence, "fr_during_hang", self.rank, self.log)
            self.log.flush()
            return


_FREEZE_HELPER = r"""
import json, os, signal, sys, time
pid, path, stop_s = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
if sys.stdin.readline().strip() != "go":
    sys.exit(0)
rec = {"target_pid": pid, "helper_pid": os.getpid(), "requested_stop_s": stop_s}
rec["sigstop_ns"] = time.time_ns()
os.kill(pid, signal.SIGSTOP)
time.sleep(stop_s)
rec["sigcont_ns"] = time.time_ns()
try:
    os.kill(pid, signal.SIGCONT)
    rec["sigcont"] = "sent"
except ProcessLookupError:
    rec["sigcont"] = "target gone"
with open(path + ".tmp", "w") as f:
    json.dump(rec, f)
os.replace(path + ".tmp", path)
"""


class Job:
    def __init__(self, scn: dict[str, Any], evidence: Path, plog_dir: Path) -> None:
        self.scn = scn
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.evidence = evidence
        self.plog_dir = plog_dir
        self.sp: dict[str, Any] = scn["shape_params"]
        self.fault: dict[str, Any] = scn["fault"]
        self.log = ProgramLog(self.rank, plog_dir / f"rank{self.rank}.json")
        self.iteration = -1
        self.executed: list[str] = []
        self.groups: dict[str, Any] = {}
        self.granks = group_ranks(scn)
        self.prof: Any = None
        self.window = 0
        self.helper: subprocess.Popen[str] | None = None
        self.compute_ms: list[float] = []
        self.work = torch.zeros(96, 384)
        self.mat_a = torch.zeros(96, 384)
        self.mat_b = torch.zeros(384, 384)
        self.loss_value = 0.0

    # ------------------------------------------------------------------ fault helpers

    def is_fault_rank(self) -> bool:
        return self.fault["kind"] != "none" and self.fault.get("rank") == self.rank

    def site_fault(self, site: str) -> dict[str, Any] | None:
        f = self.fault
        if self.is_fault_rank() and f.get("site") == site and f.get("iteration") == self.iteration:
            return f
        return None

    # ------------------------------------------------------------------ communication wrappers

    def _g(self, name: str) -> Any:
        return self.groups[name]

    def _rec(self, site: str, op: str, group: str, tensor: torch.Tensor, **kw: Any) -> dict[str, Any]:
        return self.log.begin_comm(
            site=site,
            op=op,
            group=group,
            group_ranks=self.granks[group],
            pg_name=self.groups_pg_name[group],
            numel=tensor.numel(),
            dtype=str(tensor.dtype).replace("torch.", ""),
            bytes=tensor.numel() * tensor.element_size(),
            **kw,
        )

    def collective(
        self, site: str, op: str, group: str, t: torch.Tensor, src: int | None = None
    ) -> torch.Tensor:
        """Issue (or, under a fault, skip or corrupt) the collective at ``site``; returns its result tensor.

        ``t`` is the input (all_reduce/broadcast in place; all_gather's per-rank input;
        reduce_scatter's full input). The result: t, or the gathered/scattered output.
        """
        self.executed.append(site)
        g = self._g(group)
        size = len(self.granks[group])
        f = self.site_fault(site)
        call_op, call_src, tensor = op, src, t
        if f is not None:
            kind = f["kind"]
            if kind == "skipped_collective":
                self.log.event(
                    "fault_injected", fault=kind, site=site, op=op, group=group, what="skipped the call"
                )
                self.log.flush()
                return self._result_shape(op, t, size)
            if kind == "desync_op":
                call_op = f["variant"]
                call_src = self.granks[group][0]
            elif kind == "desync_size":
                unit = t.numel() // size if op == "reduce_scatter" else t.numel()
                new_unit = {"double": unit * 2, "plus_one": unit + 1, "half": max(1, unit // 2)}[f["variant"]]
                tensor = torch.ones(new_unit * size if op == "reduce_scatter" else new_unit, dtype=t.dtype)
            elif kind == "desync_dtype":
                tensor = t.to(DTYPES[f["variant"]])
            elif kind == "desync_root":
                call_src = int(f["bad_src"])
            self.log.event(
                "fault_injected",
                fault=kind,
                site=site,
                group=group,
                expected={
                    "op": op,
                    "numel": t.numel(),
                    "dtype": str(t.dtype).replace("torch.", ""),
                    "src": src,
                },
                issued={
                    "op": call_op,
                    "numel": tensor.numel(),
                    "dtype": str(tensor.dtype).replace("torch.", ""),
                    "src": call_src,
                },
            )
            self.log.flush()
        rec = self._rec(site, call_op, group, tensor, src=call_src, expected_op=op if call_op != op else None)
        out = self._issue(call_op, g, tensor, size, call_src)
        self.log.end_comm(rec)
        if f is not None:
            return self._result_shape(op, t, size)
        return out

    @staticmethod
    def _result_shape(op: str, t: torch.Tensor, size: int) -> torch.Tensor:
        if op == "all_gather":
            return t.repeat(size)
        if op == "reduce_scatter":
            return t[: t.numel() // size].clone()
        return t

    @staticmethod
    def _issue(op: str, g: Any, t: torch.Tensor, size: int, src: int | None) -> torch.Tensor:
        if op == "all_reduce":
            dist.all_reduce(t, group=g)
            return t
        if op == "broadcast":
            assert src is not None
            dist.broadcast(t, src=src, group=g)
            return t
        if op == "all_gather":
            out = torch.empty(t.numel() * size, dtype=t.dtype)
            dist.all_gather_into_tensor(out, t.contiguous(), group=g)
            return out
        if op == "reduce_scatter":
            out = torch.empty(t.numel() // size, dtype=t.dtype)
            dist.reduce_scatter_tensor(out, t.contiguous(), group=g)
            return out
        raise ValueError(op)

    def p2p(
        self, site: str, op: str, group: str, t: torch.Tensor, peer: int, tag: int, is_async: bool
    ) -> None:
        """send/recv (isend/irecv + wait when ``is_async``) at ``site``; a skipped recv leaves zeros."""
        self.executed.append(site)
        f = self.site_fault(site)
        if f is not None and f["kind"] in ("skipped_send", "skipped_recv"):
            self.log.event(
                "fault_injected",
                fault=f["kind"],
                site=site,
                op=op,
                group=group,
                peer=peer,
                tag=tag,
                what="skipped",
            )
            self.log.flush()
            if op == "recv":
                t.zero_()
            return
        g = self._g(group)
        rec = self._rec(site, op, group, t, peer=peer, tag=tag, is_async=is_async)
        if op == "send":
            if is_async:
                work = dist.isend(t, dst=peer, group=g, tag=tag)
                assert work is not None
                work.wait()
            else:
                dist.send(t, dst=peer, group=g, tag=tag)
        else:
            if is_async:
                work = dist.irecv(t, src=peer, group=g, tag=tag)
                assert work is not None
                work.wait()
            else:
                dist.recv(t, src=peer, group=g, tag=tag)
        self.log.end_comm(rec)

    @contextlib.contextmanager
    def library_call(self, site: str, note: str) -> Iterator[None]:
        """Bracket code in which a library (DDP) communicates on the program's behalf."""
        self.executed.append(site)
        rec = {"site": site, "start_ns": time.time_ns(), "iteration": self.iteration, "note": note}
        self.log.library_call = rec
        self.log.progress()
        try:
            yield
        finally:
            self.log.library_call = None
            self.log.progress()
            self.log.event(site, start_ns=rec["start_ns"], end_ns=time.time_ns(), note=note)

    # ------------------------------------------------------------------ compute, stragglers, process faults

    def compute_block(self) -> None:
        """The iteration's extra "model" compute; where a killed or frozen rank's fault lands."""
        reps: int = self.sp["compute_reps"]
        f = self.fault
        t0 = time.time_ns()
        fault_now = (
            self.is_fault_rank()
            and f["kind"] in ("killed", "frozen")
            and f.get("iteration") == self.iteration
        )
        for i in range(reps):
            if fault_now and f["kind"] == "killed" and i >= max(1, round(reps * float(f["at_fraction"]))) - 1:
                self._kill_self(t0)
            if fault_now and f["kind"] == "frozen" and i == 0:
                self._freeze_self(t0)
            self.work = torch.tanh(self.mat_a @ self.mat_b) + self.work * 0.5
        t1 = time.time_ns()
        self.log.event("compute_block", start_ns=t0, end_ns=t1)
        self.compute_ms.append((t1 - t0) / 1e6)

    def _kill_self(self, compute_start_ns: int) -> None:
        self.log.event(
            "fault_injected",
            fault="killed",
            compute_start_ns=compute_start_ns,
            in_flight=self.log.current,
            signal="SIGKILL",
            what="the rank SIGKILLs itself in the middle of its compute block",
        )
        # the survivors' exit barrier must not wait for this rank
        (self.plog_dir / ".exit_barrier").mkdir(exist_ok=True)
        (self.plog_dir / ".exit_barrier" / str(self.rank)).touch()
        self.log.info["kill_ns"] = time.time_ns()
        self.log.flush("killed (SIGKILL right after this write)")
        os.kill(os.getpid(), signal.SIGKILL)

    def _freeze_self(self, compute_start_ns: int) -> None:
        assert self.helper is not None and self.helper.stdin is not None
        self.log.event(
            "fault_injected",
            fault="frozen",
            compute_start_ns=compute_start_ns,
            stop_s=self.fault["stop_s"],
            what="asked the helper to SIGSTOP this rank, then computes on",
        )
        self.log.flush()
        self.helper.stdin.write("go\n")
        self.helper.stdin.flush()
        # keep computing until the stop has surely landed (the helper acts within milliseconds)
        t_end = time.monotonic() + 0.3
        while time.monotonic() < t_end:
            self.work = torch.tanh(self.mat_a @ self.mat_b) + self.work * 0.5
        self.log.event("resumed_after_freeze", gap_note="this event is logged after SIGCONT")

    def straggle(self) -> None:
        f = self.fault
        if not (self.is_fault_rank() and f["kind"] in ("sleep_straggler", "compute_straggler")):
            return
        if self.iteration not in f["iterations"]:
            return
        delay_s = f["delay_ms"][f["iterations"].index(self.iteration)] / 1000.0
        t0 = time.time_ns()
        if f["kind"] == "sleep_straggler":
            time.sleep(delay_s)
        else:
            end = time.perf_counter() + delay_s
            x = self.mat_a
            while time.perf_counter() < end:
                x = torch.tanh(x @ self.mat_b)
            self.work = self.work + x * 0
        t1 = time.time_ns()
        self.log.event(
            "fault_injected",
            fault=f["kind"],
            planned_delay_ms=f["delay_ms"][f["iterations"].index(self.iteration)],
            start_ns=t0,
            end_ns=t1,
            measured_delay_ms=round((t1 - t0) / 1e6, 3),
        )

    # ------------------------------------------------------------------ profiler

    def _export(self, prof: Any, name: str) -> None:
        path = self.evidence / name
        prof.export_chrome_trace(str(path))
        self.log.event("trace_written", file=name)

    def profiler_start(self) -> None:
        pr = self.scn["profiler"]
        acts = [ProfilerActivity.CPU]
        if self.scn["markers"]:
            window, skip = int(pr["window"]), int(pr["skip_first"])

            def sched(step: int) -> ProfilerAction:
                if step < skip:
                    return ProfilerAction.WARMUP  # the profiler runs but these steps are not kept
                k = step - skip
                return ProfilerAction.RECORD_AND_SAVE if (k + 1) % window == 0 else ProfilerAction.RECORD

            def ready(p: Any) -> None:
                self.window += 1
                self._export(p, f"rank{self.rank}.window{self.window}.json")

            self.prof = profile(
                activities=acts, record_shapes=True, with_stack=False, schedule=sched, on_trace_ready=ready
            )
        else:
            self.prof = profile(activities=acts, record_shapes=True, with_stack=False)
        self.prof.start()

    def profiler_step(self) -> None:
        """Called after every iteration."""
        pr = self.scn["profiler"]
        if self.scn["markers"]:
            self.prof.step()
        elif pr["mode"] == "windows" and (self.iteration + 1) % int(pr["window"]) == 0:
            self.prof.stop()
            self.window += 1
            self._export(self.prof, f"rank{self.rank}.window{self.window}.json")
            self.prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=False)
            self.prof.start()

    def profiler_stop(self) -> None:
        if self.prof is None:
            return
        prof, self.prof = self.prof, None
        prof.stop()
        if not self.scn["markers"]:
            if self.scn["profiler"]["mode"] == "windows":
                self.window += 1
                self._export(prof, f"rank{self.rank}.window{self.window}.json")
            else:
                self._export(prof, f"rank{self.rank}.json")

    # ------------------------------------------------------------------ setup

    def setup(self) -> None:
        self.log.info["t_setup_ns"] = time.time_ns()
        torch.set_num_threads(1)
        torch.manual_seed(int(self.scn["torch_seed"]))
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(self.scn["timeout_s"])))
        assert dist.get_rank() == self.rank and dist.get_world_size() == self.world
        timeout = datetime.timedelta(seconds=float(self.scn["timeout_s"]))
        self.groups_pg_name: dict[str, str | None] = {}
        for name, ranks in self.granks.items():
            if name == "world":
                pg: Any = dist.group.WORLD
            else:
                pg = dist.new_group(ranks=ranks, timeout=timeout, backend="gloo", group_desc=name)
            self.groups[name] = pg
            self.groups_pg_name[name] = (
                dist.distributed_c10d._get_process_group_name(pg) if self.rank in ranks else None
            )
        self.log.info.update(
            groups=self.granks, pg_names=self.groups_pg_name, world=self.world, t_groups_ns=time.time_ns()
        )
        gen = torch.Generator().manual_seed(int(self.scn["torch_seed"]) + 1 + self.rank)
        self.gen = gen
        self.mat_a = torch.randn(96, 384, generator=gen)
        self.mat_b = torch.randn(384, 384, generator=gen) / 20.0
        getattr(self, f"setup_{self.scn['shape']}")()
        f = self.fault
        if self.is_fault_rank() and f["kind"] == "frozen":
            path = self.plog_dir / f"rank{self.rank}_freeze_helper.json"
            self.helper = subprocess.Popen(
                [sys.executable, "-c", _FREEZE_HELPER, str(os.getpid()), str(path), str(f["stop_s"])],
                stdin=subprocess.PIPE,
                text=True,
            )
            self.log.event("freeze_helper_spawned", helper_pid=self.helper.pid)
        self.log.info["t_model_ns"] = time.time_ns()
        self.log.flush("running")

    def setup_ddp(self) -> None:
        from torch.nn.parallel import DistributedDataParallel as DDP

        sp = self.sp
        if sp["model"] == "conv":
            c1, c2 = sp["channels"]
            model: nn.Module = nn.Sequential(
                nn.Conv2d(3, c1, 3, padding=1),
                nn.BatchNorm2d(c1),
                nn.ReLU(),
                nn.Conv2d(c1, c2, 3, stride=2, padding=1),
                nn.BatchNorm2d(c2),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(c2, 10),
            )
            shape: tuple[int, ...] = (3, sp["image"], sp["image"])
        else:
            model = nn.Sequential(
                nn.Linear(sp["in_dim"], sp["hidden"]),
                nn.BatchNorm1d(sp["hidden"]),
                nn.ReLU(),
                nn.Linear(sp["hidden"], sp["hidden"]),
                nn.ReLU(),
                nn.Linear(sp["hidden"], 10),
            )
            shape = (sp["in_dim"],)
        self.ddp = DDP(model, bucket_cap_mb=float(sp["bucket_cap_mb"]))
        self.opt = torch.optim.SGD(self.ddp.parameters(), lr=0.02, momentum=0.9)
        self.data = [
            (
                torch.randn(sp["batch"], *shape, generator=self.gen),
                torch.randint(0, 10, (sp["batch"],), generator=self.gen),
            )
            for _ in range(4)
        ]
        self.log.info["model_params"] = sum(p.numel() for p in model.parameters())

    def setup_tp_pairs(self) -> None:
        h, layers = self.sp["hidden"], self.sp["layers"]
        self.embed = torch.randn(512, h, generator=self.gen)
        self.w1 = [torch.randn(h, h // 2, generator=self.gen) / math.sqrt(h) for _ in range(layers)]
        self.w2 = [torch.randn(h, h, generator=self.gen) / math.sqrt(h) for _ in range(layers)]

    def setup_pp_dp(self) -> None:
        sp = self.sp
        h = sp["hidden"]
        self.stage, self.replica = pp_coords(self.scn, self.rank)
        torch.manual_seed(int(self.scn["torch_seed"]) + self.stage)  # replicas of a stage start equal
        self.stage_model = nn.Sequential(nn.Linear(h, 2 * h), nn.GELU(), nn.Linear(2 * h, h))
        self.head = nn.Linear(h, 10) if self.stage == sp["stages"] - 1 else None
        params = list(self.stage_model.parameters()) + (list(self.head.parameters()) if self.head else [])
        self.params = params
        self.opt = torch.optim.SGD(params, lr=0.01)
        mb = sp["micro_batch"]
        self.pp_inputs = [torch.randn(mb, h, generator=self.gen) for _ in range(4)]
        self.pp_labels = [torch.randint(0, 10, (mb,), generator=self.gen) for _ in range(4)]

    def setup_mixed(self) -> None:
        self.vec = torch.randn(self.sp["numel"], generator=self.gen)

    # ------------------------------------------------------------------ iterations

    def iter_ddp(self, k: int) -> None:
        x, y = self.data[k % len(self.data)]
        with self.library_call("ddp_forward", "DDP broadcasts its BatchNorm buffers here"):
            out = self.ddp(x)
            loss = F.cross_entropy(out, y)
        self.compute_block()
        with self.library_call("ddp_backward", "DDP all_reduces its gradient buckets here"):
            loss.backward()  # type: ignore[no-untyped-call]
        sq = sum(float(p.grad.pow(2).sum()) for p in self.ddp.parameters() if p.grad is not None)
        gn = self.collective("grad_norm", "all_reduce", "metrics", torch.tensor([sq]))
        lr = self.collective("lr_bcast", "broadcast", "world", torch.tensor([0.02, float(k)]), src=0)
        for group in self.opt.param_groups:
            group["lr"] = float(lr[0])
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.loss_value = float(loss.detach())
        if (k + 1) % self.sp["metrics_every"] == 0:
            correct = float((out.argmax(1) == y).sum())
            self.collective(
                "metrics",
                "all_reduce",
                "metrics",
                torch.tensor([self.loss_value, correct, float(len(y)), float(gn[0])]),
            )

    def iter_tp_pairs(self, k: int) -> None:
        b = self.sp["batch"]
        pair = f"pair{self.rank // 2}"
        tokens = (
            torch.randint(0, 512, (b,), generator=self.gen)
            if self.rank == 0
            else torch.zeros(b, dtype=torch.int64)
        )
        tokens = self.collective("tokens_bcast", "broadcast", "world", tokens, src=0)
        self.compute_block()
        x = self.embed[tokens.clamp(0, 511)]
        for layer in range(self.sp["layers"]):
            a = (x @ self.w1[layer]).reshape(-1)
            gathered = self.collective(f"l{layer}_gather", "all_gather", pair, a)
            z = F.gelu(torch.cat(list(gathered.reshape(2, b, -1)), dim=1))
            partial = z @ self.w2[layer]
            x = self.collective(
                f"l{layer}_reduce", "all_reduce", pair, partial.reshape(-1).contiguous()
            ).reshape(b, -1)
            x = torch.tanh(x / 2.0)
            if layer == 0:
                self.collective("aux_allreduce", "all_reduce", "world", x.mean(0)[:8].contiguous())
        loss = x.pow(2).mean().reshape(1)
        self.loss_value = (
            float(self.collective("loss_allreduce", "all_reduce", "world", loss)[0]) / self.world
        )

    def _tag(self, k: int, j: int, backward: bool) -> int:
        if self.sp["p2p_tags"] == "zero":
            return 0
        return k * 64 + j * 2 + (1 if backward else 0)

    def iter_pp_dp(self, k: int) -> None:
        sp = self.sp
        stages, mbs = sp["stages"], sp["micro_batches"]
        pp = f"pp{self.replica}"
        first, last = self.stage == 0, self.stage == stages - 1
        self.collective(
            "pp_bcast", "broadcast", pp, torch.tensor([0.01, float(k)]), src=self.replica * stages
        )
        self.compute_block()
        inputs: list[torch.Tensor] = []
        outputs: list[torch.Tensor] = []
        losses: list[torch.Tensor] = []
        for j in range(mbs):
            if first:
                x = self.pp_inputs[(k + j) % 4].clone().requires_grad_(False)
            else:
                x = torch.empty(sp["micro_batch"], sp["hidden"])
                self.p2p(f"fwd_recv{j}", "recv", pp, x, self.rank - 1, self._tag(k, j, False), False)
                x.requires_grad_(True)
            y = self.stage_model(x)
            inputs.append(x)
            outputs.append(y)
            if last:
                assert self.head is not None
                losses.append(F.cross_entropy(self.head(y), self.pp_labels[(k + j) % 4]))
            else:
                self.p2p(
                    f"fwd_send{j}",
                    "send",
                    pp,
                    y.detach().contiguous(),
                    self.rank + 1,
                    self._tag(k, j, False),
                    False,
                )
        for j in reversed(range(mbs)):
            if last:
                losses[j].backward()  # type: ignore[no-untyped-call]
            else:
                g = torch.empty(sp["micro_batch"], sp["hidden"])
                self.p2p(f"bwd_recv{j}", "recv", pp, g, self.rank + 1, self._tag(k, j, True), True)
                outputs[j].backward(g)  # type: ignore[no-untyped-call]
            if not first:
                grad = inputs[j].grad
                assert grad is not None
                self.p2p(
                    f"bwd_send{j}", "send", pp, grad.contiguous(), self.rank - 1, self._tag(k, j, True), True
                )
        sq = sum(float(p.grad.pow(2).sum()) for p in self.params if p.grad is not None)
        self.collective("grad_norm", "all_reduce", "world", torch.tensor([sq]))
        if sp["replicas"] >= 2:
            flat = torch.cat([p.grad.reshape(-1) for p in self.params if p.grad is not None])
            flat = self.collective("dp_allreduce", "all_reduce", f"dp{self.stage}", flat) / sp["replicas"]
            off = 0
            for p in self.params:
                if p.grad is not None:
                    n = p.numel()
                    p.grad.copy_(flat[off : off + n].view_as(p))
                    off += n
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.loss_value = float(sum(float(v.detach()) for v in losses)) if losses else 0.0

    def iter_mixed(self, k: int) -> None:
        n, w, r = self.sp["numel"], self.world, self.rank
        self.compute_block()
        v = self.vec * (1.0 + 0.01 * k)
        s = self.collective("world_ar", "all_reduce", "world", v.clone())
        if r <= w - 2:
            self.collective("low_ag", "all_gather", "low", s[: n // 2].contiguous())
        if r >= 1:
            self.collective("high_bcast", "broadcast", "high", s[: n // 4].clone(), src=1)
        self.collective("world_rs", "reduce_scatter", "world", torch.ones(w * (n // 8)) * float(r))
        if w >= 4 and r % 2 == 0:
            self.collective("evens_ar", "all_reduce", "evens", s[: n // 2].clone())
        loss = s.pow(2).mean().reshape(1) / 1e3
        self.loss_value = float(self.collective("loss_ar", "all_reduce", "world", loss)[0])

    # ------------------------------------------------------------------ the loop

    def run(self) -> int:
        log = self.log
        self.setup()
        wd = Watchdog(log, self.evidence, self.rank, float(self.scn["watchdog_s"]))
        status = "completed"
        error: BaseException | None = None
        self.profiler_start()
        log.info["t_profiler_started_ns"] = time.time_ns()
        try:
            for k in range(int(self.scn["iterations"])):
                self.iteration = k
                log.iteration = k
                self.executed = []
                step_num = int(self.prof.step_num) if self.scn["markers"] else None
                it: dict[str, Any] = {"index": k, "profiler_step": step_num, "start_ns": time.time_ns()}
                log.iterations.append(it)
                log.armed = True
                log.progress()
                self.straggle()
                getattr(self, f"iter_{self.scn['shape']}")(k)
                it["end_ns"] = time.time_ns()
                expected = [s.name for s in iteration_program(self.scn, self.rank, k)]
                if self.executed != expected:
                    log.event("program_mismatch", executed=list(self.executed), planned=expected)
                log.progress()
                log.flush()
                if self.rank == 0:
                    ms = (it["end_ns"] - it["start_ns"]) / 1e6
                    print(
                        f"iter {k + 1}/{self.scn['iterations']} loss {self.loss_value:.4f} ({ms:.1f} ms)",
                        flush=True,
                    )
                self.profiler_step()
                log.progress()
            log.iteration = None
            # the end-of-job metrics all_reduce: a rank that got through the loop while others failed
            # blocks here (and then times out) instead of exiting cleanly
            self.collective("final_allreduce", "all_reduce", "world", torch.tensor([self.loss_value]))
            log.armed = False
            dump_flight_recorder(self.evidence, "fr_final", self.rank, log)
        except Exception as e:
            status = "exception"
            error = e
            log.armed = False
            cur = log.current
            if cur is not None:
                cur["status"] = "failed"
                cur["end_ns"] = time.time_ns()
            lib = log.library_call
            log.info["exception"] = {
                "type": f"{type(e).__module__}.{type(e).__name__}",
                "message": str(e),
                "t_ns": time.time_ns(),
                "in_call": dict(cur) if cur else None,
                "in_library_call": dict(lib) if lib else None,
            }
            with open(self.evidence / f"rank{self.rank}_exception.txt", "w") as f:
                f.write(traceback.format_exc())
            dump_flight_recorder(self.evidence, "fr_after_error", self.rank, log)
        finally:
            wd.stop.set()
            try:
                self.profiler_stop()
            except Exception as e:
                log.event("profiler_stop_failed", error=repr(e))
        log.info["watchdog_fired"] = wd.fired
        log.flush(status)
        if status == "completed":
            dist.destroy_process_group()
            log.info["exit_ns"] = time.time_ns()
            log.flush(status)
            return 0
        self.exit_barrier()
        assert error is not None
        traceback.print_exception(error, file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        log.info["exit_ns"] = time.time_ns()
        log.flush(status)
        return 1

    def exit_barrier(self) -> None:
        """Wait (bounded) until every other rank has saved its evidence or is gone.

        A rank that closes its sockets early turns its peers' own timeouts into connection errors;
        waiting keeps every rank's own error. Files only, no sockets.
        """
        d = self.plog_dir / ".exit_barrier"
        d.mkdir(exist_ok=True)
        (d / str(self.rank)).touch()
        stop_s = float(self.fault.get("stop_s", 0.0)) if self.fault["kind"] == "frozen" else 0.0
        deadline = time.monotonic() + float(self.scn["timeout_s"]) + stop_s + 8.0
        while time.monotonic() < deadline:
            if all((d / str(r)).exists() or not _rank_alive(self.plog_dir, r) for r in range(self.world)):
                self.log.event("exit_barrier", all_ranks=True)
                return
            time.sleep(0.1)
        self.log.event("exit_barrier", all_ranks=False)


def _rank_alive(plog_dir: Path, rank: int) -> bool:
    """Whether ``rank``'s process still runs (same host), from the pid in its program log."""
    try:
        pid = int(json.loads((plog_dir / f"rank{rank}.json").read_text())["info"]["pid"])
    except (OSError, ValueError, KeyError):
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--scenario", required=True, type=Path)
    ap.add_argument("--evidence", required=True, type=Path)
    ap.add_argument("--program-log", required=True, type=Path)
    args = ap.parse_args(argv)
    scn = json.loads(args.scenario.read_text())
    args.evidence.mkdir(parents=True, exist_ok=True)
    args.program_log.mkdir(parents=True, exist_ok=True)
    job = Job(scn, args.evidence, args.program_log)
    code = job.run()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
