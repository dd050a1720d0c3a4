"""The strict gate as a library call: the canary comes back only once verified,
and its refusals speak the API's words (argument names), not the command line's."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import commcanary
from commcanary.gate import BehaviorVerificationError, PartialSourceError, check_full_source, compile_verified
from test_behavior import GEN100, LONG, reduced_trace


def test_a_verified_canary_records_its_statuses() -> None:
    canary = compile_verified(LONG)
    compiler = canary.document["compiler"]
    assert compiler["behavior_verification_status"] == "behaviorally_verified"
    assert compiler["behavior_verification_reference"] == "input_trace"
    # The same canary as the command line's gate writes.
    plain = commcanary.compile(LONG)
    assert canary.summary["execution_semantic_sha256"] == plain.summary["execution_semantic_sha256"]


def test_a_partial_source_is_refused_in_api_words(tmp_path: Path) -> None:
    reduced = reduced_trace(tmp_path)
    with pytest.raises(PartialSourceError) as refused:
        compile_verified(reduced)
    message = str(refused.value)
    assert "partial source" in message and "workload.reduction" in message
    assert "reference_trace=" in message and "allow_partial_source=True" in message and "--" not in message
    again = pickle.loads(pickle.dumps(refused.value))
    assert (again.trace, again.reason) == (refused.value.trace, refused.value.reason)
    with pytest.raises(PartialSourceError):
        check_full_source(reduced)
    with pytest.raises(PartialSourceError):
        commcanary.search_behavior(reduced, require_full_source=True)
    accepted = compile_verified(reduced, allow_partial_source=True)
    assert accepted.summary["source_coverage_status"] == "partial_source"


def test_a_canary_that_does_not_verify_carries_its_verification(tmp_path: Path) -> None:
    # A subset checked against the workload it came from: not source-verified.
    with pytest.raises(BehaviorVerificationError) as failed:
        compile_verified(reduced_trace(tmp_path), reference_trace=GEN100)
    assert failed.value.verification["source_verified_status"] == "failed"
    assert "failed required behavior verification" in str(failed.value)
    with pytest.raises(commcanary.InputError, match="alternatives"):
        compile_verified(LONG, reference_trace=LONG, allow_partial_source=True)


def test_physical_replay_refuses_arguments_in_api_words(tmp_path: Path) -> None:
    """The library names its own arguments; only the command line speaks in flags."""
    from commcanary.errors import OptionError
    from commcanary.physical import replay_physical

    canary = commcanary.compile(LONG).write(tmp_path / "c.json")
    for kwargs, option in (
        ({"engine": "mpi"}, "engine"),
        ({"nproc": 1}, "nproc"),
        ({"bytes_scale": 0.0}, "bytes_scale"),
        ({"compute_fill": "burn"}, "compute_fill"),
        ({"iterations": 0}, "iterations"),
    ):
        with pytest.raises(OptionError) as refused:
            replay_physical(canary, **kwargs)  # type: ignore[arg-type]
        assert refused.value.option == option and "--" not in str(refused.value)
