"""``commcanary serve --backup`` of a running SQLite server, restored with
``--restore`` into a new server on SQLite and on PostgreSQL: the accounts,
tokens, workloads, artifacts (byte for byte), analyses and shares are
there, new pushes work, and a damaged backup or a server that already has
accounts is refused in one line with nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from conftest import DATA, FIXTURES
from server_harness import ROOT_PASSWORD, USER_PASSWORD, Server, create_token, create_user, csrf, push

pytest.importorskip("fastapi")

DUMP = FIXTURES / "hang" / "gloo_tp4_rank3_skips_allreduce" / "fr_during_hang" / "fr_trace_rank_0.json.gz"


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "commcanary", "serve", *args], capture_output=True, text=True, check=False
    )


def test_backup_and_restore_across_databases(tmp_path: Path, database: str | None) -> None:
    source = Server(tmp_path / "source").start()
    try:
        root = source.setup()
        create_user(root, "erin")
        token = create_token(root)
        erin_token = create_token(source.login("erin", USER_PASSWORD))
        trace = (DATA / "gen100.json").read_bytes()
        first = push(source, token, trace, workload="job", name="t.json", branch="main", commit="c1").json()
        push(source, token, DUMP.read_bytes(), workload="job", name=DUMP.name)
        page = root.get(f"/workloads/{first['workload_id']}")
        assert root.post(
            f"/workloads/{first['workload_id']}/share", data={"csrf": csrf(page.text), "user": "erin"}
        )
        # Backed up while it runs.
        out = serve("--data-dir", str(source.data_dir), "--backup", str(tmp_path / "bk"))
        assert out.returncode == 0, out.stderr
        assert "backed up" in out.stdout and "2 users" in out.stdout and "2 artifacts" in out.stdout
    finally:
        source.stop()
    target_dir = tmp_path / "target"
    db_args = ["--database", database] if database else []
    out = serve("--data-dir", str(target_dir), *db_args, "--restore", str(tmp_path / "bk"))
    assert out.returncode == 0, out.stderr
    # Restoring again into the same (now populated) server is refused.
    again = serve("--data-dir", str(target_dir), *db_args, "--restore", str(tmp_path / "bk"))
    assert again.returncode == 3 and "already has accounts" in again.stderr and again.stderr.count("\n") == 1
    target = Server(target_dir, database).start()
    try:
        assert not (target_dir / "bootstrap-token").exists()
        root = target.login("root", ROOT_PASSWORD)
        wid = first["workload_id"]
        assert root.get(f"/workloads/{wid}/pushes/{first['push_id']}/raw").content == trace
        # Erin's share and token survived; a new push gets a new id.
        erin = {"Authorization": f"Bearer {erin_token}"}
        assert [w["name"] for w in httpx.get(f"{target.url}/api/v1/workloads", headers=erin).json()] == [
            "job"
        ]
        newer = push(target, token, trace, workload="job2", name="again.json")
        assert newer.status_code == 201 and newer.json()["push_id"] > first["push_id"] + 1
        assert newer.json()["workload_id"] != wid
    finally:
        target.stop()


def test_a_damaged_backup_is_refused(tmp_path: Path) -> None:
    source = Server(tmp_path / "source").start()
    try:
        token = create_token(source.setup())
        digest = push(source, token, (DATA / "gen100.json").read_bytes(), workload="w", name="t.json").json()[
            "digest"
        ]
    finally:
        source.stop()
    out = serve("--data-dir", str(source.data_dir), "--backup", str(tmp_path / "bk"))
    assert out.returncode == 0, out.stderr
    # Into a directory that is not empty: refused.
    refused = serve("--data-dir", str(source.data_dir), "--backup", str(tmp_path / "bk"))
    assert refused.returncode == 3 and "new or empty directory" in refused.stderr
    damaged = tmp_path / "bk" / "objects" / digest[:2] / digest
    data = bytearray(damaged.read_bytes())
    data[10] ^= 1
    damaged.write_bytes(bytes(data))
    target = tmp_path / "target"
    out = serve("--data-dir", str(target), "--restore", str(tmp_path / "bk"))
    assert out.returncode == 3 and "damaged" in out.stderr and out.stderr.count("\n") == 1
    assert not target.exists()
