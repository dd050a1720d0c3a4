"""The agent: one per node, following a job's shards while it runs.

Every :data:`POLL_S` the agent reads what the shards gained
(:class:`~commcanary.agent.follow.Follower`), looks at its processes (a pid
of this host that is gone, or a zombie, without an ``end`` note died; one in
state T is stopped), and checks for a hang: a group whose progress stalled
for ``hang_after`` seconds while a live member waits inside one of its calls
(:meth:`~commcanary.agent.state.LiveJob.stalled`), or a process that died
without exiting (no ``end`` note: killed, crashed). Then it raises **one alarm** per stall:

1. writes the request file and signals every live process of the job on this
   host (:mod:`commcanary.capture.live`): each writes its stacks and Flight
   Recorder dump into ``ARCHIVE/<alarm>/evidence/``; it waits up to
   :data:`EVIDENCE_WAIT_S` for their ``evidence`` notes;
2. copies the shards next to the evidence, runs ``diagnose hang`` on the
   evidence and writes ``hang.json`` (``commcanary.hang.v1``) and
   ``alarm.json`` (what was stalled, who answered, who was stopped or dead,
   the diagnosis' lines);
3. with a server, pushes the evidence to it (a hang analysis is queued there).

An alarm whose groups progress again is marked a **stall** (``alarm.json``
is rewritten with when it resumed); the agent raises a new alarm only after
progress.

The state (the live view and each shard's offset) is saved atomically to
``ARCHIVE/state.json`` every second and at exit; a restarted agent loads it
and goes on from the offsets, so no line is read twice or skipped.

With ``nccl_logs`` (``--nccl-logs DIR``, the NCCL profiler plugin's
directory) the agent also follows the plugin's logs
(:mod:`commcanary.agent.nccl`): a communicator with operations in flight and
no progress for ``hang_after`` seconds is a stalled group like the shards'
ones, and an alarm copies the logs into its evidence.

HTTP (stdlib, threads): ``/healthz``, ``/status`` (JSON), ``/metrics``
(Prometheus text), and with peers (:mod:`commcanary.agent.peers`)
``POST /peer/collect`` and ``GET /peer/evidence``, which need the peers'
token.
"""

from __future__ import annotations

import contextlib
import datetime
import http.server
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from commcanary.agent.follow import Follower, alive
from commcanary.agent.metrics import render_metrics, status
from commcanary.agent.nccl import NcclWatch
from commcanary.agent.peers import Peers, authorized, evidence_tar
from commcanary.agent.state import LiveJob
from commcanary.capture.live import REQUEST_FILE

__all__ = ["EVIDENCE_WAIT_S", "POLL_S", "Agent", "serve_http"]

#: Seconds between reads of the shards.
POLL_S = 0.25
#: How long an alarm waits for the processes' evidence, at most.
EVIDENCE_WAIT_S = 8.0
#: The state file's name in the archive.
STATE_FILE = "state.json"
#: Shard bytes an alarm copies, at most.
MAX_COPY_BYTES = 256 << 20
#: What an alarm's id looks like (a peer's request names one).
ALARM_ID = re.compile(r"alarm-[0-9]{8}T[0-9]{6}Z-[0-9]{1,9}")


class Agent:
    """Follows one job's shard directory (see the module doc)."""

    def __init__(
        self,
        watch: Path,
        archive: Path,
        *,
        hang_after_s: float,
        push: Callable[[Path, str], None] | None = None,
        log: Callable[[str], None] | None = None,
        peers: Peers | None = None,
        nccl_logs: Path | None = None,
    ) -> None:
        self.watch = watch
        self.archive = archive
        self.hang_after_s = hang_after_s
        self.push = push
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.host = socket.gethostname()
        self.lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self.alarms = 0
        self.stalls = 0
        self.open_alarm: dict[str, Any] | None = None
        self.reported_deaths: set[str] = set()
        self.saved_at = 0.0
        self.peers = peers
        self.collect_lock = threading.Lock()
        #: alarm id → the folder whose evidence a peer asked for (``None`` while collecting).
        self.for_peers: dict[str, Path | None] = {}
        job, offsets = self._load()
        self.job = job
        self.follower = Follower(watch, job, offsets)
        self.nccl: NcclWatch | None = NcclWatch(nccl_logs) if nccl_logs is not None else None

    # ------------------------------------------------------------------ state

    def _load(self) -> tuple[LiveJob, dict[str, int]]:
        path = self.archive / STATE_FILE
        if not path.exists():
            return LiveJob(), {}
        doc = orjson.loads(path.read_bytes())
        self.events = list(doc.get("events", []))
        self.alarms = int(doc.get("alarms", 0))
        self.stalls = int(doc.get("stalls", 0))
        self.open_alarm = doc.get("open_alarm")
        self.reported_deaths = set(doc.get("reported_deaths", []))
        return LiveJob.from_json(doc["job"]), {str(k): int(v) for k, v in doc["offsets"].items()}

    def save(self) -> None:
        doc = {
            "format": "commcanary.agent-state.v1",
            "watch": str(self.watch),
            "offsets": self.follower.offsets,
            "job": self.job.to_json(),
            "events": self.events,
            "alarms": self.alarms,
            "stalls": self.stalls,
            "open_alarm": self.open_alarm,
            "reported_deaths": sorted(self.reported_deaths),
        }
        _write(self.archive / STATE_FILE, orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS))
        self.saved_at = time.time()

    # ------------------------------------------------------------------ the loop

    def tick(self) -> None:
        """One round: read, look at the processes, check for a hang."""
        now = time.time()
        with self.lock:
            self.follower.poll(now)
            self._look_at_processes()
            self.follower.poll(now)  # a dead process's torn line, now that it is known dead
            stalled = self.job.stalled(now, self.hang_after_s)
            if self.nccl is not None:
                self.nccl.poll()
                for group, ranks in self.nccl.stalled(now, self.hang_after_s).items():
                    stalled[group] = sorted(
                        set(stalled.get(group, [])) | set(ranks), key=lambda r: (len(r), r)
                    )
            died = [p for p in self.job.died() if p.shard not in self.reported_deaths]
            self._resumed(now)
        if self.open_alarm is None and (stalled or died):
            self.reported_deaths.update(p.shard for p in died)
            self.raise_alarm(stalled, [p.rank for p in died])
        if self.peers is not None:
            self.peers.refresh(now)
        if now - self.saved_at >= 1.0:
            with self.lock:
                self.save()

    def _look_at_processes(self) -> None:
        for proc in self.job.processes.values():
            if proc.ended or proc.dead or proc.host != self.host:
                continue
            state = alive(proc.pid)
            proc.dead = state == "dead"
            proc.stopped = state == "stopped"

    def _resumed(self, now: float) -> None:
        alarm = self.open_alarm
        if alarm is None:
            return
        nccl = self.nccl.progressed() if self.nccl is not None else {}
        moved = [
            g
            for g in alarm["groups"]
            if max(self.job.progressed.get(g, 0.0), nccl.get(g, 0.0)) > alarm["raised_at"]
        ]
        if moved and not alarm.get("died"):
            alarm.update(outcome="stall", resumed_at=now)
            self.stalls += 1
            self.log(
                f"agent: {alarm['id']}: the job went on after {now - alarm['raised_at']:.1f} s: a stall, not a hang"
            )
            self._record(alarm)
            self.open_alarm = None

    def _record(self, alarm: dict[str, Any]) -> None:
        self.events = [*[e for e in self.events if e["id"] != alarm["id"]][-63:], dict(alarm)]
        folder = self.archive / alarm["id"]
        if folder.is_dir():
            _write(
                folder / "alarm.json", orjson.dumps(alarm, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
            )

    # ------------------------------------------------------------------ alarms

    def raise_alarm(self, stalled: dict[str, list[str]], died: list[str]) -> dict[str, Any]:
        """Collects the evidence, diagnoses it, archives (and pushes) it."""
        raised = time.time()
        self.alarms += 1
        stamp = datetime.datetime.fromtimestamp(raised, datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        ident = f"alarm-{stamp}-{self.alarms}"
        folder = self.archive / ident
        evidence = folder / "evidence"
        evidence.mkdir(parents=True)
        groups = sorted(stalled) or sorted({g for p in self.job.died() for g in p.waiting_since})
        what = (
            f"group(s) {', '.join(groups)} made no progress for {self.hang_after_s:g} s "
            f"while rank(s) {', '.join(sorted({r for rs in stalled.values() for r in rs}))} waited"
            if stalled
            else f"rank(s) {', '.join(died)} died (no exit recorded)"
        )
        self.log(f"agent: {ident}: {what}; collecting evidence")
        if died:  # a launcher stops the others next: let their last evidence land
            time.sleep(1.0)
        with self.collect_lock:
            answered = self._collect(ident, evidence)
        from_peers: dict[str, list[str]] = {}
        if self.peers is not None:
            asked = self.peers.ask(ident)
            from_peers = self.peers.fetch(asked, ident, evidence, EVIDENCE_WAIT_S + 4)
            for url in asked:
                self.log(f"agent: {ident}: {url}: {len(from_peers.get(url, []))} evidence file(s)")
        if self.nccl is not None:
            # The plugin's logs as they are now: diagnose hang reads them with the rest.
            copied_logs = self.nccl.copy_into(evidence / "nccl")
            self.log(f"agent: {ident}: {copied_logs} NCCL profiler log segment(s) copied")
        shards = folder / "shards"
        shards.mkdir()
        copied = 0
        for path in self.follower.shards():
            size = path.stat().st_size
            if copied + size <= MAX_COPY_BYTES:
                shutil.copyfile(path, shards / path.name)
                copied += size
        alarm: dict[str, Any] = {
            "id": ident,
            "raised_at": raised,
            "reason": what,
            "groups": groups,
            "waiting": stalled,
            "died": died,
            "hang_after_s": self.hang_after_s,
            "processes": answered,
            "peers": from_peers,
            "outcome": "hang",
        }
        try:
            from commcanary.analysis.hang import diagnose_hang

            diagnosis = diagnose_hang(evidence)
            _write(folder / "hang.json", diagnosis.data)
            alarm["diagnosis"] = {"verdict": diagnosis.verdict, "lines": list(diagnosis.lines)}
        except Exception as error:  # no usable evidence: the alarm stands, without a diagnosis
            alarm["diagnosis"] = {"verdict": "inconclusive", "lines": [f"no diagnosis: {error}"]}
        with self.lock:
            self.open_alarm = alarm
            self._record(alarm)
            self.save()
        for line in alarm["diagnosis"]["lines"][:3]:
            self.log(f"agent: {ident}: {line}")
        self.log(f"agent: {ident}: archived in {folder}")
        if self.push is not None:
            try:
                self.push(evidence, ident)
            except Exception as error:
                self.log(f"agent: {ident}: push failed: {error}")
        return alarm

    def _collect(self, ident: str, evidence: Path) -> list[dict[str, Any]]:
        """Asks every live process of this host for its evidence and waits
        for their answers."""
        from commcanary.capture.live import evidence_signal

        _write(self.watch / REQUEST_FILE, orjson.dumps({"id": ident, "dir": str(evidence.resolve())}))
        signum = evidence_signal() or signal.SIGUSR2
        rows: dict[str, dict[str, Any]] = {}
        asked = []
        with self.lock:
            procs = list(self.job.processes.values())
        for proc in procs:
            row: dict[str, Any] = {"rank": proc.rank, "pid": proc.pid, "host": proc.host}
            rows[proc.shard] = row
            if proc.ended:
                row["state"] = "ended"
            elif proc.host != self.host:
                row["state"] = "other host"
            elif proc.dead:
                row["state"] = "dead"
            elif proc.stopped:
                row["state"] = "stopped (cannot answer)"
            else:
                try:
                    os.kill(proc.pid, signum)
                    row["state"] = "asked"
                    asked.append(proc.shard)
                except OSError as error:
                    row["state"] = f"not asked: {error.strerror}"
        deadline = time.monotonic() + EVIDENCE_WAIT_S
        while asked and time.monotonic() < deadline:
            time.sleep(0.1)
            with self.lock:
                self.follower.poll(time.time())
                self._look_at_processes()
                answered = [s for s in asked if {ident, "terminated"} & set(self.job.processes[s].evidence)]
                gone = [s for s in asked if self.job.processes[s].dead and s not in answered]
            for shard in answered:
                rows[shard]["state"] = "answered"
                asked.remove(shard)
            if gone and time.monotonic() > deadline - EVIDENCE_WAIT_S + 1.0:
                for shard in gone:  # killed before it answered (a launcher's SIGKILL)
                    rows[shard]["state"] = "died before answering"
                    asked.remove(shard)
        for shard in asked:
            rows[shard]["state"] = "no answer"
        with contextlib.suppress(OSError):
            (self.watch / REQUEST_FILE).unlink()
        # What processes wrote when they were terminated (a launcher stopping
        # the job after a rank failed), if not into this alarm's directory.
        with self.lock:
            self.follower.poll(time.time())
            notes = [(p.shard, n) for p in self.job.processes.values() for n in p.evidence_files]
        for shard, (request, directory, files) in notes:
            if request not in ("terminated", "error") or Path(directory) == evidence.resolve():
                continue
            for name in files:
                source = Path(directory) / name
                if source.is_file() and ".." not in Path(name).parts:
                    (evidence / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, evidence / name)
            if rows[shard]["state"] not in ("answered",):
                rows[shard]["state"] = "terminated (its evidence kept)"
        return sorted(rows.values(), key=lambda r: (len(r["rank"]), r["rank"], r["pid"]))

    # ------------------------------------------------------------------ peers

    def collect_for_peer(self, ident: str) -> None:
        """A peer's alarm: this host's evidence, collected in a thread (the
        open alarm's, when this agent raised one in the last minute)."""
        if ident in self.for_peers:
            return
        self.for_peers[ident] = None

        def run() -> None:
            with self.collect_lock:
                alarm = self.open_alarm
                if alarm is not None and time.time() - alarm["raised_at"] < 60:
                    folder = self.archive / alarm["id"] / "evidence"
                else:
                    folder = self.archive / f"{ident}-for-peer" / "evidence"
                    folder.mkdir(parents=True, exist_ok=True)
                    self._collect(ident, folder)
            self.for_peers[ident] = folder
            self.log(f"agent: {ident}: collected for a peer ({folder})")

        threading.Thread(target=run, name="commcanary-agent-peer-collect", daemon=True).start()

    # ------------------------------------------------------------------ views

    def agent_counts(self) -> dict[str, Any]:
        return {"alarms": self.alarms, "stalls": self.stalls, "events": self.events}

    def metrics_text(self) -> str:
        with self.lock:
            text = render_metrics(self.job, time.time(), self.agent_counts())
            if self.nccl is not None:
                text += self.nccl.metrics(time.time())
            return text

    def status_json(self) -> bytes:
        with self.lock:
            doc = status(self.job, time.time(), self.agent_counts())
        doc["watch"] = str(self.watch)
        doc["hang_after_s"] = self.hang_after_s
        if self.nccl is not None:
            doc["nccl"] = self.nccl.status()
        if self.peers is not None:
            doc["peers"] = self.peers.views
        return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)


def _write(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, target)


def serve_http(agent: Agent, host: str, port: int) -> http.server.ThreadingHTTPServer:
    """Starts the HTTP endpoints in a thread; raises ``OSError`` when the
    address cannot be bound."""

    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "commcanary-agent"

        def _peer(self) -> bool:
            token = agent.peers.token if agent.peers is not None else None
            if not token:
                self._reply(404, "text/plain; charset=utf-8", b"not found\n")
                return False
            if not authorized(self.headers.get("Authorization"), token):
                self._reply(401, "text/plain; charset=utf-8", b"the peers' token is required\n")
                return False
            return True

        def do_POST(self) -> None:
            if self.path != "/peer/collect":
                self._reply(404, "text/plain; charset=utf-8", b"not found\n")
                return
            if not self._peer():
                return
            size = int(self.headers.get("Content-Length") or 0)
            try:
                ident = str(orjson.loads(self.rfile.read(min(size, 4096)))["id"])
            except (ValueError, KeyError, TypeError):
                ident = ""
            if not ALARM_ID.fullmatch(ident):
                self._reply(400, "text/plain; charset=utf-8", b"field 'id' must be an alarm id\n")
                return
            agent.collect_for_peer(ident)
            self._reply(202, "application/json", b'{"collecting":true}')

        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            if path == "/peer/evidence":
                if not self._peer():
                    return
                ident = urllib.parse.parse_qs(query).get("id", [""])[0]
                if ident not in agent.for_peers:
                    self._reply(404, "text/plain; charset=utf-8", b"no such collection\n")
                    return
                folder = agent.for_peers[ident]
                if folder is None:
                    self._reply(409, "text/plain; charset=utf-8", b"still collecting\n")
                    return
                self._reply(200, "application/x-tar", evidence_tar(folder))
                return
            if path == "/healthz":
                self._reply(200, "text/plain; charset=utf-8", b"ok\n")
            elif path == "/metrics":
                self._reply(200, "text/plain; version=0.0.4; charset=utf-8", agent.metrics_text().encode())
            elif path == "/status":
                self._reply(200, "application/json", agent.status_json())
            else:
                self._reply(404, "text/plain; charset=utf-8", b"not found: /healthz, /status, /metrics\n")

        def _reply(self, code: int, kind: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            del format, args

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="commcanary-agent-http", daemon=True).start()
    return server
