"""PyTorch profiler (Kineto) traces as a ``commcanary.trace.v1`` trace.

One file is imported with the reference rules of a single-rank import (its
``record_param_comms`` collectives, no cross-rank claims). Several files (one
or more per rank: profiling windows are joined in time) are merged in Rust
into one event per collective instance, with measured per-rank arrivals,
compute around each collective, concurrent communicators, steps and phases;
NCCL records name their group, gloo ``c10d::`` calls do not and are matched
across ranks. The rules live in ``rust/commcanary-core/src/import/kineto/``.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from commcanary import _core
from commcanary.errors import InputError, OptionError

if TYPE_CHECKING:
    from commcanary._types import JobCounts
    from commcanary._types import PartialCollective as CorePartial

__all__ = ["KinetoImport", "PartialCollective", "default_cache_dir", "import_kineto", "kineto_files"]

_SUFFIXES = (".json", ".json.gz")
_Named = TypeVar("_Named", str, Path, "str | Path")
_SNIFF_BYTES = 1 << 16


def _looks_like_kineto(path: Path) -> bool:
    """Whether the first 64 KiB of ``path`` (decompressed) name a Kineto
    trace's ``traceEvents`` or ``schemaVersion`` member."""
    import gzip

    try:
        with path.open("rb") as f:
            head = f.read(2)
        with gzip.open(path, "rb") if head == b"\x1f\x8b" else path.open("rb") as f:
            data = f.read(_SNIFF_BYTES)
    except (OSError, EOFError):
        return True  # let the importer report what is wrong with it
    return head_looks_like_kineto(data)


def head_looks_like_kineto(head: bytes) -> bool:
    """Whether a file's first bytes (decompressed) name a Kineto trace's
    ``traceEvents`` or ``schemaVersion`` member."""
    return b'"traceEvents"' in head or b'"schemaVersion"' in head


@dataclass(frozen=True)
class PartialCollective:
    """A collective seen on some of its member ranks only (not imported)."""

    group: str
    op: str
    seen: tuple[int, ...]
    missing: tuple[int, ...]
    start_us: float
    step: int | None
    text: str


@dataclass(frozen=True)
class KinetoImport:
    """An imported trace and what the import kept and skipped."""

    trace: _core.Trace
    imported: int
    control: int
    empty: int
    nested: int
    ranks: int = 1
    files: int = 1
    ambiguous: int = 0
    partial: tuple[PartialCollective, ...] = field(default_factory=tuple)
    cache_hits: int = 0

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the trace atomically as canonical ``commcanary.trace.v1`` JSON."""
        self.trace.write(os.fspath(path))
        return Path(path)


def default_cache_dir() -> Path:
    """Where the CLI caches parsed profiles: ``$COMMCANARY_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/commcanary``, else ``~/.cache/commcanary``."""
    explicit = os.environ.get("COMMCANARY_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "commcanary"


def kineto_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The trace files named by ``paths``: files as given, directories
    expanded to their ``*.json`` / ``*.json.gz`` files (sorted) that look like
    Kineto traces (other JSON files in a job directory, such as logs or
    ground truth, are left out).

    Raises :class:`InputError` for a missing path, a directory without
    traces, or the same file named twice.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p
                for p in path.iterdir()
                if p.is_file() and p.name.endswith(_SUFFIXES) and _looks_like_kineto(p)
            )
            if not found:
                raise InputError(f"{path} is a directory with no .json or .json.gz Kineto trace in it")
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise InputError(f"{path} does not exist")
    check_named_once(files, lambda f: str(f.resolve()))
    return files


def check_named_once(files: Sequence[_Named], key: Callable[[_Named], str]) -> None:
    """Refuse (:class:`InputError`) no trace, or one file named twice
    (``key`` says which names are one file)."""
    seen: dict[str, _Named] = {}
    for f in files:
        k = key(f)
        if k in seen:
            raise InputError(f"{f} is given twice (also as {seen[k]})")
        seen[k] = f
    if not files:
        raise InputError("no Kineto trace given")


def offsets(clock_offsets: Mapping[int, float] | None) -> dict[int, float] | None:
    if clock_offsets is None:
        return None
    # Only the types are converted here; the core checks the values.
    try:
        return {operator.index(rank): float(value) for rank, value in clock_offsets.items()}
    except (TypeError, ValueError, AttributeError):
        raise OptionError("clock_offsets", _core.CLOCK_OFFSETS_RULE) from None


def import_kineto(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    rank: int | None = None,
    workload_name: str = "kineto-import",
    phase: str | None = None,
    process_group: str | None = None,
    clock_offsets: Mapping[int, float] | None = None,
    strict: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    max_input_bytes: int | None = None,
    max_json_items: int | None = None,
) -> KinetoImport:
    """Import Kineto traces (plain or gzip Chrome-trace JSON, or directories).

    One file: the single-rank reference import (``phase`` labels every event;
    ``process_group`` keeps one group's collectives; ``rank`` names the rank
    of a file without ``distributedInfo.rank``; the two limits raise the
    input bounds). Several files: the job import; ``clock_offsets`` maps a
    global rank to microseconds added to its clock (multi-host captures),
    ``strict`` refuses collectives seen on some member ranks only,
    ``phase`` labels events outside any user annotation, and ``cache_dir``
    keeps each file's parsed profile under its BLAKE3 fingerprint so a
    second import of the same files skips parsing (see
    :func:`default_cache_dir`; no cache when ``None``). Raises
    :class:`commcanary.errors.InputError` for anything that is not an
    importable job, including group membership it would have to guess.
    """
    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    files = kineto_files(given)
    if len(files) == 1:
        trace, counts = _core.import_kineto_file(
            os.fspath(files[0]),
            rank=rank,
            workload_name=workload_name,
            phase=phase,
            process_group=process_group,
            max_input_bytes=max_input_bytes,
            max_json_items=max_json_items,
        )
        return KinetoImport(trace, counts["imported"], counts["control"], counts["empty"], counts["nested"])
    if process_group is not None:
        raise OptionError("process_group", "applies to a single-file import only")
    trace, counts, partial = _core.import_kineto_job(
        [os.fspath(f) for f in files],
        workload_name=workload_name,
        phase=phase,
        rank=rank,
        clock_offsets=offsets(clock_offsets),
        strict=strict,
        cache_dir=None if cache_dir is None else os.fspath(cache_dir),
    )
    return job_import(trace, counts, partial)


def job_import(trace: _core.Trace, counts: JobCounts, partial: list[CorePartial]) -> KinetoImport:
    """A :class:`KinetoImport` from the core's job-import result."""
    partials = tuple(
        PartialCollective(
            p["group"], p["op"], tuple(p["seen"]), tuple(p["missing"]), p["start_us"], p["step"], p["text"]
        )
        for p in partial
    )
    return KinetoImport(
        trace,
        counts["imported"],
        counts["control"],
        counts["empty"],
        counts["nested"],
        ranks=counts["ranks"],
        files=counts["files"],
        ambiguous=counts["ambiguous"],
        partial=partials,
        cache_hits=counts["cache_hits"],
    )
