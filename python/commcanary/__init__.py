"""commcanary: compile collective-communication traces into small, verifiable canaries.

Public API::

    import commcanary
    trace = commcanary.load_trace("trace.json")     # columnar, parsed in Rust
    canary = commcanary.compile(trace)              # or a path, or bytes
    canary.summary, canary.bounds, canary.commitments
    canary.occurrences()["gap_us"]                  # numpy arrays
    canary.write("workload.canary.json")

    report = commcanary.replay(canary, backend=commcanary.Backend(latency_floor_us=12), include_samples=True)
    report.metrics, report.by_phase, report.samples["exposed_us"]
    result = commcanary.compare(baseline, candidate, commcanary.Thresholds(p99_threshold_pct=20))
    commcanary.verify_report("baseline.report.json", "workload.canary.json")["status"]

    commcanary.verify_fidelity("trace.json", "workload.canary.json")["status"]
    commcanary.verify_behavior("trace.json", "workload.canary.json")["status"]
    found = commcanary.search_behavior("trace.json", min_limit=2, max_limit=128)
    found.canary.write("small.canary.json"); found.evidence_bytes  # the search ledger
    hang = commcanary.diagnose_hang("fr_dumps/")                # FR dumps, traces, stacks, exceptions
    hang.verdict, hang.root, hang.wait_for; hang.write("hang.json")
    slow = commcanary.diagnose_stragglers("traces/")            # per-rank Kineto traces
    slow.findings, slow.ranks, slow.columns("findings"); slow.write("stragglers.json")
    steps = commcanary.recover_steps("traces/")                 # steps without ProfilerStep markers
    steps.count, steps.agreement, steps.columns()["duration_us"]
    commcanary.timeline("traces/", hang="hang.json").write("timeline.json")  # Perfetto
    commcanary.baseline("trace.json", "cluster", cluster_count=8).write("cluster.trace.json")
    small = commcanary.reduce("trace.json", max_oracle_calls=64)   # ddmin, ranking oracle in Rust
    small.reduced_events, small.oracle_calls; small.write("reduced.trace.json")

    from commcanary.physical import replay_physical            # needs torch
    run = replay_physical("workload.canary.json", engine="gloo")   # real collectives, measured
    run.report.write("measured.report.json"); run.enter_us       # per-rank entries
    from commcanary.calibrate import calibrate
    calibrate(["measured.report.json"], ["workload.canary.json"]).write("backend.json")
"""

from __future__ import annotations

from commcanary._core import __version__
from commcanary.analysis import (
    HangReport,
    StepsReport,
    StragglerReport,
    diagnose_hang,
    diagnose_stragglers,
    recover_steps,
)
from commcanary.behavior import DEFAULT_CONFIGURATIONS, SearchResult, Tolerances, verify_behavior
from commcanary.behavior import search as search_behavior
from commcanary.behavior import verify_fidelity_files as verify_fidelity
from commcanary.compare import Thresholds, compare
from commcanary.compare_runs import compare_runs
from commcanary.compiler import BOUND_FIELDS, Canary, Trace, compile, load_trace
from commcanary.errors import BudgetError, CommCanaryError, InputError, OutputError
from commcanary.exporters import ParamExport, Timeline, export_param, timeline
from commcanary.formats import CANARY_FORMAT, TRACE_FORMAT
from commcanary.gate import BehaviorVerificationError, PartialSourceError, compile_verified
from commcanary.importers import (
    FlightRecorderDump,
    KinetoImport,
    NcclProfilerImport,
    import_kineto,
    import_nccl_profiler,
    read_flight_recorder,
)
from commcanary.replay import Backend, Report, replay
from commcanary.research import BASELINE_METHODS, Reduction, baseline, reduce
from commcanary.verify import verify_report

__all__ = [
    "BASELINE_METHODS",
    "BOUND_FIELDS",
    "CANARY_FORMAT",
    "DEFAULT_CONFIGURATIONS",
    "TRACE_FORMAT",
    "Backend",
    "BehaviorVerificationError",
    "BudgetError",
    "Canary",
    "CommCanaryError",
    "FlightRecorderDump",
    "HangReport",
    "InputError",
    "KinetoImport",
    "NcclProfilerImport",
    "OutputError",
    "ParamExport",
    "PartialSourceError",
    "Reduction",
    "Report",
    "SearchResult",
    "StepsReport",
    "StragglerReport",
    "Thresholds",
    "Timeline",
    "Tolerances",
    "Trace",
    "__version__",
    "baseline",
    "compare",
    "compare_runs",
    "compile",
    "compile_verified",
    "diagnose_hang",
    "diagnose_stragglers",
    "export_param",
    "import_kineto",
    "import_nccl_profiler",
    "load_trace",
    "read_flight_recorder",
    "recover_steps",
    "reduce",
    "replay",
    "search_behavior",
    "timeline",
    "verify_behavior",
    "verify_fidelity",
    "verify_report",
]
