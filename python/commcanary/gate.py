"""The strict gate: a canary that is written only once its behaviour is verified.

:func:`compile_verified` compiles a trace, refuses a trace that is itself a
subset of a workload (unless told to verify against the workload it came
from, or to accept it labelled ``partial_source``), verifies the canary's
behaviour against the reference (or the trace itself), and compiles it again
with the verification's statuses recorded in its compiler metadata.
:func:`check_full_source` is the same refusal on its own, for a behaviour
search (:func:`commcanary.search_behavior` verifies every candidate against
its input only). The command line's ``compile --require-behavior-verification``
and ``--behavior-search`` are these calls.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from commcanary.errors import InputError

if TYPE_CHECKING:
    from commcanary.compiler import Canary, Trace

__all__ = ["BehaviorVerificationError", "PartialSourceError", "check_full_source", "compile_verified"]


class PartialSourceError(InputError):
    """The trace is itself a subset of a workload: its canary could be verified
    only against the subset. ``reason`` says why it is partial."""

    def __init__(self, trace: str, reason: str) -> None:
        super().__init__(
            f"{trace} is a partial source ({reason}): verify against the workload it came from "
            "(reference_trace=...), or accept it labelled partial_source (allow_partial_source=True)"
        )
        self.trace = trace
        self.reason = reason

    def __reduce__(self) -> tuple[type[PartialSourceError], tuple[str, str]]:
        return (type(self), (self.trace, self.reason))


class BehaviorVerificationError(InputError):
    """The compiled canary did not verify; ``verification`` is the behaviour
    verification document (its statuses and per-configuration rows)."""

    def __init__(self, against: str, verification: dict[str, Any]) -> None:
        super().__init__(
            f"compiled canary failed required behavior verification against {against}: "
            f"status {verification['status']}, source verified: {verification['source_verified_status']}, "
            f"behavioral fidelity: {verification['behavioral_fidelity_status']}, "
            f"configuration ranking: {verification['configuration_ranking_status']}"
        )
        self.against = against
        self.verification = verification

    def __reduce__(self) -> tuple[type[BehaviorVerificationError], tuple[str, dict[str, Any]]]:
        return (type(self), (self.against, self.verification))


def _refuse_partial(trace: str, status: str, reason: str | None) -> None:
    if status == "partial_source":
        raise PartialSourceError(trace, reason or "it is partial")


def check_full_source(trace: str | os.PathLike[str], *, max_events: int | None = None) -> None:
    """Raise :class:`PartialSourceError` when the trace (up to ``max_events``)
    is a partial source; the trace is loaded, not compiled."""
    from commcanary.compiler import load_trace

    status, reason = load_trace(os.fspath(trace)).source_coverage(max_events)
    _refuse_partial(os.fspath(trace), status, reason)


def compile_verified(
    trace: str | os.PathLike[str] | Trace,
    *,
    reference_trace: str | os.PathLike[str] | None = None,
    allow_partial_source: bool = False,
    canary_name: str = "compiled canary",
    **options: Any,
) -> Canary:
    """Compile ``trace`` (a path or a loaded trace) and return the canary only
    when it is behaviourally verified against ``reference_trace`` (default:
    the trace itself), with the statuses recorded in its metadata.

    ``options`` are :func:`commcanary.compile`'s. Raises
    :class:`PartialSourceError` for a partial source without a reference
    trace (unless ``allow_partial_source``), :class:`BehaviorVerificationError`
    when the canary does not verify.
    """
    from commcanary.behavior import verify_canary_bytes
    from commcanary.compiler import Trace as LoadedTrace
    from commcanary.compiler import compile as compile_trace
    from commcanary.compiler import load_trace

    if reference_trace is not None and allow_partial_source:
        raise InputError("reference_trace and allow_partial_source are alternatives; give one")
    loaded = trace if isinstance(trace, LoadedTrace) else load_trace(os.fspath(trace))
    name = os.fspath(trace) if not isinstance(trace, LoadedTrace) else loaded.source
    canary = compile_trace(loaded, **options)
    if reference_trace is None and not allow_partial_source:
        s = canary.summary
        _refuse_partial(name, s["source_coverage_status"], s.get("source_coverage_reason"))
    against = os.fspath(reference_trace) if reference_trace is not None else name
    result = verify_canary_bytes(against, canary.to_bytes(), canary_name)
    if result["status"] != "behaviorally_verified":
        raise BehaviorVerificationError(against, result)
    members = {
        "behavior_verification_status": result["status"],
        "behavioral_fidelity_status": result["behavioral_fidelity_status"],
        "configuration_ranking_status": result["configuration_ranking_status"],
        "source_verified_status": result["source_verified_status"],
        "behavior_verification_reference": "reference_trace"
        if reference_trace is not None
        else "input_trace",
    }
    return compile_trace(loaded, compiler_members=members, **options)
