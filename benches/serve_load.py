"""Load on the team server: concurrent clients pushing reports and reading
pages, on SQLite and on PostgreSQL.

    python benches/serve_load.py [--clients 50] [--reports 1000] [--database both] [--json OUT]

It makes ``--reports`` real reports (``replay`` of one canary under as many
seeds), starts ``commcanary serve`` as a process (SQLite in a temporary data
directory; PostgreSQL on a cluster of its own, Debian's ``initdb``), and
runs ``--clients`` loopback clients at once. Each takes the next report,
pushes it (API token), then reads a page (a session): the workload list,
the workload, its gate history, the canary registry, in turn. It reports
page and push latency (p50, p95, p99), requests that failed, artifacts lost
(every pushed digest must be listed and its bytes served back), and the
server's memory (RSS) after a tenth of the run and at its end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import blake3
import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from server_harness import Postgres, Server, create_token, postgres_bin  # noqa: E402

PAGES = ("/workloads", "/workloads/{wid}", "/workloads/{wid}/gate?branch=main", "/canaries")


def make_reports(directory: Path, count: int) -> list[Path]:
    from commcanary.cli import main

    canary = directory / "canary.json"
    assert (
        main(["compile", str(ROOT / "examples" / "traces" / "llama70b_tp8_trace.json"), "-o", str(canary)])
        == 0
    )
    reports = []
    for seed in range(count):
        out = directory / f"report{seed:04d}.json"
        assert main(["replay", str(canary), "-o", str(out), "--seed", str(seed)]) == 0
        reports.append(out)
    return reports


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


class RssSampler:
    """The server's resident memory (its worker processes too), sampled
    every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                tree = [self.process, *self.process.children(recursive=True)]
                rss = 0
                for p in tree:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        rss += p.memory_info().rss
                self.samples.append((time.monotonic(), rss))
            except psutil.NoSuchProcess:
                return
            self._stop.wait(0.2)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def drive(
    server: Server, token: str, cookies: httpx.Cookies, reports: list[Path], clients: int
) -> dict[str, Any]:
    queue: asyncio.Queue[Path] = asyncio.Queue()
    for r in reports:
        queue.put_nowait(r)
    page_ms: list[float] = []
    push_ms: list[float] = []
    failures: list[str] = []
    pushed: dict[str, int] = {}
    wid = {"id": 0}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    auth = {"Authorization": f"Bearer {token}"}

    async def client(k: int, http: httpx.AsyncClient) -> None:
        turn = k
        while True:
            try:
                report = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            body = report.read_bytes()
            t = time.perf_counter()
            r = await http.post(
                "/api/v1/artifacts",
                params={"workload": "load", "name": report.name, "branch": "main", "commit": report.stem},
                content=body,
                headers=auth,
            )
            push_ms.append((time.perf_counter() - t) * 1000)
            if r.status_code != 201:
                failures.append(f"push {report.name}: {r.status_code}")
                continue
            pushed[r.json()["digest"]] = r.json()["push_id"]
            wid["id"] = r.json()["workload_id"]
            page = PAGES[turn % len(PAGES)].format(wid=wid["id"])
            turn += 1
            t = time.perf_counter()
            r = await http.get(page, cookies=cookies)
            page_ms.append((time.perf_counter() - t) * 1000)
            if r.status_code != 200:
                failures.append(f"GET {page}: {r.status_code}")

    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=60) as http:
        await asyncio.gather(*(client(k, http) for k in range(clients)))
    return {
        "wall_s": time.perf_counter() - started,
        "page_ms": page_ms,
        "push_ms": push_ms,
        "failures": failures,
        "pushed": pushed,
        "workload_id": wid["id"],
    }


def check_nothing_lost(server: Server, token: str, reports: list[Path], workload_id: int) -> list[str]:
    """Every report's digest listed in the workload and its bytes served back."""
    auth = {"Authorization": f"Bearer {token}"}
    listed = httpx.get(f"{server.url}/api/v1/workloads/{workload_id}", headers=auth, timeout=120).json()[
        "pushes"
    ]
    by_digest = {p["digest"]: p["id"] for p in listed}
    lost = []
    with httpx.Client(base_url=server.url, headers=auth, timeout=60) as http:
        for report in reports:
            data = report.read_bytes()
            digest = blake3.blake3(data).hexdigest()
            push_id = by_digest.get(digest)
            if push_id is None:
                lost.append(f"{report.name}: not listed")
                continue
            served = http.get(f"/api/v1/workloads/{workload_id}/pushes/{push_id}/raw").content
            if served != data:
                lost.append(f"{report.name}: served other bytes")
    return lost


def run_one(
    database: str, reports: list[Path], clients: int, work: Path, pg: Postgres | None, workers: int
) -> dict[str, Any]:
    url = pg.new_database() if database == "postgresql" and pg is not None else None
    server = Server(work / f"data-{database}", url, ["--workers", str(workers)]).start()
    try:
        root = server.setup()
        token = create_token(root)
        assert server.proc is not None
        with RssSampler(server.proc.pid) as rss:
            result = asyncio.run(drive(server, token, root.cookies, reports, clients))
        lost = check_nothing_lost(server, token, reports, result["workload_id"])
    except Exception:
        print(server.output()[-3000:], file=sys.stderr)
        raise
    finally:
        server.stop()
    samples = rss.samples
    early = samples[max(0, len(samples) // 10 - 1)][1] if samples else 0
    late = samples[-1][1] if samples else 0
    page, push = result["page_ms"], result["push_ms"]
    return {
        "database": database,
        "server_workers": workers,
        "clients": clients,
        "reports": len(reports),
        "wall_s": round(result["wall_s"], 2),
        "pushes_per_s": round(len(push) / result["wall_s"], 1),
        "page_ms": {q: round(quantile(page, v), 1) for q, v in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))},
        "push_ms": {q: round(quantile(push, v), 1) for q, v in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))},
        "page_mean_ms": round(statistics.fmean(page), 1) if page else None,
        "failures": result["failures"][:20],
        "failed": len(result["failures"]),
        "lost": lost[:20],
        "lost_count": len(lost),
        "rss_mib_after_tenth": round(early / 2**20, 1),
        "rss_mib_at_end": round(late / 2**20, 1),
        "rss_mib_peak": round(max((s for _, s in samples), default=0) / 2**20, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--reports", type=int, default=1000)
    parser.add_argument("--database", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--server-workers", type=int, default=1, help="commcanary serve --workers N.")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="serve-load-") as tmp:
        work = Path(tmp)
        (work / "reports").mkdir()
        t = time.perf_counter()
        reports = make_reports(work / "reports", args.reports)
        print(f"{len(reports)} reports made in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        databases = ["sqlite", "postgresql"] if args.database == "both" else [args.database]
        pg = None
        if "postgresql" in databases:
            if postgres_bin() is None:
                print("PostgreSQL is not installed: SQLite only", file=sys.stderr)
                databases.remove("postgresql")
            else:
                import os

                pg = Postgres(Path(tempfile.mkdtemp(prefix="serve-load-pg-")))
                os.chmod(pg.directory, 0o755)
                pg.start()
        results = []
        try:
            for database in databases:
                r = run_one(database, reports, args.clients, work, pg, args.server_workers)
                results.append(r)
                print(
                    f"{database:10} {r['server_workers']} worker(s), {r['clients']} clients, {r['reports']} pushes in {r['wall_s']} s "
                    f"({r['pushes_per_s']}/s): page p50 {r['page_ms']['p50']} ms, p95 {r['page_ms']['p95']} ms, "
                    f"p99 {r['page_ms']['p99']} ms; push p99 {r['push_ms']['p99']} ms; failed {r['failed']}, "
                    f"lost {r['lost_count']}; server RSS {r['rss_mib_after_tenth']} MiB after a tenth, "
                    f"{r['rss_mib_at_end']} MiB at the end (peak {r['rss_mib_peak']})"
                )
        finally:
            if pg is not None:
                pg.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["failed"] == 0 and r["lost_count"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
