"""Behaviour verification and behaviour search.

A canary *preserves behaviour* when, replayed in the scheduler model, it
behaves like its whole source trace: the source is compiled losslessly (the
*reference*), both are replayed under several configurations, and every
latency quantile, the queue-wait distribution, the hidden share, every
per-phase and per-operation breakdown and the tail events must agree within
tolerances, and so must the ranking of the configurations. Four statuses are
kept apart so they cannot blend into one middling score:

* ``representation_fidelity_status`` — the canary's own timing mode;
* ``source_verified_status`` — :func:`commcanary.fidelity.verify_fidelity`,
  an independent recomputation of every commitment and bound;
* ``behavioral_fidelity_status`` — every configuration row passes;
* ``configuration_ranking_status`` — every pairwise ranking decision agrees.

``status`` is ``behaviorally_verified`` only when all four hold on the full
source with no capture uncertainty; ``behaviorally_unverified`` when the only
gap is capture uncertainty; otherwise ``failed``.

:func:`search` finds the smallest canary that verifies: the Rust core compiles
and checks every candidate; the winner is then verified again here, on the
independent path, and its ledger goes to a separate evidence document whose
SHA-256 the canary carries.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from commcanary import _core
from commcanary.errors import BudgetError, InputError
from commcanary.formats import BEHAVIOR_SEARCH_EVIDENCE_FORMAT as EVIDENCE_FORMAT
from commcanary.formats import BEHAVIOR_VERIFICATION_FORMAT as BEHAVIOR_FORMAT
from commcanary.formats import FIDELITY_VERIFICATION_FORMAT

if TYPE_CHECKING:
    from commcanary._types import BehaviorTolerances

__all__ = [
    "BEHAVIOR_FORMAT",
    "DEFAULT_CONFIGURATIONS",
    "EVIDENCE_FORMAT",
    "SearchResult",
    "Tolerances",
    "load_configurations",
    "search",
    "verify_behavior",
    "verify_fidelity_files",
]

#: The five configurations behaviour is checked under by default (the
#: core's): each names the settings it changes from the default backend.
DEFAULT_CONFIGURATIONS: tuple[dict[str, Any], ...] = tuple(orjson.loads(_core.DEFAULT_CONFIGURATIONS_JSON))


@dataclass(frozen=True)
class Tolerances:
    """Behaviour-check tolerances (absolute *or* relative suffices for latencies)."""

    relative_tolerance_pct: float = _core.DEFAULT_TOLERANCES["relative_tolerance_pct"]
    absolute_tolerance_us: float = _core.DEFAULT_TOLERANCES["absolute_tolerance_us"]
    hidden_tolerance_points: float = _core.DEFAULT_TOLERANCES["hidden_tolerance_points"]
    tail_recall_threshold: float = _core.DEFAULT_TOLERANCES["tail_recall_threshold"]
    ranking_tie_tolerance_us: float = _core.DEFAULT_TOLERANCES["ranking_tie_tolerance_us"]

    def validate(self) -> None:
        """Raise :class:`OptionError` for a negative tolerance or a threshold outside [0, 1]
        (the core's rules; the defaults are the core's too)."""
        _core.check_tolerances(self.as_dict())

    def as_dict(self) -> BehaviorTolerances:
        return {
            "relative_tolerance_pct": float(self.relative_tolerance_pct),
            "absolute_tolerance_us": float(self.absolute_tolerance_us),
            "hidden_tolerance_points": float(self.hidden_tolerance_points),
            "tail_recall_threshold": float(self.tail_recall_threshold),
            "ranking_tie_tolerance_us": float(self.ranking_tie_tolerance_us),
        }


def _checked(
    configurations: Sequence[Mapping[str, Any]] | None, where: str = "configurations"
) -> _core.Configurations:
    """The core's checked list (2..32 entries, unique names, known keys,
    values in range; :class:`InputError` names the entry and field)."""
    items = list(DEFAULT_CONFIGURATIONS if configurations is None else configurations)
    plain = [dict(c) if isinstance(c, Mapping) else c for c in items]
    try:
        data = orjson.dumps(plain)
    except TypeError as exc:
        raise InputError(f"{where} must be JSON data: {exc}") from None
    return _core.configurations(data, where)


def resolve_configurations(
    configurations: Sequence[Mapping[str, Any]] | None, where: str = "configurations"
) -> list[dict[str, Any]]:
    """Validate a configuration list (2..32 entries, unique names, known keys) and fill defaults."""
    resolved: list[dict[str, Any]] = orjson.loads(_checked(configurations, where).resolved_json())
    return resolved


def load_configurations(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a configuration file (a JSON list, or an object with a ``configurations``
    list), checked by the core; the list with every default filled in."""
    resolved: list[dict[str, Any]] = orjson.loads(_core.configuration_file(os.fspath(path)).resolved_json())
    return resolved


def _signature_key(sig: Mapping[str, Any]) -> bytes:
    return orjson.dumps(sig, option=orjson.OPT_SORT_KEYS)


def _check_same_workload(
    trace: _core.Trace, canary: Mapping[str, Any], trace_name: str, canary_name: str
) -> None:
    """Refuse a canary whose operations never occur in the trace (another workload)."""
    known = {_signature_key(orjson.loads(s)) for s in trace.signatures()}
    for i, sig in enumerate(canary.get("signatures", [])):
        if _signature_key(sig) not in known:
            raise InputError(
                f"{canary_name} was compiled from another trace: its signatures[{i}] "
                f"({sig.get('op')} of {sig.get('bytes')} bytes on group {sig.get('group')!r}) never occurs in {trace_name}"
            )


@dataclass
class _Inputs:
    trace_path: str
    trace: _core.Trace
    source: Any  # fidelity.SourceTrace
    reference: _core.BehaviorReference
    configurations: list[dict[str, Any]]


def _load_inputs(trace: str | os.PathLike[str], configurations: _core.Configurations) -> _Inputs:
    from concurrent.futures import ThreadPoolExecutor

    from commcanary.fidelity import SourceTrace

    path = os.fspath(trace)
    data = _core.read_input_file(path)
    loaded = _core.load_trace_bytes(data, path)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The reference replays run in Rust (interpreter released) while the
        # independent verifier prepares the trace here.
        reference = pool.submit(_core.behavior_reference, loaded, configurations)
        source = SourceTrace(orjson.loads(data))
        resolved = orjson.loads(configurations.resolved_json())
        return _Inputs(path, loaded, source, reference.result(), resolved)


def _verify(
    inputs: _Inputs,
    canary_bytes: bytes,
    canary_name: str,
    tolerances: Tolerances,
) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor

    from commcanary.fidelity import verify_fidelity

    # Structure, weights, commitments and sizes first: a malformed canary is
    # an input error, not a verification result.
    _core.check_canary(canary_name, data=canary_bytes)
    doc: dict[str, Any] = orjson.loads(canary_bytes)
    _check_same_workload(inputs.trace, doc, inputs.trace_path, canary_name)
    with ThreadPoolExecutor(max_workers=1) as pool:
        evaluation = pool.submit(
            _core.evaluate_behavior,
            inputs.reference,
            canary_name,
            tolerances=tolerances.as_dict(),
            data=canary_bytes,
        )
        try:
            source_verification = verify_fidelity(inputs.source, doc)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            source_verification = {
                "format": FIDELITY_VERIFICATION_FORMAT,
                "status": "failed",
                "assurance_state": "internally_consistent",
                "checks": [{"name": "source_verification_exception", "status": "fail", "reason": repr(exc)}],
            }
        evaluated = evaluation.result()
    rows_pass, ranking_pass = evaluated["rows_pass"], evaluated["ranking_pass"]
    rows_json, ranking_json = evaluated["rows_json"], evaluated["ranking_json"]
    source_events = evaluated["source_events"]
    compiler = doc["compiler"]
    trace_events = inputs.reference.trace_events
    coverage = "full_source" if source_events == trace_events else "partial_source"
    source_status = source_verification["status"]
    behavioral = "pass" if all(rows_pass) else "fail"
    ranking = "pass" if ranking_pass else "fail"
    uncertain = int(compiler.get("capture_uncertainty", {}).get("compute_fields_uncertain_events", 0))
    checks_hold = (
        coverage == "full_source" and source_status == "source_verified" and behavioral == ranking == "pass"
    )
    if checks_hold and not uncertain:
        status, assurance = "behaviorally_verified", "behaviorally_verified"
    elif checks_hold:
        status, assurance = "behaviorally_unverified", "source_corresponding"
    else:
        status = "failed"
        assurance = (
            "source_corresponding"
            if source_status in ("source_verified", "partial_source_verified")
            else "internally_consistent"
        )
    return {
        "format": BEHAVIOR_FORMAT,
        "status": status,
        "assurance_state": assurance,
        "representation_fidelity_status": compiler.get("fidelity", {}).get(
            "mode", "missing_fidelity_metadata"
        ),
        "source_verified_status": source_status,
        "source_coverage_status": coverage,
        "behavioral_fidelity_status": behavioral,
        "configuration_ranking_status": ranking,
        "source_events": source_events,
        "trace_events": trace_events,
        "tolerances": {"source_events": source_events, **tolerances.as_dict()},
        "capture_uncertainty": {
            "status": "rank_local_compute_uncertain" if uncertain else "certain",
            "compute_fields_uncertain_events": uncertain,
        },
        "configuration_settings": inputs.configurations,
        "source_verification": source_verification,
        "configurations": orjson.loads(rows_json),
        "ranking": orjson.loads(ranking_json),
    }


def verify_fidelity_files(trace: str | os.PathLike[str], canary: str | os.PathLike[str]) -> dict[str, Any]:
    """Source verification of a canary file against a trace file.

    Both inputs are first validated by the strict readers (an invalid file,
    or a canary compiled from another trace, raises :class:`InputError`);
    the verification itself is :func:`commcanary.fidelity.verify_fidelity`,
    which recomputes everything without the compiler.
    """
    from commcanary.fidelity import SourceTrace, verify_fidelity

    trace_name, canary_name = os.fspath(trace), os.fspath(canary)
    data = _core.read_input_file(trace_name)
    loaded = _core.load_trace_bytes(data, trace_name)
    canary_bytes = _core.read_input_file(canary_name)
    _core.check_canary(canary_name, data=canary_bytes)
    doc = orjson.loads(canary_bytes)
    _check_same_workload(loaded, doc, trace_name, canary_name)
    return verify_fidelity(SourceTrace(orjson.loads(data)), doc)


def verify_behavior(
    trace: str | os.PathLike[str],
    canary: str | os.PathLike[str],
    *,
    configurations: Sequence[Mapping[str, Any]] | None = None,
    tolerances: Tolerances | None = None,
) -> dict[str, Any]:
    """Verify that ``canary`` preserves the behaviour of ``trace``; returns the
    ``commcanary.behavior_verification.v1`` document.

    Raises :class:`InputError` for unreadable or invalid inputs, invalid
    tolerances or configurations, and a canary compiled from another trace.
    """
    canary_name = os.fspath(canary)
    return verify_canary_bytes(
        trace,
        _core.read_input_file(canary_name),
        canary_name,
        configurations=configurations,
        tolerances=tolerances,
    )


def verify_canary_bytes(
    trace: str | os.PathLike[str],
    canary_bytes: bytes,
    canary_name: str,
    *,
    configurations: Sequence[Mapping[str, Any]] | None = None,
    tolerances: Tolerances | None = None,
) -> dict[str, Any]:
    """:func:`verify_behavior` for a canary held in memory (not yet written)."""
    tolerances = tolerances or Tolerances()
    tolerances.validate()
    inputs = _load_inputs(trace, _checked(configurations))
    return _verify(inputs, canary_bytes, canary_name, tolerances)


@dataclass
class SearchResult:
    """The outcome of :func:`search`."""

    #: The selected canary, with its compact search summary.
    canary: Any  # commcanary.compiler.Canary
    #: The evidence document (ledger and the selected canary's verification).
    evidence: dict[str, Any]
    #: The evidence document's canonical bytes (what its SHA-256 covers).
    evidence_bytes: bytes
    #: The selected candidate's size before the summary was attached.
    selected_canary_bytes: int
    #: Uniform candidates planned (``max - min + 1``).
    uniform_candidates: int
    summary: dict[str, Any] = field(default_factory=dict)


METHOD = "exhaustive_timing_sample_limit_search_with_greedy_per_group_refinement"
OBJECTIVE = "smallest behaviorally verified canary in the declared search space, by canonical bytes without the search summary"
SELECTION_METRIC = "canary_bytes_then_stored_timing_records_then_stored_events_then_timing_limit_sum"


def search(
    trace: str | os.PathLike[str],
    *,
    min_limit: int = 2,
    max_limit: int = _core.DEFAULT_TIMING_SAMPLE_LIMIT,
    configurations: Sequence[Mapping[str, Any]] | None = None,
    tolerances: Tolerances | None = None,
    max_events: int | None = None,
    budgets: Mapping[str, float] | None = None,
    lossless_timing: bool = False,
    sequence_motifs: bool = True,
    step_loops: bool = True,
    progress: Callable[[int, int], object] | None = None,
    require_full_source: bool = False,
) -> SearchResult:
    """Find the smallest canary of ``trace`` that is behaviourally verified.

    Every limit in ``min_limit..=max_limit`` is tried, then lower limits group by
    group. Raises :class:`BudgetError` when no candidate verifies. ``progress``,
    when given, is called as ``progress(done, planned)`` after each candidate
    (``planned`` grows once, when per-group refinement is planned).
    ``require_full_source`` refuses a trace that is itself a subset of a
    workload (:class:`commcanary.gate.PartialSourceError`) before any work:
    every candidate is verified against the input only.
    """
    from commcanary.compiler import Canary, compile

    _core.check_search_limits(min_limit, max_limit)
    if require_full_source:
        from commcanary.gate import check_full_source

        check_full_source(trace, max_events=max_events)
    tolerances = tolerances or Tolerances()
    tolerances.validate()
    inputs = _load_inputs(trace, _checked(configurations))
    resolved = inputs.configurations
    selected, info, ledger = _core.behavior_search(
        inputs.trace,
        inputs.reference,
        min_limit=min_limit,
        max_limit=max_limit,
        tolerances=tolerances.as_dict(),
        max_events=max_events,
        budgets=sorted((budgets or {}).items()),
        lossless_timing=lossless_timing,
        sequence_motifs=sequence_motifs,
        step_loops=step_loops,
        progress=progress,
    )
    candidate = Canary(selected)
    candidate_bytes = candidate.to_bytes()
    verification = _verify(inputs, candidate_bytes, f"{inputs.trace_path} (selected candidate)", tolerances)
    if verification["status"] != "behaviorally_verified":
        raise BudgetError(
            "the selected behavior-search candidate failed independent verification: "
            f"status {verification['status']}, source verified: {verification['source_verified_status']}"
        )
    evidence = {
        "format": EVIDENCE_FORMAT,
        "method": METHOD,
        "objective": OBJECTIVE,
        "selection_metric": SELECTION_METRIC,
        "source_trace_sha256": candidate.summary["source_trace_sha256"],
        "configurations": resolved,
        "tolerances": tolerances.as_dict(),
        "search": orjson.loads(ledger),
        "selected_verification": verification,
    }
    from commcanary.fidelity import canonical

    evidence_bytes = canonical(evidence)
    summary = {
        "accepted_candidates": int(info["accepted_candidates"]),
        "candidates": int(info["candidate_count"]),
        "evidence": {
            "canonical_bytes": len(evidence_bytes),
            "format": EVIDENCE_FORMAT,
            "sha256": hashlib.sha256(evidence_bytes).hexdigest(),
        },
        "selected_canary_bytes_without_search_metadata": len(candidate_bytes),
        "status": verification["status"],
    }
    final = compile(
        inputs.trace,
        timing_sample_limit=int(info["timing_sample_limit"]),
        timing_sample_limits_by_group=dict(info["timing_sample_limits_by_group"]),
        max_events=max_events,
        budgets=budgets,
        lossless_timing=lossless_timing,
        sequence_motifs=sequence_motifs,
        step_loops=step_loops,
        compiler_members={"behavior_search": summary},
    )
    if final.commitments["execution_semantic_sha256"] != candidate.commitments["execution_semantic_sha256"]:
        raise InputError("internal error: the final canary does not execute the selected candidate")
    return SearchResult(
        canary=final,
        evidence=evidence,
        evidence_bytes=evidence_bytes,
        selected_canary_bytes=len(candidate_bytes),
        uniform_candidates=max_limit - min_limit + 1,
        summary=summary,
    )
