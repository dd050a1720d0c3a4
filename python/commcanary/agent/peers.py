"""Agents of one job on several nodes, joined (``--peers URL... --peer-token-file F``).

Each agent sees its own host's processes. When one raises an alarm it asks
every peer to collect its own processes' evidence under the same alarm
(``POST /peer/collect``), fetches what they collected (``GET
/peer/evidence?id=``, a tar of the files) and diagnoses the union, so a hang
whose root is on another node is still localized. ``/status`` lists the
peers' processes beside its own (``GET /status`` of each peer, every
:data:`REFRESH_S`).

Between agents every request carries the shared token (``Authorization:
Bearer``, compared in constant time); without ``--peer-token-file`` the
``/peer/`` routes answer 404. A peer's tar is untrusted: only regular files
whose names are evidence names (``rankN_stacks.txt``,
``rankN_exception.txt``, ``fr_<what>/fr_trace_rank_N``) are taken, each at
most :data:`MAX_FILE_BYTES`, at most :data:`MAX_FILES` of them.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import re
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "EVIDENCE_NAME",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "REFRESH_S",
    "Peers",
    "authorized",
    "evidence_tar",
    "extract_evidence",
]

#: Seconds between reads of the peers' status.
REFRESH_S = 2.0
#: Files and bytes per file taken from a peer's evidence.
MAX_FILES = 4096
MAX_FILE_BYTES = 256 << 20
#: The names evidence files have.
EVIDENCE_NAME = re.compile(r"(rank\d{1,7}_(stacks|exception)\.txt|fr_[a-z_]{1,32}/fr_trace_rank_\d{1,7})")


def authorized(header: str | None, token: str | None) -> bool:
    """Whether an ``Authorization`` header carries the peers' token."""
    if not token or not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer ") :].strip().encode(), token.encode())


def evidence_tar(folder: Path) -> bytes:
    """The evidence files under ``folder``, as a tar."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for path in sorted(folder.rglob("*")):
            name = path.relative_to(folder).as_posix()
            if path.is_file() and not path.is_symlink() and EVIDENCE_NAME.fullmatch(name):
                tar.add(path, arcname=name, recursive=False)
    return out.getvalue()


def extract_evidence(data: bytes, into: Path) -> list[str]:
    """The evidence files of a peer's tar written into ``into`` (an existing
    file is kept: this node's own evidence wins); the names taken."""
    taken: list[str] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            if len(taken) >= MAX_FILES:
                break
            if not member.isreg() or member.size > MAX_FILE_BYTES or not EVIDENCE_NAME.fullmatch(member.name):
                continue
            target = into / member.name
            if target.exists():
                continue
            source = tar.extractfile(member)
            if source is None:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES])
            taken.append(member.name)
    return taken


class Peers:
    """The other agents of the job, and what they last said."""

    def __init__(self, urls: list[str], token: str | None) -> None:
        self.urls = [u.rstrip("/") for u in urls]
        self.token = token
        self.views: dict[str, dict[str, Any]] = {}
        self.read_at = 0.0

    def _request(self, method: str, url: str, body: bytes | None = None, timeout: float = 2.0) -> bytes:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=body, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return bytes(reply.read(MAX_FILE_BYTES * 4))

    def refresh(self, now: float) -> None:
        """Each peer's ``/status``, at most every :data:`REFRESH_S`."""
        if now - self.read_at < REFRESH_S:
            return
        self.read_at = now
        for url in self.urls:
            try:
                doc = orjson.loads(self._request("GET", f"{url}/status", timeout=1.0))
                self.views[url] = {"read_at": now, "processes": doc.get("processes", []), "error": None}
            except (OSError, ValueError) as error:
                self.views.setdefault(url, {"processes": []})["error"] = str(error)

    def ask(self, ident: str) -> list[str]:
        """Asks every peer to collect its evidence for alarm ``ident``; the
        peers that took the request."""
        asked = []
        for url in self.urls:
            with contextlib.suppress(OSError, ValueError):
                self._request("POST", f"{url}/peer/collect", orjson.dumps({"id": ident}))
                asked.append(url)
        return asked

    def fetch(self, urls: list[str], ident: str, into: Path, wait_s: float) -> dict[str, list[str]]:
        """Each asked peer's evidence for ``ident`` (waiting up to ``wait_s``
        for it to finish collecting), written into ``into``."""
        got: dict[str, list[str]] = {}
        deadline = time.monotonic() + wait_s
        pending = list(urls)
        while pending and time.monotonic() < deadline:
            for url in list(pending):
                try:
                    data = self._request(
                        "GET", f"{url}/peer/evidence?id={urllib.parse.quote(ident)}", timeout=5.0
                    )
                except urllib.error.HTTPError as error:
                    if error.code == 409:  # still collecting
                        continue
                    pending.remove(url)
                    continue
                except (OSError, ValueError):
                    continue
                with contextlib.suppress(tarfile.TarError, EOFError, OSError):
                    got[url] = extract_evidence(data, into)
                pending.remove(url)
            if pending:
                time.sleep(0.5)
        return got
