"""Canaries validate against the JSON Schema shipped in the package."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

import jsonschema
import pytest

import commcanary
from conftest import EXAMPLES, GOLDEN


def schema() -> dict[str, Any]:
    text = files("commcanary").joinpath("schemas/canary.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def test_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(schema())


CASES = [
    json.dumps(c["trace"]).encode() for c in json.loads((GOLDEN / "compile.json").read_text()) if "trace" in c
]


@pytest.mark.parametrize("limit", [2, 4, 128])
def test_example_canaries_validate(limit: int) -> None:
    validator = jsonschema.Draft202012Validator(schema())
    for name in ("llama70b_tp8_trace.json", "llama70b_tp8_trace_long.json"):
        canary = json.loads(commcanary.compile(EXAMPLES / name, timing_sample_limit=limit).to_bytes())
        validator.validate(canary)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_golden_canaries_validate(index: int) -> None:
    canary = json.loads(commcanary.compile(CASES[index], timing_sample_limit=3).to_bytes())
    jsonschema.Draft202012Validator(schema()).validate(canary)


def test_schema_rejects_a_broken_canary() -> None:
    canary = json.loads(commcanary.compile(EXAMPLES / "llama70b_tp8_trace.json").to_bytes())
    canary["events"][0]["timing"][0][0] = 0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema()).validate(canary)
