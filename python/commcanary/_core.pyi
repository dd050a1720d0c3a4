"""Type stubs for the Rust extension ``commcanary._core``."""

from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str
CANARY_FORMAT: str
TRACE_FORMAT: str

class CommCanaryError(Exception):
    """Base class of every commcanary error."""

class InputError(CommCanaryError):
    """An input is missing, unreadable, not JSON, over a resource limit, or invalid."""

class OutputError(CommCanaryError):
    """An artifact could not be written."""

class BudgetError(CommCanaryError):
    """Compilation cannot meet a requested fidelity guarantee."""

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
    def signatures(self) -> list[bytes]: ...
    def compile(
        self,
        *,
        timing_sample_limit: int = 128,
        timing_sample_limits_by_group: list[tuple[int, int]] | None = None,
        max_events: int | None = None,
        budgets: list[tuple[str, float]] | None = None,
        lossless_timing: bool = False,
        sequence_motifs: bool = True,
        allow_empty: bool = False,
        compiler_members: list[tuple[str, bytes]] | None = None,
    ) -> CompiledCanary: ...

class CompiledCanary:
    """A compiled canary: its canonical bytes and its summary."""

    def to_bytes(self) -> bytes: ...
    def summary(self) -> dict[str, Any]: ...
    def occurrences(self) -> dict[str, npt.NDArray[Any]]: ...
    def write(self, path: str) -> None: ...

def compile_file(
    path: str,
    *,
    timing_sample_limit: int = 128,
    timing_sample_limits_by_group: list[tuple[int, int]] | None = None,
    max_events: int | None = None,
    budgets: list[tuple[str, float]] | None = None,
    lossless_timing: bool = False,
    sequence_motifs: bool = True,
    allow_empty: bool = False,
) -> CompiledCanary: ...
def write_atomic(path: str, data: bytes) -> None: ...
def load_trace(path: str) -> Trace: ...
def load_trace_bytes(data: bytes, name: str = "<bytes>") -> Trace: ...
def canonical_json(data: bytes) -> bytes: ...
def float_repr(x: float) -> str: ...
def py_round(x: float, ndigits: int) -> float: ...

class ReplayReport:
    """A replay report: canonical bytes, sections and sample columns."""

    def to_bytes(self) -> bytes: ...
    def write(self, path: str) -> None: ...
    def sections(self) -> dict[str, bytes]: ...
    def samples(self) -> dict[str, npt.NDArray[Any]] | None: ...
    def sample_signatures(self) -> list[bytes]: ...
    def sample_resources(self) -> list[str]: ...

class ReportDocument:
    """A structurally validated report read from disk."""

    @property
    def has_samples(self) -> bool: ...
    def sections(self) -> dict[str, bytes]: ...
    def samples(self) -> dict[str, npt.NDArray[Any]] | None: ...
    def sample_signatures(self) -> list[bytes]: ...

def replay_canary(
    path: str,
    *,
    data: bytes | None = None,
    label: str = "simulated-nccl",
    bandwidth_gbps: float = 55.0,
    latency_floor_us: float = 7.5,
    compute_pressure: float = 0.55,
    overlap_efficiency: float = 0.72,
    iterations: int = 1,
    seed: int = 7,
    max_replay_events: int = 1_000_000,
    ablations: list[str] = ...,
    include_samples: bool = False,
) -> ReplayReport: ...
def read_report_file(path: str, *, samples: bool = True, data: bytes | None = None) -> ReportDocument: ...
def verify_report_files(
    report_path: str, canary_path: str
) -> list[tuple[str, bool, bytes | None, bytes | None]]: ...

class BehaviorReference:
    """The source side of behaviour checks: the trace's lossless program replayed per configuration."""

    @property
    def configuration_names(self) -> list[str]: ...
    @property
    def trace_events(self) -> int: ...

def behavior_reference(
    trace: Trace, configurations: list[tuple[str, float, float, float, float, int, int, int]]
) -> BehaviorReference: ...
def evaluate_behavior(
    reference: BehaviorReference,
    path: str,
    *,
    tolerances: tuple[float, float, float, float, float],
    data: bytes | None = None,
) -> tuple[list[bool], bool, bytes, bytes, int]: ...
def behavior_search(
    trace: Trace,
    reference: BehaviorReference,
    *,
    min_limit: int,
    max_limit: int,
    tolerances: tuple[float, float, float, float, float],
    max_events: int | None = None,
    budgets: list[tuple[str, float]] | None = None,
    lossless_timing: bool = False,
    sequence_motifs: bool = True,
) -> tuple[CompiledCanary, dict[str, Any], bytes]: ...
def check_canary(path: str, *, data: bytes | None = None) -> int: ...
def read_input_file(path: str) -> bytes: ...
