"""Who hung, and where: :func:`diagnose_hang` over a job's surviving evidence.

Every file is read and classified, every dump decoded (pickles without
running anything), and the diagnosis computed in Rust
(``rust/commcanary-core/src/analysis/hang/``); this module wraps the result.
The document is canonical JSON: the same evidence gives the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commcanary import _core
from commcanary.analysis import _evidence
from commcanary.formats import HANG_FORMAT

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["HANG_FORMAT", "HangReport", "diagnose_hang"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class HangReport:
    """A hang diagnosis: the verdict, the lines a person reads first, and the
    ``commcanary.hang.v1`` document (parsed, and its canonical bytes)."""

    verdict: str
    lines: tuple[str, ...]
    data: bytes = field(repr=False)
    document: dict[str, Any] = field(repr=False)

    @property
    def root(self) -> list[dict[str, Any]]:
        """The root ranks, each with its group, sequence number, op and reason."""
        return list(self.document["root"])

    @property
    def partial_collectives(self) -> list[dict[str, Any]]:
        """Collectives some members issued and others never reached."""
        return list(self.document["partial_collectives"])

    @property
    def mismatches(self) -> list[dict[str, Any]]:
        """Collectives whose op, dtypes or sizes disagree across members."""
        return list(self.document["mismatches"])

    @property
    def wait_for(self) -> list[dict[str, Any]]:
        """Wait-for edges: ``rank`` waits for ``waits_for`` in ``group``."""
        return list(self.document["wait_for"])

    @property
    def ranks(self) -> list[dict[str, Any]]:
        """Each rank's state, last completed and in-flight call."""
        return list(self.document["ranks"])

    @property
    def hung(self) -> bool:
        """Whether a hang was found."""
        return self.verdict == "hang"

    def write(self, path: PathLike) -> Path:
        """Write the document atomically (canonical JSON)."""
        _core.write_atomic(os.fspath(path), self.data)
        return Path(path)

    def render_html(self) -> str:
        """The self-contained HTML view (the ranks-by-groups grid, the wait-for chain)."""
        from commcanary.html_hang import render_hang

        return render_hang(self.document)


def diagnose_hang(
    paths: PathLike | Iterable[PathLike], *, cache_dir: PathLike | None = None, client: Client | None = None
) -> HangReport:
    """Diagnose a hang from any mix of Flight Recorder dumps (pickle or JSON),
    profiler traces (windowed or not), stack dumps and exception texts, given
    as files or directories.

    ``cache_dir`` caches parsed profiler traces by content (none by default).
    With a Dask ``client``, the dumps and traces are read by tasks on its
    workers (the same report).
    Raises :class:`~commcanary.errors.InputError` on bad evidence (a pickle
    that tries to import anything, a truncated dump, dumps of different jobs,
    no evidence at all), naming the file.
    """
    result, data, document = _evidence.run(_core.diagnose_hang, "hang", paths, cache_dir, client)
    return HangReport(
        verdict=result["verdict"],
        lines=tuple(result["lines"]),
        data=data,
        document=document,
    )
