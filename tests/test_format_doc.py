"""The recomputation recipes of docs/formats/canary.md, run on real canaries:
every commitment and bound recomputes with nothing but hashlib and json."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import commcanary
from conftest import EXAMPLES, GOLDEN, ROOT

DOC = (ROOT / "docs" / "formats" / "canary.md").read_text()


@pytest.fixture(scope="module")
def recipes() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    for block in re.findall(r"```python\n(.*?)```", DOC, flags=re.S):
        exec(compile(block, "canary.md", "exec"), namespace)
    return namespace


def _stepped_trace() -> bytes:
    """A small training job with iterations: it compiles to a step loop (v4)."""
    events, t = [], 0.0
    for step in range(9):
        for size in [4096, 2048] + ([4] if step % 3 == 2 else []) + ([64] if step == 0 else []):
            t += 100.0 + (step * 37 + size) % 17 * 3.25
            arrival = [0.0, (step * 13) % 7 * 0.5, 1.5]
            events.append(
                {
                    "op": "all_reduce",
                    "bytes": size,
                    "ranks": [0, 1, 2],
                    "start_us": t,
                    "step": step,
                    "rank_arrival_us": arrival,
                    "compute_before_us": float(step % 4),
                }
            )
    return json.dumps(
        {"format": "commcanary.trace.v1", "workload": {"name": "loop"}, "events": events}
    ).encode()


def cases() -> list[tuple[str, bytes, dict[str, Any]]]:
    out = [
        ("demo", (EXAMPLES / "llama70b_tp8_trace.json").read_bytes(), {}),
        ("long", (EXAMPLES / "llama70b_tp8_trace_long.json").read_bytes(), {}),
        (
            "long-limit-2",
            (EXAMPLES / "llama70b_tp8_trace_long.json").read_bytes(),
            {"timing_sample_limit": 2},
        ),
        (
            "long-limit-4",
            (EXAMPLES / "llama70b_tp8_trace_long.json").read_bytes(),
            {"timing_sample_limit": 4},
        ),
        ("long-prefix", (EXAMPLES / "llama70b_tp8_trace_long.json").read_bytes(), {"max_events": 20}),
    ]
    out += [
        ("step-loop", _stepped_trace(), {}),
        ("step-loop-limit-3", _stepped_trace(), {"timing_sample_limit": 3}),
    ]
    for case in json.loads((GOLDEN / "compile.json").read_text()):
        if "trace" in case:
            out.append((case["name"], json.dumps(case["trace"]).encode(), case.get("options", {})))
    return out


@pytest.mark.parametrize(("name", "trace_bytes", "options"), cases(), ids=[c[0] for c in cases()])
def test_recipes_recompute_the_canary(
    recipes: dict[str, Any], name: str, trace_bytes: bytes, options: dict[str, Any]
) -> None:
    canary_obj = commcanary.compile(trace_bytes, **options)
    canary = json.loads(canary_obj.to_bytes())
    if name.startswith("step-loop"):
        assert canary["format"] == "commcanary.canary.v4" and "loop" in canary["events"][0]
    trace = json.loads(trace_bytes)
    compiler = canary["compiler"]
    assert recipes["canonical"](canary) == canary_obj.to_bytes()
    assert recipes["canary_bytes"](canary) == compiler["canary_bytes"]
    assert recipes["provenance"](canary) == compiler["artifact_provenance_sha256"]
    digest, size = recipes["source_commitment"](trace, compiler["source_events"])
    assert (digest, size) == (compiler["source_trace_sha256"], compiler["source_bytes"])
    recipes["check_intervals"](canary, trace)
    assert recipes["execution_commitment"](canary) == compiler["execution_semantic_sha256"]


def test_recipes_catch_a_tampered_bound(recipes: dict[str, Any]) -> None:
    trace_bytes = (EXAMPLES / "llama70b_tp8_trace_long.json").read_bytes()
    canary = json.loads(commcanary.compile(trace_bytes, timing_sample_limit=2).to_bytes())
    bounded = next(
        r
        for leaf, _ in recipes["streams"](canary)
        for r in leaf["timing"]
        if isinstance(r, dict) and "interval" in r
    )
    bounded["errors"][1] = 0.5
    with pytest.raises(AssertionError):
        recipes["check_intervals"](canary, json.loads(trace_bytes))


def test_doc_quotes_real_sizes() -> None:
    demo = commcanary.compile(EXAMPLES / "llama70b_tp8_trace.json").summary
    long = commcanary.compile(EXAMPLES / "llama70b_tp8_trace_long.json").summary
    assert f"one {demo['canary_bytes']:,}" in DOC
    assert f"{long['canary_bytes']:,} bytes" in DOC
    assert Path(EXAMPLES).is_dir()


def test_recipes_catch_a_tampered_loop(recipes: dict[str, Any]) -> None:
    trace_bytes = _stepped_trace()
    canary = json.loads(commcanary.compile(trace_bytes, timing_sample_limit=3).to_bytes())
    bounded = next(
        r
        for leaf, _ in recipes["streams"](canary)
        for r in leaf["timing"]
        if isinstance(r, dict) and "interval" in r
    )
    bounded["errors"][0] = round(bounded["errors"][0] + 0.5, 9)
    with pytest.raises(AssertionError):
        recipes["check_intervals"](canary, json.loads(trace_bytes))
    exact = json.loads(commcanary.compile(trace_bytes).to_bytes())
    want = exact["compiler"]["execution_semantic_sha256"]
    exact["events"][0]["schedule"][0][1] += 1  # one more run of a variant: a different program
    assert recipes["execution_commitment"](exact) != want
