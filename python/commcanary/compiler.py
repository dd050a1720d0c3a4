"""Trace loading and canary compilation for Python pipelines.

The heavy lifting happens in Rust (``commcanary._core``): a trace is parsed
from its bytes into columnar storage and compiled without building a Python
object per event. Both calls release the interpreter, so a thread pool
compiles several traces in parallel::

    from concurrent.futures import ThreadPoolExecutor
    import commcanary

    with ThreadPoolExecutor() as pool:
        canaries = list(pool.map(commcanary.compile, paths))
    for canary in canaries:
        print(canary.source_events, canary.byte_compression_ratio)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commcanary import _core

if TYPE_CHECKING:
    from commcanary._types import OccurrenceColumns

__all__ = ["Canary", "Trace", "compile", "load_trace"]

Trace = _core.Trace

#: Names of the eight per-field error bounds, in budget-check order (the core's).
BOUND_FIELDS: tuple[str, ...] = _core.FIDELITY_FIELDS


def load_trace(source: str | os.PathLike[str] | bytes) -> _core.Trace:
    """Read and validate a ``commcanary.trace.v1`` trace (plain or gzip JSON).

    ``source`` is a path, or the trace's bytes. Raises
    :class:`commcanary.errors.InputError` naming the file and the field.
    """
    if isinstance(source, bytes | bytearray | memoryview):
        return _core.load_trace_bytes(bytes(source))
    return _core.load_trace(os.fspath(source))


class Canary:
    """A compiled canary: canonical bytes plus an inspectable summary."""

    def __init__(self, compiled: _core.CompiledCanary) -> None:
        self._compiled = compiled

    @cached_property
    def summary(self) -> dict[str, Any]:
        """Counts, ratios, timing mode, bounds and commitments of the compile."""
        return dict(self._compiled.summary())

    @property
    def source_events(self) -> int:
        """Number of source events compiled."""
        return int(self.summary["source_events"])

    @property
    def canary_events(self) -> int:
        """Stored top-level canary events (a motif counts once)."""
        return int(self.summary["canary_events"])

    @property
    def event_compression_ratio(self) -> float:
        """``round(source_events / canary_events, 3)``."""
        return float(self.summary["event_compression_ratio"])

    @property
    def byte_compression_ratio(self) -> float:
        """``round(source_bytes / canary_bytes, 3)`` over canonical JSON bytes."""
        return float(self.summary["byte_compression_ratio"])

    @property
    def fidelity_mode(self) -> str:
        """``lossless_timing`` or ``bounded_approximate``."""
        return str(self.summary["fidelity_mode"])

    @property
    def bounds(self) -> dict[str, float]:
        """The eight per-field error bounds (0.0 when lossless)."""
        return dict(self.summary["bounds"])

    @property
    def commitments(self) -> dict[str, str]:
        """SHA-256 commitments carried by the canary."""
        keys = (
            "source_trace_sha256",
            "execution_semantic_sha256",
            "calibration_evaluation_sha256",
            "artifact_provenance_sha256",
        )
        return {k: str(self.summary[k]) for k in keys}

    def to_bytes(self) -> bytes:
        """The canary's canonical JSON bytes (what is written to disk)."""
        return bytes(self._compiled.to_bytes())

    @cached_property
    def document(self) -> dict[str, Any]:
        """The canary as parsed JSON."""
        import orjson

        doc: dict[str, Any] = orjson.loads(self._compiled.to_bytes())
        return doc

    @property
    def groups(self) -> list[dict[str, Any]]:
        """Stored top-level events (leaves and motif wrappers), as parsed JSON."""
        events: list[dict[str, Any]] = self.document["events"]
        return events

    def occurrences(self) -> OccurrenceColumns:
        """Executed timing, one row per occurrence in replay order, as numpy arrays."""
        return self._compiled.occurrences()

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the canary atomically to ``path`` (its directory must exist)."""
        self._compiled.write(os.fspath(path))
        return Path(path)


def compile(
    source: str | os.PathLike[str] | bytes | _core.Trace,
    *,
    timing_sample_limit: int = _core.DEFAULT_TIMING_SAMPLE_LIMIT,
    timing_sample_limits_by_group: Mapping[int, int] | None = None,
    max_events: int | None = None,
    budgets: Mapping[str, float] | None = None,
    lossless_timing: bool = False,
    sequence_motifs: bool = True,
    step_loops: bool = True,
    allow_empty: bool = False,
    compiler_members: Mapping[str, Any] | None = None,
) -> Canary:
    """Compile a trace (path, bytes or loaded :class:`Trace`) into a :class:`Canary`.

    ``budgets`` maps bound names (see :data:`BOUND_FIELDS`) to maxima; a bound
    that is exceeded raises :class:`commcanary.errors.BudgetError` carrying the
    achieved value, as does ``lossless_timing=True`` when approximation is needed.
    ``step_loops`` (on by default) encodes a trace whose events carry ``step``
    as one loop over an iteration's slots when that is smaller; off, or for a
    trace without iterations, the program is flat (``sequence_motifs`` only).
    ``compiler_members`` adds JSON members to the canary's ``compiler`` block
    (verification statuses, a search summary); they are covered by its
    provenance digest and counted in its bytes.
    """
    options: dict[str, Any] = {
        "timing_sample_limit": timing_sample_limit,
        "timing_sample_limits_by_group": sorted((timing_sample_limits_by_group or {}).items()),
        "max_events": max_events,
        "budgets": sorted((budgets or {}).items()),
        "lossless_timing": lossless_timing,
        "sequence_motifs": sequence_motifs,
        "step_loops": step_loops,
        "allow_empty": allow_empty,
    }
    if compiler_members:
        import orjson

        options["compiler_members"] = [
            (key, orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
            for key, value in sorted(compiler_members.items())
        ]
        if not isinstance(source, _core.Trace):
            source = load_trace(source)
    if isinstance(source, _core.Trace):
        return Canary(source.compile(**options))
    if isinstance(source, bytes | bytearray | memoryview):
        return Canary(load_trace(source).compile(**options))
    # From a path: load and compile in one call so the input bytes are
    # released before the canary is built.
    return Canary(_core.compile_file(os.fspath(source), **options))
