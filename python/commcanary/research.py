"""Research controls: the baselines a canary is measured against, and the
ddmin reducer (spec §7).

* :func:`baseline` — one of the reference's five stand-ins for a workload
  (``isolated``, ``random``, ``frequency``, ``cluster``, ``stratified``); the
  result's workload carries ``baseline_method``, so the strict compile gate
  knows it is not the workload.
* :func:`reduce` — ddmin over events: the smallest subset (1-minimal with
  respect to the oracle) whose model still decides every pairwise ranking of
  the configurations as the whole trace does. The ranking oracle runs in the
  Rust core (compile, replay under each configuration, compare relations);
  ``oracle=`` takes a Python callable instead. The result's workload carries
  ``reduction_method`` and the ``reduction`` ledger.

Both work in the Rust core on the trace's columns; both return a new
:class:`commcanary._core.Trace` to write or compile.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commcanary import _core

__all__ = ["BASELINE_METHODS", "Reduction", "baseline", "reduce"]

#: The baseline methods, in the reference's order.
BASELINE_METHODS = ("isolated", "random", "frequency", "cluster", "stratified")

TraceInput = str | os.PathLike[str] | _core.Trace


def _trace(trace: TraceInput) -> _core.Trace:
    return trace if isinstance(trace, _core.Trace) else _core.load_trace(os.fspath(trace))


def baseline(
    trace: TraceInput,
    method: str,
    *,
    sample_count: int = 8,
    partial: bool = False,
    cluster_count: int = 8,
    strata_per_group: int = 4,
    seed: int = 0,
    gaps: str = "reference",
) -> _core.Trace:
    """The ``method`` baseline of ``trace`` (a path or a loaded trace).

    ``random`` samples ``sample_count`` events with ``random.Random(seed)``
    and repeats them to the trace's length (``partial``: the sample alone);
    ``cluster`` keeps up to ``cluster_count`` representatives per operation
    shape; ``stratified`` draws one event per feature stratum
    (``strata_per_group`` per shape). ``gaps="observed"`` gives each event
    its real start-to-start gap instead of the reference's ``gap_us`` /
    ``compute_before_us``. Raises :class:`~commcanary.errors.InputError` on
    an unknown method, counts below 1, an empty trace, or unknown compute
    overlap (except ``isolated``).
    """
    return _core.baseline_trace(
        _trace(trace),
        method,
        sample_count=sample_count,
        partial=partial,
        cluster_count=cluster_count,
        strata_per_group=strata_per_group,
        seed=seed,
        gaps=gaps,
    )


@dataclass(frozen=True)
class Reduction:
    """A reduced trace and what ddmin did."""

    trace: _core.Trace
    original_events: int
    reduced_events: int
    oracle_calls: int
    budget_exhausted: bool

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the trace atomically as canonical ``commcanary.trace.v1`` JSON."""
        self.trace.write(os.fspath(path))
        return Path(path)


def reduce(
    trace: TraceInput,
    *,
    ranking_tie_tolerance_us: float = 0.001,
    max_oracle_calls: int = 256,
    timing_sample_limit: int | None = None,
    configurations: Sequence[Mapping[str, Any]] | None = None,
    oracle: Callable[[list[int]], bool] | None = None,
) -> Reduction:
    """ddmin-reduce ``trace`` with the ranking oracle (spec §7.1).

    ``configurations`` defaults to the five of behaviour verification;
    ``timing_sample_limit`` compiles subsets with that limit instead of
    losslessly. ``oracle``, when given, replaces the ranking oracle: it is
    called with the kept event indices (input order, ascending) and says
    whether the subset still shows what matters; it is called at most
    ``max_oracle_calls`` times. Raises :class:`~commcanary.errors.InputError`
    for a trace of fewer than two events or options out of range.
    """
    checked = None
    if configurations is not None:
        from commcanary.behavior import _checked

        checked = _checked(configurations)
    out, info = _core.reduce_trace(
        _trace(trace),
        tie_us=ranking_tie_tolerance_us,
        budget=max_oracle_calls,
        timing_sample_limit=timing_sample_limit,
        configurations=checked,
        oracle=oracle,
    )
    return Reduction(
        trace=out,
        original_events=info["original"],
        reduced_events=info["reduced"],
        oracle_calls=info["calls"],
        budget_exhausted=info["exhausted"],
    )
