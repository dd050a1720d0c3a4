"""Steps from the collective sequence alone: :func:`recover_steps` over a
job's per-rank profiler traces.

The recovery runs in Rust (``rust/commcanary-core/src/analysis/steps/``):
each rank's calls keyed by (group, op); the number of steps is the call
count most keys share; the once-per-step collectives must repeat as one
block (the canary encoder's motif test); the boundary goes where the loop's
end-of-step work (collectives called every k-th step) stops and the idle
time before the next call is largest. When the traces carry
``ProfilerStep`` markers the document says how many of their boundaries
(each rank's first call in each step) were recovered at the same call.
``commcanary diagnose stragglers`` uses the same recovery for traces
without markers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commcanary import _core
from commcanary.analysis import _evidence
from commcanary.formats import STEPS_FORMAT

if TYPE_CHECKING:
    from distributed import Client

if TYPE_CHECKING:
    import numpy as np

__all__ = ["STEPS_FORMAT", "StepsReport", "recover_steps"]

PathLike = str | os.PathLike[str]

_STEP_COLUMNS = {"step": "int64", "start_us": "float64", "duration_us": "float64", "calls": "int64"}


@dataclass(frozen=True)
class StepsReport:
    """Recovered steps: how many, the lines a person reads first, and the
    ``commcanary.steps.v1`` document (parsed, and its canonical bytes)."""

    count: int
    lines: tuple[str, ...]
    data: bytes = field(repr=False)
    document: dict[str, Any] = field(repr=False)

    @property
    def steps(self) -> list[dict[str, Any]]:
        """Each recovered step: number, start and duration (µs, job clock), calls."""
        return list(self.document["steps"])

    @property
    def agreement(self) -> float | None:
        """The fraction of ``ProfilerStep`` boundaries recovered at the same
        call, or ``None`` when the traces have no markers."""
        a = self.document["agreement_with_profiler_steps"]
        return None if a is None else float(a["fraction"])

    def columns(self) -> dict[str, np.ndarray]:
        """The steps table as numpy columns (``step``, ``start_us``,
        ``duration_us``, ``calls``), read from the document by the core."""
        import numpy as np

        kinds = {"int64": "int", "float64": "float"}
        names = [(name, kinds[dtype]) for name, dtype in _STEP_COLUMNS.items()]
        columns = _core.table_columns(self.data, "steps", names)
        return {name: np.asarray(values) for name, values in columns.items()}

    def write(self, path: PathLike) -> Path:
        """Write the document atomically (canonical JSON)."""
        _core.write_atomic(os.fspath(path), self.data)
        return Path(path)


def recover_steps(
    paths: PathLike | Iterable[PathLike], *, cache_dir: PathLike | None = None, client: Client | None = None
) -> StepsReport:
    """Recover each rank's steps from its collective sequence (per-rank
    Kineto traces, files or directories, or one merged ``commcanary.trace.v1``
    with each member's arrival).

    ``cache_dir`` caches parsed traces by content (none by default); with a
    Dask ``client``, the traces are read by tasks on its workers. Raises
    :class:`~commcanary.errors.InputError` when the evidence holds no
    profiler trace, no collective, or no repeating pattern.
    """
    result, data, document = _evidence.run(_core.recover_steps, "steps", paths, cache_dir, client)
    return StepsReport(count=result["count"], lines=tuple(result["lines"]), data=data, document=document)
