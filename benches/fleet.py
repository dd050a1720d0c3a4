#!/usr/bin/env python3
"""Fleets of ranks on this machine, single-process against a Dask
``LocalCluster``: import, hang diagnosis from dumps, straggler diagnosis,
and compile-many; wall time, peak memory of the client and of each worker,
and whether every output is byte-identical.

Usage::

    python benches/fleet.py [--workdir /tmp/commcanary-fleet] [--ranks 1024] [--rank-mb 4]
        [--workers 2] [--worker-memory 1.5GiB] [--compile-traces 1000] [--json OUT]

The synthetic job replicates the real 4-rank gloo fixture
``tests/data/fixtures/kineto/gloo_tp4_decode`` (prefill and decode steps:
all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce,
send/recv, barrier) ``ranks / 4`` times: replica ``k`` holds global ranks
``4k..4k+3`` and its own remapped groups (``replica_k`` for the fixture's
world, ``replica_k_tp_pair_i`` for its pairs), in a job of world size
``ranks``; each rank's event list is repeated in time until the file holds
``--rank-mb`` MB, with step numbers continued. The dumps replicate the
desync fixture's JSON Flight Recorder dumps the same way. The
compile-many traces are ``examples/make_synthetic_trace.py`` traces with
their own seeds.

Each command runs as a process (``python -m commcanary ...``); its memory is
sampled every 50 ms over its whole process tree (psutil), so the client's
peak and each worker process's peak are reported apart.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
KINETO = ROOT / "tests" / "data" / "fixtures" / "kineto" / "gloo_tp4_decode"
DUMPS = ROOT / "tests" / "data" / "fixtures" / "hang" / "gloo_w4_desync_broadcast" / "fr_during_hang"
CLI = [sys.executable, "-m", "commcanary"]
STEP = re.compile(r'"ProfilerStep#(\d+)"')
PID = re.compile(r'"pid": ?(\d+)')


def make_kineto_job(out: Path, ranks: int, rank_mb: float) -> int:
    """Writes ``ranks`` rank files into ``out``; returns their total bytes."""
    if ranks % 4:
        raise SystemExit("--ranks must be a multiple of 4 (the fixture has 4 ranks)")
    out.mkdir(parents=True, exist_ok=True)
    marker = out / f".made-{ranks}-{rank_mb}-v2"
    if marker.exists():
        return sum(p.stat().st_size for p in out.glob("rank*.json"))
    for p in out.glob("rank*.json"):
        p.unlink()
    total = 0
    docs = [json.loads(gzip.decompress((KINETO / f"rank{r}.json.gz").read_bytes())) for r in range(4)]
    # One period for every rank, so the ranks' repeats stay one job on one clock.
    timed = [e for d in docs for e in d["traceEvents"] if "ts" in e]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 1000.0
    for r in range(4):
        doc = docs[r]
        events = doc.pop("traceEvents")
        steps = max((int(m) for m in STEP.findall(json.dumps(events))), default=0)
        one = len(json.dumps(events))
        repeats = max(1, math.ceil(rank_mb * 1e6 / one))
        body_parts = []
        for i in range(repeats):
            shifted = []
            for e in events:
                if i and e.get("ph") == "M":
                    continue
                e = dict(e)
                if "ts" in e:
                    e["ts"] = e["ts"] + i * span
                shifted.append(e)
            text = json.dumps(shifted)[1:-1]
            if i:
                shift = i * steps
                text = STEP.sub(lambda m, shift=shift: f'"ProfilerStep#{int(m.group(1)) + shift}"', text)
            body_parts.append(text)
        body = ", ".join(body_parts)
        info = doc["distributedInfo"]
        for k in range(ranks // 4):
            rank = 4 * k + r
            groups = []
            for g in info["pg_config"]:
                desc = "replica" if g["pg_desc"] == "default_pg" else g["pg_desc"]
                groups.append(
                    {
                        **g,
                        "pg_name": f"{k}.{g['pg_name']}",
                        "pg_desc": f"{desc}_{k}",
                        "ranks": [4 * k + x for x in g["ranks"]],
                    }
                )
            head = {
                **doc,
                "distributedInfo": {**info, "rank": rank, "world_size": ranks, "pg_config": groups},
                "traceName": f"rank{rank}.json",
            }
            text = (
                json.dumps(head)[:-1]
                + ', "traceEvents": ['
                + PID.sub(lambda m, k=k: f'"pid": {int(m.group(1)) + 1_000_000 * k}', body)
                + "]}"
            )
            path = out / f"rank{rank:05d}.json"
            path.write_text(text)
            total += len(text)
    marker.touch()
    return total


def make_dumps(out: Path, ranks: int) -> None:
    """JSON Flight Recorder dumps of ``ranks`` ranks (the desync fixture, replicated)."""
    out.mkdir(parents=True, exist_ok=True)
    if (out / f".made-{ranks}").exists():
        return
    for r in range(4):
        doc = json.loads(gzip.decompress((DUMPS / f"fr_trace_rank_{r}.json.gz").read_bytes()))
        for k in range(ranks // 4):
            d = json.loads(json.dumps(doc))
            d["pg_config"] = {
                f"{k}.{name}": {**c, "ranks": json.dumps([4 * k + x for x in json.loads(c["ranks"])])}
                for name, c in doc["pg_config"].items()
            }
            for e in d["entries"]:
                name, desc = e["process_group"]
                e["process_group"] = [f"{k}.{name}", f"{desc}_{k}"]
            (out / f"fr_trace_rank_{4 * k + r}.json").write_text(json.dumps(d))
    (out / f".made-{ranks}").touch()


def make_traces(out: Path, count: int) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT / "examples"))
    from make_synthetic_trace import trace

    paths = []
    for i in range(count):
        p = out / f"job{i:04d}.trace.json"
        if not p.exists():
            p.write_text(json.dumps(trace(200 + (i % 7) * 50, 8, i)))
        paths.append(p)
    return paths


def measure(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs ``cmd`` (with ``env`` added to this environment); its wall time,
    exit status, the client's peak RSS and each descendant process's peak
    RSS (bytes)."""
    import os
    import tempfile

    start = time.perf_counter()
    # Files, not pipes: a command that prints a long table must never block on a full pipe.
    with tempfile.TemporaryFile(mode="w+") as out_file, tempfile.TemporaryFile(mode="w+") as err_file:
        proc = subprocess.Popen(
            cmd, stdout=out_file, stderr=err_file, text=True, env={**os.environ, **(env or {})}
        )
        root = psutil.Process(proc.pid)
        peaks: dict[int, int] = {}
        names: dict[int, str] = {}
        while proc.poll() is None:
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            for p in tree:
                try:
                    rss = p.memory_info().rss
                    if p.pid not in names:
                        names[p.pid] = " ".join(p.cmdline())[:200]
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                peaks[p.pid] = max(peaks.get(p.pid, 0), rss)
            time.sleep(0.05)
        proc.wait()
        wall = time.perf_counter() - start
        out_file.seek(0)
        err_file.seek(0)
        out, err = out_file.read(), err_file.read()
    client = peaks.pop(proc.pid, 0)
    # Worker processes are the spawned children that lived long enough to be seen working.
    workers = sorted((v for pid, v in peaks.items() if "spawn" in names.get(pid, "")), reverse=True)
    return {
        "wall_s": wall,
        "rc": proc.returncode,
        "client_peak": client,
        "worker_peaks": workers,
        "stdout": out,
        "stderr": err,
    }


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/commcanary-fleet"))
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--rank-mb", type=float, default=4.0, help="Size of each rank's trace file (MB).")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="1.5GiB")
    parser.add_argument("--compile-traces", type=int, default=1000)
    parser.add_argument(
        "--skip", default="", help="Comma-separated stages to skip: import, hang, stragglers, compile."
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="Rounds of the import plans' comparison (single, sharded, sharded with whole shards, gather).",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir
    skip = set(filter(None, args.skip.split(",")))
    dask = ["--workers", str(args.workers), "--worker-memory", args.worker_memory]
    results: dict[str, Any] = {"ranks": args.ranks, "rank_mb": args.rank_mb, "workers": args.workers}

    def compare(stage: str, single: list[str], outputs: tuple[Path, Path], extra: list[str] = dask) -> None:
        here = measure([*single, "-o", str(outputs[0])])
        there = measure([*single, "-o", str(outputs[1]), *extra])
        same = outputs[0].read_bytes() == outputs[1].read_bytes() if here["rc"] in (0, 1) else False
        results[stage] = {"single": here, "dask": there, "same_bytes": same}
        print(
            f"{stage:11} single {here['wall_s']:7.1f} s peak {gib(here['client_peak'])}  |  dask {there['wall_s']:7.1f} s "
            f"client {gib(there['client_peak'])}, workers {', '.join(gib(w) for w in there['worker_peaks'][: args.workers])}"
            f"  |  ratio {there['wall_s'] / here['wall_s']:.2f}  same bytes: {same}  (rc {here['rc']}/{there['rc']})"
        )
        for r in (here, there):
            if r["rc"] not in (0, 1):
                print(r["stderr"][-2000:], file=sys.stderr)

    if "import" not in skip or "stragglers" not in skip:
        t = time.perf_counter()
        total = make_kineto_job(work / "job", args.ranks, args.rank_mb)
        results["input_bytes"] = total
        print(
            f"job: {args.ranks} ranks, {total / 1e9:.2f} GB of traces ({time.perf_counter() - t:.0f} s to make)"
        )
    if "import" not in skip:
        compare(
            "import",
            [*CLI, "import-kineto", str(work / "job"), "--no-cache"],
            (work / "import-single.json", work / "import-dask.json"),
        )
        # The two plans on a cluster and the single process, interleaved
        # round by round (this host's speed drifts between runs): medians.
        plans: dict[str, dict[str, str] | None] = {
            "single": None,
            "sharded": {"COMMCANARY_IMPORT_PLAN": "sharded"},
            "whole-shards": {"COMMCANARY_IMPORT_PLAN": "sharded", "COMMCANARY_IMPORT_RANGES": "1"},
            "gather": {"COMMCANARY_IMPORT_PLAN": "gather"},
        }
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in plans}
        same: dict[str, bool] = {k: True for k in plans}
        for _ in range(args.repeat):
            for k, env in plans.items():
                out = work / f"import-{k}.json"
                cmd = [*CLI, "import-kineto", str(work / "job"), "--no-cache", "-o", str(out)]
                runs[k].append(measure(cmd) if env is None else measure([*cmd, *dask], env=env))
                same[k] = same[k] and out.read_bytes() == (work / "import-single.json").read_bytes()
        walls = {k: sorted(r["wall_s"] for r in v)[len(v) // 2] for k, v in runs.items()}
        results["import_plans"] = {
            k: {
                "wall_s": sorted(r["wall_s"] for r in v),
                "median_s": walls[k],
                "client_peak": max(r["client_peak"] for r in v),
                "worker_peak": max((w for r in v for w in r["worker_peaks"][: args.workers]), default=0),
            }
            for k, v in runs.items()
        }
        for k in plans:
            results["import_plans"][k]["same_bytes"] = same[k]
        for k in ("sharded", "whole-shards", "gather"):
            plan = results["import_plans"][k]
            print(
                f"import, {k:12} plan: median {walls[k]:.1f} s against single {walls['single']:.1f} s "
                f"(ratio {walls[k] / walls['single']:.2f}, {args.repeat} rounds), client {gib(plan['client_peak'])}, "
                f"worker {gib(plan['worker_peak'])}, same bytes every round: {same[k]}"
            )
    if "stragglers" not in skip:
        compare(
            "stragglers",
            [*CLI, "diagnose", "stragglers", str(work / "job"), "--no-cache"],
            (work / "stragglers-single.json", work / "stragglers-dask.json"),
        )
    if "hang" not in skip:
        make_dumps(work / "dumps", args.ranks)
        compare(
            "hang",
            [*CLI, "diagnose", "hang", str(work / "dumps"), "--no-cache"],
            (work / "hang-single.json", work / "hang-dask.json"),
        )
        doc = json.loads((work / "hang-single.json").read_bytes())
        roots = doc.get("root") or []
        results["hang"]["roots"] = len(roots)
        results["hang"]["first_root"] = roots[0]["reason"] if roots else None
        print(f"hang: {len(roots)} root(s) found, the first: {results['hang']['first_root']}")
    if "compile" not in skip:
        traces = make_traces(work / "traces", args.compile_traces)
        for d in ("cm-single", "cm-dask"):
            for p in (work / d).glob("*") if (work / d).exists() else []:
                p.unlink()
        here = measure([*CLI, "compile-many", *map(str, traces), "-o", str(work / "cm-single")])
        there = measure([*CLI, "compile-many", *map(str, traces), "-o", str(work / "cm-dask"), *dask])
        names = sorted(p.name for p in (work / "cm-single").glob("*.canary.json"))
        same = all(
            (work / "cm-single" / n).read_bytes() == (work / "cm-dask" / n).read_bytes() for n in names
        )
        summary = json.loads((work / "cm-dask" / "compile-many.summary.json").read_bytes())
        # Every canary is also a single `compile`'s bytes: checked on every 100th trace.
        single_ok = True
        for p in traces[::100]:
            out = work / "one.canary.json"
            subprocess.run([*CLI, "compile", str(p), "-o", str(out)], check=True, capture_output=True)
            single_ok &= (
                out.read_bytes()
                == (work / "cm-dask" / (p.name.removesuffix(".trace.json") + ".canary.json")).read_bytes()
            )
        results["compile_many"] = {
            "single": here,
            "dask": there,
            "canaries": summary["compiled"],
            "same_bytes": same,
            "single_compile_identical": single_ok,
        }
        print(
            f"compile-many {len(traces)} traces: single {here['wall_s']:.1f} s, dask {there['wall_s']:.1f} s; "
            f"{summary['compiled']} canaries, same bytes: {same}, identical to single compiles: {single_ok}"
        )
    if args.json is not None:
        for stage in results.values():
            if isinstance(stage, dict):
                for side in ("single", "dask"):
                    if isinstance(stage.get(side), dict) and "stderr" in stage[side]:
                        stage[side].pop("stdout", None)
                        stage[side]["stderr"] = stage[side]["stderr"][-500:]
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
