"""Step loops on real training jobs: how far a job's canary shrinks, and that it still verifies.

    python benches/step_loops.py [--jobs N] [--iterations I] [--seed S] [--keep DIR] [--from DIR]
                                 [--limit L] [--replicate-steps K] [--speed-events N [--repeat R]]
                                 [--skip-jobs] [--json OUT]

Runs N real multi-process gloo jobs without faults (``faulty_jobs``: DDP, tensor-parallel pairs,
pipeline x data parallel with send/recv, mixed groups; world sizes as drawn; ``ProfilerStep``
markers on for even jobs, off for odd ones, each profiled over all I iterations in one trace per
rank), plus the repository's real job fixtures, and for each:

* imports the ranks' traces (``import-kineto``; without markers the importer recovers the steps);
* compiles it as a step loop (the default) and flat (``--no-step-loops``), lossless and at
  ``--timing-sample-limit L``;
* checks ``verify-fidelity`` (source verified) on the loop canaries, ``verify-behavior``
  (behaviourally verified) on the lossless loop canary, and that the loop and flat canaries replay
  to the same execution hash and the same report apart from the two sections naming the canary
  file (``canary``, ``canary_summary``).

The targets (issue 36): event ratio >= (iterations - 2) x 0.8 lossless; byte ratio >= 10x at limit
16 for 30 steps. ``--replicate-steps K`` also builds a K-step job by repeating the marked DDP
fixture's steps (shifted in time and renumbered), compiles it at limit L and verifies it (byte
ratio target 100x at 10,000 steps). ``--speed-events N`` times the in-process compile of a
replicated job of about N events as a loop against flat, interleaved, median of ``--repeat``
(target: the loop no slower). ``--from DIR`` re-measures kept runs without running a job.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCHES = Path(__file__).resolve().parent
REPO = BENCHES.parent
sys.path.insert(0, str(BENCHES))

FIXTURES = REPO / "tests" / "data" / "fixtures" / "kineto"
SHAPES = ("ddp", "tp_pairs", "pp_dp", "mixed")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "commcanary", *args], capture_output=True, text=True)


def run_jobs(n: int, iterations: int, seed: int, keep: Path) -> list[Path]:
    """Runs ``n`` no-fault jobs into ``keep``; returns their evidence directories."""
    from faulty_jobs.launch import run_scenario
    from faulty_jobs.scenario import draw_scenario

    out = []
    for i in range(n):
        shape = SHAPES[i % len(SHAPES)]
        markers = i % 2 == 0
        k = 0
        while True:
            scn = draw_scenario(seed, 1000 * i + k, "none", markers=markers)
            k += 1
            if scn["shape"] == shape:
                break
        scn["iterations"] = iterations
        scn["profiler"] = (
            {"mode": "schedule", "window": iterations, "skip_first": 0}
            if markers
            else {"mode": "single", "window": iterations}
        )
        scn["name"] = f"j{i:02d}-{shape}-w{scn['world']}-{'markers' if markers else 'nomarkers'}"
        run_dir = keep / scn["name"]
        if not run_dir.exists():
            log(f"running {scn['name']} ({iterations} iterations)")
            run_scenario(scn, run_dir)
        out.append(run_dir / "evidence")
    return out


def iterations_of(trace: dict[str, Any]) -> int:
    return len({e["step"] for e in trace["events"] if "step" in e})


def report_without_canary(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_bytes())
    return {k: v for k, v in doc.items() if k not in ("canary", "canary_summary")}


def measure(name: str, evidence: Path | list[Path], work: Path, limit: int) -> dict[str, Any]:
    import commcanary
    from commcanary.fidelity import verify_fidelity

    work.mkdir(parents=True, exist_ok=True)
    trace_path = work / "trace.json"
    sources = [str(p) for p in (evidence if isinstance(evidence, list) else [evidence])]
    done = cli("import-kineto", *sources, "-o", str(trace_path))
    if done.returncode != 0:
        return {"job": name, "error": done.stderr.strip().splitlines()[-1:]}
    trace = json.loads(trace_path.read_bytes())
    row: dict[str, Any] = {
        "job": name,
        "ranks": trace["workload"].get("imported_ranks"),
        "steps": trace["workload"].get("kineto_steps", "markers"),
        "iterations": iterations_of(trace),
        "events": len(trace["events"]),
    }
    canaries = {}
    for key, options in {
        "loop": {},
        "flat": {"step_loops": False},
        "loop16": {"timing_sample_limit": limit},
        "flat16": {"timing_sample_limit": limit, "step_loops": False},
    }.items():
        canary = commcanary.compile(trace_path, **options)
        path = work / f"{key}.canary.json"
        canary.write(path)
        canaries[key] = path
        s = canary.summary
        row[key] = {
            "format": json.loads(path.read_bytes())["format"],
            "canary_events": s["canary_events"],
            "event_ratio": s["event_compression_ratio"],
            "byte_ratio": s["byte_compression_ratio"],
            "canary_bytes": s["canary_bytes"],
            "execution": s["execution_semantic_sha256"],
            "mode": s["fidelity_mode"],
        }
    for key in ("loop", "loop16"):
        row[key]["fidelity"] = verify_fidelity(trace, json.loads(canaries[key].read_bytes()))["status"]
    behavior = cli(
        "verify-behavior", str(trace_path), str(canaries["loop"]), "-o", str(work / "behavior.json")
    )
    row["loop"]["behavior"] = (
        json.loads((work / "behavior.json").read_bytes())["status"]
        if behavior.returncode in (0, 1)
        else "error"
    )
    for key in ("loop", "flat"):
        cli("replay", str(canaries[key]), "-o", str(work / f"{key}.report.json"))
    row["same_execution"] = row["loop"]["execution"] == row["flat"]["execution"]
    row["same_report"] = report_without_canary(work / "loop.report.json") == report_without_canary(
        work / "flat.report.json"
    )
    row["event_target"] = round((row["iterations"] - 2) * 0.8, 1)
    return row


def replicated_trace(steps: int, out: Path) -> Path:
    """The marked DDP fixture's full steps repeated to ``steps`` steps, shifted and renumbered."""
    from commcanary.importers import import_kineto

    base = out.parent / "ddp_markers.trace.json"
    import_kineto(str(FIXTURES / "gloo_w4_ddp_straggler" / "markers")).write(base)
    trace = json.loads(base.read_bytes())
    by_step: dict[int, list[dict[str, Any]]] = {}
    for e in trace["events"]:
        if "step" in e:
            by_step.setdefault(int(e["step"]), []).append(e)
    # The steps between the first and the last (whole, past the warm-up).
    unit = [s for s in sorted(by_step)][1:-1]
    first = min(e["start_us"] for e in by_step[unit[0]])
    period = min(e["start_us"] for e in by_step[unit[-1] + 1]) - first
    events = []
    for k in range(steps):
        source = unit[k % len(unit)]
        shift = (k // len(unit)) * period + 0.0
        for e in by_step[source]:
            copy_e = copy.deepcopy(e)
            copy_e["start_us"] = round(e["start_us"] + shift, 3)
            copy_e["step"] = k
            copy_e.pop("id", None)
            events.append(copy_e)
    events.sort(key=lambda e: e["start_us"])
    trace["events"] = events
    trace["workload"] = {**trace["workload"], "name": f"ddp-replicated-{steps}-steps"}
    out.write_bytes(json.dumps(trace).encode())
    return out


def measure_replicated(steps: int, work: Path, limit: int) -> dict[str, Any]:
    import commcanary
    from commcanary.fidelity import verify_fidelity

    work.mkdir(parents=True, exist_ok=True)
    path = replicated_trace(steps, work / f"replicated{steps}.trace.json")
    canary = commcanary.compile(path, timing_sample_limit=limit)
    canary_path = work / "replicated.canary.json"
    canary.write(canary_path)
    s = canary.summary
    trace = json.loads(path.read_bytes())
    status = verify_fidelity(trace, json.loads(canary_path.read_bytes()))["status"]
    return {
        "steps": steps,
        "events": s["source_events"],
        "canary_events": s["canary_events"],
        "canary_bytes": s["canary_bytes"],
        "byte_ratio": s["byte_compression_ratio"],
        "fidelity": status,
    }


def measure_speed(events: int, work: Path, repeat: int) -> dict[str, Any]:
    """In-process compile time of a replicated ``events``-event job, loop against flat, interleaved,
    median of ``repeat`` (the trace parsed once, outside the timing)."""
    import statistics
    import time

    import commcanary

    work.mkdir(parents=True, exist_ok=True)
    per_step = 4  # the marked DDP fixture's full steps hold about four collectives each
    path = replicated_trace(max(3, events // per_step), work / "speed.trace.json")
    trace = commcanary.load_trace(path)
    times: dict[str, list[float]] = {"loop": [], "flat": []}
    sizes: dict[str, int] = {}
    for _ in range(repeat):
        for key, loops in (("flat", False), ("loop", True)):
            t0 = time.perf_counter()
            canary = trace.compile(step_loops=loops)
            times[key].append(time.perf_counter() - t0)
            sizes[key] = canary.summary()["canary_bytes"]
    return {
        "events": trace.event_count,
        "loop_s": round(statistics.median(times["loop"]), 3),
        "flat_s": round(statistics.median(times["flat"]), 3),
        "ratio": round(statistics.median(times["loop"]) / statistics.median(times["flat"]), 3),
        "loop_bytes": sizes["loop"],
        "flat_bytes": sizes["flat"],
    }


def table(rows: list[dict[str, Any]], limit: int) -> str:
    head = (
        "| job | ranks | steps | iterations | events | canary events | event ratio (target) "
        f"| byte ratio lossless / flat | byte ratio @{limit} / flat | fidelity | behaviour | same exec / report |"
    )
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['job']} | error: {r['error']} |" + " |" * 10)
            continue
        lp, fl, l16, f16 = r["loop"], r["flat"], r["loop16"], r["flat16"]
        lines.append(
            f"| {r['job']} | {r['ranks']} | {r['steps']} | {r['iterations']} | {r['events']} | "
            f"{lp['canary_events']} | {lp['event_ratio']} ({r['event_target']}) | "
            f"{lp['byte_ratio']} / {fl['byte_ratio']} | {l16['byte_ratio']} / {f16['byte_ratio']} | "
            f"{lp['fidelity']}, {l16['fidelity']} | {lp['behavior']} | "
            f"{'yes' if r['same_execution'] else 'NO'} / {'yes' if r['same_report'] else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--jobs", type=int, default=8, help="real jobs to run (default 8)")
    ap.add_argument("--iterations", type=int, default=32, help="iterations of each job (default 32)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="where runs are kept (default: a new temporary directory)")
    ap.add_argument("--from", dest="from_dir", type=Path, help="re-measure the runs kept here; run no job")
    ap.add_argument("--limit", type=int, default=16, help="the bounded timing sample limit (default 16)")
    ap.add_argument("--replicate-steps", type=int, default=0, help="also measure a K-step replicated DDP job")
    ap.add_argument("--speed-events", type=int, default=0, help="also time loop vs flat compile at ~N events")
    ap.add_argument("--repeat", type=int, default=5, help="repetitions of the speed measurement (median)")
    ap.add_argument("--skip-jobs", action="store_true", help="measure no job (only --replicate/--speed)")
    ap.add_argument("--json", type=Path, help="write every row here")
    args = ap.parse_args(argv)
    keep = args.from_dir or args.keep or Path(tempfile.mkdtemp(prefix="commcanary-loops-"))
    keep.mkdir(parents=True, exist_ok=True)
    if args.skip_jobs:
        evidence: list[Path] = []
    elif args.from_dir:
        evidence = sorted(p / "evidence" for p in keep.iterdir() if (p / "evidence").is_dir())
    else:
        evidence = run_jobs(args.jobs, args.iterations, args.seed, keep)
    jobs: list[tuple[str, Path | list[Path]]] = [(p.parent.name, p) for p in evidence]
    if not args.skip_jobs:
        jobs += [
            ("fixture ddp markers", FIXTURES / "gloo_w4_ddp_straggler" / "markers"),
            ("fixture ddp no markers", FIXTURES / "gloo_w4_ddp_straggler" / "nomarkers"),
            ("fixture tp4 decode", sorted((FIXTURES / "gloo_tp4_decode").glob("rank*.json.gz"))),
        ]
    rows = []
    for name, source in jobs:
        log(f"measuring {name}")
        rows.append(measure(name, source, keep / "measure" / name.replace(" ", "_"), args.limit))
    if rows:
        print(table(rows, args.limit))
    result: dict[str, Any] = {"rows": rows}
    if args.speed_events:
        log(f"timing loop and flat compiles of ~{args.speed_events} events")
        speed = measure_speed(args.speed_events, keep / "speed", args.repeat)
        result["speed"] = speed
        print(
            f"\ncompile of {speed['events']} events, median of {args.repeat}: loop {speed['loop_s']} s, "
            f"flat {speed['flat_s']} s (loop/flat {speed['ratio']}); canary {speed['loop_bytes']} bytes "
            f"against {speed['flat_bytes']}"
        )
    if args.replicate_steps:
        log(f"measuring a {args.replicate_steps}-step replicated job")
        rep = measure_replicated(args.replicate_steps, keep / "replicated", args.limit)
        result["replicated"] = rep
        print(
            f"\nreplicated DDP, {rep['steps']} steps: {rep['events']} events -> {rep['canary_events']} canary "
            f"event(s), {rep['canary_bytes']} bytes, byte ratio {rep['byte_ratio']} at limit {args.limit}, "
            f"{rep['fidelity']}"
        )
    print(f"\nruns kept in {keep}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
