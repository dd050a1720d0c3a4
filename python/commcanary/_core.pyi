"""Type stubs for the Rust extension ``commcanary._core``.

The extension raises the exception classes of :mod:`commcanary.errors`.
"""

from collections.abc import Callable
from typing import Any, Final, final

import numpy as np
import numpy.typing as npt

from commcanary._types import (
    BehaviorEvaluation,
    BehaviorTolerances,
    CanaryOccurrences,
    CompileSummary,
    FlightRecorderDump,
    GatePolicy,
    HangDiagnosis,
    JobCounts,
    JudgedRuns,
    KinetoCounts,
    Measurement,
    NcclLiveProcess,
    NcclProcess,
    OccurrenceColumns,
    ParamExport,
    PartialCollective,
    Reduction,
    ReportCheck,
    RunNoise,
    SearchSelection,
    StepRecovery,
    StragglerDiagnosis,
    Timeline,
)

#: A distributed analysis' reads: dump labels and partials, trace labels and partials.
_EvidenceReads = tuple[
    list[str],
    list[tuple[bytes | None, int | None, str | None]],
    list[str],
    list[tuple[bytes | None, bytes | None, str | None, str]],
]

__all__ = [
    "ABLATIONS",
    "BACKEND_SETTINGS",
    "CANARY_FORMAT",
    "CANARY_LOOP_FORMAT",
    "CANONICAL_JSON",
    "CLOCK_OFFSETS_RULE",
    "CONFIGURATION_COUNT_RANGE",
    "DEFAULT_CONFIGURATIONS_JSON",
    "DEFAULT_RESOURCE_LIMITS",
    "DEFAULT_SETTINGS_JSON",
    "DEFAULT_TIMING_SAMPLE_LIMIT",
    "DEFAULT_TOLERANCES",
    "FIDELITY_FIELDS",
    "FORMATS",
    "INJECT_PANIC_VAR",
    "INJECT_WRITE_ERROR_VAR",
    "KNOWN_OPS",
    "MAX_INPUT_BYTES",
    "MAX_REPLAY_EVENTS_LIMIT",
    "MEASURED_MODE",
    "REPLAY_MODEL",
    "REPORT_FORMAT",
    "SIMULATED_BACKEND_SCHEMA_JSON",
    "TRACE_COLUMNS",
    "TRACE_FORMAT",
    "BehaviorReference",
    "CompiledCanary",
    "Configurations",
    "KinetoPartials",
    "NcclFollower",
    "ReplayReport",
    "ReplaySettings",
    "ReportDocument",
    "ShardedImport",
    "Trace",
    "__version__",
    "algorithm_steps",
    "baseline_trace",
    "behavior_reference",
    "behavior_search",
    "bus_factor",
    "canary_occurrences",
    "canonical_json",
    "check_canary",
    "check_compile_options",
    "check_kineto_job_options",
    "check_reduce_options",
    "check_search_limits",
    "check_tolerances",
    "comm_perf",
    "compile_file",
    "configuration_file",
    "configurations",
    "diagnose_hang",
    "diagnose_stragglers",
    "dump_partial",
    "evaluate_behavior",
    "evidence_files",
    "export_param",
    "float_repr",
    "import_kineto_file",
    "import_kineto_job",
    "import_kineto_partials",
    "import_nccl_profiler",
    "inspect_file",
    "job_timeline",
    "judge_runs",
    "kineto_join",
    "kineto_partial",
    "kineto_rank",
    "load_trace",
    "load_trace_bytes",
    "measured_report",
    "physical_configurations",
    "private_key_id",
    "py_round",
    "read_backend_file",
    "read_clock_offsets",
    "read_flight_recorder_file",
    "read_gate_policy",
    "read_hang_document",
    "read_input_file",
    "read_report_file",
    "recomputed_exposed_us",
    "recover_steps",
    "recover_trace_steps",
    "reduce_trace",
    "replay_canary",
    "resource_limits",
    "run_noise",
    "set_resource_limits",
    "sharded_events",
    "sharded_prepare",
    "sharded_split",
    "sharded_votes",
    "sign_file",
    "signing_keypair",
    "straggler_rules",
    "table_columns",
    "trusted_key_ids",
    "verify_file",
    "verify_report_files",
    "write_atomic",
    "write_backend_file",
    "write_gate_policy",
]

__version__: Final[str]
CANARY_FORMAT: Final[str]
CANARY_LOOP_FORMAT: Final[str]
CANONICAL_JSON: Final[str]
MEASURED_MODE: Final[str]
TRACE_FORMAT: Final[str]
REPORT_FORMAT: Final[str]
REPLAY_MODEL: Final[str]
#: Every document format, by kind.
FORMATS: Final[dict[str, str]]
#: The eight fidelity bound / budget names, in check order.
FIDELITY_FIELDS: Final[tuple[str, ...]]
#: The replay model's ablation names, sorted.
ABLATIONS: Final[tuple[str, ...]]
#: The operations a trace or canary names without `custom_op`.
KNOWN_OPS: Final[tuple[str, ...]]
#: Timing columns of a trace.
TRACE_COLUMNS: Final[tuple[str, ...]]
#: The default replay settings (label, bandwidth_gbps, ..., max_replay_events).
#: Every replay setting at its default (JSON, as a request gives them).
DEFAULT_SETTINGS_JSON: Final[bytes]
#: Every backend setting, sorted: ``(name, role)``, role ``required``,
#: ``calibrated`` or ``run``.
BACKEND_SETTINGS: Final[tuple[tuple[str, str], ...]]
#: The report schema's ``simulated_backend`` definition, generated from the
#: settings table (JSON Schema, canonical JSON).
SIMULATED_BACKEND_SCHEMA_JSON: Final[bytes]
#: The default behaviour configurations (JSON).
DEFAULT_CONFIGURATIONS_JSON: Final[bytes]
#: The default behaviour tolerances, by API name.
DEFAULT_TOLERANCES: Final[dict[str, float]]
DEFAULT_TIMING_SAMPLE_LIMIT: Final[int]
MAX_REPLAY_EVENTS_LIMIT: Final[int]
MAX_INPUT_BYTES: Final[int]
DEFAULT_RESOURCE_LIMITS: Final[list[tuple[str, int]]]
CONFIGURATION_COUNT_RANGE: Final[tuple[int, int]]
#: The rule clock offsets follow, as an error states it.
CLOCK_OFFSETS_RULE: Final[str]
INJECT_PANIC_VAR: Final[str]
INJECT_WRITE_ERROR_VAR: Final[str]

@final
class Trace:
    """A parsed ``commcanary.trace.v1`` trace held in columnar form."""

    @property
    def event_count(self) -> int: ...
    @property
    def source(self) -> str: ...
    @property
    def signature_count(self) -> int: ...
    def signature_ids(self) -> npt.NDArray[np.uint32]: ...
    def column(self, name: str) -> npt.NDArray[np.float64]: ...
    def has_arrival_map(self) -> npt.NDArray[np.bool_]: ...
    def to_arrow(self) -> Any: ...
    def signatures(self) -> list[bytes]: ...
    def source_coverage(self, max_events: int | None = None) -> tuple[str, str | None]: ...
    def to_bytes(self) -> bytes: ...
    def write(self, path: str) -> None: ...
    def compile(
        self,
        *,
        timing_sample_limit: int | None = None,
        timing_sample_limits_by_group: list[tuple[int, int]] | None = None,
        max_events: int | None = None,
        budgets: list[tuple[str, float]] | None = None,
        lossless_timing: bool = False,
        sequence_motifs: bool = True,
        step_loops: bool = True,
        allow_empty: bool = False,
        compiler_members: list[tuple[str, bytes]] | None = None,
    ) -> CompiledCanary: ...

@final
class CompiledCanary:
    """A compiled canary: its canonical bytes and its summary."""

    def to_bytes(self) -> bytes: ...
    def summary(self) -> CompileSummary: ...
    def occurrences(self) -> OccurrenceColumns: ...
    def write(self, path: str) -> None: ...

def compile_file(
    path: str,
    *,
    timing_sample_limit: int | None = None,
    timing_sample_limits_by_group: list[tuple[int, int]] | None = None,
    max_events: int | None = None,
    budgets: list[tuple[str, float]] | None = None,
    lossless_timing: bool = False,
    sequence_motifs: bool = True,
    step_loops: bool = True,
    allow_empty: bool = False,
) -> CompiledCanary: ...
def check_compile_options(
    *,
    timing_sample_limit: int | None = None,
    timing_sample_limits_by_group: list[tuple[int, int]] | None = None,
    max_events: int | None = None,
    budgets: list[tuple[str, float]] | None = None,
    lossless_timing: bool = False,
    sequence_motifs: bool = True,
    step_loops: bool = True,
    allow_empty: bool = False,
) -> None: ...
def write_atomic(path: str, data: bytes) -> None: ...
def load_trace(path: str) -> Trace: ...
def load_trace_bytes(data: bytes, name: str = "<bytes>") -> Trace: ...
def canonical_json(data: bytes) -> bytes: ...
def float_repr(x: float) -> str: ...
def algorithm_steps(op: str, ranks: int) -> float: ...
def py_round(x: float, ndigits: int) -> float: ...

@final
class ReplayReport:
    """A replay report: canonical bytes, sections and sample columns."""

    def to_bytes(self) -> bytes: ...
    def write(self, path: str) -> None: ...
    def sections(self) -> dict[str, bytes]: ...
    def samples(self) -> dict[str, npt.NDArray[Any]] | None: ...
    def sample_signatures(self) -> list[bytes]: ...
    def exposed_us(self) -> npt.NDArray[np.float64]: ...
    def sample_resources(self) -> list[str]: ...

@final
class ReportDocument:
    """A structurally validated report read from disk."""

    @property
    def has_samples(self) -> bool: ...
    def sections(self) -> dict[str, bytes]: ...
    def samples(self) -> dict[str, npt.NDArray[Any]] | None: ...
    def sample_signatures(self) -> list[bytes]: ...

@final
class ReplaySettings:
    """Replay settings the core has checked."""

    def __new__(cls, data: bytes) -> ReplaySettings: ...
    def request_json(self) -> bytes: ...
    def backend_json(self) -> bytes: ...

@final
class Configurations:
    """A behaviour configuration list the core has checked."""

    def resolved_json(self) -> bytes: ...
    @property
    def names(self) -> list[str]: ...

def configurations(data: bytes, place: str) -> Configurations: ...
def configuration_file(path: str) -> Configurations: ...
def physical_configurations(data: bytes, place: str) -> bytes: ...
def read_backend_file(path: str) -> ReplaySettings: ...
def write_backend_file(path: str, settings: ReplaySettings, fitted_from: bytes, errors: bytes) -> None: ...
def replay_canary(
    path: str, settings: ReplaySettings, *, data: bytes | None = None, include_samples: bool = False
) -> ReplayReport: ...
def read_report_file(path: str, *, samples: bool = True, data: bytes | None = None) -> ReportDocument: ...
def verify_report_files(report_path: str, canary_path: str) -> list[ReportCheck]: ...
def recomputed_exposed_us(report_path: str, canary_path: str) -> npt.NDArray[np.float64]: ...

@final
class BehaviorReference:
    """The source side of behaviour checks: the trace's lossless program replayed per configuration."""

    @property
    def configuration_names(self) -> list[str]: ...
    @property
    def trace_events(self) -> int: ...

def behavior_reference(trace: Trace, configurations: Configurations) -> BehaviorReference: ...
def evaluate_behavior(
    reference: BehaviorReference,
    path: str,
    *,
    tolerances: BehaviorTolerances,
    data: bytes | None = None,
) -> BehaviorEvaluation: ...
def check_search_limits(min_limit: int, max_limit: int) -> None: ...
def check_tolerances(tolerances: BehaviorTolerances) -> None: ...
def behavior_search(
    trace: Trace,
    reference: BehaviorReference,
    *,
    min_limit: int,
    max_limit: int,
    tolerances: BehaviorTolerances,
    max_events: int | None = None,
    budgets: list[tuple[str, float]] | None = None,
    lossless_timing: bool = False,
    sequence_motifs: bool = True,
    step_loops: bool = True,
    progress: Callable[[int, int], object] | None = None,
) -> tuple[CompiledCanary, SearchSelection, bytes]: ...
def import_kineto_file(
    path: str,
    *,
    rank: int | None = None,
    workload_name: str = ...,
    phase: str | None = None,
    process_group: str | None = None,
    max_input_bytes: int | None = None,
    max_json_items: int | None = None,
) -> tuple[Trace, KinetoCounts]: ...
def export_param(
    path: str,
    *,
    output: str | None = None,
    per_rank_dir: str | None = None,
    dtype: str | None = None,
    skip_unsupported: bool = False,
    compute_fill_us_per_gemm: float | None = None,
    compute_fill_gemm_dim: int | None = None,
    overlap_structure: bool = False,
) -> ParamExport: ...
def import_kineto_job(
    paths: list[str],
    *,
    workload_name: str = ...,
    phase: str | None = None,
    rank: int | None = None,
    clock_offsets: dict[int, float] | None = None,
    strict: bool = False,
    cache_dir: str | None = None,
) -> tuple[Trace, JobCounts, list[PartialCollective]]: ...
def comm_perf(
    inspector: list[str], *, traces: list[str] = ..., nccl_tests: list[str] = ...
) -> tuple[bytes, list[str]]: ...

@final
class NcclFollower:
    def __new__(cls, directory: str) -> NcclFollower: ...
    def poll(self) -> tuple[list[NcclLiveProcess], list[str]]: ...

def import_nccl_profiler(
    directory: str,
    *,
    workload_name: str = ...,
    strict: bool = False,
) -> tuple[Trace, JobCounts, list[PartialCollective], list[NcclProcess]]: ...
def check_kineto_job_options(
    files: int,
    *,
    workload_name: str,
    phase: str | None = None,
    rank: int | None = None,
    clock_offsets: dict[int, float] | None = None,
    strict: bool = False,
) -> None: ...
def evidence_files(
    paths: list[str], analysis: str, *, cache_dir: str | None = None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]: ...
def dump_partial(path: str) -> tuple[bytes | None, int | None, str | None]: ...
def kineto_partial(
    path: str, label: str, *, rank: int | None = None, cache_dir: str | None = None
) -> tuple[bytes | None, bytes | None, str | None, str]: ...

@final
class KinetoPartials:
    def __init__(self) -> None: ...
    def add(self, label: str, partial: tuple[bytes | None, bytes | None, str | None, str]) -> None: ...
    def __len__(self) -> int: ...

def import_kineto_partials(
    labels: list[str],
    partials: KinetoPartials,
    *,
    workload_name: str = ...,
    phase: str | None = None,
    rank: int | None = None,
    clock_offsets: dict[int, float] | None = None,
    strict: bool = False,
) -> tuple[Trace, JobCounts, list[PartialCollective]]: ...
def kineto_join(profiles: list[bytes], labels: list[str]) -> bytes: ...
def kineto_rank(
    path: str, label: str, *, rank: int | None = None, cache_dir: str | None = None
) -> tuple[tuple[bytes | None, bytes | None, str | None, str], bytes | None, bytes | None]: ...
def sharded_split(
    shape: bytes, ranks: list[tuple[int, bytes]], shard_of_group: list[int], shards: int, bounds: list[int]
) -> list[tuple[int, bytes]]: ...
def sharded_votes(shape: bytes, shards: list[list[bytes]]) -> list[tuple[bytes, bytes]]: ...
def sharded_prepare(shape: bytes, shards: list[list[bytes]], labels: bytes) -> list[tuple[bytes, bytes]]: ...
def sharded_events(
    shape: bytes,
    shards: list[list[bytes]],
    labels: bytes,
    placements: list[bytes],
    phase: str | None = None,
) -> list[bytes]: ...

@final
class ShardedImport:
    @staticmethod
    def frame(
        labels: list[str],
        heads: KinetoPartials,
        facts: list[bytes],
        *,
        workload_name: str = ...,
        phase: str | None = None,
        clock_offsets: dict[int, float] | None = None,
        strict: bool = False,
    ) -> ShardedImport | None: ...
    def shape(self) -> bytes: ...
    def slot_files(self) -> list[list[int]]: ...
    def shard_map(self, named: list[bytes]) -> tuple[list[int], int]: ...
    def range_bounds(
        self, profile_bytes: int, shards: int, threads: int, range_count: int | None = None
    ) -> list[int]: ...
    @staticmethod
    def settle(
        units: list[list[int]], checks: list[bytes], per_shard: int
    ) -> tuple[list[list[int]], list[int]]: ...
    def labels(self, votes: list[bytes]) -> bytes: ...
    def place(self, prepared: list[bytes]) -> list[bytes]: ...
    def add_events(self, events: list[bytes]) -> None: ...
    def assemble(self) -> tuple[Trace, JobCounts, list[PartialCollective]]: ...

def diagnose_hang(
    paths: list[str], *, cache_dir: str | None = None, reads: _EvidenceReads | None = None
) -> HangDiagnosis: ...
def diagnose_stragglers(
    paths: list[str], *, cache_dir: str | None = None, reads: _EvidenceReads | None = None
) -> StragglerDiagnosis: ...
def read_flight_recorder_file(path: str) -> FlightRecorderDump: ...
def straggler_rules() -> dict[str, float]: ...
def bus_factor(op: str, ranks: int) -> float: ...
def recover_steps(
    paths: list[str], *, cache_dir: str | None = None, reads: _EvidenceReads | None = None
) -> StepRecovery: ...
def read_clock_offsets(path: str) -> dict[int, float]: ...
def recover_trace_steps(data: bytes) -> list[int] | None: ...
def read_hang_document(
    path: str,
) -> tuple[list[tuple[int, str | None, str]], tuple[int, list[tuple[str, list[int]]]]]: ...
def table_columns(
    document: bytes, table: str, names: list[tuple[str, str]]
) -> dict[str, npt.NDArray[Any] | list[str]]: ...
def job_timeline(
    paths: list[str],
    *,
    marks: list[tuple[int, str | None, str]] = ...,
    hang_job: tuple[int, list[tuple[str, list[int]]]] | None = None,
    cache_dir: str | None = None,
    reads: _EvidenceReads | None = None,
) -> Timeline: ...
def baseline_trace(
    trace: Trace,
    method: str,
    *,
    sample_count: int = 8,
    partial: bool = False,
    cluster_count: int = 8,
    strata_per_group: int = 4,
    seed: int = 0,
    gaps: str = "reference",
) -> Trace: ...
def check_reduce_options(tie_us: float, budget: int, timing_sample_limit: int | None = None) -> None: ...
def reduce_trace(
    trace: Trace,
    *,
    tie_us: float = 0.001,
    budget: int = 256,
    timing_sample_limit: int | None = None,
    configurations: Configurations | None = None,
    oracle: Callable[[list[int]], object] | None = None,
) -> tuple[Trace, Reduction]: ...
def measured_report(
    path: str,
    *,
    first_arrival_us: npt.NDArray[np.float64],
    last_arrival_us: npt.NDArray[np.float64],
    last_entry_us: npt.NDArray[np.float64],
    completion_us: npt.NDArray[np.float64],
    avg_rank_wait_us: npt.NDArray[np.float64],
    measurement: Measurement,
    data: bytes | None = None,
    include_samples: bool = True,
    host_cpus: int = 0,
    rank_cpu_share: float = 0.0,
) -> ReplayReport: ...
def canary_occurrences(path: str, *, data: bytes | None = None) -> CanaryOccurrences: ...
def check_canary(path: str, *, data: bytes | None = None) -> int: ...
def read_input_file(path: str) -> bytes: ...
def inspect_file(path: str) -> tuple[str, str, list[tuple[str, str]]]: ...
def resource_limits() -> list[tuple[str, int]]: ...
def set_resource_limits(values: list[tuple[str, int]]) -> list[tuple[str, int]]: ...
def signing_keypair(seed: bytes) -> tuple[str, str]: ...
def private_key_id(key: str) -> str: ...
def sign_file(artifact: str, key: str) -> bytes: ...
def trusted_key_ids(path: str) -> list[str]: ...
def verify_file(artifact: str, signature: str, trusted: str) -> str: ...
def judge_runs(
    baseline: npt.NDArray[np.float64],
    candidate: npt.NDArray[np.float64],
    *,
    threshold_abs: float,
    threshold_pct: float | None = None,
    decrease: bool = False,
    baseline_samples: list[npt.NDArray[np.float64]] | None = None,
    candidate_samples: list[npt.NDArray[np.float64]] | None = None,
    quantile: float | None = None,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> JudgedRuns: ...
def run_noise(
    values: npt.NDArray[np.float64],
    *,
    runs: int,
    confidence: float = 0.95,
    multiple: float = 1.5,
    floor_pct: float = 1.0,
    floor_abs: float = 1.0,
) -> RunNoise: ...
def read_gate_policy(path: str) -> GatePolicy: ...
def write_gate_policy(
    path: str,
    *,
    confidence: float,
    resamples: int,
    seed: int,
    min_runs: int,
    thresholds: dict[str, float],
    calibration: bytes | None = None,
) -> str: ...
