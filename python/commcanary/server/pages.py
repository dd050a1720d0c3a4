"""The pages: server-rendered HTML (the views' templates, autoescaped, no
scripts). A page asks who the caller is first: without a session it sends
the browser to the login page; a form without its CSRF token is refused
(403) before anything changes; an object the caller may not see is a 404."""

from __future__ import annotations

import hmac
import time
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from sqlalchemy import func, select
from sqlalchemy.orm import Session as DbSession

from commcanary.errors import InputError
from commcanary.server import auth
from commcanary.server.api import ObjectId, summaries
from commcanary.server.credentials import (
    check_password,
    hash_password,
    new_token,
    read_bootstrap_token,
    token_hash,
)
from commcanary.server.schema import ROLES, Analysis, ApiToken, Artifact, Push, Share, User, Workload
from commcanary.views import Markup, components, render, stylesheet

__all__ = ["router"]

router = APIRouter()

#: Badge colour class of each verdict.
VERDICT_CLASS = {
    "pass": "pass",
    "warn": "warn",
    "fail": "fail",
    "inconclusive": "inconclusive",
    "hang": "fail",
    "no_hang": "pass",
    "stragglers": "warn",
    "none": "pass",
}
#: Pushes a workload's page lists at once (then a link to older ones).
PUSHES_PER_PAGE = 100
#: The largest form body a page reads, bytes.
MAX_FORM_BYTES = 64 << 10


def _ctx(request: Request) -> Any:
    return request.app.state.ctx


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t)) if t else ""


def _page(
    template: str, title: str, me: auth.Principal | None, status: int = 200, **model: Any
) -> HTMLResponse:
    model.setdefault("flash", None)
    model.setdefault("flash_kind", None)
    html = render(f"server/{template}", title=title, me=me, style=stylesheet("base", "server"), **model)
    return HTMLResponse(html, status_code=status)


def _message(me: auth.Principal | None, heading: str, message: str, status: int, **more: Any) -> HTMLResponse:
    more.setdefault("link", None)
    more.setdefault("link_text", None)
    return _page("message.html.j2", heading, me, status=status, heading=heading, message=message, **more)


def _to_login(request: Request) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)


def _me(request: Request, db: DbSession) -> auth.Principal | None:
    ctx = _ctx(request)
    return auth.authenticate(request, db, ctx.config, ctx.signer)


async def _form(request: Request) -> dict[str, str]:
    """The posted form's fields (a body past the limit is refused)."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_FORM_BYTES):
        raise InputError("the form is too large")
    form = await request.form(max_files=0, max_fields=32, max_part_size=MAX_FORM_BYTES)
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    if any("\x00" in v for v in fields.values()):
        raise InputError("a form field holds a NUL character")
    return fields


def _form_caller(request: Request, db: DbSession, form: dict[str, str]) -> auth.Principal | Response:
    """The signed-in caller of a posted form, or the answer to give instead:
    the login page without a session, 403 without the session's CSRF token."""
    me = _me(request, db)
    if me is None:
        return _to_login(request)
    if not auth.csrf_ok(me.csrf, form.get("csrf")):
        return _forbidden(me)
    return me


def _forbidden(me: auth.Principal | None) -> HTMLResponse:
    return _message(
        me, "Refused", "The form's CSRF token is missing or wrong: reload the page and try again.", 403
    )


def _anon_csrf(request: Request) -> str:
    """The double-submit CSRF token of a form shown before a session."""
    signed = request.cookies.get(auth.ANON_CSRF_COOKIE)
    value = _ctx(request).signer.unsign(signed)
    return value or new_token()


def _with_anon_csrf(request: Request, response: Response, token: str) -> Response:
    ctx = _ctx(request)
    response.set_cookie(
        auth.ANON_CSRF_COOKIE,
        ctx.signer.sign(token),
        httponly=True,
        samesite="strict",
        secure=ctx.config.secure_cookies,
        max_age=3600,
    )
    return response


def _anon_csrf_ok(request: Request, given: str | None) -> bool:
    value = _ctx(request).signer.unsign(request.cookies.get(auth.ANON_CSRF_COOKIE))
    return value is not None and auth.csrf_ok(value, given)


@router.get("/healthz", include_in_schema=False)
def healthz() -> dict[str, str]:
    """Liveness, for load balancers: says nothing but that the server runs."""
    return {"status": "ok"}


@router.get("/", include_in_schema=False)
def home(request: Request) -> Response:
    if not _ctx(request).has_root():
        return RedirectResponse("/setup", status_code=303)
    return RedirectResponse("/workloads", status_code=303)


@router.get("/setup", include_in_schema=False)
def setup_form(request: Request) -> Response:
    ctx = _ctx(request)
    if ctx.has_root():
        return _message(
            None,
            "Already set up",
            "This server has its root account: log in.",
            404,
            link="/login",
            link_text="Log in",
        )
    token = _anon_csrf(request)
    page = _page("setup.html.j2", "Set up", None, csrf=token, token_path=str(ctx.config.bootstrap_token_path))
    return _with_anon_csrf(request, page, token)


@router.post("/setup", include_in_schema=False)
async def setup(request: Request) -> Response:
    ctx = _ctx(request)
    form = await _form(request)
    if not _anon_csrf_ok(request, form.get("csrf")):
        return _forbidden(None)
    expected = read_bootstrap_token(ctx.config.bootstrap_token_path)
    given = form.get("token", "").strip()
    if ctx.has_root() or expected is None or not hmac.compare_digest(expected.encode(), given.encode()):
        return _message(None, "Refused", "That is not this server's bootstrap token (it is used once).", 403)
    name = form.get("name", "").strip()
    try:
        _check_user_name(name)
        hashed = hash_password(form.get("password", ""))
    except InputError as exc:
        token = _anon_csrf(request)
        page = _page(
            "setup.html.j2",
            "Set up",
            None,
            status=422,
            csrf=token,
            token_path=str(ctx.config.bootstrap_token_path),
            flash=str(exc),
            flash_kind="error",
        )
        return _with_anon_csrf(request, page, token)
    with ctx.db.session() as db:
        if db.scalar(select(User.id).where(User.role == "root")) is not None:
            return _message(None, "Refused", "This server has its root account.", 403)
        user = User(name=name, password_hash=hashed, role="root", created_at=time.time(), disabled=False)
        db.add(user)
        db.flush()
        cookie = auth.start_session(db, user, ctx.signer)
    ctx.config.bootstrap_token_path.unlink(missing_ok=True)
    response = RedirectResponse("/workloads", status_code=303)
    _set_session(request, response, cookie)
    return response


def _check_user_name(name: str) -> None:
    if not (1 <= len(name) <= 64) or not all(c.isalnum() or c in "._-" for c in name):
        raise InputError("a name is 1 to 64 letters, digits, '.', '_' or '-'")


def _set_session(request: Request, response: Response, cookie: str) -> None:
    ctx = _ctx(request)
    response.set_cookie(
        auth.SESSION_COOKIE,
        cookie,
        httponly=True,
        samesite="lax",
        secure=ctx.config.secure_cookies,
        max_age=ctx.config.session_max_s,
    )
    response.delete_cookie(auth.ANON_CSRF_COOKIE)


def _safe_next(target: str | None) -> str:
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/workloads"


@router.get("/login", include_in_schema=False)
def login_form(request: Request, next: str = "/workloads") -> Response:
    if not _ctx(request).has_root():
        return RedirectResponse("/setup", status_code=303)
    token = _anon_csrf(request)
    return _with_anon_csrf(
        request, _page("login.html.j2", "Log in", None, csrf=token, next=_safe_next(next)), token
    )


@router.post("/login", include_in_schema=False)
async def login(request: Request) -> Response:
    ctx = _ctx(request)
    form = await _form(request)
    if not _anon_csrf_ok(request, form.get("csrf")):
        return _forbidden(None)
    name = form.get("name", "")[:64]
    address = auth.client_address(request)
    with ctx.db.session() as db:
        if auth.login_refused(db, ctx.config, name, address):
            return _message(
                None, "Too many attempts", "Too many failed logins: wait a while, then try again.", 429
            )
        user = db.scalar(select(User).where(User.name == name))
        ok = check_password(user.password_hash if user else None, form.get("password", ""))
        if not ok or user is None or user.disabled:
            auth.record_failure(db, name, address)
            failed = True
        else:
            failed = False
            cookie = auth.start_session(db, user, ctx.signer)
    if failed:
        token = _anon_csrf(request)
        page = _page(
            "login.html.j2",
            "Log in",
            None,
            status=401,
            csrf=token,
            next=_safe_next(form.get("next")),
            flash="Wrong name or password.",
            flash_kind="error",
        )
        return _with_anon_csrf(request, page, token)
    response = RedirectResponse(_safe_next(form.get("next")), status_code=303)
    _set_session(request, response, cookie)
    return response


@router.post("/logout", include_in_schema=False)
async def logout(request: Request) -> Response:
    ctx = _ctx(request)
    form = await _form(request)
    with ctx.db.session() as db:
        me = _form_caller(request, db, form)
        if isinstance(me, Response):
            return me
        auth.end_session(db, me)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(auth.SESSION_COOKIE)
    return response


@router.get("/workloads", include_in_schema=False)
def workloads(
    request: Request, q: str = "", owner: str = "", branch: str = "", verdict: str = ""
) -> Response:
    with _ctx(request).db.session() as db:
        me = _me(request, db)
        if me is None:
            return _to_login(request)
        q, owner, branch, verdict = (_text(x) for x in (q, owner, branch, verdict))
        query = auth.visible_workloads(me)
        if q:
            query = query.where(Workload.name.contains(q[:128], autoescape=True))
        if owner:
            query = query.where(Workload.owner_id.in_(select(User.id).where(User.name == owner[:64])))
        if branch:
            query = query.where(Workload.id.in_(select(Push.workload_id).where(Push.branch == branch[:255])))
        rows = [
            {
                "id": s.workload.id,
                "name": s.workload.name,
                "owner": s.owner,
                "pushes": s.pushes,
                "verdict": s.last_verdict,
                "verdict_class": VERDICT_CLASS.get(s.last_verdict or "", "inconclusive"),
                "last": _when(s.last_push_at or s.workload.created_at),
            }
            for s in summaries(db, query.order_by(Workload.name, Workload.id).limit(1000))
            if not verdict or s.last_verdict == verdict
        ]
        return _page(
            "workloads.html.j2", "Workloads", me, rows=rows, q=q, owner=owner, branch=branch, verdict=verdict
        )


def _text(value: str) -> str:
    """A query parameter as a filter: no NUL (no database stores one)."""
    return value.replace("\x00", "")


def _visible(
    request: Request, db: DbSession, workload_id: ObjectId
) -> tuple[auth.Principal | None, Workload | None]:
    me = _me(request, db)
    if me is None:
        return None, None
    return me, auth.can_see(db, me, workload_id)


def _not_found(me: auth.Principal | None) -> HTMLResponse:
    return _message(me, "Not found", "There is no such page, or it is not shared with you.", 404)


@router.get("/workloads/{workload_id}", include_in_schema=False)
def workload(request: Request, workload_id: ObjectId, before: int = 0) -> Response:
    with _ctx(request).db.session() as db:
        me, w = _visible(request, db, workload_id)
        if me is None:
            return _to_login(request)
        if w is None:
            return _not_found(me)
        # The analyses before the pushes: an analysis commits its status and
        # its pushes at once, and each statement here sees at least what the
        # one before it saw (read committed; SQLite reads outside a
        # transaction), so a finished analysis' results are always listed.
        analyses = db.scalars(
            select(Analysis).where(Analysis.workload_id == w.id).order_by(Analysis.id.desc())
        ).all()
        listed = (
            select(Push, Artifact)
            .join(Artifact, Artifact.digest == Push.digest)
            .where(Push.workload_id == w.id)
        )
        if 0 < before < 2**31:
            listed = listed.where(Push.id < before)
        pushes = db.execute(listed.order_by(Push.id.desc()).limit(PUSHES_PER_PAGE + 1)).all()
        older = pushes[PUSHES_PER_PAGE][0].id + 1 if len(pushes) > PUSHES_PER_PAGE else None
        pushes = pushes[:PUSHES_PER_PAGE]
        total = db.scalar(select(func.count()).select_from(Push).where(Push.workload_id == w.id)) or 0
        job = _job_summary(db, w.id)
        rows = [
            {
                "id": p.id,
                "name": p.name,
                "kind": p.kind,
                "verdict": p.verdict,
                "verdict_class": VERDICT_CLASS.get(p.verdict or "", "inconclusive"),
                "branch": p.branch,
                "commit": p.commit,
                "signed": a.signed_by,
                "when": _when(p.pushed_at),
            }
            for p, a in pushes
        ]
        branches = db.scalars(
            select(Push.branch)
            .where(Push.workload_id == w.id, Push.kind == "comparison", Push.branch.is_not(None))
            .distinct()
            .order_by(Push.branch)
        ).all()
        owner = db.get(User, w.owner_id)
        shared = db.scalars(
            select(User.name)
            .join(Share, Share.user_id == User.id)
            .where(Share.workload_id == w.id)
            .order_by(User.name)
        ).all()
        return _page(
            "workload.html.j2",
            w.name,
            me,
            w=w,
            owner=owner.name if owner else "",
            pushes=rows,
            branches=branches,
            analyses=analyses,
            manage=auth.can_manage(me, w),
            shared=shared,
            total=total,
            older=older,
            job=job,
        )


#: What a workload's page says of its job, from its newest diagnoses: fact
#: name in the documents' facts, and the label shown.
JOB_FACTS = (
    ("world_size", "Ranks"),
    ("groups", "Groups"),
    ("steps", "Steps"),
    ("root_ranks", "Hang root ranks"),
)


def _job_summary(db: DbSession, workload_id: int) -> list[tuple[str, str]]:
    """Ranks, groups, steps and the hang's root ranks, each from the newest
    diagnosis pushed to the workload that gives it."""
    from commcanary.server.ingest import facts_of

    found: dict[str, str] = {}
    rows = db.scalars(
        select(Artifact)
        .join(Push, Push.digest == Artifact.digest)
        .where(
            Push.workload_id == workload_id,
            Push.kind.in_(("hang diagnosis", "straggler diagnosis", "step recovery")),
        )
        .order_by(Push.id.desc())
        .limit(50)
    ).all()
    for artifact in rows:
        for key, value in facts_of(artifact).items():
            found.setdefault(key, value)
    return [(label, found[key]) for key, label in JOB_FACTS if key in found]


@router.post("/workloads/{workload_id}/share", include_in_schema=False)
async def share(request: Request, workload_id: ObjectId) -> Response:
    form = await _form(request)
    with _ctx(request).db.session() as db:
        me = _form_caller(request, db, form)
        if isinstance(me, Response):
            return me
        w = auth.can_see(db, me, workload_id)
        if w is None or not auth.can_manage(me, w):
            return _not_found(me)
        user = db.scalar(select(User).where(User.name == form.get("user", "")[:64]))
        if user is None:
            return _message(me, "No such user", "There is no user of that name.", 422)
        if db.get(Share, (w.id, user.id)) is None and user.id != w.owner_id:
            db.add(Share(workload_id=w.id, user_id=user.id))
    return RedirectResponse(f"/workloads/{workload_id}", status_code=303)


def _push(
    request: Request, db: DbSession, workload_id: ObjectId, push_id: ObjectId
) -> tuple[Any, Any, Any, Any]:
    me, w = _visible(request, db, workload_id)
    if me is None or w is None:
        return me, w, None, None
    row = db.execute(
        select(Push, Artifact)
        .join(Artifact, Artifact.digest == Push.digest)
        .where(Push.id == push_id, Push.workload_id == w.id)
    ).first()
    return (me, w, row[0], row[1]) if row else (me, w, None, None)


#: Kinds whose page the server renders (the command line's views).
VIEWABLE = ("hang diagnosis", "straggler diagnosis", "report")


@router.get("/workloads/{workload_id}/pushes/{push_id}", include_in_schema=False)
def push_page(request: Request, workload_id: ObjectId, push_id: ObjectId) -> Response:
    from commcanary.server.ingest import facts_of

    with _ctx(request).db.session() as db:
        me, w, p, a = _push(request, db, workload_id, push_id)
        if me is None:
            return _to_login(request)
        if p is None:
            return _not_found(me)
        rows = [
            ["Name", p.name],
            ["Kind", p.kind],
            ["Format", a.format or "(raw evidence)"],
            ["Digest (BLAKE3)", a.digest],
            ["Size", f"{a.size:,} bytes"],
            ["Signed by", a.signed_by or "unsigned"],
            ["Branch", p.branch or ""],
            ["Commit", p.commit or ""],
            ["Pushed", _when(p.pushed_at)],
        ]
        rows += [[k, v] for k, v in sorted(facts_of(a).items())]
        kv = Markup(components().kv_table(rows))
        return _page(
            "push.html.j2",
            p.name,
            me,
            w=w,
            p=p,
            kv=kv,
            view=p.kind in VIEWABLE,
            perfetto=p.kind == "timeline",
        )


@router.get("/workloads/{workload_id}/pushes/{push_id}/raw", include_in_schema=False)
def push_raw(request: Request, workload_id: ObjectId, push_id: ObjectId) -> Response:
    ctx = _ctx(request)
    with ctx.db.session() as db:
        me, _w, p, _a = _push(request, db, workload_id, push_id)
        if me is None:
            return _to_login(request)
        if p is None:
            return _not_found(me)
    return FileResponse(ctx.store.path_of(p.digest), media_type="application/octet-stream", filename=p.name)


@router.get("/workloads/{workload_id}/pushes/{push_id}/view", include_in_schema=False)
def push_view(request: Request, workload_id: ObjectId, push_id: ObjectId) -> Response:
    """A document's own page, as ``commcanary`` renders it (its own strict
    Content-Security-Policy: no scripts, no forms)."""
    import orjson

    from commcanary import _core

    ctx = _ctx(request)
    with ctx.db.session() as db:
        me, _w, p, _a = _push(request, db, workload_id, push_id)
        if me is None:
            return _to_login(request)
        if p is None or p.kind not in VIEWABLE:
            return _not_found(me)
    path = ctx.store.path_of(p.digest)
    kept = ctx.store.page_of(p.digest)
    if kept.exists():  # a diagnosis the server ran, with what its document does not carry
        html = kept.read_text(encoding="utf-8")
    elif p.kind == "hang diagnosis":
        from commcanary.html_hang import render_hang

        html = render_hang(orjson.loads(_core.read_input_file(str(path))))
    elif p.kind == "straggler diagnosis":
        from commcanary.html_stragglers import render_stragglers

        html = render_stragglers(orjson.loads(_core.read_input_file(str(path))), {})
    else:
        from commcanary.html import render_report
        from commcanary.replay import Report

        html = render_report(Report.from_file(path))
    from commcanary.views import CSP

    return HTMLResponse(html, headers={"Content-Security-Policy": CSP + "; frame-ancestors 'none'"})


@router.get("/workloads/{workload_id}/gate", include_in_schema=False)
def gate(request: Request, workload_id: ObjectId, branch: str = "") -> Response:
    from commcanary.server.api import comparisons
    from commcanary.server.gate_chart import chart, first_failing

    with _ctx(request).db.session() as db:
        me, w = _visible(request, db, workload_id)
        if me is None:
            return _to_login(request)
        if w is None:
            return _not_found(me)
        points = []
        for i, (p, facts) in enumerate(comparisons(db, w.id, _text(branch)[:255])):
            points.append(
                {
                    "index": i,
                    "push_id": p.id,
                    "commit": p.commit or f"push {p.id}",
                    "verdict": p.verdict or "inconclusive",
                    "verdict_class": VERDICT_CLASS.get(p.verdict or "", "inconclusive"),
                    "median": facts.get("delta.median_pct", ""),
                    "p95": facts.get("delta.p95_pct", ""),
                    "p99": facts.get("delta.p99_pct", ""),
                    "threshold": facts.get("thresholds.p99_threshold_pct", ""),
                }
            )
        first = first_failing(points)
        return _page(
            "gate.html.j2",
            f"Gate history: {w.name}",
            me,
            w=w,
            branch=branch,
            points=points,
            first_fail=first,
            chart=chart(points, first),
            metric_label="p99 latency change (%)",
        )


@router.get("/canaries", include_in_schema=False)
def canaries(request: Request) -> Response:
    from commcanary.server.ingest import facts_of

    with _ctx(request).db.session() as db:
        me = _me(request, db)
        if me is None:
            return _to_login(request)
        visible = auth.visible_workloads(me).subquery()
        found = db.execute(
            select(Artifact, Push.workload_id, visible.c.name)
            .join(Push, Push.digest == Artifact.digest)
            .join(visible, visible.c.id == Push.workload_id)
            .where(Artifact.kind == "canary")
            .order_by(Artifact.stored_at.desc())
        ).all()
        by_digest: dict[str, dict[str, Any]] = {}
        for artifact, wid, wname in found:
            facts = facts_of(artifact)
            row = by_digest.setdefault(
                artifact.digest,
                {
                    "digest": artifact.digest,
                    "sha256": facts.get("sha256", ""),
                    "workload": facts.get("workload", ""),
                    "coverage": facts.get("source_coverage", ""),
                    "timing": facts.get("timing", ""),
                    "max_gap_error_us": facts.get("max_gap_error_us", ""),
                    "source_events": facts.get("source_events", ""),
                    "signed": artifact.signed_by,
                    "workloads": [],
                },
            )
            if all(x["id"] != wid for x in row["workloads"]):
                row["workloads"].append({"id": wid, "name": wname})
        return _page("canaries.html.j2", "Canaries", me, rows=list(by_digest.values()))


@router.get("/users", include_in_schema=False)
def users(request: Request) -> Response:
    with _ctx(request).db.session() as db:
        me = _me(request, db)
        if me is None:
            return _to_login(request)
        if not me.is_admin:
            return _not_found(me)
        rows = [
            {"name": u.name, "role": u.role, "when": _when(u.created_at)}
            for u in db.scalars(select(User).order_by(User.id))
        ]
        return _page("users.html.j2", "Users", me, users=rows, roles=_grantable(me))


def _grantable(me: auth.Principal) -> list[str]:
    """The roles ``me`` may give: root gives admin and user, an admin user."""
    return ["user", "admin"] if me.role == "root" else ["user"]


@router.post("/users", include_in_schema=False)
async def create_user(request: Request) -> Response:
    form = await _form(request)
    with _ctx(request).db.session() as db:
        me = _form_caller(request, db, form)
        if isinstance(me, Response):
            return me
        if not me.is_admin:
            return _not_found(me)
        name, role = form.get("name", "").strip(), form.get("role", "user")
        try:
            _check_user_name(name)
            if role not in _grantable(me) or role not in ROLES:
                raise InputError(f"role: one of {', '.join(_grantable(me))}")
            hashed = hash_password(form.get("password", ""))
        except InputError as exc:
            return _message(me, "Not created", str(exc), 422, link="/users", link_text="Back to users")
        if db.scalar(select(User.id).where(User.name == name)) is not None:
            return _message(
                me,
                "Not created",
                "A user of that name exists.",
                409,
                link="/users",
                link_text="Back to users",
            )
        db.add(User(name=name, password_hash=hashed, role=role, created_at=time.time(), disabled=False))
    return RedirectResponse("/users", status_code=303)


@router.get("/settings/system", include_in_schema=False)
def system(request: Request) -> Response:
    ctx = _ctx(request)
    with ctx.db.session() as db:
        me = _me(request, db)
        if me is None:
            return _to_login(request)
        if not me.is_admin:
            return _not_found(me)
        return _system_page(db, ctx, me)


def _system_page(db: DbSession, ctx: Any, me: auth.Principal, status: int = 200, **more: Any) -> HTMLResponse:
    from commcanary.server.settings import load

    count, size = db.execute(select(func.count(), func.coalesce(func.sum(Artifact.size), 0))).one()
    storage = Markup(
        components().kv_table(
            [
                ["Artifacts", f"{count:,}"],
                ["Bytes", f"{size:,}"],
                ["Data directory", str(ctx.config.data_dir)],
            ]
        )
    )
    return _page(
        "system.html.j2",
        "System settings",
        me,
        status=status,
        s=load(db, ctx.config),
        storage=storage,
        ceiling=ctx.config.max_upload_bytes,
        **more,
    )


@router.post("/settings/system", include_in_schema=False)
async def save_system(request: Request) -> Response:
    from commcanary.server.settings import parse, save, sweep

    ctx = _ctx(request)
    form = await _form(request)
    with ctx.db.session() as db:
        me = _form_caller(request, db, form)
        if isinstance(me, Response):
            return me
        if not me.is_admin:
            return _not_found(me)
        try:
            settings = parse(ctx.config, form.get("retention_days", ""), form.get("max_upload_bytes", ""))
        except InputError as exc:
            return _system_page(db, ctx, me, status=422, flash=str(exc), flash_kind="error")
        save(db, settings)
    pushes, artifacts = sweep(ctx)
    with ctx.db.session() as db:
        return _system_page(
            db, ctx, me, flash=f"Saved. Retention removed {pushes} push(es) and {artifacts} artifact(s)."
        )


@router.get("/settings/tokens", include_in_schema=False)
def tokens(request: Request) -> Response:
    with _ctx(request).db.session() as db:
        me = _me(request, db)
        if me is None:
            return _to_login(request)
        return _tokens_page(db, me, None)


def _tokens_page(db: DbSession, me: auth.Principal, new: str | None, status: int = 200) -> HTMLResponse:
    rows = [
        {
            "id": t.id,
            "name": t.name,
            "created": _when(t.created_at),
            "used": _when(t.last_used),
            "revoked": t.revoked_at is not None,
        }
        for t in db.scalars(select(ApiToken).where(ApiToken.user_id == me.user_id).order_by(ApiToken.id))
    ]
    return _page("tokens.html.j2", "API tokens", me, status=status, tokens=rows, new_token=new)


@router.post("/settings/tokens", include_in_schema=False)
async def create_token(request: Request) -> Response:
    form = await _form(request)
    with _ctx(request).db.session() as db:
        me = _form_caller(request, db, form)
        if isinstance(me, Response):
            return me
        name = form.get("name", "").strip()[:64] or "token"
        token = new_token("cc_")
        db.add(ApiToken(user_id=me.user_id, name=name, token_hash=token_hash(token), created_at=time.time()))
        db.flush()
        return _tokens_page(db, me, token, status=201)


@router.post("/settings/tokens/{token_id}/revoke", include_in_schema=False)
async def revoke_token(request: Request, token_id: ObjectId) -> Response:
    form = await _form(request)
    with _ctx(request).db.session() as db:
        me = _form_caller(request, db, form)
        if isinstance(me, Response):
            return me
        t = db.get(ApiToken, token_id)
        if t is None or t.user_id != me.user_id:
            return _not_found(me)
        if t.revoked_at is None:
            t.revoked_at = time.time()
    return RedirectResponse("/settings/tokens", status_code=303)
