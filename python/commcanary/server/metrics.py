"""What ``/metrics`` says (Prometheus' text format) and the structured
request log: one JSON object per line per request.

Labels are bounded: a request is labelled by its route's template
(``/workloads/{workload_id}``, never the id) or ``unmatched``, its method
and its status class. The storage and queue figures are read from the
database when scraped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from starlette.requests import Request
from starlette.responses import Response

from commcanary.server.schema import Analysis, Artifact, Push, User, Workload

if TYPE_CHECKING:
    from commcanary.server.app import Context

__all__ = ["JsonLines", "Metrics", "structured_logs"]

access_log = logging.getLogger("commcanary.server.access")

#: Methods counted by name (any other is ``other``: a label's values stay bounded).
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: Page latency buckets, seconds.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _Stored(Collector):
    """Figures read from the database at each scrape."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self.ctx.db.session() as db:
            artifacts = db.execute(select(func.count(), func.coalesce(func.sum(Artifact.size), 0))).one()
            queued = dict(db.execute(select(Analysis.status, func.count()).group_by(Analysis.status)).all())
            counts = {
                "workloads": db.scalar(select(func.count()).select_from(Workload)) or 0,
                "pushes": db.scalar(select(func.count()).select_from(Push)) or 0,
                "users": db.scalar(select(func.count()).select_from(User)) or 0,
            }
        yield GaugeMetricFamily(
            "commcanary_artifacts", "Artifacts stored (each once, by digest).", value=artifacts[0]
        )
        yield GaugeMetricFamily(
            "commcanary_artifact_bytes", "Bytes of the stored artifacts.", value=artifacts[1]
        )
        analyses = GaugeMetricFamily("commcanary_analyses", "Analyses by status.", labels=["status"])
        for status in ("queued", "running", "done", "failed"):
            analyses.add_metric([status], queued.get(status, 0))
        yield analyses
        yield GaugeMetricFamily(
            "commcanary_analysis_queue_depth", "Analyses waiting to run.", value=queued.get("queued", 0)
        )
        for name, value in counts.items():
            yield GaugeMetricFamily(f"commcanary_{name}", f"The server's {name}.", value=value)


class Metrics:
    """The server's registry and the middleware that counts requests."""

    def __init__(self, ctx: Context) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "commcanary_http_requests",
            "HTTP requests, by method, route template and status class.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "commcanary_http_request_duration_seconds",
            "HTTP request latency, by route template.",
            ["route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.uploads = Counter(
            "commcanary_upload_bytes", "Bytes received in uploads.", registry=self.registry
        )
        self.registry.register(_Stored(ctx))

    async def middleware(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        start = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            elapsed = time.perf_counter() - start
            route = _route(request)
            method = request.method if request.method in _METHODS else "other"
            self.requests.labels(method, route, f"{status // 100}xx").inc()
            self.latency.labels(route).observe(elapsed)
            access_log.info(
                "request",
                extra={
                    "fields": {
                        "method": request.method,
                        "route": route,
                        "status": status,
                        "ms": round(elapsed * 1000, 2),
                        "client": request.client.host if request.client else None,
                    }
                },
            )


def _route(request: Request) -> str:
    route: Any = request.scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "unmatched"


class JsonLines(logging.Formatter):
    """A log record as one JSON object: time, level, logger, message, and
    the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            doc.update(fields)
        if record.exc_info:
            doc["error"] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


def structured_logs() -> None:
    """Every log line on stderr as one JSON object (requests, analyses,
    uvicorn's own lines), in this process."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
