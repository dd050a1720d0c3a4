"""Why isolated benchmarks mislead, in a few lines: a ranking inversion.

Builds a tiny decode loop where what matters is the workload around the
collective (a queue that resets after long gaps, tail windows whose compute
hides the communication), and one all_reduce as a microbenchmark would run
it. Two backend configurations are ranked on each: the isolated benchmark
prefers the fast, no-overlap backend; the workload prefers the one that
overlaps. Then the controls: a too-small canary and three baselines
(random, frequency, cluster) stay within even very loose latency
tolerances, yet lose the ranking, so behaviour verification refuses them;
an exact small canary and a behaviour-searched one keep it and are
verified. Each line gives the verification status, then (baselines) the
source verification, then the configuration ranking.

    python examples/research_scaffolding.py [--out out/research_scaffold]

Writes every trace, canary and verification under ``--out`` and prints what
each control concluded, then the directory.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import commcanary

TAIL = {10, 30, 50, 70, 90}
CONFIGURATIONS = [
    {"name": "isolated-fast-no-overlap", "latency_floor_us": 7.0, "overlap_efficiency": 0.0, "seed": 1},
    {"name": "workload-overlap-friendly", "latency_floor_us": 8.0, "overlap_efficiency": 1.0, "seed": 1},
]
#: Tolerances so loose that only a wrong shape of behaviour fails.
LOOSE = commcanary.Tolerances(
    relative_tolerance_pct=1000.0,
    absolute_tolerance_us=1000.0,
    hidden_tolerance_points=100.0,
    tail_recall_threshold=0.0,
    ranking_tie_tolerance_us=0.0,
)


def adversarial_trace() -> dict[str, Any]:
    """100 decode all_reduces: after each tail window a long gap resets the
    queue; in the window rank 1 arrives late and compute could hide it."""
    events = []
    for i in range(100):
        tail = i in TAIL
        events.append(
            {
                "id": f"event-{i}",
                "phase": "decode",
                "op": "all_reduce",
                "bytes": 1024,
                "ranks": [0, 1],
                "group": "tp",
                "gap_us": 500.0 if i - 1 in TAIL else 1.0,
                "rank_arrival_us": {"0": 0.0, "1": 500.0 if tail else 0.0},
                "compute_overlap_us": 10000.0 if tail else 0.0,
                "compute_pressure": 1.0 if tail else 0.5,
            }
        )
    return {
        "format": "commcanary.trace.v1",
        "workload": {
            "name": "adversarial-decode-ranking-inversion",
            "notes": "A tiny synthetic decode loop where queue reset gaps and high-overlap tail windows matter.",
        },
        "events": events,
    }


def isolated_trace() -> dict[str, Any]:
    """The same all_reduce, alone, as a microbenchmark runs it."""
    event = {
        "id": "isolated-0",
        "phase": "microbenchmark",
        "op": "all_reduce",
        "bytes": 1024,
        "ranks": [0, 1],
        "group": "tp",
        "gap_us": 1.0,
        "rank_arrival_us": {"0": 0.0, "1": 0.0},
        "compute_overlap_us": 0.0,
        "compute_pressure": 0.5,
    }
    return {"format": "commcanary.trace.v1", "workload": {"name": "isolated-all-reduce"}, "events": [event]}


def ranking(canary: Path) -> str:
    """Configurations by median exposed latency, best first."""
    medians = {}
    for c in CONFIGURATIONS:
        backend = commcanary.Backend(
            latency_floor_us=c["latency_floor_us"], overlap_efficiency=c["overlap_efficiency"]
        )
        medians[c["name"]] = commcanary.replay(canary, backend=backend, seed=c["seed"]).metrics["median_us"]
    return " > ".join(sorted(medians, key=lambda name: (medians[name], name)))


def verify(trace: Path, canary: Path, tolerances: commcanary.Tolerances | None = None) -> dict[str, Any]:
    result = commcanary.verify_behavior(trace, canary, configurations=CONFIGURATIONS, tolerances=tolerances)
    canary.with_suffix(".behavior.json").write_bytes(json.dumps(result, sort_keys=True).encode())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="out/research_scaffold", help="Where to write the artifacts.")
    out = Path(parser.parse_args(argv).out)
    out.mkdir(parents=True, exist_ok=True)
    trace, isolated = out / "adversarial_decode.trace.json", out / "isolated.trace.json"
    trace.write_text(json.dumps(adversarial_trace(), sort_keys=True))
    isolated.write_text(json.dumps(isolated_trace(), sort_keys=True))

    def canary(source: Path | commcanary.Trace, name: str, limit: int, lossless: bool = False) -> Path:
        path = out / f"{name}.canary.json"
        commcanary.compile(source, timing_sample_limit=limit, lossless_timing=lossless).write(path)
        return path

    print("isolated ranking:", ranking(canary(isolated, "isolated", 2, True)))
    print("full workload ranking:", ranking(canary(trace, "full", 128, True)))

    small = verify(trace, canary(trace, "too_small", 2), LOOSE)
    print("too-small canary status:", small["status"], small["configuration_ranking_status"])
    for method, options in (
        ("random", {"sample_count": 8, "seed": 11}),
        ("frequency", {}),
        ("cluster", {"cluster_count": 4}),
    ):
        control = commcanary.baseline(trace, method, **options)
        control.write(str(out / f"{method}.trace.json"))
        result = verify(trace, canary(control, f"{method}_baseline", 16), LOOSE)
        print(
            f"{method} baseline status:",
            result["status"],
            result["source_verified_status"],
            result["configuration_ranking_status"],
        )

    exact = verify(trace, canary(trace, "exact_small", 32, True))
    print("verified canary status:", exact["status"], exact["configuration_ranking_status"])
    found = commcanary.search_behavior(
        trace,
        min_limit=2,
        max_limit=32,
        configurations=CONFIGURATIONS,
        tolerances=commcanary.Tolerances(ranking_tie_tolerance_us=0.0),
    )
    searched = out / "behavior_search.canary.json"
    found.canary.write(searched)
    result = verify(trace, searched)
    limit = found.canary.summary["timing_sample_limit"]
    status = f"{result['status']} {result['configuration_ranking_status']}"
    print(f"behavior-search canary: {limit} samples, {status}")
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
