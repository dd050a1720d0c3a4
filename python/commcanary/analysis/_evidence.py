"""What every diagnosis entry point does before and after the core: paths
(one, or any iterable of them, files or directories) to strings, the cache
directory to a string or ``None``, the dumps and traces read on a Dask
cluster when a client is given, and the core's canonical document bytes
parsed once."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from commcanary._types import HangDiagnosis, StepRecovery, StragglerDiagnosis

if TYPE_CHECKING:
    from distributed import Client

PathLike = str | os.PathLike[str]
#: What a diagnosis entry point of the core returns.
Result = TypeVar("Result", HangDiagnosis, StragglerDiagnosis, StepRecovery)


def run(
    core: Callable[..., Result],
    analysis: str,
    paths: PathLike | Iterable[PathLike],
    cache_dir: PathLike | None,
    client: Client | None = None,
) -> tuple[Result, bytes, dict[str, Any]]:
    """``core(paths, cache_dir=..., reads=...)``'s result, its document
    bytes, and the document parsed. With a Dask ``client``, the dumps and
    profiler traces of ``analysis`` are read by tasks on its workers
    (:func:`commcanary.distributed.evidence_reads`)."""
    items = [os.fspath(p) for p in ([paths] if isinstance(paths, str | os.PathLike) else list(paths))]
    cache = os.fspath(cache_dir) if cache_dir is not None else None
    reads = None
    if client is not None:
        from commcanary.distributed import evidence_reads

        reads = evidence_reads(client, items, analysis, cache)
    result = core(items, cache_dir=cache, reads=reads)
    data: bytes = result["document"]
    return result, data, json.loads(data)
