"""commcanary: compile collective-communication traces into small, verifiable canaries.

Public API::

    import commcanary
    trace = commcanary.load_trace("trace.json")     # columnar, parsed in Rust
    canary = commcanary.compile(trace)              # or a path, or bytes
    canary.summary, canary.bounds, canary.commitments
    canary.occurrences()["gap_us"]                  # numpy arrays
    canary.write("workload.canary.json")
"""

from __future__ import annotations

from commcanary._core import __version__
from commcanary.compiler import BOUND_FIELDS, Canary, Trace, compile, load_trace
from commcanary.errors import BudgetError, CommCanaryError, InputError, OutputError
from commcanary.formats import CANARY_FORMAT, TRACE_FORMAT

__all__ = [
    "BOUND_FIELDS",
    "CANARY_FORMAT",
    "TRACE_FORMAT",
    "BudgetError",
    "Canary",
    "CommCanaryError",
    "InputError",
    "OutputError",
    "Trace",
    "__version__",
    "compile",
    "load_trace",
]
