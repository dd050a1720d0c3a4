"""Background analyses of raw evidence: a queue in the database, run by a
thread in the server with the same code as ``commcanary diagnose``.

A queued analysis is taken (``queued`` → ``running``), its evidence laid
out in a temporary directory under the names it was pushed with, diagnosed,
and the resulting document kept as an artifact and pushed to the workload
(``done``), or its error kept (``failed``). An analysis a stopped server
left ``running`` is queued again at the next start, and a server asked to
stop finishes the analysis it is running first.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
from sqlalchemy import select, update

from commcanary.errors import CommCanaryError
from commcanary.server.schema import Analysis, Push

if TYPE_CHECKING:
    from commcanary.server.app import Context

__all__ = ["ANALYSES", "Analyses"]

log = logging.getLogger("commcanary.server.analyses")

#: What an analysis may be.
ANALYSES = ("hang", "stragglers")
_POLL_S = 0.5
#: How often pushes past the retention are deleted, seconds.
_SWEEP_EVERY_S = 600.0


class Analyses:
    """The thread that runs queued analyses."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="commcanary-analyses", daemon=True)

    def start(self) -> None:
        with self.ctx.db.session() as s:
            s.execute(
                update(Analysis)
                .where(Analysis.status == "running")
                .values(status="queued", progress="requeued")
            )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=600)

    def queue_depth(self) -> int:
        with self.ctx.db.session() as s:
            return len(s.scalars(select(Analysis.id).where(Analysis.status == "queued")).all())

    def _run(self) -> None:
        swept = -_SWEEP_EVERY_S
        while not self._stop.is_set():
            if time.monotonic() - swept > _SWEEP_EVERY_S:
                swept = time.monotonic()
                try:
                    from commcanary.server.settings import sweep

                    sweep(self.ctx)
                except Exception:  # a failed sweep is retried at the next one
                    log.exception("retention sweep failed")
            try:
                ran = self._one()
            except Exception:  # a bug in one analysis must not stop the queue
                log.exception("analysis failed")
                ran = True
            if not ran:
                self._stop.wait(_POLL_S)

    def _take(self) -> Analysis | None:
        with self.ctx.db.session() as s:
            job = s.scalars(
                select(Analysis).where(Analysis.status == "queued").order_by(Analysis.id).limit(1)
            ).first()
            if job is None:
                return None
            taken = s.execute(
                update(Analysis)
                .where(Analysis.id == job.id, Analysis.status == "queued")
                .values(status="running", started_at=time.time(), progress="reading the evidence")
                .returning(Analysis.id)
            ).first()
            return job if taken is not None else None

    def _one(self) -> bool:
        job = self._take()
        if job is None:
            return False
        try:
            results = self._diagnose(job)
        except CommCanaryError as exc:
            self._finish(job.id, status="failed", error=str(exc), progress="")
            return True
        self._keep(job, results)
        return True

    def _diagnose(self, job: Analysis) -> list[tuple[bytes, str, str | None]]:
        """The diagnosis' document, then the job's timeline (Perfetto) with
        the diagnosis marked on it when the evidence gives one; each with the
        name it is pushed as and, where the run has more than the document
        carries, its page."""
        from commcanary.analysis.hang import diagnose_hang
        from commcanary.analysis.stragglers import diagnose_stragglers
        from commcanary.exporters.timeline import timeline

        push_ids: list[int] = orjson.loads(job.evidence)
        with self.ctx.db.session() as s:
            pushes = s.scalars(
                select(Push).where(Push.id.in_(push_ids), Push.workload_id == job.workload_id)
            ).all()
            files = [(p.name, p.digest) for p in pushes]
        with tempfile.TemporaryDirectory(prefix="analysis-", dir=self.ctx.config.tmp_dir) as d:
            evidence = Path(d) / "evidence"
            evidence.mkdir()
            used: set[str] = set()
            for name, digest in files:
                os.link(self.ctx.store.path_of(digest), evidence / _unique(name, used))
            self._progress(job.id, f"diagnosing {len(files)} file(s)")
            hang = None
            page = None
            # The timeline reads the same files: parsed once, served to it from this cache.
            cache = Path(d) / "cache"
            if job.analysis == "hang":
                data, name = diagnose_hang(evidence, cache_dir=cache).data, "hang.json"
                hang = Path(d) / name
                hang.write_bytes(data)
            else:
                report = diagnose_stragglers(evidence, cache_dir=cache)
                data, name = report.data, "stragglers.json"
                # Its page with the per-rank timeline, which needs the member
                # table the document does not carry.
                page = report.render_html()
            results: list[tuple[bytes, str, str | None]] = [(data, name, page)]
            self._progress(job.id, "drawing the timeline")
            try:
                results.append((timeline(evidence, hang=hang, cache_dir=cache).data, "timeline.json", None))
            except CommCanaryError as exc:  # evidence without calls to draw: the diagnosis stands alone
                log.info("no timeline", extra={"fields": {"analysis": job.id, "why": str(exc)}})
            # The evidence is named as it was pushed, not by the server's
            # temporary directory (a random name, so the bytes say nothing else).
            prefix = f'"{evidence}/'
            return [
                (
                    data.replace(prefix.encode(), b'"'),
                    name,
                    None if page is None else page.replace(f"{evidence}/", ""),
                )
                for data, name, page in results
            ]

    def _keep(self, job: Analysis, results: list[tuple[bytes, str, str | None]]) -> None:
        """Each result kept and pushed to the workload (its owner's), the
        analysis marked done with the diagnosis' push."""
        import blake3

        from commcanary.server.auth import Principal
        from commcanary.server.ingest import ingest
        from commcanary.server.schema import User, Workload
        from commcanary.server.store import Received

        with self.ctx.db.session() as s:
            workload = s.get(Workload, job.workload_id)
            owner = s.get(User, workload.owner_id) if workload else None
            if workload is None or owner is None:
                s.execute(
                    update(Analysis)
                    .where(Analysis.id == job.id)
                    .values(status="failed", error="the workload is gone")
                )
                return
            principal = Principal(owner.id, owner.name, owner.role, "server")
            pushed = []
            for data, name, page in results:
                fd, tmp = tempfile.mkstemp(prefix="result-", dir=self.ctx.config.tmp_dir)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                received = Received(Path(tmp), blake3.blake3(data).hexdigest(), len(data))
                done = ingest(
                    s,
                    self.ctx.store,
                    principal,
                    received,
                    name=name,
                    workload=workload.name,
                    branch=None,
                    commit=None,
                    signature=None,
                )
                pushed.append(done.push_id)
                if page is not None:
                    self.ctx.store.keep_page(done.digest, page)
            s.execute(
                update(Analysis)
                .where(Analysis.id == job.id)
                .values(status="done", progress="", finished_at=time.time(), result_push_id=pushed[0])
            )

    def _progress(self, job_id: int, text: str) -> None:
        with self.ctx.db.session() as s:
            s.execute(update(Analysis).where(Analysis.id == job_id).values(progress=text[:255]))

    def _finish(self, job_id: int, *, status: str, error: str | None, progress: str) -> None:
        with self.ctx.db.session() as s:
            s.execute(
                update(Analysis)
                .where(Analysis.id == job_id)
                .values(status=status, error=error, progress=progress, finished_at=time.time())
            )


def _unique(name: str, used: set[str]) -> str:
    candidate, n = name, 1
    while candidate in used:
        n += 1
        candidate = f"{n}-{name}"
    used.add(candidate)
    return candidate
