"""Source verification of a canary against its trace, on an independent path.

Nothing here calls the compiler or the Rust core: the trace and the canary are
taken as parsed JSON (the command line validates both files with the strict
readers first), and every commitment and error bound
is re-derived from the trace with ``hashlib`` and the definitions of
``docs/formats/canary.md``:

* ``source_format``, ``workload``, ``system``: copied from the trace;
* ``source_trace_sha256`` (and ``source_bytes``): the ordered, truncated trace;
* ``execution_semantic_sha256`` and ``calibration_evaluation_sha256``: the
  program the canary executes, expanded occurrence by occurrence;
* ``artifact_provenance_sha256`` and ``canary_bytes``: the canary itself;
* ``fidelity``: every maximum recomputed from the source, the gap totals;
* ``recursive_timing_records`` and ``approximate_timing_records``: recounted;
* ``source_commitments``: each logical event consumes its source events in
  order; their signatures must be the event's; exact, run and pattern records
  must reproduce the source samples exactly; each bounded interval's count,
  gap sum, representative, segment SHA-256 and error bounds must recompute.

The status is ``source_verified``, ``partial_source_verified`` (everything
holds for the compiled prefix of a longer trace) or ``failed``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from commcanary.formats import CANARY_FORMAT, FIDELITY_VERIFICATION_FORMAT

__all__ = ["FIDELITY_FORMAT", "SourceTrace", "verify_fidelity"]

FIDELITY_FORMAT = FIDELITY_VERIFICATION_FORMAT
KNOWN_OPS = {
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "all_to_all",
    "broadcast",
    "send",
    "recv",
    "point_to_point",
}
BOUND_NAMES = (
    "max_gap_error_us",
    "max_skew_error_us",
    "max_arrival_offset_error_us",
    "max_compute_before_error_us",
    "max_overlap_error_us",
    "max_pressure_error",
    "max_observed_exposed_error_us",
    "max_prefix_gap_error_us",
)
MAX_FAILURES = 20


def canonical(obj: Any) -> bytes:
    """Canonical JSON v1."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def sha(obj: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``obj``."""
    return hashlib.sha256(canonical(obj)).hexdigest()


def py_sum(values: Any) -> float:
    """CPython >= 3.12 ``sum()`` over floats (Neumaier), on any Python version."""
    total = compensation = 0.0
    for x in values:
        t = total + x
        compensation += (total - t) + x if abs(total) >= abs(x) else (x - t) + total
        total = t
    return total + compensation if compensation else total


def _num(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("booleans are not numbers")
    return float(value.strip()) if isinstance(value, str) else float(value)


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("booleans are not integers")
    if isinstance(value, float):
        return int(value)
    return int(value.strip()) if isinstance(value, str) else int(value)


def signature(event: dict[str, Any]) -> dict[str, Any]:
    """The operation identity of a trace event, as canaries store it."""
    ranks = event["ranks"]
    ranks = list(range(_int(ranks))) if not isinstance(ranks, list) else [_int(r) for r in ranks]
    sig: dict[str, Any] = {
        "bytes": _int(event["bytes"]),
        "concurrent_groups": _int(event.get("concurrent_groups", 1)),
        "group": event.get("group", "default"),
        "op": event["op"],
        "phase": event.get("phase", "unknown"),
        "ranks": ranks,
    }
    if event.get("custom_op") is True:
        sig["custom_op"] = True
    for key in ("dtype", "reduction_op", "root_rank", "tag", "channel"):
        if key in event:
            sig[key] = event[key]
    for key in ("sender_rank", "receiver_rank", "message_sequence"):
        if key in event:
            sig[key] = _int(event[key])
    return sig


class SourceTrace:
    """A trace prepared for verification: ordered events, gaps and samples."""

    def __init__(self, trace: dict[str, Any]) -> None:
        self.trace = trace
        events = trace.get("events", [])
        timestamped = bool(events) and all("start_us" in e for e in events)
        ordered = sorted(events, key=lambda e: _num(e["start_us"])) if timestamped else list(events)
        gaps = []
        previous = None
        for e in ordered:
            if timestamped:
                start = _num(e["start_us"])
                gap = (
                    (_num(e["gap_us"]) if "gap_us" in e else 0.0)
                    if previous is None
                    else max(0.0, start - previous)
                )
                previous = start
            elif "gap_us" in e:
                gap = _num(e["gap_us"])
            else:
                gap = _num(e.get("compute_before_us", 0.0))
            gaps.append(round(gap, 9))
        self.ordered = ordered
        self.samples = [self._sample(e, g) for e, g in zip(ordered, gaps, strict=True)]
        self.signatures = [signature(e) for e in ordered]
        self._projections: dict[int, tuple[str, int]] = {}

    @staticmethod
    def _sample(e: dict[str, Any], gap: float) -> dict[str, Any]:
        ranks = e["ranks"]
        ranks = list(range(_int(ranks))) if not isinstance(ranks, list) else [_int(r) for r in ranks]
        arrival = e.get("rank_arrival_us")
        if isinstance(arrival, dict):
            arrival = [_num(arrival[str(r)]) for r in ranks]
        elif isinstance(arrival, list):
            arrival = [_num(a) for a in arrival]
        if arrival is not None:
            low = min(arrival)
            offsets = [round(a - low, 9) for a in arrival]
            skew = round(max(arrival) - low, 9)
        else:
            skew = round(_num(e["arrival_skew_us"]), 9) if "arrival_skew_us" in e and len(ranks) > 1 else 0.0
            offsets = [0.0] * (len(ranks) - 1) + [skew]
        sample: dict[str, Any] = {
            "gap_us": gap,
            "arrival_offsets_us": offsets,
            "arrival_skew_us": skew,
            "compute_before_us": round(_num(e.get("compute_before_us", 0.0)), 9),
            "compute_overlap_us": round(_num(e.get("compute_overlap_us", 0.0)), 9),
            "compute_pressure": round(_num(e.get("compute_pressure", 0.5)), 6),
        }
        if "observed_exposed_us" in e:
            sample["observed_exposed_us"] = round(_num(e["observed_exposed_us"]), 9)
        if e.get("compute_fields_uncertain") is True:
            sample["compute_fields_uncertain"] = True
        return sample

    def projection(self, count: int) -> tuple[str, int]:
        """(SHA-256, canonical bytes) of the trace cut to its first ``count`` ordered events."""
        if count not in self._projections:
            data = canonical({**self.trace, "events": self.ordered[:count]})
            self._projections[count] = (hashlib.sha256(data).hexdigest(), len(data))
        return self._projections[count]


def _weight(record: Any) -> int:
    if isinstance(record, list):
        return int(record[0])
    if "pattern" in record:
        return len(record["pattern"]) * int(record["repeats"])
    return int(record["interval"][0])


#: The execution semantics every commitment names: a step loop (v4) runs
#: the same occurrences as the flat program (v3) it encodes.
EXECUTION_FORMAT = CANARY_FORMAT


def _logical_events(canary: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(stream, first occurrence in it, occurrences) of every logical event.

    A stream is a stored leaf instance read once: a plain leaf, each
    repetition of a motif leaf, or a step loop's slot, read on across the
    iterations of its schedule. ``_streams`` gives the leaf of each.
    """
    out: list[tuple[int, int, int]] = []
    stream = 0
    for block in canary["events"]:
        if "loop" in block:
            taken = [0] * len(block["loop"])
            for variant, iterations in block["schedule"]:
                for _ in range(int(iterations)):
                    for slot, events in block["variants"][variant]:
                        out.append((stream + slot, taken[slot], int(events)))
                        taken[slot] += int(events)
            stream += len(block["loop"])
        elif "motif" in block:
            for _ in range(int(block["repeats"])):
                for leaf in block["motif"]:
                    out.append((stream, 0, sum(_weight(r) for r in leaf["timing"])))
                    stream += 1
        else:
            out.append((stream, 0, sum(_weight(r) for r in block["timing"])))
            stream += 1
    return out


def _streams(canary: dict[str, Any]) -> list[dict[str, Any]]:
    """The leaf of each stream ``_logical_events`` numbers."""
    leaves: list[dict[str, Any]] = []
    for block in canary["events"]:
        if "loop" in block:
            leaves.extend(block["loop"])
        elif "motif" in block:
            for _ in range(int(block["repeats"])):
                leaves.extend(block["motif"])
        else:
            leaves.append(block)
    return leaves


def _spread(total: float, w: int) -> list[float]:
    share, handed, out = total / w, 0.0, []
    for j in range(w):
        if j == w - 1:
            out.append(total - handed)
        else:
            handed += share
            out.append(share)
    return out


def _occurrences(record: Any) -> list[tuple[float, list[Any]]]:
    """(gap, plain-record values) of every occurrence of one record."""
    if isinstance(record, list):
        w, gap = int(record[0]), record[1]
        return [(g, record) for g in _spread(gap if w == 1 else round(gap * w, 9), w)]
    if "pattern" in record:
        children = record["pattern"]
        residual = record["gap_sum_us"] - record["repeats"] * py_sum(c[1] for c in children)
        out = []
        n = len(children) * int(record["repeats"])
        for i in range(n):
            child = children[i % len(children)]
            out.append((child[1] + residual if i == n - 1 and residual != 0 else child[1], child))
        return out
    interval = record["interval"]
    values = [interval[0], interval[2], *interval[4:8], *interval[8:9]]
    return [(g, values) for g in _spread(interval[1], int(interval[0]))]


def interval_layout(timing_columns: list[str]) -> tuple[list[str], list[str]]:
    """Positions of a bounded interval's ``interval`` and ``errors`` arrays.

    They are not stored in the canary: the format derives them from its
    ``timing_columns`` (optional observed latency and uncertainty columns).
    """
    interval = [
        "weight",
        "gap_sum_us",
        "gap_us",
        "representative_index",
        "arrival_offsets_us",
        "compute_before_us",
        "compute_overlap_us",
        "compute_pressure",
    ]
    errors = [
        "max_gap_error_us",
        "max_skew_error_us",
        "max_arrival_offset_error_us",
        "max_compute_before_error_us",
        "max_overlap_error_us",
        "max_pressure_error",
        "max_prefix_gap_error_us",
        "representative_gap_error_us",
    ]
    if "observed_exposed_us" in timing_columns:
        interval.append("observed_exposed_us")
        errors.append("max_observed_exposed_error_us")
    if "compute_fields_uncertain" in timing_columns:
        interval.append("uncertain_weight")
    return interval, errors


def program_commitments(canary: dict[str, Any]) -> tuple[str, str]:
    """(execution_semantic_sha256, calibration_evaluation_sha256) of a canary's program."""
    columns = canary["timing_columns"]
    observed_at = columns.index("observed_exposed_us") if "observed_exposed_us" in columns else None
    interval_columns, _ = interval_layout(columns)
    interval_observed = (
        interval_columns.index("observed_exposed_us") if "observed_exposed_us" in interval_columns else None
    )
    exec_events: list[Any] = []
    calib_events: list[Any] = []
    seen: dict[int, int] = {}
    leaves = _streams(canary)
    expanded: dict[int, list[tuple[float, list[Any], Any]]] = {}

    def occurrences_of(stream: int) -> list[tuple[float, list[Any], Any]]:
        if stream not in expanded:
            out: list[tuple[float, list[Any], Any]] = []
            for record in leaves[stream]["timing"]:
                if isinstance(record, dict) and "interval" in record:
                    obs = record["interval"][interval_observed] if interval_observed is not None else None
                else:
                    obs = None
                out.extend((gap, v, obs) for gap, v in _occurrences(record))
            expanded[stream] = out
        return expanded[stream]

    for stream, first, take in _logical_events(canary):
        sig_index = leaves[stream]["signature"]
        sig = canary["signatures"][sig_index]
        base = seen.get(sig_index, 0)
        runs: list[dict[str, Any]] = []
        observed_runs: list[dict[str, Any]] | None = [] if observed_at is not None else None
        for gap, v, obs in occurrences_of(stream)[first : first + take]:
            item = {
                "arrival_offsets_us": [round(o, 9) for o in v[2]],
                "compute_overlap_us": round(v[4], 9),
                "compute_pressure": round(v[5], 9),
                "gap_us": round(gap, 9),
            }
            if runs and runs[-1]["item"] == item:
                runs[-1]["weight"] += 1
            else:
                runs.append({"item": item, "weight": 1})
            if observed_runs is not None:
                value = round(obs if obs is not None else v[observed_at], 9)  # type: ignore[index]
                if observed_runs and observed_runs[-1]["item"] == value:
                    observed_runs[-1]["weight"] += 1
                else:
                    observed_runs.append({"item": value, "weight": 1})
        seen[sig_index] = base + take
        exec_events.append({"execution_occurrence_base": base, "signature": sig, "timing_runs": runs})
        calib_events.append({"observed_runs": observed_runs, "signature": sig})
    fmt = EXECUTION_FORMAT
    return sha({"events": exec_events, "format": fmt}), sha({"events": calib_events, "format": fmt})


def provenance(canary: dict[str, Any]) -> str:
    """SHA-256 of the canary minus its three self-referential fields."""
    compiler = {
        k: v
        for k, v in canary["compiler"].items()
        if k not in ("artifact_provenance_sha256", "canary_bytes", "byte_compression_ratio")
    }
    return sha({**canary, "compiler": compiler})


class _Walk:
    """Walks a canary's logical events over the source samples."""

    def __init__(self, canary: dict[str, Any], source: SourceTrace, count: int) -> None:
        self.canary = canary
        self.samples = source.samples[:count]
        self.signatures = source.signatures[:count]
        self.failures: list[dict[str, Any]] = []
        self.maxima = dict.fromkeys(BOUND_NAMES, 0.0)
        self.encoded_gap_sums: list[float] = []
        self.recursive = 0
        self.approximate = 0
        self.checked_intervals = 0
        cols = canary["timing_columns"]
        self.observed_at = cols.index("observed_exposed_us") if "observed_exposed_us" in cols else None
        self.uncertain_at = (
            cols.index("compute_fields_uncertain") if "compute_fields_uncertain" in cols else None
        )
        self.interval_columns, self.error_columns = interval_layout(cols)

    def fail(self, where: str, field: str, expected: Any, actual: Any) -> None:
        if len(self.failures) < MAX_FAILURES:
            self.failures.append({"where": where, "field": field, "expected": expected, "actual": actual})

    def plain_matches(self, record: list[Any], sample: dict[str, Any], where: str) -> None:
        values = {
            "gap_us": record[1],
            "arrival_offsets_us": record[2],
            "compute_before_us": record[3],
            "compute_overlap_us": record[4],
            "compute_pressure": record[5],
        }
        if self.observed_at is not None:
            values["observed_exposed_us"] = record[self.observed_at]
        for field, value in values.items():
            if value != sample.get(field):
                self.fail(where, field, sample.get(field), value)
                return
        uncertain = bool(record[self.uncertain_at]) if self.uncertain_at is not None else False
        if uncertain != bool(sample.get("compute_fields_uncertain")):
            self.fail(
                where, "compute_fields_uncertain", bool(sample.get("compute_fields_uncertain")), uncertain
            )

    def interval(self, record: dict[str, Any], stream: list[dict[str, Any]], start: int, where: str) -> None:
        self.checked_intervals += 1
        cols = dict(zip(self.interval_columns, record["interval"], strict=False))
        w = int(cols["weight"])
        segment = stream[start : start + w]
        rep_index = int(cols["representative_index"])
        if len(segment) != w or not (0 <= rep_index < len(stream)):
            self.fail(where, "weight", len(segment), w)
            return
        rep = stream[rep_index]
        digest = hashlib.sha256(canonical({"samples": segment})).hexdigest()
        if digest != record["source_segment_sha256"]:
            self.fail(where, "source_segment_sha256", digest, record["source_segment_sha256"])
        total = py_sum(x["gap_us"] for x in segment)
        mean = total / w
        if round(total, 9) != cols["gap_sum_us"]:
            self.fail(where, "gap_sum_us", round(total, 9), cols["gap_sum_us"])
        if round(mean, 9) != cols["gap_us"]:
            self.fail(where, "gap_us", round(mean, 9), cols["gap_us"])
        for field in ("arrival_offsets_us", "compute_before_us", "compute_overlap_us", "compute_pressure"):
            if cols[field] != rep[field]:
                self.fail(where, f"representative {field}", rep[field], cols[field])
        running, prefix = 0.0, 0.0
        for k, x in enumerate(segment):
            running += x["gap_us"]
            prefix = max(prefix, abs(running - (k + 1) * mean))
        errors = {
            "max_gap_error_us": round(max(abs(x["gap_us"] - mean) for x in segment), 9),
            "max_skew_error_us": round(
                max(abs(x["arrival_skew_us"] - rep["arrival_skew_us"]) for x in segment), 9
            ),
            "max_arrival_offset_error_us": round(
                max(
                    abs(a - b)
                    for x in segment
                    for a, b in zip(x["arrival_offsets_us"], rep["arrival_offsets_us"], strict=False)
                ),
                9,
            ),
            "max_compute_before_error_us": round(
                max(abs(x["compute_before_us"] - rep["compute_before_us"]) for x in segment), 9
            ),
            "max_overlap_error_us": round(
                max(abs(x["compute_overlap_us"] - rep["compute_overlap_us"]) for x in segment), 9
            ),
            "max_pressure_error": round(
                max(abs(x["compute_pressure"] - rep["compute_pressure"]) for x in segment), 6
            ),
            "max_prefix_gap_error_us": round(prefix, 9),
            "representative_gap_error_us": round(abs(rep["gap_us"] - mean), 9),
        }
        if "max_observed_exposed_error_us" in self.error_columns:
            errors["max_observed_exposed_error_us"] = round(
                max(abs(x["observed_exposed_us"] - rep["observed_exposed_us"]) for x in segment), 9
            )
        declared = dict(zip(self.error_columns, record["errors"], strict=False))
        for field, value in errors.items():
            if abs(value - float(declared.get(field, -1.0))) > 1e-6:
                self.fail(where, field, value, declared.get(field))
        for field in BOUND_NAMES:
            if field in errors:
                self.maxima[field] = max(self.maxima[field], errors[field])
        self.encoded_gap_sums.append(round(total, 9))

    def run(self) -> int:
        """Walks every stream's records over its source samples; returns
        the source events the logical events consume."""
        n = len(self.samples)
        leaves = _streams(self.canary)
        positions: list[list[int]] = [[] for _ in leaves]
        position = 0
        for stream, _first, take in _logical_events(self.canary):
            positions[stream].extend(range(position, min(position + take, n)))
            position += take
        if position > n:
            self.fail("canary", "source events", n, position)
            return position
        for stream, leaf in enumerate(leaves):
            self.stream(leaf, positions[stream], f"stream {stream}")
        return position

    def stream(self, leaf: dict[str, Any], indices: list[int], where_leaf: str) -> None:
        """One stream: its records cover the samples at ``indices`` in order."""
        sig = self.canary["signatures"][leaf["signature"]]
        stream = [self.samples[k] for k in indices]
        for k in indices:
            if self.signatures[k] != sig:
                self.fail(where_leaf, "signature", self.signatures[k], sig)
                break
        at = 0
        for r, record in enumerate(leaf["timing"]):
            where = f"{where_leaf} record {r}"
            w = _weight(record)
            self.recursive += 1
            if at + w > len(stream):
                self.fail(where, "source events", len(stream) - at, w)
                return
            if isinstance(record, list):
                for k in range(at, at + w):
                    self.plain_matches(record, stream[k], where)
                gap = record[1]
                self.encoded_gap_sums.append(gap if w == 1 else round(gap * w, 9))
            elif "pattern" in record:
                period = len(record["pattern"])
                self.recursive += period
                for k in range(at, at + w):
                    self.plain_matches(record["pattern"][(k - at) % period], stream[k], where)
                total = round(py_sum(x["gap_us"] for x in stream[at : at + w]), 9)
                if total != record["gap_sum_us"]:
                    self.fail(where, "gap_sum_us", total, record["gap_sum_us"])
                self.encoded_gap_sums.append(record["gap_sum_us"])
            else:
                self.approximate += 1
                self.interval(record, stream, at, where)
            at += w
        if at != len(stream):
            self.fail(where_leaf, "source events", len(stream), at)


def verify_fidelity(
    trace: str | os.PathLike[str] | dict[str, Any] | SourceTrace,
    canary: str | os.PathLike[str] | dict[str, Any],
) -> dict[str, Any]:
    """Verify ``canary`` against ``trace``; returns the verification document."""
    if isinstance(trace, SourceTrace):
        source = trace
    else:
        source = SourceTrace(trace if isinstance(trace, dict) else json.loads(Path(trace).read_bytes()))
    doc: dict[str, Any] = canary if isinstance(canary, dict) else json.loads(Path(canary).read_bytes())
    compiler = doc["compiler"]
    count = int(compiler["source_events"])
    total_events = len(source.ordered)
    checks: list[dict[str, Any]] = []

    def check(name: str, expected: Any, actual: Any) -> None:
        checks.append(
            {
                "name": name,
                "status": "pass" if expected == actual else "fail",
                "expected": expected,
                "actual": actual,
            }
        )

    check("source_format", source.trace.get("format"), doc.get("source_format"))
    check("workload", source.trace.get("workload", {}), doc.get("workload"))
    check("system", source.trace.get("system", {}), doc.get("system"))
    if count > total_events:
        digest, size = None, None
    else:
        digest, size = source.projection(count)
    check("source_trace_sha256", digest, compiler.get("source_trace_sha256"))
    check("source_bytes", size, compiler.get("source_bytes"))
    execution, calibration = program_commitments(doc)
    check("execution_semantic_sha256", execution, compiler.get("execution_semantic_sha256"))
    check("calibration_evaluation_sha256", calibration, compiler.get("calibration_evaluation_sha256"))
    check("artifact_provenance_sha256", provenance(doc), compiler.get("artifact_provenance_sha256"))
    check("canary_bytes", len(canonical(doc)), compiler.get("canary_bytes"))

    walk = _Walk(doc, source, min(count, total_events))
    consumed = walk.run()
    if consumed != count and not walk.failures:
        walk.fail("canary", "source events consumed", count, consumed)
    source_gaps = [s["gap_us"] for s in walk.samples]
    source_total = py_sum(source_gaps)
    encoded_total = py_sum(walk.encoded_gap_sums)
    fidelity = {
        "mode": "bounded_approximate" if walk.approximate else "lossless_timing",
        "approximate_timing_records": walk.approximate,
        **{k: v for k, v in walk.maxima.items()},
        "source_gap_total_us": round(source_total, 9),
        "encoded_gap_total_us": round(encoded_total, 9),
        "total_gap_error_us": round(abs(source_total - encoded_total), 9),
    }
    check("fidelity", fidelity, compiler.get("fidelity"))
    check("recursive_timing_records", walk.recursive, compiler.get("recursive_timing_records"))
    check("approximate_timing_records", walk.approximate, compiler.get("approximate_timing_records"))
    checks.append(
        {
            "name": "source_commitments",
            "status": "pass" if not walk.failures else "fail",
            "checked_bounded_intervals": walk.checked_intervals,
            "checked_source_events": min(consumed, count),
            "failures": walk.failures,
        }
    )
    ok = all(c["status"] == "pass" for c in checks)
    coverage = "full" if count == total_events else "partial"
    status = ("source_verified" if coverage == "full" else "partial_source_verified") if ok else "failed"
    return {
        "format": FIDELITY_FORMAT,
        "status": status,
        "assurance_state": "source_corresponding" if ok else "internally_consistent",
        "source_events": count,
        "trace_events": total_events,
        "source_coverage": coverage,
        "timing_sample_limit": compiler.get("timing_sample_limit"),
        "checks": checks,
    }
