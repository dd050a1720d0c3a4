"""The server's machine side, as a process on SQLite and on PostgreSQL:
``schemathesis`` against its OpenAPI description (no server error on any
generated request), Prometheus ``/metrics`` (admins only, bounded labels),
the structured request log, and out-of-range ids."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import DATA
from server_harness import Server, create_token, create_user, push

pytest.importorskip("fastapi")


def _schemathesis() -> str:
    found = shutil.which("schemathesis") or str(Path(sys.executable).parent / "schemathesis")
    if not Path(found).exists():
        pytest.skip("schemathesis is not installed (the test extra)")
    return found


def test_schemathesis_finds_no_server_error(server: Server) -> None:
    root = server.setup()
    token = create_token(root)
    assert (
        push(server, token, (DATA / "gen100.json").read_bytes(), workload="w", name="t.json").status_code
        == 201
    )
    spec = httpx.get(f"{server.url}/api/v1/openapi.json", headers={"Authorization": f"Bearer {token}"})
    assert spec.status_code == 200
    assert {"/api/v1/artifacts", "/api/v1/workloads", "/api/v1/workloads/{workload_id}/gate"} <= set(
        spec.json()["paths"]
    )
    run = subprocess.run(
        [
            _schemathesis(),
            "run",
            f"{server.url}/api/v1/openapi.json",
            "-H",
            f"Authorization: Bearer {token}",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            "40",
            "--generation-deterministic",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "passed" in run.stdout
    assert '"status":500' not in server.output()


def test_metrics_logs_and_ids(server: Server) -> None:
    root = server.setup()
    token = create_token(root)
    create_user(root, "carol")
    carol_token = create_token(server.login("carol", "another long passphrase"))
    wid = push(server, token, (DATA / "gen100.json").read_bytes(), workload="w", name="t.json").json()[
        "workload_id"
    ]
    auth = {"Authorization": f"Bearer {token}"}
    for path in (
        f"/api/v1/workloads/{wid}",
        "/api/v1/workloads/99999999999999999999999",
        "/api/v1/workloads/0",
    ):
        r = httpx.get(server.url + path, headers=auth)
        assert r.status_code in (200, 404, 422), path
    assert httpx.request("BREW", f"{server.url}/api/v1/workloads", headers=auth).status_code == 405
    assert httpx.get(f"{server.url}/metrics").status_code == 401
    assert (
        httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {carol_token}"}).status_code
        == 403
    )
    text = httpx.get(f"{server.url}/metrics", headers=auth).text
    assert (
        'commcanary_http_requests_total{method="GET",route="/api/v1/workloads/{workload_id}",status="2xx"}'
        in text
    )
    assert 'method="other"' in text and "BREW" not in text
    assert not re.search(r'route="[^"]*/\d', text), "an id in a label"
    assert "commcanary_artifacts 1.0" in text and "commcanary_analysis_queue_depth 0.0" in text
    assert "commcanary_http_request_duration_seconds_bucket" in text
    # One JSON object per request in the log, by route template.
    lines = [json.loads(line) for line in server.output().splitlines() if line.startswith("{")]
    requests = [doc for doc in lines if doc.get("logger") == "commcanary.server.access"]
    assert any(d["route"] == "/api/v1/artifacts" and d["status"] == 201 for d in requests)
    assert all({"ts", "method", "route", "status", "ms"} <= set(d) for d in requests)


def test_bodies_read_whole_are_bounded(server: Server) -> None:
    root = server.setup()
    token = create_token(root)
    auth = {"Authorization": f"Bearer {token}"}
    big = b'{"analysis": "hang", "pushes": [' + b"1," * (1 << 20) + b"1]}"
    r = httpx.post(
        f"{server.url}/api/v1/workloads/1/analyses",
        content=big,
        headers={**auth, "Content-Type": "application/json"},
    )
    assert r.status_code == 413

    def chunks() -> Any:
        yield b'{"analysis": "hang", '
        yield b'"pushes": [1]}'

    r = httpx.post(
        f"{server.url}/api/v1/workloads/1/analyses",
        content=chunks(),
        headers={**auth, "Content-Type": "application/json"},
    )
    assert r.status_code == 411
    r = root.post(
        "/users", content=b"x" * (2 << 20), headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert r.status_code == 413


def test_several_worker_processes(tmp_path: Path, database: str | None) -> None:
    """``--workers 2``: each worker process builds the app from the settings
    the parent hands over; sessions, tokens and pushes are shared through
    the database."""
    server = Server(tmp_path / "data", database, ["--workers", "2"]).start()
    try:
        root = server.setup()
        token = create_token(root)
        for i in range(6):
            r = push(server, token, (DATA / "gen100.json").read_bytes(), workload="w", name=f"t{i}.json")
            assert r.status_code == 201
        for _ in range(6):
            assert root.get(f"/workloads/{r.json()['workload_id']}").status_code == 200
        log = server.output()
        assert "Started parent process" in log
        # The workers log too: their own JSON lines, from two processes.
        pids = set(re.findall(r'"message":"Started server process \[(\d+)\]"', log))
        assert len(pids) == 2, log[-3000:]
        assert '"logger":"commcanary.server.access"' in log
    finally:
        server.stop()
