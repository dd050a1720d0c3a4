"""commcanary on a Dask cluster (the optional ``commcanary[dask]`` extra).

The plan, for a job's many inputs:

* the client lists the inputs: paths on storage the workers share, or URLs
  that fsspec opens (:mod:`.storage`: listed by name here, fetched by the
  worker that reads them), so the client never holds trace bytes;
* one task per input runs on a worker (:mod:`._tasks`): the file is read,
  classified and reduced in Rust with the interpreter released, and the
  task returns a compact partial in the core's own codec (a rank's
  communication calls, a few hundred bytes each), or the file's own fault
  as a value;
* the client merges the partials in input order with the same core code
  the single-process command runs, so the output is the same bytes, and
  writes it atomically.

A worker that dies mid-task has its task run again on another (Dask's own
rescheduling); the output does not change, since every task is a pure
function of its file. Before any work, every worker's ``commcanary``
version is checked against the client's.

Use::

    from commcanary.distributed import cluster, import_kineto

    with cluster(workers=2) as client:          # or cluster("tcp://host:8786")
        imported = import_kineto(client, ["job/"])
    imported.write("job.trace.json")

Nothing here is imported by the core package: ``import commcanary`` never
needs ``distributed``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from commcanary import _core
from commcanary.distributed import _tasks
from commcanary.distributed.storage import FetchError, fetched, is_url, list_url
from commcanary.errors import ClusterError, InputError

if TYPE_CHECKING:
    from distributed import Client

    from commcanary.importers.kineto import KinetoImport

__all__ = ["check_workers", "cluster", "evidence_reads", "import_kineto", "kineto_inputs", "require_dask"]

#: ``gather`` or ``sharded`` forces the import's plan (for a job the sharded
#: plan takes); unset or ``auto``, :func:`choose_plan` picks it.
IMPORT_PLAN_VAR = "COMMCANARY_IMPORT_PLAN"

#: A whole number forces how many ranges of steps the sharded plan cuts
#: each shard into (at most the job's steps); unset, the plan picks from the
#: job's size and the cluster's threads (``ranges::range_count``).
IMPORT_RANGES_VAR = "COMMCANARY_IMPORT_RANGES"

#: The client's peak while it merges a job, per byte of the profiles it
#: gathers (measured at 1,024 ranks: 0.92 GiB for 157 MB of profiles).
GATHER_PEAK_PER_PROFILE_BYTE = 6

#: The share of this machine's available memory a gathered merge may take.
GATHER_MEMORY_SHARE = 0.5


def choose_plan(profile_bytes: int, available_bytes: int | None = None) -> str:
    """``gather`` when merging the job here fits: the profiles it would
    gather, times :data:`GATHER_PEAK_PER_PROFILE_BYTE`, within
    :data:`GATHER_MEMORY_SHARE` of the memory available here (the faster
    plan while the client can hold the job); ``sharded`` otherwise (the
    client then holds a few words per rank and per event).
    :data:`IMPORT_PLAN_VAR` overrides."""
    forced = os.environ.get(IMPORT_PLAN_VAR, "auto")
    if forced in ("gather", "sharded"):
        return forced
    if available_bytes is None:
        available_bytes = _available_memory()
    fits = profile_bytes * GATHER_PEAK_PER_PROFILE_BYTE <= GATHER_MEMORY_SHARE * available_bytes
    return "gather" if fits else "sharded"


def _available_memory() -> int:
    """Bytes of memory available to this process now (Linux's
    MemAvailable, else the machine's total; unknown counts as plenty)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (OSError, ValueError, AttributeError):
        return 1 << 62


#: Seconds to wait for a scheduler to answer, and for a first worker.
CONNECT_TIMEOUT_S = 10.0


def require_dask() -> None:
    """Raise :class:`ClusterError` naming the extra when ``distributed`` is
    not installed."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ClusterError("--cluster and --workers need Dask: pip install 'commcanary[dask]'") from None


@contextmanager
def cluster(
    address: str | None = None,
    *,
    workers: int | None = None,
    memory_limit: str | int | None = None,
    timeout_s: float = CONNECT_TIMEOUT_S,
) -> Iterator[Client]:
    """A checked :class:`distributed.Client`: connected to the scheduler at
    ``address``, or to a ``LocalCluster`` of ``workers`` single-threaded
    worker processes (each with ``memory_limit``, Dask's spelling: ``"1.5
    GiB"``) started here and stopped on exit.

    Raises :class:`ClusterError` for an unreachable scheduler, a cluster
    without workers, or a worker without this ``commcanary`` version.
    """
    require_dask()
    import logging

    from distributed import Client, LocalCluster

    if (address is None) == (workers is None):
        raise ClusterError("give a scheduler address or a number of workers, not both or neither")
    local = None
    try:
        if address is not None:
            try:
                # An address Dask cannot even parse is refused before a Client
                # exists (a half-made one complains again when collected).
                from distributed.comm.addressing import parse_address
                from distributed.comm.registry import get_backend

                get_backend(parse_address(address)[0])
            except Exception as exc:
                raise ClusterError(f"cannot reach the Dask scheduler at {address}: {_reason(exc)}") from None
            try:
                client = Client(address, timeout=timeout_s, set_as_default=False)
            except Exception as exc:  # OSError, timeouts (asyncio's on 3.10), a bad address scheme
                raise ClusterError(f"cannot reach the Dask scheduler at {address}: {_reason(exc)}") from None
        else:
            assert workers is not None
            if workers < 1:
                raise ClusterError("--workers must be at least 1")
            import dask
            from dask.utils import parse_bytes

            if memory_limit is not None and isinstance(memory_limit, str):
                try:
                    parse_bytes(memory_limit)
                except ValueError as exc:
                    raise ClusterError(f"--worker-memory {memory_limit}: {_reason(exc)}") from None
            try:
                with dask.config.set({"distributed.nanny.pre-spawn-environ": _worker_environ()}):
                    local = LocalCluster(
                        n_workers=workers,
                        threads_per_worker=1,
                        processes=True,
                        memory_limit=memory_limit if memory_limit is not None else "auto",
                        dashboard_address=":0",  # any free port: never a clash with another cluster
                        silence_logs=logging.ERROR,
                    )
                client = Client(local, set_as_default=False)
            except Exception as exc:  # a bad --worker-memory, workers that do not start
                raise ClusterError(f"cannot start a local Dask cluster: {_reason(exc)}") from None
        try:
            check_workers(client, timeout_s=timeout_s)
            yield client
        finally:
            client.close()
    finally:
        if local is not None:
            local.close()


def _worker_environ() -> dict[str, Any]:
    """Dask's environment for the worker processes it spawns, without its
    ``MALLOC_TRIM_THRESHOLD_=65536``: that setting makes glibc hand memory
    back to the system on nearly every free, and the core's readers, which
    allocate per event, ran 1.6x slower under it (measured: 18-21 ms against
    11-13 ms per 4.6 MB rank file). A cluster started elsewhere keeps its own
    setting (docs/fleet.md)."""
    import dask

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    return environ


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def check_workers(client: Client, *, timeout_s: float = CONNECT_TIMEOUT_S) -> dict[str, str]:
    """Every worker's ``commcanary`` version, checked against this client's
    before any work. Raises :class:`ClusterError` for no worker, a worker
    without ``commcanary``, or another version."""
    import asyncio

    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except (OSError, TimeoutError, asyncio.TimeoutError):
        raise ClusterError(f"the Dask cluster has no worker after {timeout_s:g} s") from None

    def probe() -> str | None:  # pickled by value: runs where commcanary may be missing
        try:
            import commcanary
        except ImportError:
            return None
        return str(getattr(commcanary, "__version__", "unknown"))

    with _cluster_faults():
        found: dict[str, str | None] = client.run(probe)
    mine = _core.__version__
    for worker, theirs in sorted(found.items()):
        if theirs is None:
            raise ClusterError(
                f"Dask worker {worker} does not have commcanary installed "
                f"(install commcanary {mine} on every worker)"
            )
        if theirs != mine:
            raise ClusterError(
                f"Dask worker {worker} has commcanary {theirs}, this client {mine} "
                "(install the same version on every worker)"
            )
    return {w: str(v) for w, v in found.items()}


@contextmanager
def _cluster_faults() -> Iterator[None]:
    """A lost scheduler, or a task that killed every worker it ran on,
    becomes one :class:`ClusterError` line."""
    import asyncio

    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError

    try:
        yield
    except KilledWorker as exc:
        raise ClusterError(f"a task killed every Dask worker it ran on: {_reason(exc)}") from None
    except ImportError as exc:  # a worker that joined after the check, without commcanary
        raise ClusterError(f"a Dask worker cannot run commcanary's tasks: {_reason(exc)}") from None
    except (CommClosedError, OSError, TimeoutError, asyncio.TimeoutError) as exc:
        raise ClusterError(f"lost the Dask cluster: {_reason(exc)}") from None
    except Exception as exc:
        if type(exc).__name__ == "CancelledError" or "cancelled" in type(exc).__name__.lower():
            raise ClusterError(f"lost the Dask cluster: {_reason(exc)}") from None
        raise


#: Most files one task reads: few enough that a worker holds a handful of
#: partials at a time, enough that the scheduler's cost per task (about a
#: millisecond on the client and on the worker) is paid once per batch.
FILES_PER_TASK = 16


def map_in_order(client: Client, task: Any, calls: list[tuple[Any, ...]]) -> Iterator[Any]:
    """``task(*args)`` for each of ``calls`` on the cluster, yielded in
    order as they are ready: files are batched into tasks of at most
    :data:`FILES_PER_TASK` (at least eight tasks per worker thread, so the
    work spreads), and each batch's result is let go once yielded."""
    futures = _submit_batches(client, functools.partial(_tasks.each, task), calls)
    with _cluster_faults():
        for future in futures:
            results = future.result()
            future.release()
            yield from results


def _gather_in_order(client: Client, task: Any, calls: list[tuple[Any, ...]]) -> list[Any]:
    """Every result of :func:`map_in_order`, in order."""
    return list(map_in_order(client, task, calls))


def import_kineto(
    client: Client,
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    rank: int | None = None,
    workload_name: str = "kineto-import",
    phase: str | None = None,
    clock_offsets: Mapping[int, float] | None = None,
    strict: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
) -> KinetoImport:
    """:func:`commcanary.importers.import_kineto` of a job's rank files on a
    Dask cluster: one task per file reads it into its profile, the merge
    runs here. The result, and the trace's bytes, are the single-process
    import's. ``cache_dir`` is a path on the workers' side.

    One file is the single-rank reference import and runs here (there is
    nothing to spread).
    """
    from commcanary.importers.kineto import job_import, offsets

    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    files = kineto_inputs(client, given)
    if len(files) == 1:
        return _import_one_here(
            files[0], rank=rank, workload_name=workload_name, phase=phase, cache_dir=cache_dir
        )
    wanted = offsets(clock_offsets)
    _core.check_kineto_job_options(
        len(files), workload_name=workload_name, phase=phase, rank=rank, clock_offsets=wanted, strict=strict
    )
    labels = [str(f) for f in files]
    cache = None if cache_dir is None else os.fspath(cache_dir)
    calls = [(_where(f), label, rank, cache) for f, label in zip(files, labels, strict=True)]
    options = _JobOptions(workload_name=workload_name, phase=phase, clock_offsets=wanted, strict=strict)
    with _cluster_faults():
        reads = _submit_batches(client, _tasks.read_ranks, calls)
        imported = _import_sharded(client, reads, labels, options)
        if imported is None:
            # Not a job the sharded plan takes (a rank in several windows, no
            # step markers): the profiles come here, decoded as each arrives
            # and its bytes let go, and the one-process merge runs.
            partials = _core.KinetoPartials()
            got = (p for f in reads for p in _release(client.submit(_tasks.partials_of, f, pure=False)))
            for label, partial in zip(labels, got, strict=True):
                partials.add(label, partial)
            imported = _core.import_kineto_partials(labels, partials, rank=rank, **options)
    trace, counts, partial = imported
    return job_import(trace, counts, partial)


class _JobOptions(TypedDict):
    """A job import's options, as the core's job entry points take them."""

    workload_name: str
    phase: str | None
    clock_offsets: dict[int, float] | None
    strict: bool


def _submit_batches(client: Client, task: Any, calls: list[tuple[Any, ...]]) -> list[Any]:
    """``task(batch)`` for batches of ``calls`` (as :func:`map_in_order`
    batches them), submitted; the futures, in order."""
    size = max(1, min(FILES_PER_TASK, -(-len(calls) // (8 * _threads(client)))))
    return [client.submit(task, calls[i : i + size], pure=False) for i in range(0, len(calls), size)]


def _threads(client: Client) -> int:
    """The cluster's worker threads (at least 1)."""
    return sum(w.get("nthreads", 1) for w in client.scheduler_info().get("workers", {}).values()) or 1


def _release(future: Any) -> Any:
    """A small future's result, the future let go."""
    result = future.result()
    future.release()
    return result


def _import_sharded(
    client: Client, reads: list[Any], labels: list[str], options: _JobOptions
) -> tuple[Any, Any, Any] | None:
    """The job imported by the sharded plan (``commcanary_core``'s
    ``import::kineto::sharded``): the client frames the job from each rank's
    head, workers cut the ranks they read into pieces per shard of groups,
    align and write each shard's events; the client places and joins them.
    ``None`` when the job is not for the plan, or when merging it here fits
    (:func:`choose_plan`)."""
    heads = _core.KinetoPartials()
    facts: list[bytes] = []
    named: list[bytes] = []
    where: list[tuple[int, int]] = []  # file -> (batch, index in it)
    profile_bytes = 0
    head_futures = [client.submit(_tasks.heads_of, future, pure=False) for future in reads]
    for b, future in enumerate(head_futures):
        for i, (partial, fact, sets, size) in enumerate(_release(future)):
            heads.add(labels[len(where)], partial)
            facts.append(fact)
            named.append(sets)
            profile_bytes += size
            where.append((b, i))
    if choose_plan(profile_bytes) == "gather":
        return None
    framed = _core.ShardedImport.frame(labels, heads, facts, **options)
    if framed is None:
        return None
    shape = bytes(framed.shape())
    entries: list[list[tuple[int, int]]] = [[] for _ in reads]
    windows: list[tuple[int, list[int]]] = []  # a rank in several files: its slot, its files
    for slot, files in enumerate(framed.slot_files()):
        if len(files) == 1:
            b, i = where[files[0]]
            entries[b].append((slot, i))
        else:
            windows.append((slot, files))
    of_group, count = framed.shard_map(named)
    bounds = framed.range_bounds(profile_bytes, count, _threads(client), _forced_ranges())
    per_shard = len(bounds) + 1
    splits = [
        client.submit(_tasks.batch_split, shape, r, e, of_group, count, bounds, pure=False)
        for r, e in zip(reads, entries, strict=True)
    ]
    for slot, files in windows:
        # The rank's windows joined on a worker, then cut like any rank.
        joined = client.submit(
            _tasks.join_files,
            [reads[where[f][0]] for f in files],
            [where[f][1] for f in files],
            [labels[f] for f in files],
            pure=False,
        )
        splits.append(
            client.submit(_tasks.split_one, shape, slot, joined, of_group, count, bounds, pure=False)
        )
    holders: dict[int, list[int]] = {}  # unit id -> batches with pieces of it
    ids = client.gather([client.submit(_tasks.shard_ids, split, pure=False) for split in splits])
    for read in reads:
        # The ranks are cut: the workers keep the pieces, not the profiles
        # too (Dask reads a rank again should a worker holding its pieces die).
        read.release()
    for b, id_list in enumerate(ids):
        for unit_id in id_list:
            holders.setdefault(unit_id, []).append(b)

    def submit_units(
        task: Any, units: list[list[int]], *extra: Any, per_unit: list[Any] | None = None
    ) -> list[Any]:
        """``task`` submitted on every unit (a unit: the ids of its ranges),
        a few units a Dask task (with ``per_unit[k]`` for unit ``k``): the
        tasks' futures, each giving its units' results in order. A task gets
        the splits of the batches holding its units' pieces (Dask runs it
        where most of them are and keeps the copies it moved)."""
        per_task = max(1, -(-len(units) // (8 * _threads(client))))
        futures = []
        for i in range(0, len(units), per_task):
            group = units[i : i + per_task]
            batches = sorted({b for unit in group for u in unit for b in holders[u]})
            more = [] if per_unit is None else [per_unit[i : i + per_task]]
            futures.append(
                client.submit(task, shape, [splits[b] for b in batches], group, *extra, *more, pure=False)
            )
        return futures

    def on_units(task: Any, units: list[list[int]], *extra: Any) -> list[Any]:
        """Each unit's result of ``task``, in order."""
        return [result for future in submit_units(task, units, *extra) for result in _release(future)]

    def settled(units: list[list[int]], task: Any, *extra: Any) -> tuple[list[list[int]], list[bytes]]:
        """Each unit's result once every unit's end is clean: a unit whose
        matching read past its end merged with the next, and run again
        (``ranges::settle``, in the core)."""
        results: list[tuple[bytes, bytes]] = on_units(task, units, *extra)
        while True:
            merged_units, merged = _core.ShardedImport.settle(units, [c for _, c in results], per_shard)
            if not merged:
                return units, [r for r, _ in results]
            earlier = {unit[0]: result for unit, result in zip(units, results, strict=True)}
            again = dict(zip(merged, on_units(task, [merged_units[i] for i in merged], *extra), strict=True))
            results = [again[i] if i in again else earlier[unit[0]] for i, unit in enumerate(merged_units)]
            units = merged_units

    units, votes = settled([[u] for u in sorted(holders)], _tasks.shards_votes)
    labels_bytes = bytes(framed.labels(votes))
    units, prepared = settled(units, _tasks.shards_prepare, labels_bytes)
    # The placements come back in unit order, as the units went in.
    placements = [bytes(p) for p in framed.place(prepared)]
    for future in submit_units(
        _tasks.shards_events, units, labels_bytes, options["phase"], per_unit=placements
    ):
        framed.add_events(_release(future))  # decoded as each task's arrive, the bytes let go
    result: tuple[Any, Any, Any] = framed.assemble()
    return result


def _forced_ranges() -> int | None:
    """The ranges :data:`IMPORT_RANGES_VAR` forces, if any."""
    raw = os.environ.get(IMPORT_RANGES_VAR, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def _where(path: str | os.PathLike[str]) -> str:
    """What a task opens for ``path``: a URL as given, a path made absolute
    (a relative one would name another file in a worker's own directory);
    the labels stay as given, as in the single-process run."""
    return path if isinstance(path, str) and is_url(path) else os.path.abspath(path)


def kineto_inputs(client: Client, given: list[str | os.PathLike[str]]) -> list[str | Path]:
    """The Kineto trace files ``given`` names, in order: local paths and
    directories as :func:`commcanary.importers.kineto_files` lists them,
    URLs as :func:`.storage.list_url` does (a directory URL's files are
    sniffed by tasks on the cluster, so the client reads none of them).
    :class:`InputError` for what does not exist, holds no trace, or is
    named twice."""
    from commcanary.importers.kineto import _SUFFIXES, check_named_once, kineto_files

    files: list[str | Path] = []
    for raw in given:
        if not (isinstance(raw, str) and is_url(raw)):
            files.extend(kineto_files([raw]))
            continue
        urls = list_url(raw, _SUFFIXES)
        if urls != [raw]:
            kept = [
                u
                for u, ok in zip(
                    urls, map_in_order(client, _tasks.looks_like_kineto, [(u,) for u in urls]), strict=True
                )
                if ok
            ]
            if not kept:
                raise InputError(f"{raw} is a directory with no .json or .json.gz Kineto trace in it")
            urls = kept
        files.extend(urls)
    check_named_once(files, lambda f: f if isinstance(f, str) else str(f.resolve()))
    return files


def _import_one_here(
    file: str | Path, *, rank: int | None, workload_name: str, phase: str | None, cache_dir: Any
) -> KinetoImport:
    """The single-rank reference import of one file, here (a URL's file
    fetched into a local copy first; its errors name the URL)."""
    from commcanary.errors import CommCanaryError
    from commcanary.importers.kineto import import_kineto as import_here

    if isinstance(file, Path):
        return import_here([file], rank=rank, workload_name=workload_name, phase=phase, cache_dir=cache_dir)
    try:
        with fetched(file, where="this host") as local:
            try:
                return import_here(
                    [Path(local)], rank=rank, workload_name=workload_name, phase=phase, cache_dir=cache_dir
                )
            except CommCanaryError as exc:
                raise type(exc)(str(exc).replace(local, file)) from None
    except FetchError as exc:
        raise InputError(f"{file}: {exc}") from None


#: What :func:`evidence_reads` returns: the dumps' labels and partials, the
#: traces' labels and partials, in the analysis' order.
EvidenceReads = tuple[
    list[str],
    list[tuple[bytes | None, int | None, str | None]],
    list[str],
    list[tuple[bytes | None, bytes | None, str | None, str]],
]


def evidence_reads(client: Client, paths: list[str], analysis: str, cache_dir: str | None) -> EvidenceReads:
    """The dumps and profiler traces ``analysis`` (``hang``, ``stragglers``,
    ``steps``, ``timeline``) reads in ``paths``, each read by a task on the
    cluster: listed and classified here (the files' first bytes), read and
    reduced there. The analysis then runs here on these partials (pass them
    as the core's ``reads``), and gives the single-process result."""
    dumps, traces = _core.evidence_files(paths, analysis, cache_dir=cache_dir)
    dump_partials = _gather_in_order(client, _tasks.dump_partial, [(os.path.abspath(p),) for p, _ in dumps])
    trace_calls = [(os.path.abspath(p), label, None, cache_dir) for p, label in traces]
    trace_partials = _gather_in_order(client, _tasks.kineto_partial, trace_calls)
    return ([label for _, label in dumps], dump_partials, [label for _, label in traces], trace_partials)
