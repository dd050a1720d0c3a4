"""The shapes of what crosses the binding: every dict ``commcanary._core``
takes or returns, as a ``TypedDict`` (the stub ``_core.pyi`` names them, and
mypy checks every key Python reads). Documents (hang, stragglers, steps,
timeline) cross as canonical JSON bytes beside these, never as dicts.

Columns are numpy arrays; ``int`` counts are exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]
    Floats = npt.NDArray[np.float64]
    Bools = npt.NDArray[np.bool_]
    UInts = npt.NDArray[np.uint32]


class CompileSummary(TypedDict):
    """``CompiledCanary.summary()``: what the compiler did and the bounds it committed."""

    source_events: int
    trace_events: int
    canary_events: int
    expanded_canary_events: int
    sequence_motif_count: int
    timing_group_count: int
    event_compression_ratio: float
    byte_compression_ratio: float
    source_bytes: int
    canary_bytes: int
    timing_mode: str
    tail_signal: str
    timing_sample_limit: int
    recursive_timing_records: int
    approximate_timing_records: int
    stored_recursive_timing_records: int
    stored_approximate_timing_records: int
    fidelity_mode: str
    #: The committed maximum of each fidelity field (``FIDELITY_FIELDS``).
    bounds: dict[str, float]
    source_gap_total_us: float
    encoded_gap_total_us: float
    total_gap_error_us: float
    source_trace_sha256: str
    execution_semantic_sha256: str
    calibration_evaluation_sha256: str
    artifact_provenance_sha256: str
    source_coverage_status: str
    source_coverage_reason: str | None
    uncertain_events: int


class OccurrenceColumns(TypedDict):
    """A canary's executed timing, one row per occurrence in replay order."""

    signature: UInts
    occurrence: Ints
    gap_us: Floats
    arrival_skew_us: Floats
    compute_before_us: Floats
    compute_overlap_us: Floats
    compute_pressure: Floats
    #: Every member's arrival offset, concatenated.
    arrival_offsets_us: Floats


class CanaryOccurrences(OccurrenceColumns):
    """``canary_occurrences``: the columns and the signatures they refer to."""

    #: Canonical JSON of each signature the ``signature`` column indexes.
    signatures: list[bytes]


class SearchSelection(TypedDict):
    """What the behaviour search chose and how many candidates it tried."""

    timing_sample_limit: int
    timing_sample_limits_by_group: list[tuple[int, int]]
    candidate_count: int
    accepted_candidates: int


class BehaviorEvaluation(TypedDict):
    """One canary checked against the behaviour reference."""

    #: Per configuration: whether every check passed.
    rows_pass: list[bool]
    ranking_pass: bool
    #: Canonical JSON of the per-configuration rows and of the ranking.
    rows_json: bytes
    ranking_json: bytes
    source_events: int


class ReportCheck(TypedDict):
    """One recomputed check of a report: expected and actual JSON when it fails."""

    name: str
    passed: bool
    expected: bytes | None
    actual: bytes | None


class JudgedRuns(TypedDict):
    """``judge_runs``: a statistic's change over repeated runs, its interval and verdict."""

    baseline: float
    candidate: float
    estimate: float
    low: float
    high: float
    estimate_pct: float | None
    low_pct: float | None
    high_pct: float | None
    verdict: str


class RunNoise(TypedDict):
    """``run_noise``: a statistic's run-to-run noise and the threshold it gets."""

    runs: int
    mean: float
    sd: float
    split_half: float
    leave_one_out: float
    drift_pct: float | None
    threshold_pct: float
    threshold_abs: float
    detectable_pct: float | None


class GatePolicy(TypedDict):
    """``read_gate_policy``: a checked gate policy and the SHA-256 of its file."""

    confidence: float
    resamples: int
    seed: int
    min_runs: int
    thresholds: dict[str, float]
    calibration: bytes | None
    sha256: str


class Reduction(TypedDict):
    """``reduce_trace``: events before and after, oracle calls, whether the budget ran out."""

    original: int
    reduced: int
    calls: int
    exhausted: bool


class ParamExport(TypedDict):
    """``export_param``: entries written (single list), skipped, and per rank."""

    entries: int
    skipped: int
    per_rank_entries: list[int]


class KinetoCounts(TypedDict):
    """``import_kineto_file``: what one profiler trace held."""

    imported: int
    control: int
    empty: int
    nested: int


class JobCounts(TypedDict):
    """``import_kineto_job``: what the job's traces held, and the cache's work."""

    imported: int
    ranks: int
    files: int
    partial: int
    ambiguous: int
    control: int
    empty: int
    nested: int
    undtyped: int
    unlinked: int
    cache_hits: int
    parsed: int
    cache_write_failures: int


class NcclComm(TypedDict):
    """``import_nccl_profiler``: how far NCCL got on one communicator."""

    group: str
    enqueued: int
    last_enqueued: int
    last_completed: int
    observed: int


class NcclProcess(TypedDict):
    """``import_nccl_profiler``: one process's logs."""

    label: str
    rank: int
    abi: int
    segments: int
    sealed: int
    dropped: int
    torn: int
    orphans: int
    comms: list[NcclComm]


class NcclLiveComm(TypedDict):
    """``NcclFollower.poll``: one communicator of one process, so far."""

    group: str
    nranks: int
    rank: int
    enqueued: int
    last_enqueued: int
    last_completed: int
    in_flight: int
    observed: bool
    last_progress_ns: int
    finalized: bool


class NcclLiveProcess(TypedDict):
    """``NcclFollower.poll``: one process of the followed directory."""

    host: str
    pid: int
    rank: int
    dropped: int
    lost: int
    sealed: bool
    comms: list[NcclLiveComm]


class PartialCollective(TypedDict):
    """A collective some of its group's ranks never recorded."""

    group: str
    op: str
    seen: list[int]
    missing: list[int]
    start_us: float
    step: int | None
    text: str


class Measurement(TypedDict):
    """How a measured run was made (``measured_report``)."""

    engine: str
    host: str
    torch_version: str
    nproc: int
    iterations: int
    warmup: int
    compute_fill: str
    compute_fill_scale: float
    bytes_scale: float


class HangDiagnosis(TypedDict):
    """``diagnose_hang``: the verdict, the lines a person reads, the document."""

    verdict: str
    lines: list[str]
    document: bytes


class StragglerMembers(TypedDict):
    """Per instance and member: numeric columns as little-endian bytes
    (``<i8``: instance, step, rank, group, bytes; ``<f8``: the times), ``op`` as text."""

    instance: bytes
    step: bytes
    rank: bytes
    group: bytes
    bytes: bytes
    arrival_us: bytes
    end_us: bytes
    lag_us: bytes
    excess_us: bytes
    inside_us: bytes
    op: list[str]


class StragglerDiagnosis(TypedDict):
    """``diagnose_stragglers``: whether any was found, the lines, the document, the members."""

    found: bool
    lines: list[str]
    document: bytes
    members: StragglerMembers


class StepRecovery(TypedDict):
    """``recover_steps``: the steps found, the lines, the document."""

    count: int
    lines: list[str]
    document: bytes


class GroupConfig(TypedDict):
    name: str
    desc: str
    ranks: list[int]


class GroupStatus(TypedDict):
    pg_id: int
    last_enqueued_collective: int
    last_started_collective: int
    last_completed_collective: int


class FlightRecorderEntries(TypedDict):
    """A dump's entries as columns."""

    record_id: Ints
    pg_id: Ints
    op_id: Ints
    collective_seq_id: Ints
    p2p_seq_id: Ints
    time_created_ns: Ints
    time_discovered_started_ns: Ints
    time_discovered_completed_ns: Ints
    timeout_ms: Ints
    input_numel: Ints
    output_numel: Ints
    duration_ms: Floats
    is_p2p: Bools
    retired: Bools
    process_group: list[str]
    group_desc: list[str]
    profiling_name: list[str]
    op: list[str]
    state: list[str]
    #: Sizes and dtypes as the dump writes them (text).
    input_sizes: list[str]
    output_sizes: list[str]
    input_dtypes: list[str]
    output_dtypes: list[str]


class FlightRecorderDump(TypedDict):
    """``read_flight_recorder_file``: one rank's dump."""

    version: str
    comm_lib_version: str
    encoding: str
    pg_config: list[GroupConfig]
    pg_status: list[GroupStatus]
    entries: FlightRecorderEntries


class Timeline(TypedDict):
    """``job_timeline``: the Chrome trace's bytes and what it drew."""

    bytes: bytes
    events: int
    ranks: int
    straggler_marks: int
    hang_marks: int


class BehaviorTolerances(TypedDict):
    """Behaviour-check tolerances by their API names (the core checks them)."""

    relative_tolerance_pct: float
    absolute_tolerance_us: float
    hidden_tolerance_points: float
    tail_recall_threshold: float
    ranking_tie_tolerance_us: float
