"""The team server as a real process, for the tests: ``commcanary serve``
started on a free loopback port (SQLite in its data directory, or a real
PostgreSQL this module starts with Debian's ``initdb``/``postgres``), and
the few steps a test takes through its pages and API (setup, login, a
user, a token, a push) with a real HTTP client."""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT_PASSWORD = "correct horse battery staple"
USER_PASSWORD = "another long passphrase"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def postgres_bin() -> Path | None:
    """Debian's PostgreSQL programs (``initdb``, ``postgres``), when installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@dataclass
class Postgres:
    """A PostgreSQL cluster of this test run: its own directory and port,
    trust authentication on loopback only."""

    directory: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    databases: int = 0

    def _as_owner(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def start(self) -> None:
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
        self.directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        data = self.directory / "data"
        subprocess.run(
            [
                *self._as_owner(),
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
            ],
            check=True,
            capture_output=True,
        )
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                *self._as_owner(),
                str(bin_dir / "postgres"),
                "-D",
                str(data),
                "-p",
                str(self.port),
                "-h",
                "127.0.0.1",
                "-k",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.admin_dsn(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def admin_dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def new_database(self) -> str:
        """A fresh database: its SQLAlchemy URL."""
        import psycopg

        self.databases += 1
        name = f"commcanary_{self.databases}"
        with psycopg.connect(self.admin_dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@dataclass
class Server:
    """``commcanary serve`` running as a process."""

    data_dir: Path
    database: str | None = None
    extra: list[str] = field(default_factory=list)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    clients: list[httpx.Client] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        self.port = free_port()
        self.log = self.data_dir.parent / f"{self.data_dir.name}.log"
        args = [
            sys.executable,
            "-m",
            "commcanary",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            f"127.0.0.1:{self.port}",
            *self.extra,
        ]
        if self.database:
            args += ["--database", self.database]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited {self.proc.returncode}: {self.output()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {self.output()}")
            time.sleep(0.2)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log and self.log.exists() else ""

    def stop(self, kill: bool = False) -> None:
        for c in self.clients:
            c.close()
        self.clients.clear()
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def client(self) -> httpx.Client:
        """A browser-like client (its own cookies), closed when the server stops."""
        c = httpx.Client(base_url=self.url, follow_redirects=False, timeout=60)
        self.clients.append(c)
        return c

    def setup(self, name: str = "root", password: str = ROOT_PASSWORD) -> httpx.Client:
        """The first start's setup through its page; a client logged in as root."""
        c = self.client()
        page = c.get("/setup")
        token = (self.data_dir / "bootstrap-token").read_text().strip()
        r = c.post(
            "/setup", data={"csrf": csrf(page.text), "token": token, "name": name, "password": password}
        )
        assert r.status_code == 303, r.text
        return c

    def login(self, name: str, password: str) -> httpx.Client:
        c = self.client()
        page = c.get("/login")
        r = c.post("/login", data={"csrf": csrf(page.text), "name": name, "password": password})
        assert r.status_code == 303, r.text
        return c


def csrf(html: str) -> str:
    found = _CSRF.search(html)
    assert found, html[:500]
    return found.group(1)


def create_user(admin: httpx.Client, name: str, password: str = USER_PASSWORD, role: str = "user") -> None:
    page = admin.get("/users")
    r = admin.post("/users", data={"csrf": csrf(page.text), "name": name, "password": password, "role": role})
    assert r.status_code == 303, r.text


def create_token(c: httpx.Client, name: str = "ci") -> str:
    page = c.get("/settings/tokens")
    r = c.post("/settings/tokens", data={"csrf": csrf(page.text), "name": name})
    assert r.status_code == 201, r.text
    found = re.search(r'id="new-token">([^<]+)<', r.text)
    assert found
    return found.group(1)


def push(
    server: Server, token: str, data: bytes, *, workload: str, name: str, **params: Any
) -> httpx.Response:
    return httpx.post(
        f"{server.url}/api/v1/artifacts",
        params={"workload": workload, "name": name, **params},
        content=data,
        headers={"Authorization": f"Bearer {token}"},
        timeout=120,
    )


def make_comparisons(directory: Path, trace: Path) -> tuple[bytes, bytes]:
    """A passing and a failing comparison, made by the command line from
    ``trace`` (the failing candidate replayed at a quarter of the bandwidth)."""
    import json

    from typer.testing import CliRunner

    from commcanary.cli import app

    d = directory
    for args in (
        ["compile", str(trace), "-o", str(d / "c.json")],
        ["replay", str(d / "c.json"), "-o", str(d / "base.json"), "--bandwidth-gbps", "200"],
        ["replay", str(d / "c.json"), "-o", str(d / "slow.json"), "--bandwidth-gbps", "50"],
        ["compare", str(d / "base.json"), str(d / "base.json"), "-o", str(d / "pass.json")],
        ["compare", str(d / "base.json"), str(d / "slow.json"), "-o", str(d / "fail.json")],
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code in (0, 1), result.output
    passing, failing = (d / "pass.json").read_bytes(), (d / "fail.json").read_bytes()
    assert json.loads(passing)["verdict"] == "pass" and json.loads(failing)["verdict"] == "fail"
    return passing, failing
