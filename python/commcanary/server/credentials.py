"""Secrets: passwords (argon2id), random tokens and the hashes they are kept
as, the key that signs session cookies, and the first start's bootstrap
token file."""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from pathlib import Path

import blake3
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from commcanary.errors import InputError

__all__ = [
    "PASSWORD_MAX_BYTES",
    "PASSWORD_MIN_BYTES",
    "CookieSigner",
    "check_password",
    "check_password_rules",
    "hash_password",
    "new_token",
    "read_bootstrap_token",
    "token_hash",
    "write_bootstrap_token",
]

#: A password's length, in UTF-8 bytes (argon2 takes any; 72 keeps the
#: limit bcrypt users know, and bounds the work a login costs).
PASSWORD_MIN_BYTES = 12
PASSWORD_MAX_BYTES = 72

_hasher = PasswordHasher()  # argon2id, the library's (RFC 9106) parameters

#: A password hash to check against when the name is unknown, so a login
#: costs the same either way.
_DUMMY_HASH = _hasher.hash("commcanary: no such user")


def check_password_rules(password: str) -> None:
    """:class:`InputError` unless ``password`` is 12 to 72 bytes of UTF-8."""
    n = len(password.encode("utf-8", "surrogatepass"))
    if not PASSWORD_MIN_BYTES <= n <= PASSWORD_MAX_BYTES:
        raise InputError(
            f"a password is {PASSWORD_MIN_BYTES} to {PASSWORD_MAX_BYTES} bytes long (this one is {n})"
        )


def hash_password(password: str) -> str:
    check_password_rules(password)
    return _hasher.hash(password)


def check_password(stored: str | None, password: str) -> bool:
    """Whether ``password`` is the one ``stored`` hashes (``None``: no such
    account; the same work is done, and the answer is no)."""
    if len(password.encode("utf-8", "surrogatepass")) > PASSWORD_MAX_BYTES:
        return False
    try:
        return _hasher.verify(stored or _DUMMY_HASH, password) and stored is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def new_token(prefix: str = "") -> str:
    """A random token (256 bits)."""
    return prefix + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What a token is kept as (BLAKE3, hex): a token is random, so a fast
    hash is as safe as a slow one."""
    return blake3.blake3(token.encode()).hexdigest()


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class CookieSigner:
    """Signs and checks cookie values with the server's key (``cookie-key``
    in the data directory, 32 random bytes, owner-only)."""

    def __init__(self, key_path: Path) -> None:
        if not key_path.exists():
            with contextlib.suppress(FileExistsError):
                _write_private(key_path, secrets.token_bytes(32))
        self._key = key_path.read_bytes()
        if len(self._key) != 32:
            raise InputError(f"{key_path}: expected 32 bytes (a cookie key), found {len(self._key)}")

    def _mac(self, value: str) -> str:
        return blake3.blake3(value.encode(), key=self._key).hexdigest()[:32]

    def sign(self, value: str) -> str:
        return f"{value}.{self._mac(value)}"

    def unsign(self, signed: str | None) -> str | None:
        """The value ``signed`` carries, or ``None`` when its signature is wrong."""
        if not signed or "." not in signed:
            return None
        value, mac = signed.rsplit(".", 1)
        return value if hmac.compare_digest(mac, self._mac(value)) else None


def write_bootstrap_token(path: Path) -> bool:
    """Writes a one-time token to ``path`` (mode 0600) unless one is there;
    whether it wrote one."""
    try:
        _write_private(path, (new_token("ccboot_") + "\n").encode())
    except FileExistsError:
        return False
    return True


def read_bootstrap_token(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None
