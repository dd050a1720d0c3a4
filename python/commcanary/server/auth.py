"""Who a request is, and what they may see.

A browser carries a session cookie: a random token, signed with the
server's key (:class:`.credentials.CookieSigner`), kept in the database by
its hash, ending after ``session_idle_s`` unused or ``session_max_s`` in
all, and at logout. Every form carries the session's CSRF token (forms
before a session, login and setup, a signed double-submit cookie's). A
program sends ``Authorization: Bearer TOKEN``, an API token made on the
settings page, kept by its hash, revocable. Failed logins are counted per
name and per address; past the limits, logins are refused for the window.

Users see their own workloads and those shared with them; admins and root
see all. An object a principal may not see is answered as one that does
not exist.
"""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, delete, func, or_, select
from sqlalchemy.orm import Session as DbSession
from starlette.requests import Request

from commcanary.server.config import ServerConfig
from commcanary.server.credentials import CookieSigner, new_token, token_hash
from commcanary.server.schema import ApiToken, LoginFailure, Session, Share, User, Workload

__all__ = [
    "ANON_CSRF_COOKIE",
    "SESSION_COOKIE",
    "Principal",
    "authenticate",
    "can_see",
    "end_session",
    "login_refused",
    "record_failure",
    "start_session",
    "visible_workloads",
]

SESSION_COOKIE = "commcanary_session"
ANON_CSRF_COOKIE = "commcanary_csrf"
#: A session's or token's last use is written at most this often (seconds):
#: a busy CI token does not write a row per request.
_TOUCH_EVERY_S = 30.0


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    user_id: int
    name: str
    role: str
    #: ``session`` (a browser) or ``token`` (an API token).
    via: str
    #: The session's CSRF token (``""`` for a token caller).
    csrf: str = ""
    session_id: int | None = None

    @property
    def is_admin(self) -> bool:
        return self.role in ("root", "admin")


def client_address(request: Request) -> str:
    return (request.client.host if request.client else "unknown")[:64]


def authenticate(
    request: Request, db: DbSession, config: ServerConfig, signer: CookieSigner
) -> Principal | None:
    """The caller of ``request``, or ``None``."""
    header = request.headers.get("authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        row = db.execute(
            select(ApiToken, User)
            .join(User, User.id == ApiToken.user_id)
            .where(ApiToken.token_hash == token_hash(token.strip()), ApiToken.revoked_at.is_(None))
        ).first()
        if row is None or row[1].disabled:
            return None
        api_token, user = row
        now = time.time()
        if api_token.last_used is None or now - api_token.last_used > _TOUCH_EVERY_S:
            api_token.last_used = now
        return Principal(user.id, user.name, user.role, "token")
    raw = signer.unsign(request.cookies.get(SESSION_COOKIE))
    if raw is None:
        return None
    now = time.time()
    found = db.execute(
        select(Session, User)
        .join(User, User.id == Session.user_id)
        .where(Session.token_hash == token_hash(raw))
    ).first()
    if found is None:
        return None
    session, user = found
    if (
        user.disabled
        or now - session.last_seen > config.session_idle_s
        or now - session.created_at > config.session_max_s
    ):
        db.delete(session)
        return None
    if now - session.last_seen > _TOUCH_EVERY_S:
        session.last_seen = now
    return Principal(user.id, user.name, user.role, "session", session.csrf, session.id)


def start_session(db: DbSession, user: User, signer: CookieSigner) -> str:
    """A new session for ``user``: the signed cookie value."""
    raw = new_token()
    now = time.time()
    db.add(
        Session(token_hash=token_hash(raw), user_id=user.id, csrf=new_token(), created_at=now, last_seen=now)
    )
    return signer.sign(raw)


def end_session(db: DbSession, principal: Principal) -> None:
    if principal.session_id is not None:
        db.execute(delete(Session).where(Session.id == principal.session_id))


def csrf_ok(expected: str, given: str | None) -> bool:
    return bool(expected) and given is not None and hmac.compare_digest(expected.encode(), given.encode())


def login_refused(db: DbSession, config: ServerConfig, name: str, address: str) -> bool:
    """Whether logins for ``name`` or from ``address`` are refused now (too
    many failures within the window)."""
    since = time.time() - config.login_window_s
    db.execute(delete(LoginFailure).where(LoginFailure.at < since))
    by_name = (
        db.scalar(select(func.count()).where(LoginFailure.name == name[:64], LoginFailure.at >= since)) or 0
    )
    by_address = (
        db.scalar(select(func.count()).where(LoginFailure.address == address, LoginFailure.at >= since)) or 0
    )
    return by_name >= config.login_failures_per_name or by_address >= config.login_failures_per_address


def record_failure(db: DbSession, name: str, address: str) -> None:
    db.add(LoginFailure(name=name[:64], address=address, at=time.time()))


def visible_workloads(principal: Principal) -> Select[Any]:
    """A query of the workloads ``principal`` may see."""
    query = select(Workload)
    if principal.is_admin:
        return query
    shared = select(Share.workload_id).where(Share.user_id == principal.user_id)
    return query.where(or_(Workload.owner_id == principal.user_id, Workload.id.in_(shared)))


def can_see(db: DbSession, principal: Principal, workload_id: int) -> Workload | None:
    """The workload, when ``principal`` may see it."""
    found: Workload | None = db.scalar(visible_workloads(principal).where(Workload.id == workload_id))
    return found


def can_manage(principal: Principal, workload: Workload) -> bool:
    """Whether ``principal`` may share (and unshare) ``workload``."""
    return principal.is_admin or workload.owner_id == principal.user_id
