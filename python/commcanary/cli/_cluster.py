"""The options that run a command's many inputs on a Dask cluster
(``--cluster ADDRESS``, ``--workers N``, ``--worker-memory LIMIT``), shared
by every command that takes them, and the client they give."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from commcanary.cli import EXIT_USAGE, fail

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["ClusterAddress", "WorkerMemory", "Workers", "client_for"]

ClusterAddress = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        metavar="ADDRESS",
        help="Run the per-file work on the Dask scheduler at ADDRESS (tcp://host:8786); its workers read "
        "the inputs from storage they share. Needs commcanary[dask].",
    ),
]
Workers = Annotated[
    int | None,
    typer.Option(
        "--workers",
        metavar="N",
        help="Run the per-file work on a Dask LocalCluster of N worker processes, started and stopped here. "
        "Needs commcanary[dask].",
    ),
]
WorkerMemory = Annotated[
    str | None,
    typer.Option(
        "--worker-memory",
        metavar="LIMIT",
        help="With --workers: each worker's memory limit, in Dask's spelling ('1.5GiB'; default: a share "
        "of this machine's memory).",
    ),
]


def _is_size(memory: str) -> bool:
    """Whether Dask reads ``memory`` as a size (true without Dask: the
    cluster then names the missing extra)."""
    try:
        from dask.utils import parse_bytes
    except ImportError:
        return True
    try:
        parse_bytes(memory)
    except ValueError:
        return False
    return True


@contextmanager
def client_for(address: str | None, workers: int | None, memory: str | None) -> Iterator[Client | None]:
    """The checked Dask client the options ask for, or ``None`` (run here)."""
    if address is not None and workers is not None:
        fail("--cluster and --workers are alternatives; give one", EXIT_USAGE)
    if memory is not None and workers is None:
        fail("--worker-memory needs --workers", EXIT_USAGE)
    if workers is not None and workers < 1:
        fail("--workers must be at least 1", EXIT_USAGE)
    if memory is not None and not _is_size(memory):
        fail(f"--worker-memory {memory} is not a size (e.g. 1.5GiB, 800MB)", EXIT_USAGE)
    if address is None and workers is None:
        yield None
        return
    from commcanary.distributed import cluster

    with cluster(address, workers=workers, memory_limit=memory) as client:
        yield client
