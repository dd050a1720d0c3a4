"""What an upload is, and where it goes: a commcanary document checked by
the core's readers (``_core.inspect_file``), or raw evidence told apart as
the analyses tell it (a Flight Recorder dump, a profiler trace, a text: a
stack dump, an exception, a launcher log); a signature checked against the
server's trusted keys; then the artifact kept once by digest and pushed to
the workload (made on the first push of its name by its owner)."""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session as DbSession

from commcanary import _core
from commcanary.errors import CommCanaryError, InputError
from commcanary.server.auth import Principal
from commcanary.server.config import ServerConfig
from commcanary.server.schema import Artifact, Push, Workload
from commcanary.server.store import Received, Store

__all__ = ["EVIDENCE_KINDS", "Ingested", "classify", "clean_name", "ingest"]

T = TypeVar("T")

#: Kinds of raw evidence (not commcanary documents).
EVIDENCE_KINDS = ("flight recorder dump", "profiler trace", "text")
#: The largest text evidence (a stack dump, an exception), bytes.
MAX_TEXT_BYTES = 16 << 20
_NAME = re.compile(r"[^A-Za-z0-9._+-]+")
_WORKLOAD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/+-]{0,127}$")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/+-]{0,254}$")


@dataclass(frozen=True)
class Ingested:
    push_id: int
    workload_id: int
    digest: str
    kind: str
    format: str
    facts: dict[str, str]
    signed_by: str | None
    created_workload: bool


def clean_name(name: str | None) -> str:
    """An upload's name as kept: its last path component, any character
    outside ``[A-Za-z0-9._+-]`` replaced (no traversal, no separators)."""
    base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _NAME.sub("_", base).strip("._") or "artifact"
    return cleaned[:200]


def check_workload_name(name: str) -> str:
    if not _WORKLOAD.match(name or ""):
        raise InputError("workload: 1 to 128 of A-Z a-z 0-9 . _ : / + -, starting with a letter or digit")
    return name


def check_ref(what: str, value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if not _REF.match(value):
        raise InputError(f"{what}: 1 to 255 of A-Z a-z 0-9 . _ / + -, starting with a letter or digit")
    return value


def classify(path: Path, name: str) -> tuple[str, str, dict[str, str]]:
    """``(kind, format, facts)`` of the file at ``path`` uploaded as
    ``name``; :class:`InputError` naming ``name`` for what the server does
    not take."""
    try:
        fmt, kind, facts = _core.inspect_file(str(path))
        return kind, fmt, dict(facts)
    except CommCanaryError as exc:
        document_error: str = str(exc).replace(str(path), name)
    with path.open("rb") as f:
        head = f.read(4096)
    if _looks_like_document(head):
        raise InputError(document_error)
    evidence = _evidence_kind(path, name)
    if evidence is None:
        raise InputError(
            f"{name}: neither a commcanary document nor evidence the analyses read ({document_error})"
        )
    return evidence, "", {}


def _looks_like_document(head: bytes) -> bool:
    """Whether the file says it is a commcanary document (then its reader's
    refusal is the answer)."""
    return b'"format"' in head and b'"commcanary.' in head


def _evidence_kind(path: Path, name: str) -> str | None:
    with tempfile.TemporaryDirectory(prefix="classify-") as d:
        link = Path(d) / name
        try:
            os.link(path, link)
        except OSError:
            link.write_bytes(path.read_bytes())
        try:
            dumps, traces = _core.evidence_files([str(link)], "hang")
        except CommCanaryError:
            dumps, traces = [], []
        if dumps:
            return "flight recorder dump"
        if traces:
            return "profiler trace"
    if path.stat().st_size <= MAX_TEXT_BYTES:
        data = path.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return "text" if b"\0" not in data else None
    return None


def verify_signature(config: ServerConfig, path: Path, signature: bytes | None) -> str | None:
    """The trusted key id that signed the file, ``None`` when unsigned;
    :class:`InputError` when the signature does not verify."""
    if signature is None:
        return None
    if not config.trusted_keys_path.exists():
        raise InputError("the artifact is signed, but the server trusts no key (trusted-keys.pem)")
    with tempfile.NamedTemporaryFile(dir=config.tmp_dir, prefix="sig-", delete=False) as f:
        f.write(signature)
        sig_path = f.name
    try:
        return str(_core.verify_file(str(path), sig_path, str(config.trusted_keys_path)))
    except CommCanaryError as exc:
        raise InputError(f"signature: {exc}".replace(sig_path, "the signature")) from None
    finally:
        os.unlink(sig_path)


def ingest(
    db: DbSession,
    store: Store,
    principal: Principal,
    received: Received,
    *,
    name: str,
    workload: str,
    branch: str | None,
    commit: str | None,
    signature: bytes | None,
) -> Ingested:
    """The upload checked, kept and pushed to ``workload`` (the caller's own
    of that name). The received file is kept or removed either way."""
    try:
        name = clean_name(name)
        workload = check_workload_name(workload)
        branch = check_ref("branch", branch)
        commit = check_ref("commit", commit)
        store.check_inflation(received)
        kind, fmt, facts = classify(received.path, name)
        signed_by = verify_signature(store.config, received.path, signature)
    except BaseException:
        store.discard(received)
        raise
    store.keep(received)
    now = time.time()
    new_artifact = Artifact(
        digest=received.digest,
        size=received.size,
        kind=kind,
        format=fmt,
        facts=orjson.dumps(facts, option=orjson.OPT_SORT_KEYS).decode(),
        signed_by=signed_by,
        stored_at=now,
    )
    artifact, _ = _get_or_add(db, lambda: db.get(Artifact, received.digest), new_artifact)
    if signed_by and not artifact.signed_by:
        artifact.signed_by = signed_by
    row, created = _get_or_add(
        db,
        lambda: db.scalar(
            select(Workload).where(Workload.owner_id == principal.user_id, Workload.name == workload)
        ),
        Workload(name=workload, owner_id=principal.user_id, created_at=now),
    )
    push = Push(
        workload_id=row.id,
        digest=received.digest,
        name=name,
        kind=kind,
        verdict=facts.get("verdict"),
        branch=branch,
        commit=commit,
        pushed_by=principal.user_id,
        pushed_at=now,
    )
    db.add(push)
    db.flush()
    return Ingested(push.id, row.id, received.digest, kind, fmt, facts, signed_by or None, created)


def _get_or_add(db: DbSession, find: Callable[[], T | None], new: T) -> tuple[T, bool]:
    """The row ``find`` gives, or ``new`` added (and whether it was): a
    concurrent push of the same workload or bytes that wins the insert is
    found again, not an error."""
    found = find()
    if found is not None:
        return found, False
    try:
        with db.begin_nested():
            db.add(new)
            db.flush()
        return new, True
    except IntegrityError:
        again = find()
        if again is None:
            raise
        return again, False


def facts_of(artifact: Artifact) -> dict[str, Any]:
    parsed: dict[str, Any] = orjson.loads(artifact.facts)
    return parsed
