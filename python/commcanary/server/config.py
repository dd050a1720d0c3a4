"""The server's settings: where it keeps its data, which database, the
limits of what it accepts, how long a session lasts."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ServerConfig"]

#: The largest upload, in bytes as sent.
MAX_UPLOAD_BYTES = 512 << 20
#: The largest a gzip upload may decompress to, and its largest ratio.
MAX_INFLATED_BYTES = 2 << 30
MAX_INFLATE_RATIO = 100


@dataclass(frozen=True)
class ServerConfig:
    """What one server runs with."""

    #: Where the database (SQLite), the artifacts and the keys live.
    data_dir: Path
    #: A SQLAlchemy URL; ``None``: SQLite in the data directory.
    database_url: str | None = None
    #: Largest upload, bytes as sent.
    max_upload_bytes: int = MAX_UPLOAD_BYTES
    #: Largest decompressed size of a gzip upload, and its largest ratio.
    max_inflated_bytes: int = MAX_INFLATED_BYTES
    max_inflate_ratio: int = MAX_INFLATE_RATIO
    #: A session unused this long ends (seconds), and none lasts longer than
    #: ``session_max_s``.
    session_idle_s: int = 30 * 60
    session_max_s: int = 12 * 3600
    #: Failed logins for one name (or from one address) within
    #: ``login_window_s`` after which logins are refused for the window.
    login_failures_per_name: int = 10
    login_failures_per_address: int = 30
    login_window_s: int = 15 * 60
    #: Cookies marked ``Secure`` (behind HTTPS).
    secure_cookies: bool = False
    #: Analyses of raw evidence run at once.
    analysis_workers: int = 1
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def database(self) -> str:
        """The SQLAlchemy URL in use."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'commcanary.db').resolve()}"

    @property
    def objects_dir(self) -> Path:
        return self.data_dir / "objects"

    @property
    def tmp_dir(self) -> Path:
        return self.data_dir / "tmp"

    @property
    def bootstrap_token_path(self) -> Path:
        return self.data_dir / "bootstrap-token"

    @property
    def cookie_key_path(self) -> Path:
        return self.data_dir / "cookie-key"

    @property
    def trusted_keys_path(self) -> Path:
        """Public keys whose signatures the server marks as verified (PEM)."""
        return self.data_dir / "trusted-keys.pem"

    def prepare(self) -> None:
        """Creates the data directory and its folders (owner-only)."""
        for d in (self.data_dir, self.objects_dir, self.tmp_dir):
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o700)
