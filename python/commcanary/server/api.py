"""The machine API (JSON, ``/api/v1``), authenticated like every page: an
API token (``Authorization: Bearer``) or a browser session; its OpenAPI
description is ``/api/v1/openapi.json``. Writes take an API token (a
browser writes through the pages' forms, which carry CSRF tokens)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, NamedTuple

import orjson
from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, Field
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session as DbSession

from commcanary.errors import InputError
from commcanary.server.analyses import ANALYSES
from commcanary.server.auth import Principal, authenticate, can_see, visible_workloads
from commcanary.server.schema import Analysis, Artifact, Push, User, Workload
from commcanary.server.store import TooLarge

__all__ = ["router"]

router = APIRouter(prefix="/api/v1")

#: An object id in a path: what the schema's ids hold (PostgreSQL's 32-bit integer).
ObjectId = Annotated[int, Path(ge=1, le=2**31 - 1)]

#: The largest signature header (a detached signature document, base64).
_MAX_SIGNATURE_HEADER = 8192


class PushOut(BaseModel):
    push_id: ObjectId
    workload_id: ObjectId
    workload: str
    digest: str
    kind: str
    format: str
    verdict: str | None
    signed_by: str | None
    created_workload: bool


class WorkloadOut(BaseModel):
    id: int
    name: str
    owner: str
    pushes: int


class PushRow(BaseModel):
    id: int
    name: str
    kind: str
    digest: str
    verdict: str | None
    branch: str | None
    commit: str | None
    pushed_at: float


class WorkloadDetail(BaseModel):
    id: int
    name: str
    owner: str
    pushes: list[PushRow]


class AnalysisIn(BaseModel):
    analysis: str = Field(description="hang or stragglers")
    pushes: list[int] = Field(min_length=1, max_length=100_000)


class AnalysisOut(BaseModel):
    id: int
    workload_id: ObjectId
    analysis: str
    status: str
    progress: str
    error: str | None
    result_push_id: ObjectId | None


class GatePoint(BaseModel):
    push_id: ObjectId
    commit: str | None
    verdict: str | None
    facts: dict[str, str]
    pushed_at: float


class WorkloadSummary(NamedTuple):
    """A workload as a listing shows it."""

    workload: Workload
    owner: str
    pushes: int
    last_push_at: float | None
    last_verdict: str | None


def summaries(db: DbSession, query: Select[Any]) -> list[WorkloadSummary]:
    """The workloads ``query`` selects, each with its owner's name, its
    pushes' count and the time of the last, and the last verdict given: in
    three queries, whatever their number."""
    found = db.execute(query.join(User, User.id == Workload.owner_id).add_columns(User.name)).all()
    ids = [w.id for w, _ in found]
    stats = {
        wid: (n, last)
        for wid, n, last in db.execute(
            select(Push.workload_id, func.count(), func.max(Push.pushed_at))
            .where(Push.workload_id.in_(ids))
            .group_by(Push.workload_id)
        ).all()
    }
    judged = (
        select(func.max(Push.id))
        .where(Push.workload_id.in_(ids), Push.verdict.is_not(None))
        .group_by(Push.workload_id)
    )
    verdicts = dict(
        db.execute(select(Push.workload_id, Push.verdict).where(Push.id.in_(judged))).tuples().all()
    )
    out = []
    for w, owner in found:
        count, last = stats.get(w.id, (0, None))
        out.append(WorkloadSummary(w, owner, count, last, verdicts.get(w.id)))
    return out


def _ctx(request: Request) -> Any:
    return request.app.state.ctx


def _caller(request: Request, db: DbSession) -> Principal:
    ctx = _ctx(request)
    me = authenticate(request, db, ctx.config, ctx.signer)
    if me is None:
        raise HTTPException(401, "authentication required", headers={"WWW-Authenticate": "Bearer"})
    return me


def _token_caller(request: Request, db: DbSession) -> Principal:
    me = _caller(request, db)
    if me.via != "token":
        raise HTTPException(403, "writes through the API take an API token")
    return me


@router.get("/openapi.json", include_in_schema=False)
def openapi(request: Request) -> JSONResponse:
    with _ctx(request).db.session() as db:
        _caller(request, db)
    return JSONResponse(request.app.openapi())


def metrics(request: Request) -> Response:
    """Prometheus metrics (an admin's API token or session)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    with _ctx(request).db.session() as db:
        me = _caller(request, db)
        if not me.is_admin:
            raise HTTPException(403, "metrics are for admins")
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.post("/artifacts", status_code=201, response_model=PushOut)
async def push_artifact(
    request: Request,
    workload: Annotated[str, Query(max_length=128)],
    name: Annotated[str, Query(max_length=1024)],
    branch: Annotated[str | None, Query(max_length=255)] = None,
    commit: Annotated[str | None, Query(max_length=64)] = None,
) -> PushOut:
    """Push one artifact (the request's body, as sent: plain or gzip) to the
    caller's workload ``workload`` (made on its first push). Signed
    artifacts send their detached signature document base64-encoded in
    ``X-Commcanary-Signature``."""
    ctx = _ctx(request)
    me, limit = await run_in_threadpool(_uploader, request)
    signature = _signature(request.headers.get("x-commcanary-signature"))
    try:
        received = await ctx.store.receive(request.stream(), limit)
    except TooLarge as exc:
        raise HTTPException(413, str(exc)) from None
    request.app.state.metrics.uploads.inc(received.size)

    def work() -> PushOut:
        from commcanary.server.ingest import ingest

        with ctx.db.session() as db:
            done = ingest(
                db,
                ctx.store,
                me,
                received,
                name=name,
                workload=workload,
                branch=branch,
                commit=commit,
                signature=signature,
            )
            return PushOut(
                push_id=done.push_id,
                workload_id=done.workload_id,
                workload=workload,
                digest=done.digest,
                kind=done.kind,
                format=done.format,
                verdict=done.facts.get("verdict"),
                signed_by=done.signed_by,
                created_workload=done.created_workload,
            )

    try:
        return await run_in_threadpool(work)
    except TooLarge as exc:
        raise HTTPException(413, str(exc)) from None
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None


def _uploader(request: Request) -> tuple[Principal, int]:
    """Who uploads (an API token) and the upload limit in force, in one
    transaction before any byte of the body is read."""
    from commcanary.server.settings import load

    ctx = _ctx(request)
    with ctx.db.session() as db:
        return _token_caller(request, db), load(db, ctx.config).max_upload_bytes


def _signature(header: str | None) -> bytes | None:
    if header is None:
        return None
    if len(header) > _MAX_SIGNATURE_HEADER:
        raise HTTPException(413, "X-Commcanary-Signature is too long")
    try:
        return base64.b64decode(header, validate=True)
    except (binascii.Error, ValueError):
        raise HTTPException(400, "X-Commcanary-Signature: not base64") from None


@router.get("/workloads", response_model=list[WorkloadOut])
def list_workloads(request: Request) -> list[WorkloadOut]:
    """The workloads the caller may see."""
    with _ctx(request).db.session() as db:
        me = _caller(request, db)
        return [
            WorkloadOut(id=s.workload.id, name=s.workload.name, owner=s.owner, pushes=s.pushes)
            for s in summaries(db, visible_workloads(me).order_by(Workload.id))
        ]


def _visible(db: DbSession, me: Principal, workload_id: ObjectId) -> Workload:
    w = can_see(db, me, workload_id)
    if w is None:
        raise HTTPException(404, "no such workload")
    return w


@router.get("/workloads/{workload_id}", response_model=WorkloadDetail)
def get_workload(request: Request, workload_id: ObjectId) -> WorkloadDetail:
    """A workload and its pushes, newest first."""
    with _ctx(request).db.session() as db:
        me = _caller(request, db)
        w = _visible(db, me, workload_id)
        owner = db.get(User, w.owner_id)
        pushes = db.scalars(select(Push).where(Push.workload_id == w.id).order_by(Push.id.desc())).all()
        return WorkloadDetail(
            id=w.id,
            name=w.name,
            owner=owner.name if owner else "",
            pushes=[PushRow.model_validate(p, from_attributes=True) for p in pushes],
        )


@router.get("/workloads/{workload_id}/pushes/{push_id}/raw")
def get_raw(request: Request, workload_id: ObjectId, push_id: ObjectId) -> FileResponse:
    """A pushed artifact's bytes, as pushed."""
    ctx = _ctx(request)
    with ctx.db.session() as db:
        me = _caller(request, db)
        _visible(db, me, workload_id)
        p = db.scalar(select(Push).where(Push.id == push_id, Push.workload_id == workload_id))
        if p is None:
            raise HTTPException(404, "no such push")
        path = ctx.store.path_of(p.digest)
    return FileResponse(path, media_type="application/octet-stream", filename=p.name)


@router.get("/workloads/{workload_id}/gate", response_model=list[GatePoint])
def gate_history(
    request: Request, workload_id: ObjectId, branch: Annotated[str, Query(max_length=255)]
) -> list[GatePoint]:
    """Every comparison pushed to the workload on ``branch``, oldest first,
    with its verdict, deltas and thresholds."""
    from commcanary.server.ingest import check_ref

    with _ctx(request).db.session() as db:
        me = _caller(request, db)
        _visible(db, me, workload_id)
        branch = check_ref("branch", branch) or ""
        return [
            GatePoint(push_id=p.id, commit=p.commit, verdict=p.verdict, facts=facts, pushed_at=p.pushed_at)
            for p, facts in comparisons(db, workload_id, branch)
        ]


def comparisons(db: DbSession, workload_id: ObjectId, branch: str) -> list[tuple[Push, dict[str, str]]]:
    rows = db.execute(
        select(Push, Artifact)
        .join(Artifact, Artifact.digest == Push.digest)
        .where(Push.workload_id == workload_id, Push.branch == branch, Push.kind == "comparison")
        .order_by(Push.pushed_at, Push.id)
    ).all()
    return [(p, orjson.loads(a.facts)) for p, a in rows]


@router.post("/workloads/{workload_id}/analyses", status_code=201, response_model=AnalysisOut)
def queue_analysis(request: Request, workload_id: ObjectId, body: AnalysisIn) -> AnalysisOut:
    """Queue a diagnosis (``hang`` or ``stragglers``) of raw evidence pushed
    to the workload; the workload's page shows its progress."""
    import time

    with _ctx(request).db.session() as db:
        me = _token_caller(request, db)
        w = _visible(db, me, workload_id)
        if body.analysis not in ANALYSES:
            raise HTTPException(422, f"analysis: one of {', '.join(ANALYSES)}")
        found = set(
            db.scalars(select(Push.id).where(Push.workload_id == w.id, Push.id.in_(body.pushes))).all()
        )
        if found != set(body.pushes):
            raise HTTPException(404, "a push that is not in this workload")
        job = Analysis(
            workload_id=w.id,
            analysis=body.analysis,
            status="queued",
            evidence=orjson.dumps(sorted(found)).decode(),
            progress="queued",
            created_at=time.time(),
        )
        db.add(job)
        db.flush()
        return _analysis_out(job)


@router.get("/analyses/{analysis_id}", response_model=AnalysisOut)
def get_analysis(request: Request, analysis_id: ObjectId) -> AnalysisOut:
    with _ctx(request).db.session() as db:
        me = _caller(request, db)
        job = db.get(Analysis, analysis_id)
        if job is None or can_see(db, me, job.workload_id) is None:
            raise HTTPException(404, "no such analysis")
        return _analysis_out(job)


def _analysis_out(job: Analysis) -> AnalysisOut:
    return AnalysisOut.model_validate(job, from_attributes=True)
