"""The application: settings, database, store and routes put together.

:func:`create_app` builds it for a :class:`.config.ServerConfig`: the data
directory prepared, the schema migrated, what an interrupted upload left
removed, the bootstrap token written while the server has no root account,
the background analyses started. Every response carries the
Content-Security-Policy and the headers that keep pages out of frames and
caches; every route but ``/healthz`` asks who the caller is.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI
from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from commcanary.errors import InputError
from commcanary.server.config import ServerConfig
from commcanary.server.credentials import CookieSigner, write_bootstrap_token
from commcanary.server.database import Database
from commcanary.server.schema import User
from commcanary.server.store import Store

__all__ = ["Context", "create_app"]

log = logging.getLogger("commcanary.server")

#: The server's pages load nothing and run nothing; forms post to the server.
SERVER_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)


@dataclass
class Context:
    """What every route needs: the settings, the database, the store, the
    cookie signer."""

    config: ServerConfig
    db: Database
    store: Store
    signer: CookieSigner

    def has_root(self) -> bool:
        with self.db.session() as s:
            return s.scalar(select(User.id).where(User.role == "root")) is not None

    def bootstrap(self) -> bool:
        """Writes the bootstrap token while there is no root account; whether
        the server waits for its setup."""
        if self.has_root():
            self.config.bootstrap_token_path.unlink(missing_ok=True)
            return False
        write_bootstrap_token(self.config.bootstrap_token_path)
        return True


def create_app(config: ServerConfig) -> FastAPI:
    """The server's ASGI application."""
    config.prepare()
    db = Database(config.database)
    db.migrate()
    store = Store(config)
    left = store.clean()
    if left:
        log.info("removed %d unfinished upload(s)", left)
    ctx = Context(config, db, store, CookieSigner(config.cookie_key_path))
    ctx.bootstrap()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        from commcanary.server.analyses import Analyses

        worker = Analyses(ctx)
        worker.start()
        try:
            yield
        finally:
            worker.stop()
            db.dispose()

    app = FastAPI(
        title="commcanary server",
        version=_version(),
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.ctx = ctx
    from commcanary.server.metrics import Metrics

    metrics = Metrics(ctx)
    app.state.metrics = metrics

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        refused = _body_refused(request)
        response = refused if refused is not None else await call_next(request)
        response.headers.setdefault("Content-Security-Policy", SERVER_CSP)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    app.middleware("http")(metrics.middleware)

    @app.exception_handler(InputError)
    async def refused(_request: Request, exc: InputError) -> Response:
        """What a caller sent that the server does not take: 422, the reason."""
        return JSONResponse({"detail": str(exc)}, status_code=422)

    from commcanary.server import api, pages

    app.include_router(api.router)
    app.add_api_route("/metrics", api.metrics, methods=["GET"], include_in_schema=False)
    app.include_router(pages.router)
    return app


#: The largest request body anywhere but an upload (forms, JSON), bytes.
MAX_BODY_BYTES = 1 << 20
#: The route whose body is an upload (streamed to disk, bounded there).
UPLOAD_PATH = "/api/v1/artifacts"


def _body_refused(request: Request) -> Response | None:
    """A request whose body would be read into memory whole (a form, JSON)
    without a length, or longer than :data:`MAX_BODY_BYTES`, is refused
    before it is read."""
    if request.method not in ("POST", "PUT", "PATCH") or request.url.path == UPLOAD_PATH:
        return None
    length = request.headers.get("content-length")
    if length is None:
        if request.headers.get("transfer-encoding"):
            return JSONResponse({"detail": "a request body needs a Content-Length"}, status_code=411)
        return None
    if not length.isdigit() or int(length) > MAX_BODY_BYTES:
        return JSONResponse({"detail": f"the request body is over {MAX_BODY_BYTES} bytes"}, status_code=413)
    return None


#: How ``commcanary serve --workers N`` hands its settings to each worker
#: process (uvicorn imports :func:`app_from_environment` there).
CONFIG_VAR = "COMMCANARY_SERVE_CONFIG"


def config_to_environment(config: ServerConfig) -> str:
    import orjson

    fields = {k: v for k, v in config.__dict__.items() if k != "extra"}
    fields["data_dir"] = str(config.data_dir.resolve())
    return orjson.dumps(fields).decode()


def app_from_environment() -> FastAPI:
    """The application of a worker process started by ``commcanary serve
    --workers N``: the settings the parent put in :data:`CONFIG_VAR`."""
    import os
    from pathlib import Path

    import orjson

    from commcanary.server.metrics import structured_logs

    structured_logs()
    fields = orjson.loads(os.environ[CONFIG_VAR])
    fields["data_dir"] = Path(fields["data_dir"])
    return create_app(ServerConfig(**fields))


def _version() -> str:
    from commcanary import __version__

    return str(__version__)
