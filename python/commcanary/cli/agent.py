"""``commcanary agent``: follow a running job's shards; metrics, hang alarms, evidence."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import EXIT_USAGE, errors_exit, fail

__all__ = ["agent_command"]


def _listen_address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        fail(f"--listen: expected HOST:PORT, got {value!r}", EXIT_USAGE)
    return host.strip("[]") or "127.0.0.1", int(port)


def agent_command(
    watch: Annotated[
        Path,
        typer.Option(
            "--watch",
            metavar="DIR",
            help="The shard directory of a running capture (`commcanary capture --shards DIR`).",
        ),
    ],
    listen: Annotated[
        str,
        typer.Option(
            "--listen", metavar="HOST:PORT", help="Where /healthz, /status and /metrics are served."
        ),
    ] = "127.0.0.1:19102",
    hang_after: Annotated[
        float,
        typer.Option(
            "--hang-after",
            metavar="SECONDS",
            min=1.0,
            help="Raise a hang alarm when a group makes no progress for this long while a member waits in a call.",
        ),
    ] = 60.0,
    archive: Annotated[
        Path | None,
        typer.Option(
            "--archive",
            metavar="DIR",
            help="Where alarms' evidence and diagnoses, and the agent's state, are kept (default: DIR/agent).",
        ),
    ] = None,
    server: Annotated[
        str | None,
        typer.Option("--server", metavar="URL", help="Push each alarm's evidence to this commcanary server."),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file", metavar="FILE", help="The API token for --server (a file, never an argument)."
        ),
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload", metavar="NAME", help="The workload alarms are pushed to (default: the job's name)."
        ),
    ] = None,
    peers: Annotated[
        list[str] | None,
        typer.Option(
            "--peers",
            metavar="URL",
            help="Another node's agent (repeat for each): an alarm also collects and diagnoses their evidence.",
        ),
    ] = None,
    peer_token_file: Annotated[
        Path | None,
        typer.Option(
            "--peer-token-file",
            metavar="FILE",
            help="The token the job's agents share (a file): needed by --peers and to answer them.",
        ),
    ] = None,
    nccl_logs: Annotated[
        Path | None,
        typer.Option(
            "--nccl-logs",
            metavar="DIR",
            help="Also follow the NCCL profiler plugin's logs (COMMCANARY_NCCL_DIR of the job): per-communicator "
            "progress in /status and /metrics, and a communicator with calls in flight and no progress for "
            "--hang-after seconds raises the alarm; the alarm's evidence includes the logs.",
        ),
    ] = None,
    run_for: Annotated[
        float | None,
        typer.Option(
            "--run-for", metavar="SECONDS", help="Stop after this long (default: until interrupted)."
        ),
    ] = None,
) -> None:
    """Follow a running job's capture shards: live metrics and status, hang alarms with evidence.

    Reads every shard in DIR as it grows (resuming from its saved offsets after a restart), serves
    /healthz, /status (JSON) and /metrics (Prometheus), and when a group makes no progress for
    --hang-after seconds while a member waits inside a call, asks every process for its stacks and
    Flight Recorder dump, diagnoses the hang and archives the evidence (and pushes it with --server).
    """
    with errors_exit():
        from commcanary.agent.follow import ShardRefused
        from commcanary.agent.service import Agent, serve_http

        if not watch.is_dir():
            fail(f"--watch {watch}: no such directory")
        if nccl_logs is not None and not nccl_logs.is_dir():
            fail(f"--nccl-logs {nccl_logs}: no such directory")
        host, port = _listen_address(listen)
        if (server is None) != (token_file is None):
            fail("--server and --token-file go together", EXIT_USAGE)
        push = None
        if server is not None and token_file is not None:
            from commcanary.server.push import read_token

            token = read_token(token_file)
            push = _pusher(server, token, workload)
        joined = None
        if peers or peer_token_file is not None:
            from commcanary.agent.peers import Peers
            from commcanary.server.push import read_token

            if peer_token_file is None:
                fail("--peers needs --peer-token-file (the token the job's agents share)", EXIT_USAGE)
            bad = [u for u in peers or [] if not u.startswith(("http://", "https://"))]
            if bad:
                fail(f"--peers: expected http://HOST:PORT, got {bad[0]!r}", EXIT_USAGE)
            joined = Peers(list(peers or []), read_token(peer_token_file))
        where = archive or watch / "agent"
        where.mkdir(parents=True, exist_ok=True)
        try:
            agent = Agent(watch, where, hang_after_s=hang_after, push=push, peers=joined, nccl_logs=nccl_logs)
            agent.follower.poll(time.time())
        except ShardRefused as exc:
            fail(str(exc))
        try:
            http = serve_http(agent, host, port)
        except OSError as exc:
            fail(f"--listen {listen}: cannot listen there: {exc.strerror or exc}")
        typer.echo(
            f"agent: watching {watch}; http://{host}:{http.server_address[1]}/metrics; "
            f"hang alarm after {hang_after:g} s; archive {where}",
            err=True,
        )
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        deadline = None if run_for is None else time.monotonic() + run_for
        try:
            while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
                try:
                    agent.tick()
                except ShardRefused as exc:
                    fail(str(exc))
                stop.wait(0.25)
        finally:
            with agent.lock:
                agent.save()
            http.shutdown()
            http.server_close()


def _pusher(server: str, token: str, workload: str | None):  # type: ignore[no-untyped-def]
    def push(evidence: Path, ident: str) -> None:
        from commcanary.server.push import evidence_ids, push_files, queue_analysis

        files = sorted(p for p in evidence.rglob("*") if p.is_file() and not p.name.startswith("."))
        name = workload or "live-job"
        pushed = push_files(server, token, files, workload=name)
        ids = evidence_ids(pushed)
        if ids:
            queue_analysis(server, token, int(pushed[0].answer["workload_id"]), "hang", ids)
        typer.echo(f"agent: {ident}: pushed {len(files)} file(s) to {server} (workload {name})", err=True)

    return push
