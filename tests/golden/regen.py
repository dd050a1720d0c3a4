#!/usr/bin/env python3
"""Regenerate the expected values of the golden vectors in this folder.

Updating goldens is a deliberate, reviewed step: run this after an intended
change of the canary format or the compiler, read the diff, commit it.

* ``canonical_json.json`` and ``pyfloat.json`` are computed by CPython itself
  (``json.dumps``, ``repr``, ``round``), never by commcanary.
* ``compile.json`` records what the compiler produces for small traces that
  exercise every rung of the timing ladder, motifs and bounded intervals; the
  walkthrough's published numbers (event ratios, bounds) are asserted by the
  tests independently of this file.
* ``replay.json`` replays those canaries (every timing representation) under
  the default backend, each ablation, several iterations and seeds, and
  records metrics, breakdowns and the report's SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent


def canonical(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def regen_canonical() -> None:
    path = HERE / "canonical_json.json"
    cases = json.loads(path.read_text())
    for case in cases:
        value = json.loads(case["input"])
        text = canonical(value)
        case["canonical"] = text
        case["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    path.write_text(json.dumps(cases, indent=1, ensure_ascii=True) + "\n")


def regen_pyfloat() -> None:
    path = HERE / "pyfloat.json"
    cases = json.loads(path.read_text())
    for case in cases:
        x = float.fromhex(case["hex"])
        assert math.isfinite(x)
        case["repr"] = repr(x)
        case["round"] = {str(n): repr(round(x, n)) for n in (0, 2, 3, 6, 9)}
    path.write_text(json.dumps(cases, indent=1) + "\n")


def regen_compile() -> None:
    import commcanary

    path = HERE / "compile.json"
    cases = json.loads(path.read_text())
    for case in cases:
        source = case.get("trace_file")
        trace = (HERE / source).read_bytes() if source else canonical(case["trace"]).encode()
        canary = commcanary.compile(trace, **case.get("options", {}))
        s = canary.summary
        doc = canary.document
        kinds = []
        for block in doc["events"]:
            leaves = block.get("motif", [block])
            for leaf in leaves:
                row = []
                for record in leaf["timing"]:
                    if isinstance(record, list):
                        row.append("exact" if record[0] == 1 else f"run:{record[0]}")
                    elif "pattern" in record:
                        row.append(f"pattern:{len(record['pattern'])}x{record['repeats']}")
                    else:
                        row.append(f"bounded:{record['interval'][0]}")
                kinds.append(row)
        case["expected"] = {
            "source_events": s["source_events"],
            "canary_events": s["canary_events"],
            "sequence_motif_count": s["sequence_motif_count"],
            "event_compression_ratio": s["event_compression_ratio"],
            "timing_mode": s["timing_mode"],
            "fidelity_mode": s["fidelity_mode"],
            "bounds": s["bounds"],
            "records": kinds,
            "source_trace_sha256": s["source_trace_sha256"],
            "execution_semantic_sha256": s["execution_semantic_sha256"],
            "canary_sha256": hashlib.sha256(canary.to_bytes()).hexdigest(),
        }
    path.write_text(json.dumps(cases, indent=1) + "\n")


def regen_replay() -> None:
    import commcanary

    compile_cases = {c["name"]: c for c in json.loads((HERE / "compile.json").read_text())}
    path = HERE / "replay.json"
    cases = json.loads(path.read_text())
    for case in cases:
        source = compile_cases[case["compile_case"]]
        trace = (
            (HERE / source["trace_file"]).read_bytes()
            if "trace_file" in source
            else canonical(source["trace"]).encode()
        )
        canary = commcanary.compile(trace, **source.get("options", {}))
        settings = dict(case["settings"])
        backend = commcanary.Backend(**settings.pop("backend", {}))
        report = commcanary.replay(canary, backend=backend, **settings)
        case["expected"] = {
            "line": report.summary_line(),
            "metrics": report.metrics,
            "by_phase": report.by_phase,
            "by_op": report.by_op,
            "report_sha256": hashlib.sha256(report.to_bytes()).hexdigest(),
        }
    path.write_text(json.dumps(cases, indent=1) + "\n")


if __name__ == "__main__":
    regen_canonical()
    regen_pyfloat()
    regen_compile()
    regen_replay()
