"""Diagnosis accuracy on a randomized suite of real faulty torch.distributed jobs.

    python benches/diagnosis_accuracy.py --scenarios N --seed S [--keep DIR] [--from DIR]
                                         [--json OUT] [--jobs-only] [--workers K]

Draws N scenarios from a seeded space (``faulty_jobs/scenario.py``: job shape ddp / tp_pairs /
pp_dp / mixed, world size 2-8, profiler markers on or off, and one fault: none, a sleep or
compute straggler, a skipped collective / send / recv, a desync of op / size / dtype / root, a
SIGKILLed rank, or a SIGSTOPped one), runs each as a real multi-process gloo job under
``torchrun`` on 127.0.0.1 (``faulty_jobs/job.py``, ``faulty_jobs/launch.py``), keeps each run
under ``--keep DIR`` (default: a new temporary directory, kept and named at the end), then scores
commcanary's diagnoses of every evidence subset against the run's ground truth
(``faulty_jobs/score.py``) and prints the tables and every failure. ``--from DIR`` re-scores kept
runs without running any job. ``--jobs-only`` runs the jobs and stops.

What counts (hang faults: skipped_*, desync_*, killed, frozen):

* right: verdict ``hang``, the root ranks exactly {the fault rank}, the category right (and the
  desync kind for a desync);
* acceptable: right, or honest about not knowing (verdict ``inconclusive`` or no root, with a
  non-empty ``would_settle``);
* confidently wrong: ``confidence == "high"`` and not right;
* step right: ``step.value`` is the fault iteration, as its ProfilerStep number when the run has
  markers and the document's step source is the markers, else as the 0-based program iteration.

For no-fault and straggler runs a ``hang`` verdict is a false alarm. Stragglers: recall over the
injected (rank, iteration) pairs whose measured delay is at least 3x the job's step-time noise
(robust sigma of the iteration durations), precision over all findings: a finding is right when
it matches an injected delay, or when the program's own clock shows that rank reaching one of the
step's collectives after every other member by at least half the finding's lag (a delay the host
caused: up to 8 ranks share 2 cores); precision against injected delays alone is printed beside
it. Step recovery (runs
without markers): the share of iteration starts (k >= 1) at which a recovered boundary sits on the
right call (the first communication call of the rank's traces at or after the program's logged
start of iteration k); 99% is the bar.

The JSON (``--json``) holds every run's scored results, the tables and the failures; it is a
function of the kept runs and the installed commcanary only (no timings).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from faulty_jobs.launch import run_scenario
from faulty_jobs.scenario import FAULT_KINDS, HANG_FAULTS, STRAGGLER_FAULTS, draw_scenarios
from faulty_jobs.score import SUBSETS

BENCHES = Path(__file__).resolve().parent
SCORE_TIMEOUT_S = 1800


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- running jobs


def run_campaign(seed: int, n: int, keep: Path) -> list[Path]:
    keep.mkdir(parents=True, exist_ok=True)
    scenarios = draw_scenarios(seed, n)
    (keep / "campaign.json").write_text(
        json.dumps({"seed": seed, "scenarios": [s["name"] for s in scenarios]}, indent=1) + "\n"
    )
    runs: list[Path] = []
    t_all = time.monotonic()
    for i, scn in enumerate(scenarios):
        run_dir = keep / scn["name"]
        if (run_dir / "ground_truth.json").exists():
            old = json.loads((run_dir / "scenario.json").read_text())
            if old != json.loads(json.dumps(scn)):
                raise SystemExit(f"{run_dir} holds a different scenario; use another --keep directory")
            log(f"[{i + 1}/{n}] {scn['name']}: kept run found, not rerun")
            runs.append(run_dir)
            continue
        if run_dir.exists():
            # an interrupted run: set it aside so that its files never mix with the new run's
            aside = run_dir.with_name(run_dir.name + f".incomplete-{int(time.time())}")
            run_dir.rename(aside)
            log(f"[{i + 1}/{n}] {scn['name']}: incomplete earlier run moved to {aside.name}")
        f = scn["fault"]
        where = f" rank {f['rank']}" if "rank" in f else ""
        it = f" iteration {f.get('iteration', f.get('iterations'))}" if f["kind"] != "none" else ""
        log(
            f"[{i + 1}/{n}] {scn['name']}: {scn['shape']} world {scn['world']}, {scn['iterations']} iterations, "
            f"markers {'on' if scn['markers'] else 'off'} ({scn['profiler']['mode']}), fault {f['kind']}{where}{it}"
        )
        t0 = time.monotonic()
        truth = run_scenario(scn, run_dir)
        fe = truth["fault"]
        eff = "" if fe["effective"] else f" [fault NOT effective: {fe['not_effective_because']}]"
        log(f"    {time.monotonic() - t0:.1f} s: {truth['outcome']['summary']}{eff}")
        runs.append(run_dir)
    log(f"ran {n} scenario(s) in {time.monotonic() - t_all:.0f} s into {keep}")
    return runs


def kept_runs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/ground_truth.json"))


# ---------------------------------------------------------------------------- scoring


def score_all(runs: list[Path], workers: int) -> list[dict[str, Any]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(BENCHES), *filter(None, [env.get("PYTHONPATH")])])
    tmp = Path(tempfile.mkdtemp(prefix="cc-bench-score-"))

    def one(run: Path) -> dict[str, Any]:
        dest = tmp / f"{run.name}.json"
        t0 = time.monotonic()
        try:
            p = subprocess.run(
                [sys.executable, "-m", "faulty_jobs.score", str(run), str(dest)],
                env=env,
                capture_output=True,
                text=True,
                timeout=SCORE_TIMEOUT_S,
            )
            rc: int | None = p.returncode
            err = (p.stderr or "").strip().splitlines()[-3:]
        except subprocess.TimeoutExpired:
            rc, err = None, [f"scoring timed out after {SCORE_TIMEOUT_S} s"]
        if dest.exists():
            res: dict[str, Any] = json.loads(dest.read_text())
        else:
            truth = json.loads((run / "ground_truth.json").read_text())
            res = {
                "name": truth["scenario"]["name"],
                "run_dir": run.name,
                "fault": truth["scenario"]["fault"]["kind"],
                "scorer_crashed": {"exit": rc, "stderr_tail": err},
            }
        log(
            f"  scored {run.name} in {time.monotonic() - t0:.1f} s"
            + (" (SCORER CRASHED)" if "scorer_crashed" in res else "")
        )
        return res

    log(f"scoring {len(runs)} run(s) with {workers} worker(s)")
    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        results = list(ex.map(one, runs))
    shutil.rmtree(tmp, ignore_errors=True)
    return sorted(results, key=lambda r: r["run_dir"])


# ---------------------------------------------------------------------------- tables


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:5.1f}%" if b else "    -"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(c) for c in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for j, r in enumerate(cells):
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _subset_tables(
    effective: list[dict[str, Any]],
    kinds: tuple[str, ...],
    hang_faults: bool,
    total: str,
    counts: Callable[[dict[str, Any]], dict[str, bool]],
    order: tuple[str, ...],
) -> dict[str, dict[str, dict[str, int]]]:
    """Per evidence subset, per fault kind (and ``total`` over them): how many
    runs were scored, refused or crashed, and the ``counts`` of each, as the
    columns ``order`` names."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for subset in SUBSETS:
        rows: dict[str, dict[str, int]] = {}
        for kind in (*kinds, total):
            c: collections.Counter[str] = collections.Counter()
            for r in effective:
                if (r["fault"] in HANG_FAULTS) != hang_faults or (kind != total and r["fault"] != kind):
                    continue
                h = r["hang"].get(subset, {})
                if h.get("status") == "no_evidence":
                    c["no_evidence"] += 1
                    continue
                c["n"] += 1
                for k, v in counts(h).items():
                    c[k] += v
                c["refused"] += h.get("status") == "refused"
                c["internal_error"] += h.get("status") == "internal_error"
            rows[kind] = {k: c.get(k, 0) for k in order}
        out[subset] = rows
    return out


def aggregate(results: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in results if "scorer_crashed" not in r]
    effective = [r for r in scored if r["fault_effective"]]
    tables: dict[str, Any] = {}

    # hang faults, per kind x subset
    def hang_counts(h: dict[str, Any]) -> dict[str, bool]:
        return {
            "right": bool(h.get("right")),
            "acceptable": bool(h.get("acceptable")),
            "confidently_wrong": bool(h.get("confidently_wrong")),
            "step_right": bool(h.get("step_right")),
        }

    hang_order = (
        "n",
        "right",
        "acceptable",
        "confidently_wrong",
        "refused",
        "internal_error",
        "step_right",
        "no_evidence",
    )
    tables["hang"] = _subset_tables(effective, HANG_FAULTS, True, "all hang faults", hang_counts, hang_order)

    # false alarms
    def alarm_counts(h: dict[str, Any]) -> dict[str, bool]:
        return {
            "false_alarm": bool(h.get("false_alarm")),
            "no_hang": h.get("verdict") == "no_hang",
            "inconclusive": h.get("verdict") == "inconclusive",
        }

    alarm_order = ("n", "false_alarm", "no_hang", "inconclusive", "refused", "internal_error", "no_evidence")
    tables["false_alarms"] = _subset_tables(
        effective, ("none", *STRAGGLER_FAULTS), False, "all without a hang", alarm_counts, alarm_order
    )

    # stragglers
    st: dict[str, dict[str, Any]] = {}
    for label, sel in (("markers on", True), ("markers off", False), ("all", None)):
        rs = [r for r in effective if "stragglers" in r and (sel is None or r["markers"] == sel)]
        c: collections.Counter[str] = collections.Counter()
        for r in rs:
            s = r["stragglers"]
            c["runs"] += 1
            if s["status"] != "ok":
                c[s["status"]] += 1
                continue
            c["injected"] += len(s["injected"])
            c["eligible"] += s["eligible"]
            c["found"] += s["found"]
            c["findings"] += s["findings"]
            c["true_findings"] += s["true_findings"]
            c["host_confirmed"] += len(s.get("host_confirmed") or [])
            if r["fault"] == "none":
                c["findings_without_fault"] += s["findings"]
        row: dict[str, Any] = {
            k: c.get(k, 0)
            for k in (
                "runs",
                "refused",
                "internal_error",
                "injected",
                "eligible",
                "found",
                "findings",
                "true_findings",
                "host_confirmed",
                "findings_without_fault",
            )
        }
        row["recall"] = c["found"] / c["eligible"] if c["eligible"] else None
        row["precision"] = (
            (c["true_findings"] + c["host_confirmed"]) / c["findings"] if c["findings"] else None
        )
        row["precision_injected_only"] = c["true_findings"] / c["findings"] if c["findings"] else None
        st[label] = row
    tables["stragglers"] = st

    # step recovery
    sr: collections.Counter[str] = collections.Counter()
    for r in effective:
        s = r.get("steps")
        if s is None:
            continue
        sr["runs"] += 1
        sr[s["status"]] += 1
        if s["status"] == "ok":
            sr["boundaries"] += s["boundaries"]
            sr["right"] += s["right"]
            sr["extra_boundaries"] += s["extra_boundaries"]
            sr["runs_at_99"] += bool(s["fraction"] is not None and s["fraction"] >= 0.99)
    steps_row: dict[str, Any] = {
        k: sr.get(k, 0)
        for k in (
            "runs",
            "ok",
            "not_scorable_yet",
            "refused",
            "internal_error",
            "boundaries",
            "right",
            "extra_boundaries",
            "runs_at_99",
        )
    }
    # Boundaries placed at no true iteration start count against the figure.
    placed = sr["boundaries"] + sr["extra_boundaries"]
    steps_row["fraction"] = sr["right"] / placed if placed else None
    tables["steps"] = steps_row

    # CLI
    cli: collections.Counter[str] = collections.Counter()
    mismatches = []
    expected_exit = {"hang": 1, "no_hang": 0, "inconclusive": 0}
    for r in scored:
        c = r.get("cli", {})
        cli[f"exit {c.get('exit')}"] += 1
        api = r["hang"].get("all", {})
        want = (
            expected_exit.get(str(api.get("verdict")))
            if api.get("status") == "ok"
            else {"refused": 3, "internal_error": 70}.get(str(api.get("status")))
        )
        if c.get("exit") != want:
            mismatches.append(
                {
                    "run": r["run_dir"],
                    "cli_exit": c.get("exit"),
                    "api": api.get("verdict") or api.get("status"),
                    "first_line": c.get("first_line"),
                }
            )
    tables["cli"] = {"exit_codes": dict(sorted(cli.items())), "disagreements_with_api": mismatches}

    # runs
    runs_tab: dict[str, Any] = {}
    for kind in FAULT_KINDS:
        rs = [r for r in results if r["fault"] == kind]
        if rs:
            runs_tab[kind] = {
                "runs": len(rs),
                "fault_effective": sum(bool(r.get("fault_effective")) for r in rs),
                "scorer_crashed": sum("scorer_crashed" in r for r in rs),
            }
    tables["runs"] = runs_tab
    return tables


def failures(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in results:
        if "scorer_crashed" in r:
            out.append(
                {
                    "run": r["run_dir"],
                    "subset": "-",
                    "fault": r["fault"],
                    "class": "scorer crashed",
                    "reason": json.dumps(r["scorer_crashed"]),
                }
            )
            continue
        if not r["fault_effective"]:
            out.append(
                {
                    "run": r["run_dir"],
                    "subset": "-",
                    "fault": r["fault"],
                    "class": "fault not effective",
                    "reason": r["outcome"],
                }
            )
            continue
        exp = r["expected"]
        for subset in SUBSETS:
            h = r["hang"].get(subset, {})
            if h.get("status") == "no_evidence" or h.get("right"):
                continue
            if h.get("status") != "ok":
                cls = "refused" if h.get("status") == "refused" else "internal error"
                got = f"{h.get('status')}: {h.get('error', '')[:200]}"
            else:
                got = (
                    f"{h.get('verdict')}/{h.get('confidence')} root {h.get('root_ranks')} ({','.join(h.get('root_kinds') or [])}) "
                    f"category {h.get('category')}"
                    + (f" kind {h.get('desync_kind')}" if exp.get("desync_kind") else "")
                    + f" step {(h.get('step') or {}).get('value')}"
                )
                cls = _failure_class(exp, h)
            if exp["hang"]:
                want = (
                    f"hang root {exp['root_ranks']} {exp['category']}"
                    + (f"/{exp['desync_kind']}" if exp.get("desync_kind") else "")
                    + f" step {exp['step_iteration']}"
                    + (
                        f" (ProfilerStep#{exp['step_profiler']})"
                        if exp.get("step_profiler") is not None
                        else ""
                    )
                )
            else:
                want = "no hang"
            tag = " [acceptable]" if h.get("acceptable") else ""
            tag += " [CONFIDENTLY WRONG]" if h.get("confidently_wrong") else ""
            out.append(
                {
                    "run": r["run_dir"],
                    "subset": subset,
                    "fault": r["fault"],
                    "class": cls,
                    "reason": f"expected {want}; got {got}{tag}",
                }
            )
    return out


def _failure_class(exp: dict[str, Any], h: dict[str, Any]) -> str:
    if not exp["hang"]:
        return "false alarm" if h.get("verdict") == "hang" else f"verdict {h.get('verdict')}"
    if h.get("verdict") != "hang":
        return f"verdict {h.get('verdict')}"
    if h.get("root_ranks") != exp["root_ranks"]:
        return "wrong or no root" if h.get("root_ranks") else "no root"
    if h.get("category") != exp["category"]:
        return "wrong category"
    return "wrong desync kind"


def render(tables: dict[str, Any], fails: list[dict[str, Any]]) -> str:
    out: list[str] = []
    out.append("== runs ==")
    out.append(
        _table(
            ["fault", "runs", "effective", "scorer crashed"],
            [[k, v["runs"], v["fault_effective"], v["scorer_crashed"]] for k, v in tables["runs"].items()],
        )
    )
    for subset in SUBSETS:
        out.append(f"\n== hang faults, evidence subset '{subset}' ==")
        rows = []
        for kind, c in tables["hang"][subset].items():
            n = c["n"]
            rows.append(
                [
                    kind,
                    n,
                    f"{c['right']} {_pct(c['right'], n)}",
                    f"{c['acceptable']} {_pct(c['acceptable'], n)}",
                    c["confidently_wrong"],
                    c["refused"],
                    c["internal_error"],
                    f"{c['step_right']} {_pct(c['step_right'], n)}",
                ]
            )
        out.append(
            _table(
                ["fault", "n", "right", "acceptable", "conf. wrong", "refused", "internal err", "step right"],
                rows,
            )
        )
    out.append("\n== runs without a hang: false alarms (verdict hang) ==")
    rows = []
    for subset in SUBSETS:
        for kind, c in tables["false_alarms"][subset].items():
            rows.append(
                [
                    f"{subset:6} {kind}",
                    c["n"],
                    c["false_alarm"],
                    c["no_hang"],
                    c["inconclusive"],
                    c["refused"],
                    c["internal_error"],
                ]
            )
    out.append(
        _table(
            ["subset / fault", "n", "false alarm", "no_hang", "inconclusive", "refused", "internal err"], rows
        )
    )
    out.append("\n== stragglers (traces; recall over injected delays >= 3 sigma of the step-time noise) ==")
    rows = []
    for label, s in tables["stragglers"].items():
        rows.append(
            [
                label,
                s["runs"],
                s["refused"],
                s["internal_error"],
                s["injected"],
                s["eligible"],
                s["found"],
                "-" if s["recall"] is None else f"{100 * s['recall']:.1f}%",
                s["findings"],
                s["true_findings"],
                s["host_confirmed"],
                "-" if s["precision"] is None else f"{100 * s['precision']:.1f}%",
                "-" if s["precision_injected_only"] is None else f"{100 * s['precision_injected_only']:.1f}%",
                s["findings_without_fault"],
            ]
        )
    out.append(
        _table(
            [
                "markers",
                "runs",
                "refused",
                "internal",
                "injected",
                ">=3sigma",
                "found",
                "recall",
                "findings",
                "injected",
                "host-confirmed",
                "precision",
                "vs injected only",
                "findings w/o fault",
            ],
            rows,
        )
    )
    s = tables["steps"]
    out.append("\n== step recovery (runs without markers) ==")
    if s["runs"] and not s["ok"] and s["not_scorable_yet"]:
        out.append(
            f"not scorable yet: {s['not_scorable_yet']} of {s['runs']} run(s) lack ranks[].boundaries / clock_origin_ns"
        )
    out.append(
        _table(
            [
                "runs",
                "scored",
                "not scorable yet",
                "refused",
                "internal",
                "boundaries",
                "right",
                "fraction",
                "runs >= 99%",
                "extra",
            ],
            [
                [
                    s["runs"],
                    s["ok"],
                    s["not_scorable_yet"],
                    s["refused"],
                    s["internal_error"],
                    s["boundaries"],
                    s["right"],
                    "-" if s["fraction"] is None else f"{100 * s['fraction']:.2f}%",
                    s["runs_at_99"],
                    s["extra_boundaries"],
                ]
            ],
        )
    )
    out.append("\n== CLI (commcanary diagnose hang EVIDENCE -o X.json) ==")
    out.append("exit codes: " + ", ".join(f"{k}: {v}" for k, v in tables["cli"]["exit_codes"].items()))
    for m in tables["cli"]["disagreements_with_api"]:
        out.append(f"  DISAGREES {m['run']}: exit {m['cli_exit']} vs API {m['api']}: {m['first_line']}")
    out.append(f"\n== failures ({len(fails)}; '[acceptable]' = honest inconclusive) ==")
    classes = collections.Counter(f["class"] for f in fails)
    out.append("by class: " + ", ".join(f"{k}: {v}" for k, v in classes.most_common()))
    for f in fails:
        out.append(f"{f['run']} [{f['subset']}] {f['class']}: {f['reason']}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--scenarios", type=int, default=16, help="how many scenarios to draw and run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="where the runs are kept (default: a new temporary directory)")
    ap.add_argument("--from", dest="from_dir", type=Path, help="re-score the runs kept here; run no job")
    ap.add_argument("--json", type=Path, help="write everything scored here")
    ap.add_argument("--jobs-only", action="store_true", help="run the jobs, do not score")
    ap.add_argument("--workers", type=int, default=2, help="runs scored in parallel (default 2)")
    args = ap.parse_args(argv)
    if args.from_dir is not None:
        runs = kept_runs(args.from_dir)
        if not runs:
            ap.error(f"no kept run (*/ground_truth.json) under {args.from_dir}")
        log(f"re-scoring {len(runs)} kept run(s) under {args.from_dir}")
    else:
        keep = args.keep or Path(tempfile.mkdtemp(prefix="commcanary-faulty-jobs-"))
        runs = run_campaign(args.seed, args.scenarios, keep)
        if args.keep is None:
            log(f"runs kept in {keep}")
    if args.jobs_only:
        return 0
    results = score_all(runs, args.workers)
    tables = aggregate(results)
    fails = failures(results)
    print(render(tables, fails))
    if args.json is not None:
        doc = {
            "format": "commcanary-bench.diagnosis-accuracy.v1",
            "runs": [r.name for r in runs],
            "tables": tables,
            "failures": fails,
            "results": results,
        }
        args.json.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
