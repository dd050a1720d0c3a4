"""``commcanary serve`` (the team server, ``commcanary[server]``) and
``commcanary push`` (artifacts to a server; the core package alone)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import EXIT_USAGE, errors_exit, fail
from commcanary.server.config import MAX_UPLOAD_BYTES

__all__ = ["push_command", "serve_command"]


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        fail(f"--listen: expected HOST:PORT (127.0.0.1:8000), got {value!r}", EXIT_USAGE)
    return host.strip("[]"), int(port)


def serve_command(
    data_dir: Annotated[
        Path,
        typer.Option(
            "--data-dir",
            metavar="DIR",
            help="Where the server keeps its database (SQLite), artifacts and keys.",
        ),
    ] = Path("commcanary-data"),
    listen: Annotated[
        str, typer.Option("--listen", metavar="HOST:PORT", help="Address to listen on (loopback by default).")
    ] = "127.0.0.1:8000",
    database: Annotated[
        str | None,
        typer.Option(
            "--database",
            metavar="URL",
            help="A PostgreSQL database for teams (postgresql+psycopg://USER@HOST/DB); SQLite in the data directory "
            "by default.",
        ),
    ] = None,
    forwarded_allow_ips: Annotated[
        str | None,
        typer.Option(
            "--forwarded-allow-ips",
            metavar="IPS",
            help="Reverse proxies (comma-separated addresses, or *) whose X-Forwarded-For and X-Forwarded-Proto "
            "headers are believed (HTTPS behind a proxy: docs/serve.md).",
        ),
    ] = None,
    secure_cookies: Annotated[
        bool, typer.Option("--secure-cookies", help="Mark cookies Secure (the server is reached over HTTPS).")
    ] = False,
    max_upload_bytes: Annotated[
        int,
        typer.Option(
            "--max-upload-bytes", metavar="N", min=1, help="Largest upload, in bytes as sent (512 MiB)."
        ),
    ] = MAX_UPLOAD_BYTES,
    session_idle: Annotated[
        int,
        typer.Option(
            "--session-idle", metavar="SECONDS", min=1, help="A session unused this long ends (30 minutes)."
        ),
    ] = 30 * 60,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            metavar="N",
            min=1,
            max=64,
            help="Worker processes serving requests (each with its own analysis thread; /metrics then counts the "
            "requests of the process that answers).",
        ),
    ] = 1,
    backup_dir: Annotated[
        Path | None,
        typer.Option(
            "--backup",
            metavar="DIR",
            help="Write a backup of the server (its database and artifacts, consistent while it runs) into DIR, "
            "a new directory, and exit.",
        ),
    ] = None,
    restore_dir: Annotated[
        Path | None,
        typer.Option(
            "--restore",
            metavar="DIR",
            help="Restore the backup in DIR into this (new) server's data directory and database, and exit; "
            "SQLite and PostgreSQL take each other's backups.",
        ),
    ] = None,
) -> None:
    """Run the team server: workloads, diagnoses and gate history, with accounts."""
    with errors_exit():
        try:
            import uvicorn

            from commcanary.server.app import create_app
            from commcanary.server.config import ServerConfig
        except ImportError as exc:
            fail(
                f"commcanary serve needs the server extra: pip install 'commcanary[server]' ({exc.name} is missing)"
            )
        host, port = _listen(listen)
        config = ServerConfig(
            data_dir=data_dir,
            database_url=database,
            secure_cookies=secure_cookies,
            max_upload_bytes=max_upload_bytes,
            session_idle_s=session_idle,
        )
        if backup_dir is not None and restore_dir is not None:
            fail("--backup and --restore: give one", EXIT_USAGE)
        if backup_dir is not None or restore_dir is not None:
            from commcanary.server.backup import backup, restore

            if backup_dir is not None:
                manifest = backup(config, backup_dir)
                verb, where = "backed up", backup_dir
            else:
                assert restore_dir is not None
                manifest = restore(config, restore_dir)
                verb, where = "restored", restore_dir
            counts = ", ".join(f"{n} {t}" for t, n in manifest["tables"].items())
            typer.echo(f"{verb} {where}: {counts} (schema {manifest['revision']})")
            return
        app = create_app(config)
        url = f"http://{host}:{port}"
        typer.echo(f"commcanary serve: {url} (data in {data_dir})")
        if app.state.ctx.bootstrap():
            typer.echo(
                f"first start: the one-time setup token is in {config.bootstrap_token_path} (mode 0600); "
                f"open {url}/setup to set the root password"
            )
        from commcanary.server.metrics import structured_logs

        structured_logs()
        target: object = app
        if workers > 1:
            import os

            from commcanary.server.app import CONFIG_VAR, config_to_environment

            os.environ[CONFIG_VAR] = config_to_environment(config)
            target = "commcanary.server.app:app_from_environment"
        uvicorn.run(
            target,  # type: ignore[arg-type]
            factory=workers > 1,
            workers=workers if workers > 1 else None,
            host=host,
            port=port,
            proxy_headers=forwarded_allow_ips is not None,
            forwarded_allow_ips=forwarded_allow_ips,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=30,
        )


def push_command(
    artifacts: Annotated[
        list[Path],
        typer.Argument(
            metavar="ARTIFACT...",
            help="Traces, canaries, reports, comparisons, diagnoses, timelines, or raw evidence (profiler traces, "
            "Flight Recorder dumps, stack and exception texts). A FILE.sig beside a file is sent with it.",
        ),
    ],
    server: Annotated[str, typer.Option("--server", metavar="URL", help="The server (http://HOST:PORT).")],
    token_file: Annotated[
        Path,
        typer.Option(
            "--token-file", metavar="FILE", help="A file holding an API token (the server's Tokens page)."
        ),
    ],
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            metavar="NAME",
            help="Workload to push to (default: the first file's directory name).",
        ),
    ] = None,
    branch: Annotated[
        str | None, typer.Option("--branch", metavar="B", help="Branch the artifacts are for.")
    ] = None,
    commit: Annotated[
        str | None, typer.Option("--commit", metavar="C", help="Commit the artifacts are for.")
    ] = None,
    analyze: Annotated[
        str,
        typer.Option(
            "--analyze",
            metavar="WHAT",
            help="After raw evidence: auto (hang for dumps and texts, stragglers for profiler traces alone), hang, "
            "stragglers, or none.",
        ),
    ] = "auto",
) -> None:
    """Push artifacts to a commcanary server."""
    with errors_exit():
        from commcanary.server.push import (
            evidence_ids,
            push_files,
            queue_analysis,
            read_token,
            suggested_analysis,
        )

        if analyze not in ("auto", "hang", "stragglers", "none"):
            fail(f"--analyze: one of auto, hang, stragglers, none (got {analyze!r})", EXIT_USAGE)
        if not server.startswith(("http://", "https://")):
            fail(f"--server: expected http://HOST:PORT or https://..., got {server!r}", EXIT_USAGE)
        missing = [a for a in artifacts if not a.is_file()]
        if missing:
            fail(f"{missing[0]}: no such file")
        token = read_token(token_file)
        name = workload or (artifacts[0].resolve().parent.name or "workload")
        pushed = push_files(server, token, artifacts, workload=name, branch=branch, commit=commit)
        for p in pushed:
            a = p.answer
            verdict = f", {a['verdict']}" if a.get("verdict") else ""
            signed = f", signed by {a['signed_by']}" if a.get("signed_by") else ""
            typer.echo(
                f"pushed {p.path}: {a['kind']}{verdict}{signed} -> workload {a['workload']} (push {a['push_id']})"
            )
        which = suggested_analysis(pushed) if analyze == "auto" else (None if analyze == "none" else analyze)
        ids = evidence_ids(pushed)
        if which and ids:
            job = queue_analysis(server, token, int(pushed[0].answer["workload_id"]), which, ids)
            typer.echo(
                f"queued {which} analysis {job['id']} of {len(ids)} file(s): "
                f"{server.rstrip('/')}/workloads/{job['workload_id']}"
            )
