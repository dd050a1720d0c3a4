"""Replaying a canary on real collectives (``replay --physical``).

:func:`replay_physical` expands the canary into its program
(:mod:`.program`), starts one process per rank on this host
(:mod:`.worker`: ``torch.distributed`` with gloo, or NCCL on GPUs, the same
code), runs ``warmup`` + ``iterations`` iterations of the program with its
order, sizes, groups, gaps and per-rank arrival offsets, and times every
occurrence on every member. From the members' entries and exits it builds a
report in the model's layout (:mod:`commcanary.report` sections, samples
that satisfy the scheduler's equations, nothing hidden) whose backend says
``physical-measurement`` and names the engine, host and torch version, so
``compare`` gates on it as on a simulated report.

Every child is ended on every way out: a child that fails ends the others
and raises :class:`ChildFailed` (the command line's exit 4); a run past
``timeout_s`` ends them all. torch is the optional ``torch`` extra.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from commcanary import _core
from commcanary._types import Measurement
from commcanary.errors import CommCanaryError, InputError, OptionError
from commcanary.physical.program import load_program, write_program
from commcanary.replay import Report

__all__ = [
    "ENGINES",
    "ChildFailed",
    "MeasuredRun",
    "host_cpus",
    "load_program",
    "measured_run",
    "replay_physical",
]

#: The engines a physical replay runs on.
ENGINES = ("gloo", "nccl")


class ChildFailed(CommCanaryError):
    """A replay process died or failed; the others were ended."""


@dataclass(frozen=True)
class MeasuredRun:
    """A physical replay: its report and every member's raw times."""

    report: Report
    #: Readiness of each rank for each measured sample (ranks x samples): its
    #: due time plus its arrival offset, µs from the sample's iteration
    #: start; NaN where the rank is not a member.
    ready_us: npt.NDArray[np.float64]
    #: Entry of each rank into each measured sample (ranks x samples), µs
    #: from the sample's iteration start; NaN where the rank is not a member.
    enter_us: npt.NDArray[np.float64]
    #: Exit, likewise.
    exit_us: npt.NDArray[np.float64]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise OptionError("engine", f"must be one of {', '.join(ENGINES)}, got {engine!r}")
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise InputError("physical replay needs torch (pip install 'commcanary[torch]')") from None
    if not dist.is_available():
        raise InputError("this torch build has no torch.distributed")
    if engine == "gloo" and not dist.is_gloo_available():
        raise InputError("this torch build has no gloo backend")
    if engine == "nccl":
        if not dist.is_nccl_available():
            raise InputError("this torch build has no NCCL backend (a CPU-only build?)")
        if torch.cuda.device_count() < 1:
            raise OptionError("engine", "nccl needs GPUs, and none is visible")
    return str(torch.__version__)


def _run_children(directory: Path, nproc: int, engine: str, timeout_s: float) -> None:
    port = _free_port()
    argv = [sys.executable, "-m", "commcanary.physical.worker", str(directory)]
    logs = [open(directory / f"rank{r}.log", "wb") for r in range(nproc)]  # noqa: SIM115
    children = [
        subprocess.Popen(
            [*argv, str(r), str(nproc), str(port), engine], stdout=logs[r], stderr=subprocess.STDOUT
        )
        for r in range(nproc)
    ]
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            codes = [c.poll() for c in children]
            failed = [r for r, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                r = failed[0]
                raise ChildFailed(
                    f"replay process of rank {r} failed (exit {codes[r]}): {_last_line(directory, r)}"
                )
            if all(code == 0 for code in codes):
                return
            if time.monotonic() > deadline:
                raise InputError(
                    f"physical replay did not finish within {timeout_s:g} s; every process was ended"
                )
            time.sleep(0.05)
    finally:
        for c in children:
            if c.poll() is None:
                c.terminate()
        for c in children:
            try:
                c.wait(timeout=5)
            except subprocess.TimeoutExpired:
                c.kill()
                c.wait()
        for f in logs:
            f.close()


def _last_line(directory: Path, rank: int) -> str:
    text = (directory / f"rank{rank}.log").read_text(errors="replace").strip().splitlines()
    return text[-1][-300:] if text else "no output"


def replay_physical(
    canary: str | os.PathLike[str],
    *,
    engine: str = "gloo",
    nproc: int | None = None,
    iterations: int = 1,
    warmup: int = 1,
    compute_fill: str = "sleep",
    compute_fill_scale: float = 1.0,
    bytes_scale: float = 1.0,
    serialize_groups: bool = False,
    timeout_s: float = 600.0,
    include_samples: bool = True,
) -> MeasuredRun:
    """Run the canary at ``canary`` on ``nproc`` local processes (default:
    its world size) over ``engine`` and measure every occurrence.

    ``warmup`` iterations run first and are not measured; ``compute_fill``
    (``sleep`` or ``spin``) fills each gap, scaled by ``compute_fill_scale``;
    every message is ``bytes_scale`` times its recorded size;
    ``serialize_groups`` makes every rank wait (a world barrier) whenever the
    program moves to another communicator, so groups never overlap.
    Raises :class:`InputError` for fewer processes than the canary's ranks,
    an op torch cannot run, an engine this torch lacks, or a run past
    ``timeout_s``; :class:`ChildFailed` when a process fails.
    """
    name = os.fspath(canary)
    program = load_program(name)
    nproc = program.world if nproc is None else nproc
    if nproc < program.world:
        raise OptionError("nproc", f"{nproc} is smaller than the canary's world size ({program.world} ranks)")
    if iterations < 1:
        raise OptionError("iterations", "must be at least 1")
    if warmup < 0:
        raise OptionError("warmup", "must be at least 0")
    if compute_fill not in ("sleep", "spin"):
        raise OptionError("compute_fill", f"must be sleep or spin, got {compute_fill!r}")
    if not compute_fill_scale >= 0:
        raise OptionError("compute_fill_scale", f"must be non-negative, got {compute_fill_scale}")
    if not 0 < bytes_scale <= 1e6:
        raise OptionError("bytes_scale", f"must be positive and at most 1e6, got {bytes_scale}")
    torch_version = _check_engine(engine)
    with tempfile.TemporaryDirectory(prefix="commcanary-physical-") as tmp:
        directory = Path(tmp)
        write_program(program, directory)
        options = {
            "iterations": iterations,
            "warmup": warmup,
            "compute_fill": compute_fill,
            "compute_fill_scale": compute_fill_scale,
            "bytes_scale": bytes_scale,
            "serialize_groups": serialize_groups,
            "timeout_s": timeout_s,
        }
        (directory / "options.json").write_text(json.dumps(options))
        _run_children(directory, nproc, engine, timeout_s)
        ready, enter, leave, cpu = [], [], [], []
        for r in range(nproc):
            with np.load(directory / f"rank{r}.npz") as z:
                ready.append(z["ready"])
                enter.append(z["enter"])
                leave.append(z["exit"])
                cpu.append(z["cpu"])
    host = platform.node() or "localhost"
    measurement: Measurement = {
        "engine": engine,
        "host": host,
        "torch_version": torch_version,
        "nproc": nproc,
        "iterations": iterations,
        "warmup": warmup,
        "compute_fill": compute_fill,
        "compute_fill_scale": compute_fill_scale,
        "bytes_scale": bytes_scale,
    }
    return measured_run(
        name,
        ready,
        enter,
        leave,
        measurement,
        include_samples=include_samples,
        host_cpus=host_cpus(),
        cpu=cpu if engine == "gloo" else None,
    )


def rank_cpu_share(
    cpu: list[npt.NDArray[np.float64]],
    enter: list[npt.NDArray[np.float64]],
    leave: list[npt.NDArray[np.float64]],
    warmup: int,
) -> float:
    """The share of a core a rank kept busy inside its collectives: the
    ranks' process CPU time inside the measured calls over their wall time
    there (0 when nothing was timed), rounded to 4 digits, at most 1."""
    busy = sum(float(np.nansum(c[warmup:])) for c in cpu)
    wall = sum(float(np.nansum(b[warmup:] - a[warmup:])) for a, b in zip(enter, leave, strict=True))
    if not wall > 0 or not busy > 0:
        return 0.0
    return round(min(1.0, busy / wall), 4)


def host_cpus() -> int:
    """The cores this process (and the ranks it starts) may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 0


def measured_run(
    name: str,
    ready: list[npt.NDArray[np.float64]],
    enter: list[npt.NDArray[np.float64]],
    leave: list[npt.NDArray[np.float64]],
    measurement: Measurement,
    *,
    include_samples: bool = True,
    host_cpus: int = 0,
    cpu: list[npt.NDArray[np.float64]] | None = None,
) -> MeasuredRun:
    """The report of a run from each rank's readiness, entries and exits
    (iterations x occurrences, warm-up first) and how it was made (engine,
    host, torch version, processes, iterations, warm-up, fill, fill scale,
    bytes scale), with ``host_cpus`` the cores the ranks shared on their one
    host (0: unknown, or several hosts), and ``cpu`` each rank's process CPU
    time inside each call, where the ranks' collectives run on the host's
    cores (gloo on one host). Arrivals are readiness, as in the model: a
    member kept late by earlier work queues."""
    warmup = measurement["warmup"]
    ready_us = np.vstack([e[warmup:].reshape(-1) for e in ready])
    enter_us = np.vstack([e[warmup:].reshape(-1) for e in enter])
    exit_us = np.vstack([e[warmup:].reshape(-1) for e in leave])
    first = np.nanmin(ready_us, axis=0)
    last = np.nanmax(ready_us, axis=0)
    completion = np.nanmax(exit_us, axis=0)
    wait = np.nanmean(last[None, :] - ready_us, axis=0)
    raw = _core.measured_report(
        name,
        first_arrival_us=first,
        last_arrival_us=last,
        last_entry_us=np.nanmax(enter_us, axis=0),
        completion_us=completion,
        avg_rank_wait_us=wait,
        measurement=measurement,
        include_samples=include_samples,
        host_cpus=host_cpus,
        rank_cpu_share=0.0 if cpu is None else rank_cpu_share(cpu, enter, leave, warmup),
    )
    report = Report.of_run(raw, name, has_samples=include_samples)
    return MeasuredRun(report=report, ready_us=ready_us, enter_us=enter_us, exit_us=exit_us)
