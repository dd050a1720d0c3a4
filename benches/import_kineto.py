#!/usr/bin/env python3
"""Whole-command benchmark of ``commcanary import-kineto`` on large multi-rank Kineto traces, against HTA.

Usage::

    python benches/import_kineto.py [--size-mb 250] [--peer-size-mb 25] [--ranks 4]
        [--fixture DIR] [--workdir /tmp/commcanary-bench] [--commcanary CMD]
        [--repeat 1] [--peer-full] [--peer-timeout 1200] [--json OUT]
    python benches/import_kineto.py --generate        # only build the trace sets

Stages:

1. **Generate** (cached). From the real 4-rank gloo fixture
   (``../shared/fixtures/kineto/gloo_tp4_decode/rank{r}.json.gz`` relative to
   the repository root, or ``--fixture DIR``) it writes one set of per-rank
   plain-JSON traces of ``--size-mb`` MB each and one of ``--peer-size-mb`` MB
   each, as ``<workdir>/kineto-r<N>-<S>mb/rank{r}.json``. Each rank keeps its
   header members (``distributedInfo``, ``baseTimeNanoseconds``, ...) in their
   order and its metadata events (``ph: "M"``) once; every other event is
   written ``k`` times, copy ``c`` shifted in ``ts`` by ``c * span``, where
   ``span`` is the extent (max ``ts + dur`` - min ``ts``) of the non-metadata
   events over all ranks plus ``--gap-us``, rounded up to whole microseconds,
   the same shift on every rank. ``ProfilerStep#N`` becomes
   ``ProfilerStep#(N + c * steps_per_copy)``; integer ``args["External id"]``,
   ``args["Ev Idx"]``, ``args["correlation"]`` and top-level ``id`` get
   ``c * stride`` added, one stride for all of them (so links such as a
   kernel's External id or a flow's id still match) and large enough that the
   copies never collide. The profiler's session events, the
   ``PyTorch Profiler (0)`` span (``cat: "Trace"``) and the
   ``Iteration Start`` / ``Record Window End`` instants, are written once: the
   span stretched over every copy, the window end moved to the last copy.
   ``k`` is chosen so each file is close to the target size. Events are
   encoded one by one with ``json.dumps`` and written copy by copy, so memory
   stays at one copy's text. A file appears under its final name only when
   complete (written as ``*.json.tmp``, then renamed), and a marker next to the
   directory (``kineto-r<N>-<S>mb.done``, not ``*.json``) records the
   parameters and file sizes; a set whose marker matches is not rebuilt.
   The trace directories hold nothing but the rank files: HTA parses every
   ``*.json`` / ``*.json.gz`` in the directory it is given.
2. **Ours** at every generated size: ``commcanary import-kineto <dir> -o OUT
   --no-cache`` (cold, ``--repeat`` times), then with ``--cache-dir
   <workdir>/cache`` twice after emptying that cache (the first run fills it,
   the second is the cache hit, ``--repeat`` times). A failing command is
   reported with its last stderr line and the benchmark goes on.
3. **Peer**: HolisticTraceAnalysis in its own virtualenv
   (``<workdir>/hta-venv``, created and filled with ``pip install
   HolisticTraceAnalysis`` on first use; never a project dependency), run as
   ``TraceAnalysis(trace_dir=DIR)`` in a child process at ``--peer-size-mb``,
   and at ``--size-mb`` too with ``--peer-full``, limited to
   ``--peer-timeout`` seconds. HTA takes each file's rank from its
   ``distributedInfo``; file names do not matter.
4. **Output**: a table on stdout (wall seconds, peak memory, the ratios at
   the sizes both tools ran, the cache-hit time) with the issue's targets and
   PASS/FAIL, and with ``--json OUT`` the same numbers as JSON. Progress goes
   to stderr.

Measurement. Every command is a child process in its own session, waited for
with ``os.wait4``: wall time is process start to exit, and ``ru_maxrss`` is the
peak RSS of the largest single process among the child and the descendants it
reaped. HTA parses ranks in a ``multiprocessing`` pool, so that figure misses
the workers running side by side; a sampler thread therefore sums the PSS of
every live process of the child's session every ``--sample-interval``
seconds. The *peak MiB* used in the ratios and targets is the larger of the
two. The machine is shared and noisy: read ratios, not absolute seconds. No
test asserts on timings.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, TypeGuard

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_FIXTURE = ROOT.parent / "shared" / "fixtures" / "kineto" / "gloo_tp4_decode"
DEFAULT_WORKDIR = Path("/tmp/commcanary-bench")
GENERATOR_VERSION = 1
MB = 1_000_000
MIB = 1024 * 1024

STEP_RE = re.compile(r"ProfilerStep#(\d+)")
ARG_ID_FIELDS = ("External id", "Ev Idx", "correlation")
SESSION_INSTANTS = ("Iteration Start: PyTorch Profiler", "Record Window End")

# The issue's targets.
TARGET_SIZE_MB, TARGET_RANKS = 250.0, 4
TARGET_WALL_S, TARGET_RSS_MIB = 8.0, 1024.0
TARGET_SPEEDUP, TARGET_MEMORY_RATIO = 10.0, 0.2
TARGET_CACHE_HIT_S = 1.0


def log(message: str) -> None:
    """A progress line on stderr."""
    print(f"[import-kineto bench] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- generator


@dataclass(frozen=True)
class Plan:
    """How every rank is replicated: the same shift, renumbering and id stride on every rank."""

    copies: int
    span_ns: int  # a multiple of 1000: integer-microsecond ts stay integers
    steps_per_copy: int
    id_stride: int
    extent_ns: int  # max(ts + dur) - min(ts) of the original non-metadata events


@dataclass(frozen=True)
class Template:
    """One original event and what changes per copy."""

    event: dict[str, Any]
    ts_ns: int | None  # None: the event has no numeric ts
    ts_int: bool
    step: int | None
    arg_ids: tuple[str, ...]
    has_id: bool


@dataclass
class RankSource:
    """One rank of the fixture: its top-level members in order and its events, classified."""

    rank: int
    members: list[tuple[str, Any]]  # ("traceEvents", None) marks where the events go
    metadata: list[dict[str, Any]] = field(default_factory=list)
    session: list[dict[str, Any]] = field(default_factory=list)
    replicated: list[Template] = field(default_factory=list)
    order: list[tuple[str, int]] = field(default_factory=list)  # (kind, index) in original order


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _ns(us: float) -> int:
    """Microseconds (Kineto's ts/dur, at most three decimals) to integer nanoseconds."""
    return round(us * 1000)


def _is_session_event(event: dict[str, Any]) -> bool:
    if event.get("ph") == "X" and event.get("cat") == "Trace":
        return True
    return event.get("ph") == "i" and event.get("name") in SESSION_INSTANTS


def fixture_files(fixture: Path, ranks: int) -> list[Path]:
    """``rank{r}.json.gz`` (or ``rank{r}.json``) for r < ranks; exit with a message if one is missing."""
    paths = []
    for rank in range(ranks):
        for name in (f"rank{rank}.json.gz", f"rank{rank}.json"):
            if (fixture / name).is_file():
                paths.append(fixture / name)
                break
        else:
            sys.exit(f"fixture rank {rank} not found in {fixture} (rank{rank}.json.gz or rank{rank}.json)")
    return paths


def _template(event: dict[str, Any]) -> Template:
    ts = event.get("ts")
    name = event.get("name")
    match = STEP_RE.fullmatch(name) if isinstance(name, str) else None
    args = event.get("args")
    arg_ids = tuple(k for k in ARG_ID_FIELDS if isinstance(args, dict) and _is_int(args.get(k)))
    return Template(
        event=event,
        ts_ns=_ns(ts) if _is_number(ts) else None,
        ts_int=_is_int(ts),
        step=int(match.group(1)) if match else None,
        arg_ids=arg_ids,
        has_id=_is_int(event.get("id")),
    )


def load_rank(path: Path, rank: int) -> RankSource:
    """Read one fixture rank and sort its events into metadata, session and replicated ones."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        doc = json.load(handle)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        sys.exit(f"{path}: not a Kineto trace (an object with a traceEvents list)")
    source = RankSource(rank=rank, members=[(k, None if k == "traceEvents" else v) for k, v in doc.items()])
    for event in doc["traceEvents"]:
        if not isinstance(event, dict):
            continue
        if event.get("ph") == "M":
            source.order.append(("metadata", len(source.metadata)))
            source.metadata.append(event)
        elif _is_session_event(event):
            source.order.append(("session", len(source.session)))
            source.session.append(event)
        else:
            source.order.append(("replicated", len(source.replicated)))
            source.replicated.append(_template(event))
    return source


def _extent_ns(sources: list[RankSource]) -> tuple[int, int]:
    """(min ts, max ts + dur) in ns over every non-metadata event of every rank."""
    starts: list[int] = []
    ends: list[int] = []
    for source in sources:
        events = [t.event for t in source.replicated] + source.session
        for event in events:
            ts, dur = event.get("ts"), event.get("dur", 0)
            if _is_number(ts):
                starts.append(_ns(ts))
                ends.append(_ns(ts) + (_ns(dur) if _is_number(dur) else 0))
    if not starts:
        sys.exit("the fixture has no timed events to replicate")
    return min(starts), max(ends)


def _id_stride(sources: list[RankSource]) -> int:
    values: list[int] = []
    for source in sources:
        for t in source.replicated:
            values.extend(t.event["args"][k] for k in t.arg_ids)
            if t.has_id:
                values.append(t.event["id"])
    return max(values) - min(values) + 1 if values else 0


def _encoded_copy_bytes(source: RankSource) -> int:
    return sum(len(json.dumps(t.event)) + 2 for t in source.replicated)


def make_plan(sources: list[RankSource], size_mb: float, gap_us: float) -> Plan:
    """The shift, step renumbering, id stride and copy count shared by every rank."""
    start, end = _extent_ns(sources)
    span_ns = -(-(end - start + _ns(gap_us)) // 1000) * 1000
    steps = [t.step for s in sources for t in s.replicated if t.step is not None]
    steps_per_copy = max(steps) - min(steps) + 1 if steps else 0
    per_copy = statistics.fmean(_encoded_copy_bytes(s) for s in sources)
    copies = max(1, round(size_mb * MB / per_copy))
    return Plan(copies, span_ns, steps_per_copy, _id_stride(sources), end - start)


def _copy_event(t: Template, copy: int, plan: Plan) -> dict[str, Any]:
    event = dict(t.event)
    if t.ts_ns is not None:
        shift = copy * plan.span_ns
        event["ts"] = event["ts"] + shift // 1000 if t.ts_int else (t.ts_ns + shift) / 1000
    if t.step is not None:
        event["name"] = f"ProfilerStep#{t.step + copy * plan.steps_per_copy}"
    if t.arg_ids:
        args = dict(event["args"])
        for key in t.arg_ids:
            args[key] += copy * plan.id_stride
        event["args"] = args
    if t.has_id:
        event["id"] += copy * plan.id_stride
    return event


def _session_event(event: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """Written once: the profiler span covers every copy, the window end moves to the last one."""
    out = dict(event)
    stretch = (plan.copies - 1) * plan.span_ns
    if out.get("ph") == "X" and _is_number(out.get("dur")):
        out["dur"] = (_ns(out["dur"]) + stretch) / 1000
    elif out.get("name") == "Record Window End" and _is_number(out.get("ts")):
        out["ts"] = (_ns(out["ts"]) + stretch) / 1000
    return out


def _write_events(handle: IO[str], source: RankSource, plan: Plan) -> int:
    """The traceEvents array, one copy at a time; returns the number of events written."""
    handle.write("[\n")
    count = 0
    for copy in range(plan.copies):
        lines: list[str] = []
        if copy == 0:
            for kind, index in source.order:
                if kind == "metadata":
                    lines.append(json.dumps(source.metadata[index]))
                elif kind == "session":
                    lines.append(json.dumps(_session_event(source.session[index], plan)))
                else:
                    lines.append(json.dumps(_copy_event(source.replicated[index], 0, plan)))
        else:
            lines = [json.dumps(_copy_event(t, copy, plan)) for t in source.replicated]
        if lines:
            handle.write((",\n" if count else "") + ",\n".join(lines))
        count += len(lines)
    handle.write("\n]")
    return count


def write_rank(source: RankSource, plan: Plan, path: Path) -> tuple[int, int]:
    """Write one rank's trace atomically (``*.json.tmp``, then renamed); returns (events, bytes)."""
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
        handle.write("{")
        for position, (key, value) in enumerate(source.members):
            handle.write(("," if position else "") + "\n  " + json.dumps(key) + ": ")
            if key == "traceEvents":
                count = _write_events(handle, source, plan)
            else:
                handle.write(json.dumps(value))
        handle.write("\n}\n")
    os.replace(tmp, path)
    return count, path.stat().st_size


@dataclass(frozen=True)
class TraceSet:
    """One generated set of per-rank traces."""

    size_mb: float
    directory: Path
    files: list[Path]
    total_bytes: int
    events: int
    copies: int


def _set_name(ranks: int, size_mb: float) -> str:
    return f"kineto-r{ranks}-{size_mb:g}mb"


def _marker_params(inputs: list[Path], size_mb: float, gap_us: float) -> dict[str, Any]:
    digest = hashlib.sha256()
    for path in inputs:
        digest.update(path.read_bytes())
    return {
        "generator_version": GENERATOR_VERSION,
        "fixture_sha256": digest.hexdigest(),
        "ranks": len(inputs),
        "size_mb": size_mb,
        "gap_us": gap_us,
    }


def _cached_set(marker: Path, directory: Path, params: dict[str, Any]) -> TraceSet | None:
    """The set the marker describes, if its parameters match and every file has its recorded size."""
    try:
        recorded = json.loads(marker.read_text())
        if recorded["params"] != params:
            return None
        sizes: dict[str, int] = recorded["files"]
        events, copies = int(recorded["events"]), int(recorded["copies"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    files = [directory / f"rank{rank}.json" for rank in range(params["ranks"])]
    if set(sizes) != {f.name for f in files}:
        return None
    if any(not f.is_file() or f.stat().st_size != sizes[f.name] for f in files):
        return None
    return TraceSet(params["size_mb"], directory, files, sum(sizes.values()), events, copies)


def generate(
    fixture: Path, ranks: int, size_mb: float, gap_us: float, workdir: Path, force: bool
) -> TraceSet:
    """Build (or reuse) ``<workdir>/kineto-r<N>-<S>mb/rank{r}.json``."""
    inputs = fixture_files(fixture, ranks)
    directory = workdir / _set_name(ranks, size_mb)
    marker = workdir / (_set_name(ranks, size_mb) + ".done")
    params = _marker_params(inputs, size_mb, gap_us)
    cached = None if force else _cached_set(marker, directory, params)
    if cached is not None:
        log(f"reusing {directory} ({cached.total_bytes / MB:,.1f} MB, {cached.copies} copies per rank)")
        return cached
    marker.unlink(missing_ok=True)
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    sources = [load_rank(path, rank) for rank, path in enumerate(inputs)]
    plan = make_plan(sources, size_mb, gap_us)
    log(
        f"generating {directory}: {ranks} ranks x {plan.copies} copies, span {plan.span_ns / 1e9:.3f} s, "
        f"{plan.steps_per_copy} steps and id stride {plan.id_stride} per copy"
    )
    files, sizes, events = [], {}, 0
    for source in sources:
        start = time.perf_counter()
        path = directory / f"rank{source.rank}.json"
        count, size = write_rank(source, plan, path)
        files.append(path)
        sizes[path.name] = size
        events += count
        log(f"  {path.name}: {count:,} events, {size / MB:,.1f} MB in {time.perf_counter() - start:.1f} s")
    record = {"params": params, "files": sizes, "events": events, "copies": plan.copies, "plan": asdict(plan)}
    marker.write_text(json.dumps(record, indent=1) + "\n")
    return TraceSet(size_mb, directory, files, sum(sizes.values()), events, plan.copies)


# --------------------------------------------------------------------------- measuring


def _session_members(session: int) -> list[int]:
    """Live pids whose session id is ``session`` (the measured child and everything it started)."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 3 and int(fields[3]) == session:
            pids.append(int(entry.name))
    return pids


def _pss_bytes(pid: int) -> int:
    """PSS of one process (shared pages split among sharers); RSS where smaps_rollup is unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


class TreeSampler(threading.Thread):
    """Samples the summed PSS and the process count of a session until stopped."""

    def __init__(self, session: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.session, self.interval = session, interval
        self.peak_bytes, self.peak_processes = 0, 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            pids = _session_members(self.session)
            self.peak_bytes = max(self.peak_bytes, sum(_pss_bytes(pid) for pid in pids))
            self.peak_processes = max(self.peak_processes, len(pids))
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


@dataclass
class Measured:
    """One child process: exit status, wall time and memory."""

    argv: list[str]
    rc: int | None
    wall_s: float
    maxrss_mib: float  # os.wait4 ru_maxrss: the largest single process
    tree_pss_mib: float | None  # sampled peak of the session's summed PSS; None when sampling is off
    processes: int
    timed_out: bool
    stdout: str
    stderr_tail: str

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out

    @property
    def peak_mib(self) -> float:
        return max(self.maxrss_mib, self.tree_pss_mib or 0.0)


def _kill_session(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_measured(
    argv: list[str], timeout_s: float, interval: float, env: dict[str, str] | None = None
) -> Measured:
    """Run ``argv`` in its own session; wall time, wait4 rusage, sampled session PSS; killed at the timeout."""
    timed_out = threading.Event()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, start_new_session=True)
        except OSError as exc:
            return Measured(argv, None, 0.0, 0.0, None, 0, False, "", str(exc))
        sampler = TreeSampler(proc.pid, interval) if interval > 0 else None
        if sampler is not None:
            sampler.start()

        def expire() -> None:
            timed_out.set()
            _kill_session(proc.pid)

        timer = threading.Timer(timeout_s, expire)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if sampler is not None:
            sampler.stop()
        _kill_session(proc.pid)  # leftovers of a killed or careless child (e.g. pool workers)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr_tail = err.read().decode(errors="replace")[-4000:]
    return Measured(
        argv=argv,
        rc=proc.returncode,
        wall_s=wall,
        maxrss_mib=usage.ru_maxrss / 1024.0,
        tree_pss_mib=sampler.peak_bytes / MIB if sampler is not None else None,
        processes=sampler.peak_processes if sampler is not None else 1,
        timed_out=timed_out.is_set(),
        stdout=stdout,
        stderr_tail=stderr_tail,
    )


def _failure(run: Measured, timeout_s: float) -> str:
    if run.timed_out:
        return f"timed out after {timeout_s:g} s"
    return "could not start" if run.rc is None else f"exited {run.rc}"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


# --------------------------------------------------------------------------- the two tools


@dataclass
class Row:
    """One line of the table: a tool's stage at one size, over its runs."""

    tool: str
    stage: str
    size_mb: float
    total_mb: float
    runs: list[Measured]
    note: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(run.ok for run in self.runs)

    @property
    def wall_s(self) -> float | None:
        return statistics.median(r.wall_s for r in self.runs) if self.ok else None

    @property
    def peak_mib(self) -> float | None:
        return max(r.peak_mib for r in self.runs) if self.ok else None

    def as_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "stage": self.stage,
            "size_mb_per_rank": self.size_mb,
            "total_mb": round(self.total_mb, 3),
            "ok": self.ok,
            "note": self.note,
            "wall_s": self.wall_s,
            "peak_mib": self.peak_mib,
            "runs": [
                {
                    "argv": r.argv,
                    "rc": r.rc,
                    "timed_out": r.timed_out,
                    "wall_s": round(r.wall_s, 4),
                    "maxrss_mib": round(r.maxrss_mib, 1),
                    "tree_pss_mib": None if r.tree_pss_mib is None else round(r.tree_pss_mib, 1),
                    "processes": r.processes,
                }
                for r in self.runs
            ],
        }


def find_commcanary(explicit: str | None) -> list[str] | None:
    """``--commcanary CMD`` (split like a shell), else ``commcanary`` on PATH, else ``<repo>/.venv/bin``."""
    if explicit:
        return shlex.split(explicit)
    found = shutil.which("commcanary")
    if found:
        return [found]
    local = ROOT / ".venv" / "bin" / "commcanary"
    return [str(local)] if local.is_file() else None


def _run_stage(name: str, argv: list[str], repeat: int, trace_set: TraceSet, args: argparse.Namespace) -> Row:
    row = Row("commcanary", name, trace_set.size_mb, trace_set.total_bytes / MB, [])
    for attempt in range(repeat):
        log(f"ours {name} at {trace_set.size_mb:g} MB/rank, run {attempt + 1}/{repeat}")
        run = run_measured(argv, args.ours_timeout, args.sample_interval)
        row.runs.append(run)
        if not run.ok:
            why = _failure(run, args.ours_timeout)
            row.note = f"{why}: {_last_line(run.stderr_tail)}"
            log(
                f"commcanary import-kineto {why} ({shlex.join(argv)}): {_last_line(run.stderr_tail)}. "
                "This build may not take a trace directory / several ranks, --no-cache or --cache-dir yet; "
                "going on."
            )
            break
        log(f"  {run.wall_s:.3f} s, {run.peak_mib:.1f} MiB")
    return row


def run_ours(cli: list[str], trace_set: TraceSet, args: argparse.Namespace) -> list[Row]:
    """Cold import (``--no-cache``), cache fill and cache hit (``--cache-dir``) at one size."""
    out_dir = args.workdir / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    cache_dir = args.workdir / "cache"
    name = trace_set.directory.name
    inputs = [str(f) for f in trace_set.files] if args.pass_files else [str(trace_set.directory)]
    base = [*cli, "import-kineto", *inputs]
    cold = [*base, "-o", str(out_dir / f"{name}.cold.trace.json"), "--no-cache"]
    cached = [*base, "-o", str(out_dir / f"{name}.cached.trace.json"), "--cache-dir", str(cache_dir)]
    rows = [_run_stage("cold", cold, args.repeat, trace_set, args)]
    if cache_dir.exists():
        shutil.rmtree(cache_dir)
    rows.append(_run_stage("cache fill", cached, 1, trace_set, args))
    rows.append(_run_stage("cache hit", cached, args.repeat, trace_set, args))
    return rows


PEER_SCRIPT = """\
import json, sys, time
start = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
imported = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
loaded = time.perf_counter()
traces = getattr(getattr(analysis, "t", None), "traces", {}) or {}
print(json.dumps({
    "ranks": sorted(int(r) for r in traces),
    "rows": int(sum(len(df) for df in traces.values())),
    "import_s": imported - start,
    "load_s": loaded - imported,
}))
"""


def _peer_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def ensure_hta(venv: Path, spec: str) -> tuple[Path | None, str]:
    """The HTA virtualenv's python (created and filled on first use), or None and why not."""
    python = venv / "bin" / "python"
    probe = [
        str(python),
        "-c",
        "import hta.trace_analysis, importlib.metadata as m; print(m.version('HolisticTraceAnalysis'))",
    ]
    if python.is_file():
        done = subprocess.run(probe, capture_output=True, text=True, env=_peer_env(), check=False)
        if done.returncode == 0:
            return python, done.stdout.strip()
    log(f"creating {venv} and installing {spec} (a few minutes; bench only, not a project dependency)")
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        [str(python), "-m", "pip", "install", "--quiet", spec],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, env=_peer_env(), check=False)
        if done.returncode != 0:
            return None, f"{shlex.join(step)} failed: {_last_line(done.stderr or done.stdout)}"
    done = subprocess.run(probe, capture_output=True, text=True, env=_peer_env(), check=False)
    if done.returncode != 0:
        return None, f"HTA installed but does not import: {_last_line(done.stderr)}"
    return python, done.stdout.strip()


def run_peer(python: Path, version: str, trace_set: TraceSet, args: argparse.Namespace) -> Row:
    """``TraceAnalysis(trace_dir=DIR)`` in a child process, once, limited to ``--peer-timeout``."""
    log(f"HTA {version} at {trace_set.size_mb:g} MB/rank (limit {args.peer_timeout:g} s)")
    argv = [str(python), "-c", PEER_SCRIPT, str(trace_set.directory)]
    run = run_measured(argv, args.peer_timeout, args.sample_interval, env=_peer_env())
    row = Row(f"HTA {version}", "TraceAnalysis", trace_set.size_mb, trace_set.total_bytes / MB, [run])
    if run.ok:
        try:
            info = json.loads(_last_line(run.stdout))
            row.note = f"ranks {info['ranks']}, {info['rows']:,} rows, import {info['import_s']:.1f} s"
        except (ValueError, KeyError, TypeError):
            row.note = "loaded (no summary line)"
        log(f"  {run.wall_s:.1f} s, {run.peak_mib:.1f} MiB ({run.processes} processes); {row.note}")
    else:
        why = _failure(run, args.peer_timeout)
        row.note = f"{why}: {_last_line(run.stderr_tail)}"
        log(f"HTA {why}: {_last_line(run.stderr_tail)}")
    return row


# --------------------------------------------------------------------------- report


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_rows(rows: list[Row]) -> None:
    header = (
        f"{'tool':18} {'stage':13} {'MB/rank':>8} {'total MB':>9} {'wall s':>9} {'peak MiB':>9} "
        f"{'wait4 MiB':>9} {'PSS MiB':>9} {'procs':>5}  result"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        wait4 = max(r.maxrss_mib for r in row.runs) if row.ok else None
        sampled = [r.tree_pss_mib for r in row.runs if r.tree_pss_mib is not None]
        pss = max(sampled) if row.ok and sampled else None
        result = ("ok" if row.ok else "FAILED") + (f" ({row.note})" if row.note else "")
        print(
            f"{row.tool:18} {row.stage:13} {row.size_mb:>8g} {row.total_mb:>9.1f} {_fmt(row.wall_s, '.3f'):>9} "
            f"{_fmt(row.peak_mib, '.1f'):>9} {_fmt(wait4, '.1f'):>9} {_fmt(pss, '.1f'):>9} "
            f"{max(r.processes for r in row.runs) if row.runs else 0:>5}  {result}"
        )


def ratios(rows: list[Row]) -> list[dict[str, Any]]:
    """Speed-up (peer wall / ours wall) and memory ratio (ours / peer) where both ran at one size."""
    out = []
    for peer in (r for r in rows if r.tool.startswith("HTA") and r.ok):
        ours = next(
            (r for r in rows if r.tool == "commcanary" and r.stage == "cold" and r.size_mb == peer.size_mb),
            None,
        )
        if ours is None or not ours.wall_s or not ours.peak_mib or not peer.wall_s or not peer.peak_mib:
            continue
        out.append(
            {
                "size_mb_per_rank": peer.size_mb,
                "ours_wall_s": ours.wall_s,
                "peer_wall_s": peer.wall_s,
                "speedup": peer.wall_s / ours.wall_s,
                "ours_peak_mib": ours.peak_mib,
                "peer_peak_mib": peer.peak_mib,
                "memory_ratio": ours.peak_mib / peer.peak_mib,
            }
        )
    return out


def _verdict(value: float | None, limit: float, at_most: bool) -> str:
    if value is None:
        return "UNTESTED"
    return "PASS" if (value <= limit if at_most else value >= limit) else "FAIL"


def targets(rows: list[Row], pairs: list[dict[str, Any]], size_mb: float, ranks: int) -> list[dict[str, Any]]:
    """The issue's targets next to what was measured."""

    def find(stage: str) -> Row | None:
        return next(
            (r for r in rows if r.tool == "commcanary" and r.stage == stage and r.size_mb == size_mb), None
        )

    at = f"{ranks} x {size_mb:g} MB"
    note = "" if (size_mb, ranks) == (TARGET_SIZE_MB, TARGET_RANKS) else " (target set for 4 x 250 MB)"
    cold, hit = find("cold"), find("cache hit")
    items = [
        (f"import {at} cold: wall{note}", cold.wall_s if cold else None, TARGET_WALL_S, True, "s"),
        (
            f"import {at} cold: peak memory{note}",
            cold.peak_mib if cold else None,
            TARGET_RSS_MIB,
            True,
            "MiB",
        ),
        (f"cache hit {at}: wall{note}", hit.wall_s if hit else None, TARGET_CACHE_HIT_S, True, "s"),
    ]
    if not pairs:
        items.append(("speed-up vs HTA (same size)", None, TARGET_SPEEDUP, False, "x"))
        items.append(("memory vs HTA (same size)", None, TARGET_MEMORY_RATIO, True, "x"))
    for pair in pairs:
        at_peer = f"{ranks} x {pair['size_mb_per_rank']:g} MB"
        items.append((f"speed-up vs HTA at {at_peer}", pair["speedup"], TARGET_SPEEDUP, False, "x"))
        items.append((f"memory vs HTA at {at_peer}", pair["memory_ratio"], TARGET_MEMORY_RATIO, True, "x"))
    return [
        {
            "target": name,
            "value": value,
            "limit": limit,
            "at_most": at_most,
            "unit": unit,
            "verdict": _verdict(value, limit, at_most),
        }
        for name, value, limit, at_most, unit in items
    ]


def print_report(rows: list[Row], pairs: list[dict[str, Any]], goals: list[dict[str, Any]]) -> None:
    print()
    print_rows(rows)
    print()
    if pairs:
        print(
            f"{'MB/rank':>8} {'ours s':>9} {'HTA s':>9} {'speed-up':>9} {'ours MiB':>9} {'HTA MiB':>9} {'ours/HTA':>9}"
        )
        for p in pairs:
            print(
                f"{p['size_mb_per_rank']:>8g} {p['ours_wall_s']:>9.3f} {p['peer_wall_s']:>9.2f} "
                f"{p['speedup']:>8.1f}x {p['ours_peak_mib']:>9.1f} {p['peer_peak_mib']:>9.1f} {p['memory_ratio']:>9.3f}"
            )
    else:
        print("no size where both tools ran: no ratios")
    print()
    print(f"{'target':62} {'measured':>12} {'limit':>12}  verdict")
    for g in goals:
        unit, spec = g["unit"], {"s": ".3f", "MiB": ".1f"}.get(g["unit"], ".2f")
        value = "-" if g["value"] is None else format(g["value"], spec) + ("x" if unit == "x" else f" {unit}")
        limit = ("<= " if g["at_most"] else ">= ") + f"{g['limit']:g}" + ("x" if unit == "x" else f" {unit}")
        print(f"{g['target']:62} {value:>12} {limit:>12}  {g['verdict']}")


# --------------------------------------------------------------------------- main


def _add_trace_options(ap: argparse.ArgumentParser) -> None:
    gen = ap.add_argument_group("traces")
    gen.add_argument(
        "--fixture",
        type=Path,
        default=DEFAULT_FIXTURE,
        help="Directory with rank{r}.json[.gz] of the real trace to replicate (default: %(default)s).",
    )
    gen.add_argument(
        "--ranks",
        type=int,
        default=4,
        help="Ranks to generate: the first N of the fixture, headers unchanged (default: %(default)s).",
    )
    gen.add_argument(
        "--size-mb",
        type=float,
        default=250.0,
        help="Target size of each rank's file in MB (10^6 bytes) for ours (default: %(default)s).",
    )
    gen.add_argument(
        "--peer-size-mb",
        type=float,
        default=25.0,
        help="Size per rank of the set HTA runs on (default: %(default)s); ours runs on it too, for the ratios.",
    )
    gen.add_argument(
        "--gap-us",
        type=float,
        default=1000.0,
        help="Gap added between copies, microseconds (default: %(default)s).",
    )
    gen.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help="Where traces, outputs, the cache and the HTA venv live; keep it outside the repository (default: %(default)s).",
    )
    gen.add_argument(
        "--generate", action="store_true", help="Only build (or reuse) the trace sets, then exit."
    )
    gen.add_argument(
        "--regenerate", action="store_true", help="Rebuild the trace sets even if their markers match."
    )


def _add_tool_options(ap: argparse.ArgumentParser) -> None:
    ours = ap.add_argument_group("commcanary")
    ours.add_argument(
        "--commcanary",
        metavar="CMD",
        default=None,
        help="The commcanary command, split like a shell line (default: commcanary on PATH, else <repo>/.venv/bin/commcanary).",
    )
    ours.add_argument(
        "--pass-files",
        action="store_true",
        help="Give import-kineto the rank files as separate arguments instead of their directory.",
    )
    ours.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="Runs of the cold import and of the cache hit; the median wall and the largest peak are reported (default: %(default)s).",
    )
    ours.add_argument(
        "--ours-timeout",
        type=float,
        default=600.0,
        help="Seconds before one commcanary run is killed (default: %(default)s).",
    )
    ours.add_argument("--skip-ours", action="store_true", help="Do not run commcanary.")
    peer = ap.add_argument_group("peer (HolisticTraceAnalysis)")
    peer.add_argument(
        "--hta-venv",
        type=Path,
        default=None,
        help="Virtualenv for HTA, created on first use (default: <workdir>/hta-venv).",
    )
    peer.add_argument(
        "--hta-spec",
        default="HolisticTraceAnalysis",
        help="What pip installs into that venv (default: %(default)s).",
    )
    peer.add_argument(
        "--peer-full", action="store_true", help="Also run HTA at --size-mb (about 15 minutes at 4 x 250 MB)."
    )
    peer.add_argument(
        "--peer-timeout",
        type=float,
        default=1200.0,
        help="Seconds before one HTA run is killed (default: %(default)s).",
    )
    peer.add_argument("--skip-peer", action="store_true", help="Do not run HTA.")
    out = ap.add_argument_group("output")
    out.add_argument(
        "--json", type=Path, metavar="OUT", default=None, help="Also write every figure to this JSON file."
    )
    out.add_argument(
        "--sample-interval",
        type=float,
        default=0.05,
        help="Seconds between samples of the child's process-tree PSS; 0 turns sampling off (default: %(default)s).",
    )


def parse_args(argv: Iterable[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="import_kineto.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    _add_trace_options(ap)
    _add_tool_options(ap)
    args = ap.parse_args(None if argv is None else list(argv))
    if args.ranks < 1 or args.size_mb <= 0 or args.peer_size_mb <= 0 or args.repeat < 1:
        ap.error("--ranks and --repeat must be >= 1, the sizes > 0")
    args.workdir = args.workdir.resolve()
    if args.workdir == ROOT or ROOT in args.workdir.parents:
        ap.error(f"--workdir {args.workdir} is inside the repository; generated data stays outside it")
    args.hta_venv = (args.hta_venv or args.workdir / "hta-venv").resolve()
    return args


def main(argv: Iterable[str] | None = None) -> int:
    args = parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    sizes = sorted({args.size_mb, args.peer_size_mb}, reverse=True)
    sets = {
        s: generate(args.fixture, args.ranks, s, args.gap_us, args.workdir, args.regenerate) for s in sizes
    }
    if args.generate:
        for trace_set in sets.values():
            print(f"{trace_set.directory}: {trace_set.total_bytes / MB:,.1f} MB, {trace_set.events:,} events")
        return 0
    rows: list[Row] = []
    if not args.skip_ours:
        cli = find_commcanary(args.commcanary)
        if cli is None:
            log("no commcanary executable (PATH, <repo>/.venv/bin); pass --commcanary CMD. Skipping ours.")
        else:
            for size in sizes:
                rows.extend(run_ours(cli, sets[size], args))
    peer_note = ""
    if not args.skip_peer:
        python, version = ensure_hta(args.hta_venv, args.hta_spec)
        if python is None:
            peer_note = f"HTA not run: {version}"
            log(peer_note)
        else:
            peer_sizes = sizes if args.peer_full else [args.peer_size_mb]
            rows.extend(run_peer(python, version, sets[s], args) for s in sorted(peer_sizes))
    pairs = ratios(rows)
    goals = targets(rows, pairs, args.size_mb, args.ranks)
    print(
        f"commcanary import-kineto vs HTA: {args.ranks} ranks from {args.fixture.name}; {os.cpu_count()} CPUs"
    )
    print_report(rows, pairs, goals)
    if peer_note:
        print(peer_note)
    if args.json:
        document = {
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": sys.version.split()[0],
            },
            "fixture": str(args.fixture),
            "ranks": args.ranks,
            "sets": {
                f"{s:g}": {
                    "directory": str(t.directory),
                    "total_bytes": t.total_bytes,
                    "events": t.events,
                    "copies": t.copies,
                }
                for s, t in sets.items()
            },
            "rows": [row.as_json() for row in rows],
            "ratios": pairs,
            "targets": goals,
            "peer_note": peer_note,
        }
        args.json.write_text(json.dumps(document, indent=1) + "\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
