"""The server's tables (SQLAlchemy, one schema for SQLite and PostgreSQL;
:mod:`.migrations` creates and evolves it). Times are seconds since the
epoch (UTC); secrets are stored only as hashes."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "ROLES",
    "Analysis",
    "ApiToken",
    "Artifact",
    "Base",
    "LoginFailure",
    "Push",
    "Session",
    "Setting",
    "Share",
    "User",
    "Workload",
]

#: Roles, from most to least privileged.
ROLES = ("root", "admin", "user")


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(8))
    created_at: Mapped[float] = mapped_column(Float)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)


class Session(Base):
    """A signed-in browser: the cookie's token by its hash."""

    __tablename__ = "sessions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    csrf: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float)
    last_seen: Mapped[float] = mapped_column(Float)


class ApiToken(Base):
    """A token for CI and agents, shown once, kept by its hash."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    last_used: Mapped[float | None] = mapped_column(Float, nullable=True)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class LoginFailure(Base):
    """A failed login, by name and by address (the rate limit counts them)."""

    __tablename__ = "login_failures"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), index=True)
    address: Mapped[str] = mapped_column(String(64), index=True)
    at: Mapped[float] = mapped_column(Float, index=True)


class Workload(Base):
    """A job (or a benchmark lane): what pushes go to."""

    __tablename__ = "workloads"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[float] = mapped_column(Float)


class Share(Base):
    __tablename__ = "shares"
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)


class Artifact(Base):
    """A stored file, once, by its BLAKE3 digest."""

    __tablename__ = "artifacts"
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(40))
    format: Mapped[str] = mapped_column(String(64))
    facts: Mapped[str] = mapped_column(Text)  # canonical JSON object
    signed_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    stored_at: Mapped[float] = mapped_column(Float)


class Push(Base):
    """An artifact pushed to a workload (with the branch and commit it is for)."""

    __tablename__ = "pushes"
    __table_args__ = (Index("ix_pushes_workload_branch", "workload_id", "branch"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id", ondelete="CASCADE"), index=True)
    digest: Mapped[str] = mapped_column(ForeignKey("artifacts.digest"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(40))
    verdict: Mapped[str | None] = mapped_column(String(16), nullable=True)
    branch: Mapped[str | None] = mapped_column(String(255), nullable=True)
    commit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    pushed_by: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    pushed_at: Mapped[float] = mapped_column(Float)


class Setting(Base):
    """A system setting changed on the settings page (:mod:`.settings`)."""

    __tablename__ = "settings"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Analysis(Base):
    """A diagnosis queued from raw evidence, run in the background."""

    __tablename__ = "analyses"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id", ondelete="CASCADE"), index=True)
    analysis: Mapped[str] = mapped_column(String(16))  # hang | stragglers
    status: Mapped[str] = mapped_column(String(16), index=True)  # queued | running | done | failed
    evidence: Mapped[str] = mapped_column(Text)  # canonical JSON list of push ids
    progress: Mapped[str] = mapped_column(String(255), default="")
    result_push_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
