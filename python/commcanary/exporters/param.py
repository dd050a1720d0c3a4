"""A canary as PARAM comms-replay ("basic") JSON.

Two shapes (rules in ``rust/commcanary-core/src/export/param.rs``): the
reference tool's single list, and ``<rank>.json`` per rank, the shape PARAM's
replayer (one process per rank) runs: ``init`` entries for every group on
every rank, element counts, PARAM's op and dtype names, and
``src_rank``/``dst_rank``/``use_batch`` on send and recv.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from commcanary import _core
from commcanary.errors import OptionError

__all__ = ["ParamExport", "export_param"]


@dataclass(frozen=True)
class ParamExport:
    """What an export wrote."""

    entries: int
    skipped: int
    per_rank_entries: tuple[int, ...]


def export_param(
    canary: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    per_rank_dir: str | os.PathLike[str] | None = None,
    dtype: str | None = None,
    skip_unsupported: bool = False,
    compute_fill_us_per_gemm: float | None = None,
    compute_fill_gemm_dim: int | None = None,
    overlap_structure: bool = False,
) -> ParamExport:
    """Export ``canary`` as the single list at ``output`` and/or per-rank
    files in ``per_rank_dir`` (created if absent).

    ``dtype`` overrides every event's element type; ``skip_unsupported``
    drops ops with no PARAM equivalent (counted in ``skipped`` and marked on
    the first entry) instead of refusing the canary. For the single list,
    ``compute_fill_us_per_gemm`` puts a GEMM fill entry (``mm_dim``
    ``compute_fill_gemm_dim``, default 1024) before each collective, one GEMM
    per that many µs of its readiness gap, and ``overlap_structure`` issues
    each collective asynchronously with its ``wait`` after the next fill.
    Nothing is written when anything is refused.
    """
    if output is None and per_rank_dir is None:
        raise OptionError("output", "or per_rank_dir is required")
    result = _core.export_param(
        os.fspath(canary),
        output=None if output is None else os.fspath(output),
        per_rank_dir=None if per_rank_dir is None else os.fspath(per_rank_dir),
        dtype=dtype,
        skip_unsupported=skip_unsupported,
        compute_fill_us_per_gemm=compute_fill_us_per_gemm,
        compute_fill_gemm_dim=compute_fill_gemm_dim,
        overlap_structure=overlap_structure,
    )
    return ParamExport(result["entries"], result["skipped"], tuple(result["per_rank_entries"]))
