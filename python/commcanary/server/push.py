"""The client side of ``commcanary push``: artifacts streamed to a server's
API with the standard library alone (the core package needs nothing more to
push), then, for raw evidence, the analysis queued."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commcanary.errors import InputError

__all__ = ["PushError", "Pushed", "push_files", "queue_analysis", "read_token"]

#: Raw evidence kinds, and which analysis each suggests.
_EVIDENCE = {"flight recorder dump": "hang", "text": "hang", "profiler trace": "stragglers"}


class PushError(InputError):
    """The server refused, or could not be reached."""


@dataclass(frozen=True)
class Pushed:
    path: Path
    answer: dict[str, Any]


def read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the token file ({exc.strerror or exc})") from None
    if not token or any(c.isspace() for c in token):
        raise InputError(f"{path}: expected one API token (made on the server's Tokens page)")
    return token


def _request(
    method: str, url: str, token: str, body: Any = None, headers: dict[str, str] | None = None
) -> Any:
    req = urllib.request.Request(url, data=body, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=600) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        detail = _detail(exc)
        if exc.code == 401:
            raise PushError(f"{url}: the server refused the token (401): {detail}") from None
        raise PushError(f"{url}: {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PushError(f"{url}: cannot reach the server ({reason})") from None


def _detail(exc: urllib.error.HTTPError) -> str:
    try:
        payload = json.loads(exc.read())
        return str(payload.get("detail", payload))
    except (ValueError, OSError, AttributeError):
        return exc.reason or "refused"


def push_files(
    server: str,
    token: str,
    paths: Sequence[Path],
    *,
    workload: str,
    branch: str | None = None,
    commit: str | None = None,
) -> list[Pushed]:
    """Each file pushed (with ``FILE.sig`` beside it, when there is one),
    in order; :class:`PushError` at the first the server refuses."""
    base = server.rstrip("/")
    out: list[Pushed] = []
    for path in paths:
        query = {"workload": workload, "name": path.name}
        if branch:
            query["branch"] = branch
        if commit:
            query["commit"] = commit
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(path.stat().st_size)}
        sig = path.with_name(path.name + ".sig")
        if sig.is_file():
            headers["X-Commcanary-Signature"] = base64.b64encode(sig.read_bytes()).decode()
        url = f"{base}/api/v1/artifacts?{urllib.parse.urlencode(query)}"
        with open(path, "rb") as body:
            try:
                answer = _request("POST", url, token, body, headers)
            except PushError as exc:
                raise PushError(f"{path}: {str(exc).split(': ', 1)[1]}") from None
        out.append(Pushed(path, answer))
    return out


def suggested_analysis(pushed: Sequence[Pushed]) -> str | None:
    """The analysis raw evidence asks for: ``hang`` when a Flight Recorder
    dump or a text is among it, ``stragglers`` for profiler traces alone,
    ``None`` without raw evidence."""
    wanted = {_EVIDENCE[p.answer["kind"]] for p in pushed if p.answer.get("kind") in _EVIDENCE}
    if not wanted:
        return None
    return "hang" if "hang" in wanted else "stragglers"


def queue_analysis(server: str, token: str, workload_id: int, analysis: str, push_ids: list[int]) -> Any:
    url = f"{server.rstrip('/')}/api/v1/workloads/{workload_id}/analyses"
    body = json.dumps({"analysis": analysis, "pushes": push_ids}).encode()
    return _request("POST", url, token, body, {"Content-Type": "application/json"})


def evidence_ids(pushed: Sequence[Pushed]) -> list[int]:
    return [int(p.answer["push_id"]) for p in pushed if p.answer.get("kind") in _EVIDENCE]
