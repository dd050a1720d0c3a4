"""What every diagnosis entry point does before and after the core: paths
(one, or any iterable of them, files or directories) to strings, the cache
directory to a string or ``None``, and the core's canonical document bytes
parsed once."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from commcanary._types import HangDiagnosis, StepRecovery, StragglerDiagnosis

PathLike = str | os.PathLike[str]
#: What a diagnosis entry point of the core returns.
Result = TypeVar("Result", HangDiagnosis, StragglerDiagnosis, StepRecovery)


def run(
    core: Callable[..., Result], paths: PathLike | Iterable[PathLike], cache_dir: PathLike | None
) -> tuple[Result, bytes, dict[str, Any]]:
    """``core(paths, cache_dir=...)``'s result, its document bytes, and the
    document parsed."""
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    result = core(
        [os.fspath(p) for p in items], cache_dir=os.fspath(cache_dir) if cache_dir is not None else None
    )
    data: bytes = result["document"]
    return result, data, json.loads(data)
