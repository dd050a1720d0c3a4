"""Who is slow, and what it costs: :func:`diagnose_stragglers` over a job's
per-rank profiler traces.

The analysis runs in Rust (``rust/commcanary-core/src/analysis/stragglers/``):
each collective instance's arrival excess per member, late arrivals against
the job's own noise (median plus six robust standard deviations of every
(rank, step)'s largest excess), slow collectives per (group, op, bytes)
class, and each finding's cost from a what-if replay of its step. This
module wraps the ``commcanary.stragglers.v1`` document and gives its tables
as numpy columns.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commcanary import _core
from commcanary.analysis import _evidence
from commcanary.formats import STRAGGLERS_FORMAT

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from distributed import Client

__all__ = ["STRAGGLERS_FORMAT", "StragglerReport", "diagnose_stragglers"]

PathLike = str | os.PathLike[str]

#: numpy dtype of each numeric column of the tables (numpy is imported
#: only when columns are asked for: the CLI's start stays light).
_COLUMNS: dict[str, dict[str, str]] = {
    "steps": {"step": "int64", "duration_us": "float64", "last_rank": "int64", "lag_us": "float64"},
    "findings": {"rank": "int64", "step": "int64", "lag_us": "float64", "estimated_cost_us": "float64"},
    "ranks": {"rank": "int64", "straggler_steps": "int64", "total_estimated_cost_us": "float64"},
}


@dataclass(frozen=True)
class StragglerReport:
    """A straggler diagnosis: whether any was found, the lines a person reads
    first, and the ``commcanary.stragglers.v1`` document (parsed, and its
    canonical bytes)."""

    found: bool
    lines: tuple[str, ...]
    data: bytes = field(repr=False)
    document: dict[str, Any] = field(repr=False)
    member_columns: Mapping[str, Any] = field(repr=False, default_factory=dict)

    def members(self) -> dict[str, np.ndarray]:
        """The per-instance view, one row per member of every complete
        instance (collectives and p2p): ``instance``, ``step``, ``rank``,
        ``group`` (an index into ``document["groups"]``), ``bytes`` (int64),
        ``arrival_us``, ``end_us`` (job clock), ``lag_us`` (behind the
        instance's first arrival), ``excess_us`` (behind the latest other
        member), ``inside_us`` (end minus the last arrival) (float64), and
        ``op`` (str)."""
        import numpy as np

        out: dict[str, np.ndarray] = {}
        for name, raw in self.member_columns.items():
            if name == "op":
                out[name] = np.array(raw, dtype=str)
            else:
                out[name] = np.frombuffer(raw, dtype="<f8" if name.endswith("_us") else "<i8")
        return out

    def columns(self, table: str) -> dict[str, np.ndarray]:
        """The numeric columns of ``table`` (``steps``, ``findings`` or
        ``ranks``) as numpy arrays; ``findings`` also has ``kind`` and ``op``
        as arrays of str."""
        import numpy as np

        kinds = {"int64": "int", "float64": "float"}
        names = [(name, kinds[dtype]) for name, dtype in _COLUMNS[table].items()]
        if table == "findings":
            names += [("kind", "text"), ("op", "text")]
        columns = _core.table_columns(self.data, table, names)
        out: dict[str, np.ndarray] = {
            name: np.array(values, dtype=str) if isinstance(values, list) else values
            for name, values in columns.items()
        }
        return out

    def to_arrow(self, table: str = "members") -> pa.Table:
        """``table`` (``members``, ``steps``, ``findings``, ``ranks``) as an
        Apache Arrow table (:func:`commcanary.arrow.straggler_table`; needs
        pyarrow, the ``arrow`` extra)."""
        from commcanary.arrow import straggler_table

        return straggler_table(self, table)

    @property
    def findings(self) -> list[dict[str, Any]]:
        """Each finding: rank, step, kind, lag, estimated cost, op, group."""
        return list(self.document["findings"])

    @property
    def steps(self) -> list[dict[str, Any]]:
        """Each step: duration, last rank to arrive and by how much, straggler ranks."""
        return list(self.document["steps"])

    @property
    def ranks(self) -> list[dict[str, Any]]:
        """The blame table: each rank's straggler steps and total cost, costliest first."""
        return list(self.document["ranks"])

    def render_html(self) -> str:
        """The self-contained HTML view: the per-rank timeline with the
        findings marked, the blame table, findings, steps, communication."""
        from commcanary.html_stragglers import render_stragglers

        columns = {name: col.tolist() for name, col in self.members().items()}
        return render_stragglers(self.document, columns)

    def write(self, path: PathLike) -> Path:
        """Write the document atomically (canonical JSON)."""
        _core.write_atomic(os.fspath(path), self.data)
        return Path(path)


def diagnose_stragglers(
    paths: PathLike | Iterable[PathLike], *, cache_dir: PathLike | None = None, client: Client | None = None
) -> StragglerReport:
    """Diagnose stragglers from per-rank Kineto traces (files or directories),
    or from one merged ``commcanary.trace.v1`` with each member's arrival
    (``import-kineto`` of several ranks, ``capture``).

    ``cache_dir`` caches parsed traces by content (none by default); with a
    Dask ``client``, the traces are read by tasks on its workers. Raises
    :class:`~commcanary.errors.InputError` when the evidence holds no
    profiler trace, a single rank, no collective two ranks completed, or no
    ``ProfilerStep`` markers.
    """
    result, data, document = _evidence.run(_core.diagnose_stragglers, "stragglers", paths, cache_dir, client)
    return StragglerReport(
        found=result["found"],
        lines=tuple(result["lines"]),
        data=data,
        document=document,
        member_columns=result["members"],
    )
