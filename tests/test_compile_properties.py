"""Properties of the compiler on generated traces.

Checked with the independent recipes of docs/formats/canary.md (plain
hashlib/json code): whatever the trace and the limit, the canary is canonical,
self-consistent, recomputable from the source, deterministic, and lossless
canaries replay the source timing exactly (gaps to within the run-length
spreading of their exact totals).
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import commcanary
from conftest import ROOT

DOC = (ROOT / "docs" / "formats" / "canary.md").read_text()
RECIPES: dict[str, Any] = {}
for block in re.findall(r"```python\n(.*?)```", DOC, flags=re.S):
    exec(compile(block, "canary.md", "exec"), RECIPES)

small = st.sampled_from([0.0, 1.0, 2.5, 10.0, 0.125])
jitter = st.floats(min_value=0.0, max_value=500.0, allow_nan=False).map(lambda x: round(x, 3))


@st.composite
def traces(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 40))
    timestamped = draw(st.booleans())
    value = st.one_of(small, jitter) if draw(st.booleans()) else small
    signatures = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["all_reduce", "all_gather", "send"]),
                st.sampled_from([1024, 4096]),
                st.integers(1, 4),
            ),
            min_size=1,
            max_size=3,
        )
    )
    events, now = [], 0.0
    for _ in range(n):
        op, size, ranks = draw(st.sampled_from(signatures))
        event: dict[str, Any] = {"op": op, "bytes": size, "ranks": ranks}
        gap = draw(value)
        if timestamped:
            now = round(now + gap, 3)
            event["start_us"] = now
        else:
            event["gap_us"] = gap
        if ranks > 1 and draw(st.booleans()):
            event["rank_arrival_us"] = [draw(small) for _ in range(ranks)]
        event["compute_overlap_us"] = draw(value)
        event["compute_before_us"] = draw(value)
        event["compute_pressure"] = draw(st.sampled_from([0.5, 0.25, 0.9]))
        events.append(event)
    if draw(st.booleans()):
        for event in events:
            event["observed_exposed_us"] = draw(small)
    return {"format": "commcanary.trace.v1", "events": events}


@given(traces(), st.integers(2, 12), st.booleans())
def test_canary_is_canonical_recomputable_and_deterministic(
    trace: dict[str, Any], limit: int, motifs: bool
) -> None:
    data = json.dumps(trace).encode()
    canary_obj = commcanary.compile(data, timing_sample_limit=limit, sequence_motifs=motifs)
    raw = canary_obj.to_bytes()
    assert commcanary.compile(data, timing_sample_limit=limit, sequence_motifs=motifs).to_bytes() == raw
    canary = json.loads(raw)
    compiler = canary["compiler"]
    assert RECIPES["canonical"](canary) == raw
    assert len(raw) == compiler["canary_bytes"]
    assert RECIPES["provenance"](canary) == compiler["artifact_provenance_sha256"]
    assert (
        RECIPES["source_commitment"](trace, compiler["source_events"])[0] == compiler["source_trace_sha256"]
    )
    RECIPES["check_intervals"](canary, trace)
    assert RECIPES["execution_commitment"](canary) == compiler["execution_semantic_sha256"]
    # Every record respects the limit per group.
    for block in canary["events"]:
        for leaf in block.get("motif", [block]):
            stored = sum(
                1 + len(r["pattern"]) if isinstance(r, dict) and "pattern" in r else 1 for r in leaf["timing"]
            )
            assert stored <= limit


@given(traces(), st.integers(2, 12))
def test_lossless_canaries_replay_the_source_timing(trace: dict[str, Any], limit: int) -> None:
    canary = json.loads(commcanary.compile(json.dumps(trace).encode(), timing_sample_limit=limit).to_bytes())
    if canary["compiler"]["fidelity"]["mode"] != "lossless_timing":
        return
    samples = RECIPES["samples"](trace, len(trace["events"]))
    expanded: dict[int, list[Any]] = {}
    replayed: list[Any] = []
    for leaf, first, count in RECIPES["logical_events"](canary):
        if id(leaf) not in expanded:
            expanded[id(leaf)] = [
                occurrence
                for record in leaf["timing"]
                for occurrence in RECIPES["occurrences"](record, canary["timing_columns"])
            ]
        replayed += expanded[id(leaf)][first : first + count]
    assert len(replayed) == len(samples)
    for sample, (gap, values) in zip(samples, replayed, strict=True):
        assert abs(gap - sample["gap_us"]) <= 1e-9 * max(1.0, sample["gap_us"])
        assert values[2] == sample["arrival_offsets_us"]
        assert (values[3], values[4], values[5]) == (
            sample["compute_before_us"],
            sample["compute_overlap_us"],
            sample["compute_pressure"],
        )


@given(traces())
def test_budget_refusal_matches_the_achieved_bound(trace: dict[str, Any]) -> None:
    data = json.dumps(trace).encode()
    bounds = commcanary.compile(data, timing_sample_limit=2).bounds
    achieved = bounds["max_gap_error_us"]
    if achieved > 0.01:
        try:
            commcanary.compile(data, timing_sample_limit=2, budgets={"max_gap_error_us": achieved / 2})
        except commcanary.BudgetError as exc:
            assert f"max_gap_error_us={achieved!r} us exceeds budget {achieved / 2!r} us" in str(exc)
        else:
            raise AssertionError("budget below the achieved bound was accepted")
    commcanary.compile(data, timing_sample_limit=2, budgets={"max_gap_error_us": achieved})
