"""``commcanary serve``: the team's place for jobs, diagnoses and gates.

An ASGI application (FastAPI on Starlette, served by uvicorn) with its pages
rendered server-side from Jinja2 templates (no scripts), a database through
SQLAlchemy (SQLite in the data directory by default, PostgreSQL for teams)
migrated by Alembic, and artifacts stored content-addressed (BLAKE3) on disk.
Optional: ``pip install commcanary[server]``; the core package never imports
this package.

Modules, each owning one thing:

* :mod:`.config`: the server's settings (data directory, database, limits);
* :mod:`.schema`: the tables; :mod:`.database`: the engine and migrations;
* :mod:`.credentials`: passwords (argon2id), random tokens and their hashes,
  the cookie signing key, the first-start bootstrap token;
* :mod:`.auth`: who a request is (session cookie or API token), CSRF, the
  login rate limit, who may see what;
* :mod:`.store`: uploads streamed to disk, bounded, hashed, kept once;
* :mod:`.ingest`: what an upload is (the core's readers) and where it goes;
* :mod:`.pages` (HTML) and :mod:`.api` (JSON, OpenAPI) routes;
* :mod:`.app`: the application, put together;
* :mod:`.push`: the client side of ``commcanary push``.
"""

from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name: str) -> object:
    if name == "create_app":
        from commcanary.server.app import create_app

        return create_app
    raise AttributeError(name)
