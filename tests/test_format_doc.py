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
        r for leaf in canary["events"] for r in leaf["timing"] if isinstance(r, dict) and "interval" in r
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
