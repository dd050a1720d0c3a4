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


def load_schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        files("commcanary").joinpath(f"schemas/{name}.schema.json").read_text()
    )
    return loaded


@pytest.mark.parametrize(
    "name",
    [
        "report",
        "comparison",
        "report_verification",
        "fidelity_verification",
        "behavior_verification",
        "behavior_search_evidence",
    ],
)
def test_other_schemas_are_valid(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(load_schema(name))


def test_reports_comparisons_and_verifications_validate(tmp_path: Any) -> None:
    from commcanary.compare import compare
    from commcanary.replay import Backend, replay
    from commcanary.verify import verify_report

    canary = commcanary.compile(EXAMPLES / "llama70b_tp8_trace_long.json")
    canary_path = tmp_path / "c.json"
    canary.write(canary_path)
    base = replay(canary, include_samples=True)
    cand = replay(canary, backend=Backend(latency_floor_us=12.0))
    for report in (base, cand):
        jsonschema.Draft202012Validator(load_schema("report")).validate(json.loads(report.to_bytes()))
    jsonschema.Draft202012Validator(load_schema("comparison")).validate(compare(base, cand))
    base.write(tmp_path / "r.json")
    verification = verify_report(tmp_path / "r.json", canary_path)
    jsonschema.Draft202012Validator(load_schema("report_verification")).validate(verification)


def test_behaviour_documents_validate(tmp_path: Any) -> None:
    trace = EXAMPLES / "llama70b_tp8_trace_long.json"
    found = commcanary.search_behavior(trace, min_limit=2, max_limit=12)
    jsonschema.Draft202012Validator(load_schema("behavior_search_evidence")).validate(found.evidence)
    canary_path = found.canary.write(tmp_path / "searched.json")
    jsonschema.Draft202012Validator(schema()).validate(json.loads(canary_path.read_bytes()))
    behavior = commcanary.verify_behavior(trace, canary_path)
    jsonschema.Draft202012Validator(load_schema("behavior_verification")).validate(behavior)
    fidelity = commcanary.verify_fidelity(trace, canary_path)
    jsonschema.Draft202012Validator(load_schema("fidelity_verification")).validate(fidelity)
    # A failing verification validates too.
    demo = commcanary.compile(EXAMPLES / "llama70b_tp8_trace.json").write(tmp_path / "demo.json")
    jsonschema.Draft202012Validator(load_schema("behavior_verification")).validate(
        commcanary.verify_behavior(trace, demo)
    )


def report_schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        files("commcanary").joinpath("schemas/report.schema.json").read_text()
    )
    return loaded


def test_reports_validate_plain_and_under_a_calibrated_backend(tmp_path: Any) -> None:
    validator = jsonschema.Draft202012Validator(report_schema())
    canary = commcanary.compile(EXAMPLES / "llama70b_tp8_trace.json")
    calibrated = commcanary.Backend(
        op_overrides=(("all_reduce", 300.0, 8.0),),
        serialize_ranks=True,
        stall_probability=0.2,
        stall_mean_us=900.0,
        host_cpus=2.0,
    )
    for backend in (None, calibrated):
        report = commcanary.replay(canary, backend=backend, include_samples=True)
        validator.validate(json.loads(report.to_bytes()))
