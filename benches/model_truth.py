#!/usr/bin/env python3
"""How well the calibrated model predicts real collectives here
(``docs/model-truth.md``).

1. Calibrate: the gloo fixture's canary (``import-kineto`` of its four
   ranks, compiled losslessly) is replayed ``--runs`` times on 4 real gloo
   processes at each message scale of ``--calibration-scales`` (so the
   sizes it calibrates span those it predicts), its gaps scaled too where
   the host could not keep the schedule at that size (``64:16``: messages
   x64, gaps x16); ``calibrate`` fits the backend to all runs.
2. Predict a different canary: a ``../shared/bench/gen_trace.py`` trace of
   ``--events`` events (8 ranks: a TP-4 prefill group, a TP-4 decode group,
   KV transfers), its gaps scaled by ``--gap-scale`` so this machine can keep
   its schedule, and its messages divided by each of ``--bytes-divisors``
   (1: the GPU sizes as generated; 8: sizes this host moves in about the
   time a GPU moves the generated ones, inside the fixture's range);
   compiled losslessly; replayed ``--runs`` times physically and in the
   model with the calibrated backend (``--model-iterations`` iterations at
   ``--seed``, so the model's own sampling error is small beside the
   measurements'; each model figure is also given over seeds 1..``--seeds``).
Every physical run of steps 1 and 2 goes round by round (each round: the
fixture's canary once at each scale, then each predicted canary once), so
the host's drift over the campaign falls on calibration and prediction
alike; validate-model goes round by round over its configurations too.

3. Figures, each beside the run-to-run noise of the same statistic over the
   physical runs (one run against the pooled others):
   * per signature (op, size, group): the absolute percentage error of the
     model's median ``collective_us`` against the measured median; the
     median over signatures;
   * the report's p50 and p95 of exposed latency: the model's against the
     mean of the runs' (also in sample, on the fixture's own runs as recorded);
   * with ``--validate``: the pairwise ranking agreement of six
     configurations (message sizes x4 and x0.25, gaps x2 and x0.5, both),
     beside the runs' agreement with each other (for this row the second
     column is agreement, not error).

Prints a table and writes ``--json`` when asked. Needs torch, except with
``--from DIR``, which measures nothing and re-evaluates the runs a previous
``--keep DIR`` left (a model change checked against the same measurements).

    python benches/model_truth.py [--runs 3] [--events 400] [--gap-scale 100] [--bytes-divisors 1,8]
        [--calibration-scales 0.125,1,8,64:16] [--model-iterations 20] [--seed 7] [--seeds 20]
        [--validate] [--signatures] [--json out.json] [--keep DIR | --from DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import commcanary
from commcanary.calibrate import calibrate
from commcanary.physical import replay_physical

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@dataclass(frozen=True)
class ModelDraw:
    """How the stochastic model is replayed for a figure: ``iterations``
    repetitions of the canary (so its own sampling error is small beside
    the measurements') at ``seed``."""

    iterations: int
    seed: int


def ape(model: float, measured: float) -> float:
    return abs(model - measured) / measured * 100.0


def signature_keys(samples: dict[str, Any]) -> list[str]:
    """Each sample's signature key: ``op|group|signature index``."""
    return [
        f"{o}|{g}|{x}" for o, g, x in zip(samples["op"], samples["group"], samples["signature"], strict=True)
    ]


def per_signature(samples: dict[str, Any]) -> dict[str, float]:
    return pooled([samples])


def pooled(runs: list[dict[str, Any]], skip: int | None = None) -> dict[str, float]:
    merged: dict[str, list[float]] = {}
    for j, s in enumerate(runs):
        if j == skip:
            continue
        for k, v in zip(signature_keys(s), s["collective_us"], strict=True):
            merged.setdefault(k, []).append(float(v))
    return {k: float(np.median(v)) for k, v in merged.items()}


def signature_error(model: dict[str, float], measured: dict[str, float]) -> float:
    return float(np.median([ape(model[k], measured[k]) for k in measured if k in model and measured[k] > 0]))


def predicted_canary(d: Path, gap_scale: float, divisor: int) -> Path:
    """The generated trace with gaps times ``gap_scale`` and every message
    divided by ``divisor``, compiled losslessly."""
    gen = json.loads((d / "gen.json").read_text())
    for e in gen["events"]:
        e["start_us"] = e["start_us"] * gap_scale
        e.pop("gap_us", None)
        e["bytes"] = max(2, int(e["bytes"]) // divisor)
    trace = d / f"gen.{divisor}.trace.json"
    trace.write_text(json.dumps(gen))
    out = d / f"gen.{divisor}.canary.json"
    commcanary.compile(trace, lossless_timing=True, timing_sample_limit=1000).write(out)
    return out


def quantile_rows(
    model: Any, measured: list[Any], prefix: str, tag: str = ""
) -> list[tuple[str, float, float]]:
    """The report's p50 and p95: the model's error against the runs' mean,
    beside the largest error of one run against the others' mean."""
    rows = []
    for q in ("median_us", "p95_us"):
        values = [r.metrics[q] for r in measured]
        centre = statistics.mean(values)
        noise = max(ape(v, statistics.mean(values[:j] + values[j + 1 :])) for j, v in enumerate(values))
        rows.append((f"{prefix}report {q}{tag}", ape(model.metrics[q], centre), noise))
    return rows


def model_replay(canary: Path, backend: Any, model: ModelDraw) -> Any:
    return commcanary.replay(
        canary, backend=backend, include_samples=True, iterations=model.iterations, seed=model.seed
    )


def in_sample(
    canary: Path, reports: list[Path], fit: Any, scale: float, draw: ModelDraw
) -> list[tuple[str, float, float]]:
    """The report-level figures on the calibration canary itself, at the
    message scale ``scale`` it was measured at in ``reports``."""
    from dataclasses import replace

    from commcanary.replay import Report

    measured = [Report.from_file(r) for r in reports]
    backend = replace(fit.backend, bytes_scale=scale)
    model = model_replay(canary, backend, draw)
    tag = f"in sample, the fixture x{scale:g}"
    signature = signature_row(model, measured, f" ({tag})")
    return [signature, *quantile_rows(model, measured, f"{tag}: ")]


def signature_row(model: Any, measured: list[Any], tag: str) -> tuple[str, float, float]:
    """Per signature: the model's median APE against the pooled runs, beside
    the largest of one run's against the others pooled."""
    samples = [r.samples for r in measured]
    assert model.samples is not None and all(s is not None for s in samples)
    error = signature_error(per_signature(model.samples), pooled(samples))
    noise = [signature_error(per_signature(samples[j]), pooled(samples, skip=j)) for j in range(len(samples))]
    return ("per-signature median collective_us, median APE" + tag, error, max(noise))


def predict(
    canary: Path, fit: Any, measured: list[Path], divisor: int, draw: ModelDraw
) -> list[tuple[str, float, float]]:
    """The prediction figures of one canary: per signature, p50 and p95."""
    from commcanary.replay import Report

    model = model_replay(canary, fit.backend, draw)
    tag = f" (bytes / {divisor})"
    runs = [Report.from_file(r) for r in measured]
    return [signature_row(model, runs, tag), *quantile_rows(model, runs, "", tag)]


def signature_table(canary: Path, fit: Any, measured: list[Path], draw: ModelDraw) -> list[str]:
    """Per signature of ``canary``: occurrences per run, the measured median
    (pooled, and each run's range), the model's median and its error."""
    from commcanary.replay import Report

    doc = json.loads(canary.read_text())
    model = per_signature(model_replay(canary, fit.backend, draw).samples)
    runs = [Report.from_file(r).samples for r in measured]
    each = [per_signature(s) for s in runs]
    centre = pooled(runs)
    counts = Counter(signature_keys(runs[0]))
    lines = [f"  {'signature':<44} {'n':>4} {'measured ms (runs)':>24} {'model ms':>9} {'error %':>8}"]
    for key in sorted(centre, key=lambda k: (k.split("|")[0], int(k.split("|")[2]))):
        op, group, index = key.split("|")
        sig = doc["signatures"][int(index)]
        ranks = sig["ranks"]
        name = f"{op} {sig['bytes'] / 1024:g} KiB {group} ranks {ranks[0]}..{ranks[-1]}"
        lo, hi = (f(e[key] for e in each if key in e) / 1e3 for f in (min, max))
        mine = model.get(key, float("nan"))
        lines.append(
            f"  {name:<44} {counts.get(key, 0):>4} {centre[key] / 1e3:>9.2f} ({lo:.2f}-{hi:.2f}) "
            f"{mine / 1e3:>9.2f} {ape(mine, centre[key]):>8.1f}"
        )
    return lines


def measure_rounds(
    d: Path, runs: int, scales: list[tuple[float, float]], predicted: dict[int, Path]
) -> tuple[dict[tuple[float, float], list[Path]], dict[int, list[Path]]]:
    """Every physical run, round by round: in each round the fixture's canary
    once at each calibration scale, then each predicted canary once, so the
    host's drift over the campaign falls on calibration and prediction alike."""
    calibration: dict[tuple[float, float], list[Path]] = {s: [] for s in scales}
    prediction: dict[int, list[Path]] = {k: [] for k in predicted}
    for j in range(runs):
        t0 = time.perf_counter()
        for scale, gaps in scales:
            run = replay_physical(
                d / "fixture.canary.json", iterations=1, warmup=1, bytes_scale=scale, compute_fill_scale=gaps
            )
            calibration[(scale, gaps)].append(run.report.write(d / f"fixture.x{scale:g}g{gaps:g}.{j}.json"))
        for divisor, canary in predicted.items():
            run = replay_physical(canary, iterations=1, warmup=1)
            prediction[divisor].append(run.report.write(canary.with_name(f"{canary.stem}.measured.{j}.json")))
        print(f"round {j + 1} of {runs}: {time.perf_counter() - t0:.0f} s", flush=True)
    return calibration, prediction


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--events", type=int, default=400)
    ap.add_argument("--gap-scale", type=float, default=100.0)
    ap.add_argument(
        "--bytes-divisors",
        default="1,8",
        help="Predict the generated canary with every message divided by each of these (1: GPU sizes as generated).",
    )
    ap.add_argument(
        "--calibration-scales",
        default="0.125,1,8,64:16",
        help=(
            "Measure the fixture's canary with its messages times each of these to calibrate; "
            "SCALE:GAPS also scales its gaps, so the host keeps the schedule at large sizes."
        ),
    )
    ap.add_argument(
        "--model-iterations",
        type=int,
        default=20,
        help="Replay the model this many iterations of each canary for its figures (its own sampling error).",
    )
    ap.add_argument("--seed", type=int, default=7, help="The model's seed for the headline figures.")
    ap.add_argument(
        "--seeds",
        type=int,
        default=20,
        help="Also give each model figure's median and range over seeds 1..SEEDS (0: skip).",
    )
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--keep",
        default=None,
        help="Keep the canaries, measured reports and backend file in this directory (default: a temporary one).",
    )
    ap.add_argument(
        "--from",
        dest="reuse",
        default=None,
        help="Measure nothing: recalibrate and evaluate the runs a previous --keep left in this directory.",
    )
    ap.add_argument("--validate", action="store_true", help="Also rank six configurations (validate-model).")
    ap.add_argument(
        "--signatures",
        action="store_true",
        help="Also print each predicted canary's signatures: measured and model medians at --seed.",
    )
    return ap.parse_args()


def prepare(d: Path, args: argparse.Namespace) -> dict[int, Path]:
    """The fixture's canary and the generated canaries to predict, in ``d``."""
    import subprocess

    fixture = SHARED / "fixtures" / "kineto" / "gloo_tp4_decode"
    commcanary.import_kineto(sorted(fixture.glob("rank*.json.gz"))).write(d / "fixture.trace.json")
    commcanary.compile(d / "fixture.trace.json", lossless_timing=True, timing_sample_limit=1000).write(
        d / "fixture.canary.json"
    )
    generator = SHARED / "bench" / "gen_trace.py"
    subprocess.run(
        [sys.executable, str(generator), str(args.events), str(d / "gen.json")],
        check=True,
        capture_output=True,
    )
    return {k: predicted_canary(d, args.gap_scale, k) for k in divisors(args)}


def divisors(args: argparse.Namespace) -> list[int]:
    return [int(x) for x in args.bytes_divisors.split(",")]


def kept_runs(
    d: Path, scales: list[tuple[float, float]], divisors: list[int]
) -> tuple[dict[tuple[float, float], list[Path]], dict[int, list[Path]]]:
    """The measured reports a previous ``--keep`` left in ``d``."""
    calibration = {(m, g): sorted(d.glob(f"fixture.x{m:g}g{g:g}.*.json")) for m, g in scales}
    prediction = {k: sorted(d.glob(f"gen.{k}.canary.measured.*.json")) for k in divisors}
    for runs in [*calibration.values(), *prediction.values()]:
        if not runs:
            raise SystemExit(f"{d}: no kept runs for every scale and divisor asked")
    return calibration, prediction


def figures(
    d: Path,
    fit: Any,
    reports: dict[tuple[float, float], list[Path]],
    measured: dict[int, list[Path]],
    draw: ModelDraw,
) -> list[tuple[str, float, float]]:
    """Every model-against-measurement row but the ranking."""
    recorded = (1.0, 1.0) if (1.0, 1.0) in reports else next(iter(reports))
    rows = in_sample(d / "fixture.canary.json", reports[recorded], fit, recorded[0], draw)
    for divisor, runs in measured.items():
        rows.extend(predict(d / f"gen.{divisor}.canary.json", fit, runs, divisor, draw))
    return rows


def seed_spread(rows_at: Any, seeds: int) -> list[tuple[float, float, float]]:
    """Each row's model error over seeds 1..``seeds``: (min, median, max)."""
    by_seed = [rows_at(seed) for seed in range(1, seeds + 1)]
    columns = zip(*[[err for _, err, _ in rows] for rows in by_seed], strict=True)
    return [(min(c), statistics.median(c), max(c)) for c in columns]


def validation(d: Path, fit: Any, args: argparse.Namespace) -> tuple[str, float, float]:
    from commcanary.validate import validate_model

    configs = [
        {"name": "a-as-recorded"},
        {"name": "b-bytes-x4", "bytes_scale": 4},
        {"name": "c-bytes-x0.25", "bytes_scale": 0.25},
        {"name": "d-gaps-x2", "compute_fill_scale": 2},
        {"name": "e-gaps-x0.5", "compute_fill_scale": 0.5},
        {"name": "f-bytes-x4-gaps-x2", "bytes_scale": 4, "compute_fill_scale": 2},
    ]
    t0 = time.perf_counter()
    canary = d / "gen.1.canary.json"
    if not canary.exists():
        canary = predicted_canary(d, args.gap_scale, 1)
    v = validate_model(canary, configs, backend=fit.backend, runs=args.runs)
    print(f"validation: {len(configs)} configurations x {args.runs} runs in {time.perf_counter() - t0:.0f} s")
    for line in v.lines():
        print("  " + line)
    return ("pairwise ranking agreement, %", v.agreement * 100, v.document["run_to_run_agreement"] * 100)


def main() -> int:
    args = arguments()
    scales = [
        (float(m), float(g))
        for m, g in ([*x.split(":"), "1"][:2] for x in args.calibration_scales.split(","))
    ]
    with tempfile.TemporaryDirectory(prefix="commcanary-model-truth-") as tmp:
        d = Path(args.reuse or args.keep or tmp)
        d.mkdir(parents=True, exist_ok=True)
        if args.reuse:
            reports, measured = kept_runs(d, scales, divisors(args))
        else:
            predicted = prepare(d, args)
            t0 = time.perf_counter()
            reports, measured = measure_rounds(d, args.runs, scales, predicted)
            print(
                f"measured: {args.runs} rounds of the fixture canary at message scales {args.calibration_scales} "
                f"and the {args.events}-event generated canary at bytes / {args.bytes_divisors} "
                f"in {time.perf_counter() - t0:.0f} s"
            )
        fit = calibrate([r for runs in reports.values() for r in runs], [d / "fixture.canary.json"])
        fit.write(d / "backend.json")
        for line in fit.lines():
            print("  " + line)

        def rows_at(seed: int) -> list[tuple[str, float, float]]:
            return figures(d, fit, reports, measured, ModelDraw(args.model_iterations, seed))

        rows = rows_at(args.seed)
        spread = seed_spread(rows_at, args.seeds) if args.seeds > 0 else [(e, e, e) for _, e, _ in rows]
        if args.validate and not args.reuse:
            rows.append(validation(d, fit, args))
            spread.append((rows[-1][1],) * 3)
        report(rows, spread, args)
        if args.signatures:
            draw = ModelDraw(args.model_iterations, args.seed)
            for divisor, runs in measured.items():
                print(f"per signature, bytes / {divisor}:")
                for line in signature_table(d / f"gen.{divisor}.canary.json", fit, runs, draw):
                    print(line)
        if args.json:
            Path(args.json).write_text(
                json.dumps(
                    {
                        "backend": fit.document()["backend"],
                        "calibration_errors": fit.errors,
                        "model_iterations": args.model_iterations,
                        "seed": args.seed,
                        "figures": [
                            {
                                "figure": n,
                                "model_error_pct": e,
                                "noise_pct": v,
                                "over_seeds_pct": {"min": lo, "median": mid, "max": hi},
                            }
                            for (n, e, v), (lo, mid, hi) in zip(rows, spread, strict=True)
                        ],
                    },
                    indent=1,
                )
            )
    return 0


def report(
    rows: list[tuple[str, float, float]], spread: list[tuple[float, float, float]], args: argparse.Namespace
) -> None:
    seeds = f"seeds 1..{args.seeds}: median (range)" if args.seeds > 0 else ""
    print(f"model replayed {args.model_iterations} iterations at seed {args.seed}")
    print(f"{'figure':<50} {'model error %':>14} {'run-to-run %':>13}  {seeds}")
    for (name, err, noise), (lo, mid, hi) in zip(rows, spread, strict=True):
        over = f"{mid:.1f} ({lo:.1f}-{hi:.1f})" if args.seeds > 0 and "ranking" not in name else ""
        print(f"{name:<50} {err:>14.1f} {noise:>13.1f}  {over}")


if __name__ == "__main__":
    raise SystemExit(main())
