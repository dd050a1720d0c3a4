"""Columns for pipelines: a trace's events and a straggler diagnosis' tables
as Apache Arrow tables, and Parquet files of them (the optional
``commcanary[arrow]`` extra: pyarrow). Polars, DuckDB and pandas read both
directly.

The numeric columns come from the core as numpy arrays and are wrapped
without a copy; text columns that repeat (a trace's ``op``, ``phase`` and
``group``, one value per signature) are dictionary-encoded, so a
million-event table holds each name once. A float column keeps ``NaN``
where an event lacks the field, as the trace's own columns do.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commcanary import _core
from commcanary.errors import CommCanaryError, OutputError

if TYPE_CHECKING:
    import pyarrow as pa

    from commcanary.analysis.stragglers import StragglerReport

__all__ = ["require_arrow", "straggler_table", "trace_table", "write_parquet"]


def require_arrow() -> None:
    """Raise a :class:`CommCanaryError` naming the extra when pyarrow is
    not installed."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise CommCanaryError(
            "Arrow and Parquet output need pyarrow: pip install 'commcanary[arrow]'"
        ) from None


def _dictionary(values: list[str], ids: Any) -> pa.DictionaryArray:
    """A dictionary array of ``values[ids[i]]`` holding each distinct value once."""
    import numpy as np
    import pyarrow as pa

    distinct = sorted(set(values))
    code = {v: i for i, v in enumerate(distinct)}
    per_signature = np.array([code[v] for v in values], dtype=np.int32)
    indices = per_signature[ids] if len(ids) else np.zeros(0, dtype=np.int32)
    return pa.DictionaryArray.from_arrays(
        pa.array(indices, type=pa.int32()), pa.array(distinct, type=pa.string())
    )


def trace_table(trace: _core.Trace) -> pa.Table:
    """One row per event, in trace order: ``event``, ``signature``, ``op``,
    ``phase``, ``group`` (dictionary-encoded), ``bytes``, ``rank_count``,
    ``has_arrival_map``, and the timing columns (``start_us``, ``gap_us``,
    ``arrival_skew_us``, ``compute_before_us``, ``compute_overlap_us``,
    ``compute_pressure``, ``observed_exposed_us``, ``device_us``, ``step``:
    float64, ``NaN`` where absent)."""
    require_arrow()
    import numpy as np
    import pyarrow as pa

    signatures = [json.loads(s) for s in trace.signatures()]
    ids = trace.signature_ids().astype(np.intp, copy=False)
    count = len(ids)
    sizes = np.array([int(s.get("bytes", 0)) for s in signatures] or [0], dtype=np.int64)
    ranks = np.array([len(s.get("ranks", [])) for s in signatures] or [0], dtype=np.int32)
    columns: dict[str, Any] = {
        "event": pa.array(np.arange(count, dtype=np.int64)),
        "signature": pa.array(trace.signature_ids()),
        "op": _dictionary([str(s.get("op", "")) for s in signatures], ids),
        "phase": _dictionary([str(s.get("phase", "")) for s in signatures], ids),
        "group": _dictionary([str(s.get("group", "")) for s in signatures], ids),
        "bytes": pa.array(sizes[ids] if count else np.zeros(0, dtype=np.int64)),
        "rank_count": pa.array(ranks[ids] if count else np.zeros(0, dtype=np.int32)),
        "has_arrival_map": pa.array(trace.has_arrival_map()),
    }
    for name in _core.TRACE_COLUMNS:
        columns[name] = pa.array(trace.column(name))
    return pa.table(columns)


#: The tables of a straggler diagnosis.
STRAGGLER_TABLES = ("members", "steps", "findings", "ranks")


def straggler_table(report: StragglerReport, table: str = "members") -> pa.Table:
    """A straggler diagnosis' table as Arrow: ``members`` (one row per
    member of every complete instance, the columns of
    :meth:`StragglerReport.members`), or ``steps``, ``findings``, ``ranks``
    (the numeric columns of :meth:`StragglerReport.columns`)."""
    require_arrow()
    import pyarrow as pa

    if table not in STRAGGLER_TABLES:
        raise ValueError(f"table must be one of {', '.join(STRAGGLER_TABLES)}, not {table!r}")
    columns = report.members() if table == "members" else report.columns(table)
    out: dict[str, Any] = {}
    for name, values in columns.items():
        if values.dtype.kind == "U":
            out[name] = pa.array(values.tolist(), type=pa.string()).dictionary_encode()
        else:
            out[name] = pa.array(values)
    return pa.table(out)


def write_parquet(table: pa.Table, path: str | os.PathLike[str]) -> Path:
    """Write ``table`` as Parquet (zstd) atomically: a temporary file in
    the target's directory, renamed over it when whole. Raises
    :class:`OutputError` when the directory is missing or not writable."""
    require_arrow()
    import pyarrow.parquet as pq

    target = Path(path)
    if not target.parent.is_dir():
        raise OutputError(f"cannot write {target}: directory {target.parent} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(fd)
        try:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # the mode of any other output, not mkstemp's 0600
            pq.write_table(table, tmp, compression="zstd")
            with open(tmp, "rb") as written:
                os.fsync(written.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target
