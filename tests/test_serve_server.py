"""``commcanary serve`` as a real process, on SQLite and on a real
PostgreSQL (the same tests on both): the first start and its bootstrap
token, accounts and sessions, API tokens, pushes of documents and raw
evidence, the background analysis, sharing, the gate history, and the
refusals (no session, another user's objects, CSRF, a reused bootstrap
token, traversal in upload names, oversized uploads and gzip bombs, revoked
tokens, the login rate limit, stored HTML), each asserting that nothing
leaked or changed. ``commcanary push`` is run against the server too."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from conftest import DATA, FIXTURES
from server_harness import (
    ROOT_PASSWORD,
    USER_PASSWORD,
    Server,
    create_token,
    create_user,
    csrf,
    make_comparisons,
    push,
)

pytest.importorskip("fastapi")

HANG = FIXTURES / "hang" / "gloo_tp4_rank3_skips_allreduce" / "fr_during_hang"
TRACE = DATA / "gen100.json"
runner = CliRunner()


@pytest.fixture(scope="module")
def comparisons(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    return make_comparisons(tmp_path_factory.mktemp("cmp"), TRACE)


def objects(server: Server) -> list[Path]:
    return sorted(p for p in (server.data_dir / "objects").rglob("*") if p.is_file())


def leftovers(server: Server) -> list[Path]:
    return sorted((server.data_dir / "tmp").iterdir())


# --- first start ------------------------------------------------------------------------------


def test_first_start_bootstrap_token_and_setup(server: Server) -> None:
    token_file = server.data_dir / "bootstrap-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert str(token_file) in server.output() and token not in server.output()
    c = server.client()
    assert c.get("/").headers["location"] == "/setup"
    page = c.get("/setup")
    # A short password is refused; the token stays.
    r = c.post("/setup", data={"csrf": csrf(page.text), "token": token, "name": "root", "password": "short"})
    assert r.status_code == 422 and token_file.exists()
    # A wrong token is refused.
    page = c.get("/setup")
    r = c.post(
        "/setup",
        data={"csrf": csrf(page.text), "token": "x" + token, "name": "root", "password": ROOT_PASSWORD},
    )
    assert r.status_code == 403 and token_file.exists()
    page = c.get("/setup")
    r = c.post(
        "/setup", data={"csrf": csrf(page.text), "token": token, "name": "root", "password": ROOT_PASSWORD}
    )
    assert r.status_code == 303 and not token_file.exists()
    assert "root (root)" in c.get("/workloads").text
    # The token, used again (a fresh browser): refused, nothing changes.
    other = server.client()
    assert other.get("/setup").status_code == 404
    login_page = other.get("/login")  # a form's valid (double-submit) CSRF token
    r = other.post(
        "/setup",
        data={"csrf": csrf(login_page.text), "token": token, "name": "evil", "password": ROOT_PASSWORD},
    )
    assert r.status_code == 403
    assert server.login("root", ROOT_PASSWORD).get("/users").text.count("<tr>") == 2  # header + root
    # Restarted, the server does not write a new token.
    server.stop()
    server.start()
    assert not token_file.exists()


# --- every route without a session or a token ---------------------------------------------------

PAGES = [
    "/workloads",
    "/workloads/1",
    "/workloads/1/pushes/1",
    "/workloads/1/pushes/1/raw",
    "/workloads/1/pushes/1/view",
    "/workloads/1/gate?branch=main",
    "/canaries",
    "/users",
    "/settings/tokens",
]
FORMS = ["/logout", "/workloads/1/share", "/users", "/settings/tokens", "/settings/tokens/1/revoke"]
API_GET = [
    "/api/v1/workloads",
    "/api/v1/workloads/1",
    "/api/v1/workloads/1/pushes/1/raw",
    "/api/v1/workloads/1/gate?branch=main",
    "/api/v1/analyses/1",
    "/api/v1/openapi.json",
]


def test_every_route_refuses_an_anonymous_caller(server: Server) -> None:
    root = server.setup()
    token = create_token(root)
    assert push(server, token, TRACE.read_bytes(), workload="w", name="t.json").status_code == 201
    before = objects(server)
    anon = server.client()
    for path in PAGES:
        r = anon.get(path)
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), path
    for path in FORMS:
        r = anon.post(
            path, data={"csrf": "x", "name": "mallory", "password": USER_PASSWORD, "user": "mallory"}
        )
        assert r.status_code in (303, 403) and "mallory" not in r.text, path
    for path in API_GET:
        r = anon.get(path)
        assert r.status_code == 401 and "t.json" not in r.text, path
    for bad in ("Bearer nope", "Basic cm9vdDp4", "Bearer  x y", "bearer"):
        assert httpx.get(f"{server.url}/api/v1/workloads", headers={"Authorization": bad}).status_code == 401
    r = httpx.post(
        f"{server.url}/api/v1/artifacts", params={"workload": "w", "name": "x.json"}, content=b"{}"
    )
    assert r.status_code == 401
    r = anon.post("/api/v1/workloads/1/analyses", json={"analysis": "hang", "pushes": [1]})
    assert r.status_code == 401
    assert objects(server) == before
    assert "mallory" not in root.get("/users").text
    # A session may not write through the API (no CSRF there): a token may.
    r = root.post("/api/v1/artifacts", params={"workload": "w", "name": "x.json"}, content=TRACE.read_bytes())
    assert r.status_code == 403


# --- accounts, tokens, pushes, sharing ----------------------------------------------------------


def test_users_tokens_pushes_and_sharing(server: Server) -> None:
    root = server.setup()
    create_user(root, "alice")
    create_user(root, "bob")
    alice, bob = server.login("alice", USER_PASSWORD), server.login("bob", USER_PASSWORD)
    assert bob.get("/users").status_code == 404  # not an admin
    token = create_token(alice, "ci")
    assert token not in alice.get("/settings/tokens").text  # shown once
    r = push(
        server,
        token,
        TRACE.read_bytes(),
        workload="job-a",
        name="gen100.json",
        branch="main",
        commit="abc123",
    )
    assert r.status_code == 201, r.text
    answer = r.json()
    assert answer["kind"] == "trace" and answer["created_workload"]
    wid, pid = answer["workload_id"], answer["push_id"]
    stored = objects(server)
    assert [p.name for p in stored] == [answer["digest"]]
    assert stored[0].read_bytes() == TRACE.read_bytes()
    # The same bytes again: kept once, pushed twice.
    assert push(server, token, TRACE.read_bytes(), workload="job-a", name="again.json").status_code == 201
    assert objects(server) == stored
    page = alice.get(f"/workloads/{wid}")
    assert page.status_code == 200 and "gen100.json" in page.text and "again.json" in page.text
    assert alice.get(f"/workloads/{wid}/pushes/{pid}/raw").content == TRACE.read_bytes()
    # Bob sees nothing of it: every object id answers as if it did not exist.
    for path in (
        f"/workloads/{wid}",
        f"/workloads/{wid}/pushes/{pid}",
        f"/workloads/{wid}/pushes/{pid}/raw",
        f"/workloads/{wid}/gate?branch=main",
    ):
        r = bob.get(path)
        assert r.status_code == 404 and "gen100" not in r.text, path
    assert "job-a" not in bob.get("/workloads").text
    bob_token = create_token(bob)
    headers = {"Authorization": f"Bearer {bob_token}"}
    for path in (
        f"/api/v1/workloads/{wid}",
        f"/api/v1/workloads/{wid}/pushes/{pid}/raw",
        f"/api/v1/workloads/{wid}/gate?branch=main",
    ):
        assert httpx.get(server.url + path, headers=headers).status_code == 404, path
    assert httpx.get(f"{server.url}/api/v1/workloads", headers=headers).json() == []
    r = httpx.post(
        f"{server.url}/api/v1/workloads/{wid}/analyses",
        headers=headers,
        json={"analysis": "hang", "pushes": [pid]},
    )
    assert r.status_code == 404
    # Bob may not share Alice's workload with himself.
    r = bob.post(f"/workloads/{wid}/share", data={"csrf": csrf(bob.get("/workloads").text), "user": "bob"})
    assert r.status_code == 404
    assert bob.get(f"/workloads/{wid}").status_code == 404
    # Alice shares it: now Bob sees it.
    r = alice.post(f"/workloads/{wid}/share", data={"csrf": csrf(page.text), "user": "bob"})
    assert r.status_code == 303
    assert bob.get(f"/workloads/{wid}").status_code == 200
    assert [w["name"] for w in httpx.get(f"{server.url}/api/v1/workloads", headers=headers).json()] == [
        "job-a"
    ]
    # Root (an admin) sees every workload.
    assert "job-a" in root.get("/workloads").text
    # A revoked token is refused from then on.
    tokens_page = alice.get("/settings/tokens")
    revoke = re.search(r'action="(/settings/tokens/\d+/revoke)"', tokens_page.text)
    assert revoke
    assert alice.post(revoke.group(1), data={"csrf": csrf(tokens_page.text)}).status_code == 303
    r = push(server, token, b'{"format": "x"}', workload="job-a", name="late.json")
    assert r.status_code == 401
    assert (
        httpx.get(f"{server.url}/api/v1/workloads", headers={"Authorization": f"Bearer {token}"}).status_code
        == 401
    )
    # Logging out ends the session for good.
    logout = alice.post("/logout", data={"csrf": csrf(alice.get("/workloads").text)})
    assert logout.status_code == 303
    assert alice.get("/workloads").status_code == 303


def test_forms_without_a_csrf_token_change_nothing(server: Server) -> None:
    root = server.setup()
    page = root.get("/users").text
    for data in ({}, {"csrf": "wrong"}, {"csrf": csrf(page) + "x"}):
        r = root.post("/users", data={**data, "name": "mallory", "password": USER_PASSWORD, "role": "admin"})
        assert r.status_code == 403
        r = root.post("/settings/tokens", data={**data, "name": "stolen"})
        assert r.status_code == 403
        r = root.post("/logout", data=data)
        assert r.status_code == 403
    assert "mallory" not in root.get("/users").text
    assert "stolen" not in root.get("/settings/tokens").text
    # The login form checks its own (double-submit) token.
    c = server.client()
    c.get("/login")
    r = c.post("/login", data={"csrf": "forged", "name": "root", "password": ROOT_PASSWORD})
    assert r.status_code == 403 and "commcanary_session" not in r.headers.get("set-cookie", "")


def test_logins_are_rate_limited(server: Server) -> None:
    server.setup()
    c = server.client()
    codes = []
    for i in range(50):
        page = c.get("/login")
        r = c.post(
            "/login", data={"csrf": csrf(page.text), "name": "root", "password": f"wrong password {i}"}
        )
        codes.append(r.status_code)
    assert set(codes[:10]) == {401}
    assert set(codes[10:]) == {429}
    # Within the window even the right password is refused.
    page = c.get("/login")
    r = c.post("/login", data={"csrf": csrf(page.text), "name": "root", "password": ROOT_PASSWORD})
    assert r.status_code == 429 and "commcanary_session" not in r.headers.get("set-cookie", "")


# --- uploads ---------------------------------------------------------------------------------------


def test_upload_names_oversize_bombs_and_bad_documents(tmp_path: Path, database: str | None) -> None:
    server = Server(tmp_path / "data", database, ["--max-upload-bytes", str(4 << 20)]).start()
    try:
        root = server.setup()
        token = create_token(root)
        r = push(server, token, TRACE.read_bytes(), workload="w", name="../../../../etc/cron.d/evil.json")
        assert r.status_code == 201
        page = root.get(f"/workloads/{r.json()['workload_id']}").text
        assert "evil.json" in page and "../" not in page and "etc" not in page
        assert not Path("/etc/cron.d/evil.json").exists()
        assert all(server.data_dir in p.parents for p in objects(server))
        before = objects(server)
        # Over the size limit: refused as it arrives.
        r = push(server, token, b"x" * (5 << 20), workload="w", name="big.json")
        assert r.status_code == 413
        # A gzip bomb: 4 MiB that inflates to 4 GiB.
        bomb = tmp_path / "bomb.json.gz"
        with gzip.open(bomb, "wb", compresslevel=9) as f:
            block = b"\0" * (1 << 20)
            for _ in range(4096):
                f.write(block)
        assert bomb.stat().st_size < (4 << 20)
        r = push(server, token, bomb.read_bytes(), workload="w", name="bomb.json.gz")
        assert r.status_code == 413, r.text
        # A document its reader refuses: the field named, nothing kept.
        doc = json.loads(TRACE.read_bytes())
        del doc["events"]
        r = push(server, token, json.dumps(doc).encode(), workload="w", name="broken.json")
        assert r.status_code == 422 and "broken.json" in r.text
        r = push(server, token, b"\x00\x01binary", workload="w", name="blob.bin")
        assert r.status_code == 422
        for bad in (
            {"workload": "<script>"},
            {"workload": "w", "branch": "a b"},
            {"workload": "w", "commit": "$(x)"},
        ):
            r = httpx.post(
                f"{server.url}/api/v1/artifacts",
                params={"name": "t.json", **bad},
                content=TRACE.read_bytes(),
                headers={"Authorization": f"Bearer {token}"},
            )
            assert r.status_code == 422, bad
        assert objects(server) == before and leftovers(server) == []
    finally:
        server.stop()


def test_stored_html_is_rendered_escaped(server: Server) -> None:
    root = server.setup()
    token = create_token(root)
    hang = json.loads(_diagnosed_hang())
    hang["summary"] = "<script>alert(1)</script>"
    hang["root"][0]["reason"] = '"><img src=x onerror=alert(2)>'
    r = push(server, token, json.dumps(hang).encode(), workload="w", name="hang.json")
    assert r.status_code == 201, r.text
    wid, pid = r.json()["workload_id"], r.json()["push_id"]
    view = root.get(f"/workloads/{wid}/pushes/{pid}/view")
    assert view.status_code == 200
    assert "<script>alert" not in view.text and "<img src=x" not in view.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in view.text
    assert "script-src" not in view.headers["content-security-policy"]
    r = root.post(
        "/users", data={"csrf": csrf(root.get("/users").text), "name": "<b>x</b>", "password": USER_PASSWORD}
    )
    assert r.status_code == 422 and "<b>x</b>" not in r.text


def run_push(*args: str) -> subprocess.CompletedProcess[str]:
    """``commcanary push ARGS`` as a process."""
    return subprocess.run(
        [sys.executable, "-m", "commcanary", "push", *args], capture_output=True, text=True, check=False
    )


def _diagnosed_hang() -> bytes:
    from commcanary.analysis.hang import diagnose_hang

    return diagnose_hang(HANG).data


# --- raw evidence, the background analysis, commcanary push -------------------------------------


def _analysed(root: httpx.Client, wid: int) -> str:
    """The workload's page once its analysis is done (failing if it failed or took 2 minutes)."""
    deadline = time.monotonic() + 120
    while True:
        page = root.get(f"/workloads/{wid}").text
        if "status-done" in page or "status-failed" in page or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "status-done" in page, page
    return page


def test_push_raw_evidence_and_the_analysis_finds_the_root(server: Server, tmp_path: Path) -> None:
    root = server.setup()
    token_file = tmp_path / "token"
    token_file.write_text(create_token(root) + "\n")
    files = sorted(HANG.iterdir())
    out = run_push(
        *map(str, files), "--server", server.url, "--token-file", str(token_file), "--workload", "tp4-hang"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("flight recorder dump") == len(files)
    assert "queued hang analysis" in out.stdout
    wid = int(re.search(r"/workloads/(\d+)", out.stdout).group(1))  # type: ignore[union-attr]
    page = _analysed(root, wid)
    result = re.search(rf'href="/workloads/{wid}/pushes/(\d+)">view', page)
    assert result
    # The job's timeline too, for Perfetto, with the hang marked.
    timeline = re.search(rf'href="/workloads/{wid}/pushes/(\d+)">timeline.json</a></td><td>timeline<', page)
    assert timeline, page
    timeline_page = root.get(f"/workloads/{wid}/pushes/{timeline.group(1)}").text
    assert "ui.perfetto.dev" in timeline_page
    marks = root.get(f"/workloads/{wid}/pushes/{timeline.group(1)}/raw").content
    assert b"root: " in marks and b"/analysis-" not in marks
    job = re.findall(r'<div class="label">([^<]+)</div><div class="value">([^<]+)</div>', page)
    assert job == [("Ranks", "4"), ("Groups", "3"), ("Hang root ranks", "3")], job
    view = root.get(f"/workloads/{wid}/pushes/{result.group(1)}/view").text
    assert 'class="row-root"' in view and "rank 3" in view.lower()
    # The command line's diagnosis, byte for byte, the evidence named as pushed.
    raw = root.get(f"/workloads/{wid}/pushes/{result.group(1)}/raw").content
    assert raw == _diagnosed_hang().replace(f'"{HANG}/'.encode(), b'"')
    # Bad input to push: one line, exit 3.
    bad = run_push(str(files[0]), "--server", server.url, "--token-file", str(tmp_path / "missing"))
    assert bad.returncode == 3 and bad.stderr.count("\n") == 1 and "missing" in bad.stderr
    token_file.write_text("not-a-token\n")
    refused = run_push(str(files[0]), "--server", server.url, "--token-file", str(token_file))
    assert refused.returncode == 3 and "401" in refused.stderr


def test_an_agent_alarm_pushes_its_evidence_and_the_server_diagnoses_it(
    server: Server, tmp_path: Path
) -> None:
    from commcanary.cli.agent import _pusher

    root = server.setup()
    evidence = tmp_path / "alarm-x" / "evidence"
    shutil.copytree(HANG, evidence)
    (evidence / ".partial-file").write_bytes(b"half written")  # never pushed
    _pusher(server.url, create_token(root), "live-tp4")(evidence, "alarm-x")
    page = root.get("/workloads").text
    wid = int(re.search(r'href="/workloads/(\d+)">live-tp4<', page).group(1))  # type: ignore[union-attr]
    page = _analysed(root, wid)
    assert all(f">{f.name}<" in page for f in HANG.iterdir()) and ".partial-file" not in page


# --- the gate history -------------------------------------------------------------------------------


def test_gate_history_marks_the_first_failing_commit(
    server: Server, comparisons: tuple[bytes, bytes]
) -> None:
    passing, failing = comparisons
    root = server.setup()
    token = create_token(root)
    verdicts = ["pass"] * 6 + ["fail"] * 4
    wid = 0
    for i, v in enumerate(verdicts):
        r = push(
            server,
            token,
            passing if v == "pass" else failing,
            workload="lane",
            name=f"cmp{i}.json",
            branch="main",
            commit=f"c{i:02d}",
        )
        assert r.status_code == 201 and r.json()["verdict"] == v
        wid = r.json()["workload_id"]
    page = root.get(f"/workloads/{wid}/gate", params={"branch": "main"})
    assert page.status_code == 200
    assert page.text.count("<circle") == 10
    assert page.text.count('data-verdict="fail"') == 4
    assert 'id="first-fail-commit">c06<' in page.text
    api = httpx.get(
        f"{server.url}/api/v1/workloads/{wid}/gate",
        params={"branch": "main"},
        headers={"Authorization": f"Bearer {token}"},
    ).json()
    assert [p["commit"] for p in api] == [f"c{i:02d}" for i in range(10)]
    assert float(api[-1]["facts"]["delta.p99_pct"]) > float(api[-1]["facts"]["thresholds.p99_threshold_pct"])


def test_killed_mid_upload_leaves_nothing_and_resumes_analyses(tmp_path: Path, database: str | None) -> None:
    server = Server(tmp_path / "data", database).start()
    root = server.setup()
    token = create_token(root)
    r = push(server, token, TRACE.read_bytes(), workload="w", name="t.json")
    wid = r.json()["workload_id"]
    ids = [
        push(server, token, f.read_bytes(), workload="w", name=f.name).json()["push_id"]
        for f in sorted(HANG.iterdir())
    ]
    # An analysis queued, and an upload that never finishes; then SIGKILL.
    import socket

    r = httpx.post(
        f"{server.url}/api/v1/workloads/{wid}/analyses",
        json={"analysis": "hang", "pushes": ids},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 201
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(
        b"POST /api/v1/artifacts?workload=w&name=half.json HTTP/1.1\r\nHost: x\r\n"
        + f"Authorization: Bearer {token}\r\nContent-Length: 10000000\r\n\r\n".encode()
        + b"{" * 100000
    )
    deadline = time.monotonic() + 10
    while not leftovers(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers(server), "the upload did not reach the disk"
    stored = objects(server)
    server.stop(kill=True)
    s.close()
    server.start()
    try:
        # Nothing of the cut upload is left; the resumed analysis may already
        # be working in its own temporary directory, which it removes when done.
        assert [p for p in leftovers(server) if not p.name.startswith("analysis-")] == []
        root = server.login("root", ROOT_PASSWORD)
        page = root.get(f"/workloads/{wid}").text
        assert "t.json" in page and "half.json" not in page
        assert all(p in objects(server) for p in stored)
        # The analysis (queued, running or done when the server died) ends done.
        deadline = time.monotonic() + 120
        while "status-done" not in page and time.monotonic() < deadline:
            time.sleep(0.5)
            page = root.get(f"/workloads/{wid}").text
        assert "status-done" in page
        deadline = time.monotonic() + 10
        while leftovers(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert leftovers(server) == []
    finally:
        server.stop()


def test_concurrent_first_pushes_to_one_workload(server: Server) -> None:
    """Pushes racing to make the same workload, and the same bytes, all land."""
    from concurrent.futures import ThreadPoolExecutor

    token = create_token(server.setup())
    data = TRACE.read_bytes()
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(lambda i: push(server, token, data, workload="race", name=f"t{i}.json"), range(16))
        )
    assert [a.status_code for a in answers] == [201] * 16
    assert len({a.json()["workload_id"] for a in answers}) == 1
    assert len(objects(server)) == 1


def test_a_workload_page_lists_its_pushes_a_hundred_at_a_time(server: Server) -> None:
    root = server.setup()
    token = create_token(root)
    data = TRACE.read_bytes()
    wid = 0
    for i in range(105):
        wid = push(server, token, data, workload="many", name=f"t{i:03d}.json").json()["workload_id"]
    page = root.get(f"/workloads/{wid}").text
    assert "105 pushes" in page and page.count("t104.json") == 1 and "t004.json" not in page
    older = re.search(r'id="older" href="([^"]+)"', page)
    assert older
    rest = root.get(older.group(1).replace("&amp;", "&")).text
    assert (
        "t004.json" in rest and "t000.json" in rest and "t005.json" not in rest and 'id="older"' not in rest
    )
    listed = root.get("/workloads").text
    assert re.search(r'>many</a></td><td>root</td><td class="num">105<', listed)


def test_signed_artifacts_are_verified_and_marked(server: Server, tmp_path: Path) -> None:
    from commcanary.cli import main

    root = server.setup()
    token_file = tmp_path / "token"
    token_file.write_text(create_token(root))
    key = tmp_path / "key.pem"
    assert main(["keygen", "-o", str(key)]) == 0
    trace = tmp_path / "signed.json"
    shutil.copyfile(TRACE, trace)
    assert main(["sign", str(trace), "--key", str(key)]) == 0
    # Signed, but the server trusts no key yet: refused, nothing kept.
    out = run_push(str(trace), "--server", server.url, "--token-file", str(token_file), "--workload", "s")
    assert out.returncode == 3 and "trusts no key" in out.stderr
    assert objects(server) == []
    shutil.copyfile(key.with_name(key.name + ".pub"), server.data_dir / "trusted-keys.pem")
    out = run_push(str(trace), "--server", server.url, "--token-file", str(token_file), "--workload", "s")
    assert out.returncode == 0 and ", signed by " in out.stdout, out.stderr
    page = root.get("/workloads").text
    wid = re.search(r'href="/workloads/(\d+)">s<', page)
    assert wid
    from commcanary.signing import key_id

    assert key_id(key) in out.stdout and key_id(key) in root.get(f"/workloads/{wid.group(1)}").text
    # A signature of other bytes: refused.
    tampered = tmp_path / "tampered.json"
    tampered.write_bytes(TRACE.read_bytes().replace(b"}", b" }", 1))
    shutil.copyfile(trace.with_name(trace.name + ".sig"), tampered.with_name(tampered.name + ".sig"))
    out = run_push(str(tampered), "--server", server.url, "--token-file", str(token_file), "--workload", "s")
    assert out.returncode == 3 and "signature" in out.stderr


def test_system_settings_retention_and_upload_limit(server: Server, tmp_path: Path) -> None:
    import sqlalchemy

    root = server.setup()
    token = create_token(root)
    old = push(server, token, TRACE.read_bytes(), workload="keep", name="old.json").json()
    kept = push(
        server,
        token,
        (DATA / "hang" / "gloo_tp4_rank3_skips_allreduce.fr.json").read_bytes(),
        workload="keep",
        name="new.json",
    ).json()
    assert len(objects(server)) == 2
    # The old push, three days old.
    url = server.database or f"sqlite:///{server.data_dir / 'commcanary.db'}"
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sqlalchemy.text("UPDATE pushes SET pushed_at = pushed_at - 3 * 86400 WHERE id = :id"),
            {"id": old["push_id"]},
        )
    engine.dispose()
    create_user(root, "frank")
    frank = server.login("frank", USER_PASSWORD)
    assert frank.get("/settings/system").status_code == 404
    page = root.get("/settings/system")
    assert page.status_code == 200
    r = frank.post(
        "/settings/system",
        data={"csrf": csrf(frank.get("/workloads").text), "retention_days": "1", "max_upload_bytes": "4096"},
    )
    assert r.status_code == 404
    for bad in (
        {"retention_days": "-1", "max_upload_bytes": "4096"},
        {"retention_days": "1", "max_upload_bytes": "1"},
    ):
        r = root.post("/settings/system", data={"csrf": csrf(page.text), **bad})
        assert r.status_code == 422
    assert len(objects(server)) == 2
    r = root.post(
        "/settings/system", data={"csrf": csrf(page.text), "retention_days": "1", "max_upload_bytes": "4096"}
    )
    assert r.status_code == 200 and "removed 1 push(es) and 1 artifact(s)" in r.text
    remaining = objects(server)
    assert [p.name for p in remaining] == [kept["digest"]]
    listed = root.get(f"/workloads/{kept['workload_id']}").text
    assert "new.json" in listed and "old.json" not in listed
    # The upload limit from the settings: 4 KiB.
    assert push(server, token, TRACE.read_bytes(), workload="keep", name="big.json").status_code == 413


def test_the_canary_registry_filters_and_idle_sessions(tmp_path: Path, database: str | None) -> None:
    from commcanary.cli import main

    server = Server(tmp_path / "data", database, ["--session-idle", "3"]).start()
    try:
        root = server.setup()
        token = create_token(root)
        canary = tmp_path / "c.json"
        assert main(["compile", str(TRACE), "-o", str(canary)]) == 0
        r = push(
            server, token, canary.read_bytes(), workload="lane-a", name="c.json", branch="main", commit="c1"
        )
        assert r.status_code == 201 and r.json()["kind"] == "canary"
        push(server, token, _diagnosed_hang(), workload="job-b", name="hang.json", branch="dev")
        registry = root.get("/canaries").text
        assert r.json()["digest"] in registry and "full_source" in registry and "lossless_timing" in registry
        # The workload list's filters: by name, owner, branch and verdict.
        names = lambda html: re.findall(r'href="/workloads/\d+">([^<]+)</a>', html)  # noqa: E731
        assert names(root.get("/workloads").text) == ["job-b", "lane-a"]
        assert names(root.get("/workloads", params={"q": "lane"}).text) == ["lane-a"]
        assert names(root.get("/workloads", params={"branch": "dev"}).text) == ["job-b"]
        assert names(root.get("/workloads", params={"verdict": "hang"}).text) == ["job-b"]
        assert names(root.get("/workloads", params={"owner": "nobody"}).text) == []
        assert names(root.get("/workloads", params={"owner": "root", "q": "%"}).text) == []
        # A session unused past --session-idle ends.
        time.sleep(4)
        assert root.get("/workloads").status_code == 303
    finally:
        server.stop()


def test_a_straggler_analysis_keeps_its_per_rank_timeline(server: Server, tmp_path: Path) -> None:
    from commcanary.analysis.stragglers import diagnose_stragglers

    root = server.setup()
    token_file = tmp_path / "token"
    token_file.write_text(create_token(root))
    job = FIXTURES / "kineto" / "gloo_w4_ddp_straggler" / "markers"
    ranks = sorted(job.glob("rank*.json.gz"))
    out = run_push(
        *map(str, ranks), "--server", server.url, "--token-file", str(token_file), "--workload", "ddp"
    )
    assert out.returncode == 0 and "queued stragglers analysis" in out.stdout, out.stderr
    wid = int(re.search(r"/workloads/(\d+)", out.stdout).group(1))  # type: ignore[union-attr]
    deadline = time.monotonic() + 180
    page = ""
    while "status-done" not in page and "status-failed" not in page and time.monotonic() < deadline:
        time.sleep(0.5)
        page = root.get(f"/workloads/{wid}").text
    assert "status-done" in page, page
    result = re.search(rf'href="/workloads/{wid}/pushes/(\d+)">view', page)
    assert result
    view = root.get(f"/workloads/{wid}/pushes/{result.group(1)}/view").text
    assert 'class="timeline"' in view
    assert view.count("<rect") > 100, "the per-rank timeline is drawn (from the member table the run kept)"
    assert "/analysis-" not in view
    expected = diagnose_stragglers(job)
    raw = root.get(f"/workloads/{wid}/pushes/{result.group(1)}/raw").content
    assert raw == expected.data.replace(f'"{job}/'.encode(), b'"')
    # The same document pushed by hand: its page without the member table.
    r = push(server, create_token(root, "b"), expected.data, workload="by-hand", name="s.json")
    assert r.status_code == 201 and r.json()["kind"] == "straggler diagnosis"
    hand = root.get(f"/workloads/{r.json()['workload_id']}/pushes/{r.json()['push_id']}/view")
    assert hand.status_code == 200 and "Stragglers" in hand.text
    assert "<rect" not in hand.text  # no member table: no drawing
