"""System settings an admin changes on the settings page, and what they
do: how long pushes are kept (older ones, then the artifacts no push
refers to, are deleted by :func:`sweep`), and the largest upload (at most
the ``--max-upload-bytes`` the server was started with)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import delete, exists, select, update
from sqlalchemy.orm import Session as DbSession

from commcanary.errors import InputError
from commcanary.server.config import ServerConfig
from commcanary.server.schema import Analysis, Artifact, Push, Setting

if TYPE_CHECKING:
    from commcanary.server.app import Context

__all__ = ["SystemSettings", "load", "save", "sweep"]

log = logging.getLogger("commcanary.server.settings")

#: The smallest upload limit a setting may give, bytes.
MIN_UPLOAD_BYTES = 1 << 10
#: The longest retention a setting may give, days.
MAX_RETENTION_DAYS = 36_500


@dataclass(frozen=True)
class SystemSettings:
    #: Pushes older than this many days are deleted; 0 keeps everything.
    retention_days: int
    #: The largest upload, bytes as sent.
    max_upload_bytes: int


def load(db: DbSession, config: ServerConfig) -> SystemSettings:
    stored = dict(db.execute(select(Setting.key, Setting.value)).tuples().all())
    return SystemSettings(
        retention_days=int(stored.get("retention_days", "0")),
        max_upload_bytes=min(
            int(stored.get("max_upload_bytes", config.max_upload_bytes)), config.max_upload_bytes
        ),
    )


def parse(config: ServerConfig, retention_days: str, max_upload_bytes: str) -> SystemSettings:
    """The settings a form gives; :class:`InputError` naming the field."""
    if not retention_days.strip().isdigit() or int(retention_days) > MAX_RETENTION_DAYS:
        raise InputError(
            f"retention_days: a whole number of days from 0 (keep everything) to {MAX_RETENTION_DAYS}"
        )
    text = max_upload_bytes.strip()
    if not text.isdigit() or not MIN_UPLOAD_BYTES <= int(text) <= config.max_upload_bytes:
        raise InputError(
            f"max_upload_bytes: from {MIN_UPLOAD_BYTES} to {config.max_upload_bytes} (the server's --max-upload-bytes)"
        )
    return SystemSettings(int(retention_days), int(text))


def save(db: DbSession, settings: SystemSettings) -> None:
    for key, value in (
        ("retention_days", settings.retention_days),
        ("max_upload_bytes", settings.max_upload_bytes),
    ):
        row = db.get(Setting, key)
        if row is None:
            db.add(Setting(key=key, value=str(value)))
        else:
            row.value = str(value)


def sweep(ctx: Context, now: float | None = None) -> tuple[int, int]:
    """Deletes the pushes past the retention, then the artifacts no push
    refers to: their rows, then (once that is committed, and if no push
    stored the same bytes again meanwhile) their files. ``(pushes,
    artifacts)`` deleted."""
    with ctx.db.session() as db:
        pushes, orphans = _sweep_rows(db, ctx.config, now)
    for digest in orphans:
        with ctx.db.session() as db:
            if db.get(Artifact, digest) is None:
                ctx.store.path_of(digest).unlink(missing_ok=True)
    return pushes, len(orphans)


def _sweep_rows(db: DbSession, config: ServerConfig, now: float | None) -> tuple[int, list[str]]:
    days = load(db, config).retention_days
    if days <= 0:
        return 0, []
    cutoff = (now if now is not None else time.time()) - days * 86_400
    old = select(Push.id).where(Push.pushed_at < cutoff)
    db.execute(update(Analysis).where(Analysis.result_push_id.in_(old)).values(result_push_id=None))
    gone = db.execute(delete(Push).where(Push.pushed_at < cutoff).returning(Push.id)).all()
    pushes = len(gone)
    orphans = db.scalars(select(Artifact.digest).where(~exists().where(Push.digest == Artifact.digest))).all()
    if orphans:
        db.execute(delete(Artifact).where(Artifact.digest.in_(orphans)))
    if pushes or orphans:
        log.info("retention", extra={"fields": {"pushes": pushes, "artifacts": len(orphans), "days": days}})
    return pushes, list(orphans)
