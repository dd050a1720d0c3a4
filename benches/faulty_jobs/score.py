"""Scoring commcanary's diagnoses of one kept run against its ground truth.

``python -m faulty_jobs.score RUN_DIR OUT.json`` scores one run in its own process (the campaign
driver runs one child per run, so a crash of the native extension costs one run, not the
campaign) and writes the result as JSON. Nothing here reads the ground truth's source logs or
changes the run directory.

Per run:

* ``hang[subset]`` for the evidence subsets ``all`` (the whole evidence directory), ``dumps``
  (Flight Recorder dumps only), ``traces`` (Kineto traces only) and ``texts`` (stacks, exception
  texts, the launcher log): ``commcanary.diagnose_hang`` on those paths, judged against the
  injected fault;
* ``cli``: ``commcanary diagnose hang EVIDENCE -o X.json`` once, its exit status checked against
  the API's verdict on the same directory;
* ``stragglers`` (no-fault and straggler runs): ``commcanary.diagnose_stragglers`` on the traces;
* ``steps`` (runs without ProfilerStep markers): ``commcanary.recover_steps`` on the traces, its
  boundaries placed on the calls of each rank's traces and compared with the program's own
  iteration starts.
"""

from __future__ import annotations

import bisect
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from faulty_jobs import kineto

SUBSETS = ("all", "dumps", "traces", "texts")
CLI_TIMEOUT_S = 600
# a recovered boundary is "at" a call when it is this close to the call's start on the wall clock
BOUNDARY_TOLERANCE_NS = 2_000


# ---------------------------------------------------------------------------- evidence subsets


def subset_paths(evidence: Path, subset: str) -> list[Path]:
    """The paths handed to the diagnosis for ``subset`` (files, sorted; ``all`` is the directory)."""
    if subset == "all":
        return [evidence]
    files = sorted(p for p in evidence.rglob("*") if p.is_file() and not p.name.startswith("."))
    if subset == "dumps":
        return [p for p in files if p.name.startswith("fr_trace_rank_")]
    if subset == "traces":
        return kineto.trace_files(evidence)
    if subset == "texts":
        return [
            p
            for p in files
            if p.parent == evidence
            and (p.name.endswith(("_stacks.txt", "_exception.txt")) or p.name == "launcher.log")
        ]
    raise ValueError(subset)


# ---------------------------------------------------------------------------- calling commcanary


def _call(fn_name: str, paths: list[Path]) -> dict[str, Any]:
    """Run ``commcanary.<fn_name>(paths)``: {status: ok|refused|internal_error, document|error}."""
    import commcanary
    from commcanary.errors import InputError, InternalError

    fn = getattr(commcanary, fn_name)
    try:
        rep = fn([str(p) for p in paths])
    except (KeyboardInterrupt, SystemExit):
        raise
    except InternalError as e:
        return {"status": "internal_error", "error": f"InternalError: {e}"}
    except InputError as e:
        return {"status": "refused", "error": f"{type(e).__name__}: {e}"}
    except BaseException as e:  # a panic surfaces as pyo3's PanicException, a BaseException
        return {"status": "internal_error", "error": f"{type(e).__module__}.{type(e).__name__}: {e}"}
    doc = getattr(rep, "document", None)
    if not isinstance(doc, dict):
        data = rep.data
        doc = json.loads(data) if isinstance(data, bytes | str) else data
    return {"status": "ok", "document": doc}


def run_cli(evidence: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cc-bench-cli-") as tmp:
        out = Path(tmp) / "hang.json"
        cmd = [
            sys.executable,
            "-m",
            "commcanary",
            "diagnose",
            "hang",
            str(evidence),
            "-o",
            str(out),
            "--no-cache",
        ]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {"exit": None, "error": f"timed out after {CLI_TIMEOUT_S} s", "verdict": None}
        verdict = None
        if out.exists():
            try:
                verdict = json.loads(out.read_text()).get("verdict")
            except ValueError:
                verdict = "unparseable output"
        lines = (p.stdout + p.stderr).strip().splitlines()
        return {"exit": p.returncode, "verdict": verdict, "first_line": lines[0][:300] if lines else ""}


# ---------------------------------------------------------------------------- judging


def _roots(doc: dict[str, Any]) -> list[int]:
    return sorted({int(r["rank"]) for r in doc.get("root") or [] if isinstance(r, dict) and "rank" in r})


def _uses_profiler_steps(source: Any) -> bool:
    return isinstance(source, str) and "profilerstep" in source.lower().replace(" ", "")


def judge_hang(truth: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
    """Judge one diagnose_hang result (see the module docstring of diagnosis_accuracy.py)."""
    exp = truth["expected"]
    markers = bool(truth["scenario"]["markers"])
    out: dict[str, Any] = {"status": res["status"]}
    if res["status"] != "ok":
        out.update(
            error=res["error"][:500],
            right=False,
            # refusing to diagnose a run without a hang (for lack of evidence) is not a false alarm
            acceptable=not exp["hang"] and res["status"] == "refused",
            confidently_wrong=False,
            false_alarm=False,
            step_right=False if exp["hang"] else None,
        )
        return out
    doc: dict[str, Any] = res["document"]
    verdict = doc.get("verdict")
    conf = doc.get("confidence")
    roots = _roots(doc)
    category = doc.get("category")
    desync_kind = doc.get("desync_kind")
    raw_step = doc.get("step")
    step: dict[str, Any] = raw_step if isinstance(raw_step, dict) else {}
    would_settle = doc.get("would_settle")
    out.update(
        verdict=verdict,
        confidence=conf,
        root_ranks=roots,
        root_kinds=sorted({str(r.get("kind")) for r in doc.get("root") or [] if isinstance(r, dict)}),
        category=category,
        desync_kind=desync_kind,
        step=step,
        would_settle=would_settle,
        summary=str(doc.get("summary", ""))[:300],
    )
    if exp["hang"]:
        cat_ok = category == exp["category"]
        kind_ok = exp["desync_kind"] is None or desync_kind == exp["desync_kind"]
        right = verdict == "hang" and roots == exp["root_ranks"] and cat_ok and kind_ok
        names_missing = isinstance(would_settle, list) and bool(would_settle)
        # The kind of a desync left open (gloo's abort gives only "N vs M"
        # bytes: half the elements and half the width read alike) while the
        # root and the category are right: undecided on what the evidence
        # cannot show, and saying what would show it.
        kind_left_open = (
            verdict == "hang"
            and roots == exp["root_ranks"]
            and cat_ok
            and exp["desync_kind"] is not None
            and desync_kind is None
            and conf != "high"
        )
        honest = ((verdict == "inconclusive" or not roots) or kind_left_open) and names_missing
        use_ps = markers and _uses_profiler_steps(step.get("source"))
        expected_step = exp["step_profiler"] if use_ps else exp["step_iteration"]
        out.update(
            right=right,
            acceptable=right or honest,
            confidently_wrong=conf == "high" and not right,
            false_alarm=False,
            step_compared_as="ProfilerStep" if use_ps else "iteration",
            step_expected=expected_step,
            step_right=step.get("value") == expected_step,
        )
        problems = []
        if verdict != "hang":
            problems.append(f"verdict {verdict}")
        if roots != exp["root_ranks"]:
            problems.append(f"root {roots} (expected {exp['root_ranks']})")
        if not cat_ok:
            problems.append(f"category {category} (expected {exp['category']})")
        if not kind_ok:
            problems.append(f"desync_kind {desync_kind} (expected {exp['desync_kind']})")
        out["problems"] = problems
    else:
        out.update(
            right=verdict == "no_hang",
            acceptable=verdict in ("no_hang", "inconclusive"),
            confidently_wrong=conf == "high" and verdict == "hang",
            false_alarm=verdict == "hang",
            step_right=None,
            problems=[]
            if verdict == "no_hang"
            else [f"verdict {verdict} (no fault that hangs was injected)"],
        )
    return out


# A finding no delay was injected for is confirmed by the program's own clock when that rank
# reached one of its step's collectives later than every other member by at least this share of
# the finding's lag (the host delayed it: up to 8 ranks share 2 cores here).
HOST_CONFIRM_SHARE = 0.5


def measured_lateness(truth: dict[str, Any]) -> dict[tuple[int, int], float]:
    """Per (rank, iteration), the most the rank reached a collective after every other member,
    ms, by the program's own clock (the calls the program issued, and the start of DDP's forward,
    where it broadcasts its buffers; all ranks share one host clock)."""
    starts: dict[tuple[Any, ...], dict[int, int]] = collections.defaultdict(dict)
    for r, v in truth["ranks"].items():
        seen: collections.Counter[tuple[Any, ...]] = collections.Counter()
        forwards = [
            {"op": "ddp_forward", "group": None, "site": "ddp_forward", **e}
            for e in v.get("events") or []
            if e.get("kind") == "ddp_forward"
        ]
        for c in [*(v.get("comms") or []), *forwards]:
            if c["op"] in ("send", "recv") or c.get("start_ns") is None or c.get("iteration") is None:
                continue
            k = (c.get("group"), c.get("site"), c["iteration"])
            seen[k] += 1
            starts[(k[0], k[1], k[2], seen[k])][int(r)] = int(c["start_ns"])
    late: dict[tuple[int, int], float] = collections.defaultdict(float)
    for k, by_rank in starts.items():
        for r, s in by_rank.items():
            others = [v for q, v in by_rank.items() if q != r]
            if others and s > max(others):
                late[(r, int(k[2]))] = max(late[(r, int(k[2]))], (s - max(others)) / 1e6)
    return late


def judge_stragglers(truth: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
    sigma = truth["noise"]["robust_sigma_ms"]
    pairs = truth["fault"].get("pairs") or []
    out: dict[str, Any] = {"status": res["status"], "noise_sigma_ms": sigma}
    if res["status"] != "ok":
        out["error"] = res["error"][:500]
        return out
    doc = res["document"]
    source = doc.get("step_source")
    key = "profiler_step" if source == "ProfilerStep" else "iteration"
    found_keys = {(int(f["rank"]), int(f["step"])) for f in doc.get("findings") or []}
    truth_keys = {(int(p["rank"]), p[key]) for p in pairs}
    eligible = [p for p in pairs if sigma is not None and p["measured_delay_ms"] >= 3 * sigma]
    hits = [p for p in eligible if (int(p["rank"]), p[key]) in found_keys]
    findings = doc.get("findings") or []
    true_findings = [f for f in findings if (int(f["rank"]), int(f["step"])) in truth_keys]
    to_key = {int(i): s for i, s in (truth.get("iteration_profiler_steps") or {}).items()}
    late = {
        (r, to_key.get(i) if key == "profiler_step" else i): ms
        for (r, i), ms in measured_lateness(truth).items()
    }
    host_confirmed = [
        f
        for f in findings
        if (int(f["rank"]), int(f["step"])) not in truth_keys
        and late.get((int(f["rank"]), int(f["step"])), 0.0)
        >= HOST_CONFIRM_SHARE * float(f.get("lag_us") or 0) / 1e3
        and late.get((int(f["rank"]), int(f["step"])), 0.0) > 0
    ]
    out.update(
        step_source=source,
        compared_as=key,
        injected=[{"rank": p["rank"], "step": p[key], "delay_ms": p["measured_delay_ms"]} for p in pairs],
        eligible=len(eligible),
        found=len(hits),
        missed=[
            {"rank": p["rank"], "step": p[key], "delay_ms": p["measured_delay_ms"]}
            for p in eligible
            if p not in hits
        ],
        findings=len(findings),
        true_findings=len(true_findings),
        host_confirmed=[
            {
                "rank": f["rank"],
                "step": f["step"],
                "lag_us": f.get("lag_us"),
                "measured_ms": round(late[(int(f["rank"]), int(f["step"]))], 3),
            }
            for f in host_confirmed
        ],
        false_findings=[
            {"rank": f["rank"], "step": f["step"], "kind": f.get("kind"), "lag_us": f.get("lag_us")}
            for f in findings
            if (int(f["rank"]), int(f["step"])) not in truth_keys and f not in host_confirmed
        ],
    )
    return out


def judge_steps(truth: dict[str, Any], evidence: Path, res: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"status": res["status"]}
    if res["status"] != "ok":
        out["error"] = res["error"][:500]
        return out
    doc = res["document"]
    origin = doc.get("clock_origin_ns")
    ranks_doc = [r for r in doc.get("ranks") or [] if isinstance(r, dict)]
    out["step_count"] = doc.get("step_count")
    if origin is None or not any("boundaries" in r for r in ranks_doc):
        out["status"] = "not_scorable_yet"
        out["why"] = "the steps document has no clock_origin_ns / ranks[].boundaries yet"
        return out
    calls = kineto.rank_calls(evidence)
    by_rank = {int(rd["rank"]): rd for rd in ranks_doc if "rank" in rd}
    total = right = extra = 0
    misplaced: list[dict[str, Any]] = []
    for r, rcalls in sorted(calls.items()):
        starts = [c.start_ns for c in rcalls]
        placed: set[int] = set()
        for b in by_rank.get(r, {}).get("boundaries") or []:
            t = int(origin) + round(float(b["at_us"]) * 1000)
            idx = _nearest(starts, t)
            if idx is None or abs(starts[idx] - t) > BOUNDARY_TOLERANCE_NS:
                extra += 1  # a boundary at no call of this rank
            else:
                placed.add(idx)
        truth_calls: set[int] = {0}  # the traces' first call opens the first step in any numbering
        for it in truth["ranks"].get(str(r), {}).get("iterations", []):
            if it["index"] < 1:
                continue
            end = it.get("end_ns")
            idx = next((i for i, s in enumerate(starts) if s >= it["start_ns"]), None)
            if idx is None or (end is not None and starts[idx] > end):
                continue  # the iteration's calls are not in the traces
            truth_calls.add(idx)
            total += 1
            if idx in placed:
                right += 1
            elif len(misplaced) < 20:
                misplaced.append({"rank": r, "iteration": it["index"], "call": rcalls[idx].name})
        extra += len(placed - truth_calls)
    out.update(
        status="ok",
        boundaries=total,
        right=right,
        # A boundary placed at no true iteration start counts against the
        # figure: over-segmenting (every broadcast a step) is not "right".
        fraction=(right / (total + extra)) if total + extra else None,
        extra_boundaries=extra,
        misplaced=misplaced,
    )
    return out


def _nearest(starts: list[int], t: int) -> int | None:
    if not starts:
        return None
    i = bisect.bisect_left(starts, t)
    cands = [j for j in (i - 1, i) if 0 <= j < len(starts)]
    return min(cands, key=lambda j: abs(starts[j] - t))


# ---------------------------------------------------------------------------- one run


def score_run(run_dir: Path) -> dict[str, Any]:
    truth = json.loads((run_dir / "ground_truth.json").read_text())
    scn = truth["scenario"]
    evidence = run_dir / "evidence"
    kind = scn["fault"]["kind"]
    out: dict[str, Any] = {
        "name": scn["name"],
        "run_dir": run_dir.name,
        "shape": scn["shape"],
        "world": scn["world"],
        "markers": scn["markers"],
        "profiler_mode": scn["profiler"]["mode"],
        "fault": kind,
        "fault_rank": scn["fault"].get("rank"),
        "fault_site": scn["fault"].get("site"),
        "fault_variant": scn["fault"].get("variant"),
        "fault_effective": truth["fault"]["effective"],
        "outcome": truth["outcome"]["summary"],
        "expected": truth["expected"],
        "hang": {},
    }
    for subset in SUBSETS:
        paths = subset_paths(evidence, subset)
        if not paths:
            out["hang"][subset] = {"status": "no_evidence"}
            continue
        out["hang"][subset] = judge_hang(truth, _call("diagnose_hang", paths))
        out["hang"][subset]["files"] = len(paths) if subset != "all" else None
    out["cli"] = run_cli(evidence)
    traces = subset_paths(evidence, "traces")
    if kind in ("none", "sleep_straggler", "compute_straggler") and traces:
        out["stragglers"] = judge_stragglers(truth, _call("diagnose_stragglers", traces))
    if not scn["markers"] and traces:
        out["steps"] = judge_steps(truth, evidence, _call("recover_steps", traces))
    return out


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    run_dir, dest = Path(args[0]), Path(args[1])
    res = score_run(run_dir)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_text(json.dumps(res, sort_keys=True))
    os.replace(tmp, dest)


if __name__ == "__main__":
    main()
