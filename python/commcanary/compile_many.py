"""Many traces compiled into many canaries: one per trace, in a directory,
with a summary of what compiled and what could not.

Each trace is compiled by the same core call as ``commcanary compile``
(:func:`commcanary.compiler.compile` from a path), so every canary is
byte-identical to a single compile of its trace with the same options. The
compiles run on a thread pool here (the core releases the interpreter), or,
given a Dask client, one task per trace on the cluster's workers, which
read the traces themselves and return only the canary's bytes.

Outputs are never partial: the canaries are written only after every trace
has been tried (a cluster lost half-way writes nothing), each atomically,
then the summary (``commcanary.compile_many.v1``, canonical JSON). A trace
that cannot be compiled (unreadable, invalid, over a budget) is listed in
the summary with its one-line reason and has no canary (one an earlier run
left in the directory for it is removed).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commcanary import _core
from commcanary.distributed.storage import is_url
from commcanary.errors import InputError
from commcanary.formats import COMPILE_MANY_FORMAT

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["SUMMARY_NAME", "CompileOutcome", "Source", "canary_name", "compile_many", "traces_named"]

#: The summary's file name in the output directory.
SUMMARY_NAME = "compile-many.summary.json"

_TRACE_SUFFIXES = (".gz", ".json", ".trace")
#: What a URL glob's matches must end with to be taken as traces.
_URL_SUFFIXES = (".json", ".gz")

#: A trace: a path, or a URL (a string) that fsspec opens on the workers.
Source = str | Path


@dataclass(frozen=True)
class CompileOutcome:
    """One trace's result: its canary (path, SHA-256 and compile summary),
    or the reason it has none."""

    trace: Source
    canary: Path | None
    sha256: str | None
    summary: Mapping[str, Any] | None
    error: str | None

    @property
    def ok(self) -> bool:
        """Whether the trace compiled."""
        return self.error is None


def canary_name(trace: str | os.PathLike[str]) -> str:
    """``job.trace.json.gz`` -> ``job.canary.json``: the trace's file name
    without its ``.gz``, ``.json`` and ``.trace`` suffixes, then
    ``.canary.json``."""
    name = Path(trace).name
    stripped = True
    while stripped:
        stripped = False
        for suffix in _TRACE_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                stripped = True
    return name + ".canary.json"


def _core_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`commcanary.compiler.compile`'s keyword options in the core's
    spelling (sorted pairs for the maps)."""
    allowed = {
        "timing_sample_limit",
        "max_events",
        "budgets",
        "lossless_timing",
        "sequence_motifs",
        "step_loops",
    }
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise TypeError(f"compile_many() got unexpected options: {', '.join(unknown)}")
    core = {k: v for k, v in options.items() if k != "budgets"}
    core["budgets"] = sorted((options.get("budgets") or {}).items())
    return core


def compile_many(
    traces: Iterable[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    client: Client | None = None,
    threads: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    **options: Any,
) -> list[CompileOutcome]:
    """Compile every trace into ``out_dir`` (created if missing), one
    ``<name>.canary.json`` each (:func:`canary_name`), and write the summary
    :data:`SUMMARY_NAME` there. ``options`` are
    :func:`commcanary.compiler.compile`'s (``timing_sample_limit``,
    ``max_events``, ``budgets``, ``lossless_timing``, ``sequence_motifs``,
    ``step_loops``), checked before any trace is read. Returns one outcome
    per trace, in input order; ``progress(done, total)`` is called as
    traces finish.

    Raises :class:`commcanary.errors.InputError` for a missing trace or two
    traces whose canaries would have the same name,
    :class:`commcanary.errors.OptionError` for an option out of range, and
    :class:`commcanary.errors.ClusterError` for a cluster lost mid-run
    (nothing written).
    """
    paths = traces_named(traces)
    core = _core_options(options)
    _core.check_compile_options(**core)
    if client is None and any(isinstance(p, str) for p in paths):
        raise InputError("URL traces are read by Dask workers: give a client (--cluster or --workers)")
    check_traces(paths)
    out = prepare_out_dir(out_dir, paths)
    results: list[tuple[bytes | None, dict[str, Any] | None, str | None]]
    if client is None:
        results = _run_here(paths, core, threads, progress)
    else:
        results = _run_on(client, paths, core, progress)
    outcomes = []
    for p, (data, summary, error) in zip(paths, results, strict=True):
        if data is None:
            # A canary an earlier run wrote for this trace would contradict
            # the summary: the directory holds this run's canaries only.
            (out / canary_name(p)).unlink(missing_ok=True)
            outcomes.append(CompileOutcome(p, None, None, None, error))
            continue
        target = out / canary_name(p)
        _core.write_atomic(os.fspath(target), data)
        import hashlib

        outcomes.append(CompileOutcome(p, target, hashlib.sha256(data).hexdigest(), summary, None))
    _core.write_atomic(os.fspath(out / SUMMARY_NAME), summary_bytes(outcomes, core))
    return outcomes


def traces_named(given: Iterable[str | os.PathLike[str]]) -> list[Source]:
    """The traces ``given`` names: paths as given, URLs as they are (a URL
    glob expanded on its storage, by name: ``s3://bucket/job/*.json``)."""
    from commcanary.distributed.storage import list_url

    named: list[Source] = []
    for t in given:
        if is_url(t):
            assert isinstance(t, str)
            named.extend(list_url(t, _URL_SUFFIXES, directories=False))
        else:
            named.append(Path(t))
    return named


def check_traces(paths: list[Source]) -> None:
    """Refuse (:class:`InputError`) no trace, a trace that is not a file (a
    URL: that does not exist on its storage), and two traces whose
    canaries would have the same name."""
    from commcanary.distributed.storage import url_exists

    if not paths:
        raise InputError("no trace given")
    names: dict[str, Source] = {}
    for p in paths:
        if isinstance(p, str):
            if not url_exists(p):
                raise InputError(f"{p} does not exist")
        elif not p.is_file():
            raise InputError(f"{p} does not exist" if not p.exists() else f"{p} is not a file")
        name = canary_name(p)
        if name in names:
            raise InputError(f"{p} and {names[name]} would both be compiled to {name}; rename one")
        names[name] = p


def prepare_out_dir(out_dir: str | os.PathLike[str], paths: list[Source]) -> Path:
    """The output directory, created if missing, with every file this run
    will write checked writable before any trace is compiled (a directory
    or a link in a canary's place is refused here, not half-way through
    the writes); :class:`OutputError` otherwise."""
    from commcanary.errors import OutputError
    from commcanary.io import check_output_path

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {out}: {exc.strerror or exc}") from None
    if not out.is_dir():
        raise OutputError(f"cannot write into {out}: it is not a directory")
    for target in [*(out / canary_name(p) for p in paths), out / SUMMARY_NAME]:
        check_output_path(target)
    return out


def _run_here(
    paths: list[Source],
    core: dict[str, Any],
    threads: int | None,
    progress: Callable[[int, int], None] | None,
) -> list[tuple[bytes | None, dict[str, Any] | None, str | None]]:
    from commcanary.distributed import _tasks

    workers = threads or min(len(paths), os.cpu_count() or 1)
    done = 0
    results = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for result in pool.map(lambda p: _tasks.compile_trace(os.path.abspath(p), str(p), core), paths):
            results.append(result)
            done += 1
            if progress is not None:
                progress(done, len(paths))
    return results


def _run_on(
    client: Client,
    paths: list[Source],
    core: dict[str, Any],
    progress: Callable[[int, int], None] | None,
) -> list[tuple[bytes | None, dict[str, Any] | None, str | None]]:
    from commcanary.distributed import _tasks, map_in_order

    results: list[Any] = []
    calls = [(p if isinstance(p, str) else os.path.abspath(p), str(p), core) for p in paths]
    for done, result in enumerate(map_in_order(client, _tasks.compile_trace, calls), start=1):
        results.append(result)
        if progress is not None:
            progress(done, len(paths))
    return results


def summary_bytes(outcomes: list[CompileOutcome], core: Mapping[str, Any]) -> bytes:
    """The ``commcanary.compile_many.v1`` summary, canonical JSON."""
    import orjson

    entries: list[dict[str, Any]] = []
    for o in outcomes:
        entry: dict[str, Any] = {"trace": str(o.trace)}
        if o.ok:
            assert o.canary is not None and o.summary is not None
            s = o.summary
            entry.update(
                {
                    "status": "compiled",
                    "canary": o.canary.name,
                    "canary_sha256": o.sha256,
                    "source_events": s["source_events"],
                    "canary_events": s["canary_events"],
                    "byte_compression_ratio": s["byte_compression_ratio"],
                    "fidelity_mode": s["fidelity_mode"],
                }
            )
        else:
            entry.update({"status": "failed", "error": o.error})
        entries.append(entry)
    options = {k: v for k, v in core.items() if k != "budgets"}
    options["budgets"] = dict(core["budgets"])
    document = {
        "format": COMPILE_MANY_FORMAT,
        "options": options,
        "compiled": sum(1 for o in outcomes if o.ok),
        "failed": sum(1 for o in outcomes if not o.ok),
        "traces": entries,
    }
    return _core.canonical_json(orjson.dumps(document))
