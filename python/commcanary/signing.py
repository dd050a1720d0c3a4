"""Signed artifacts: Ed25519 key pairs, detached signatures, trusted keys.

A canary or report is signed by a detached ``commcanary.signature.v1``
document written beside it (``canary.json`` → ``canary.json.sig``), so the
artifact's canonical bytes, hashes and byte ratio are untouched. The signature
covers the artifact's bytes exactly as stored (through their BLAKE3 digest);
the Rust core (``commcanary-core``'s ``signing`` module) does the
cryptography with ``ed25519-dalek``.

Keys are the formats ``openssl`` reads: the private key is PKCS#8 PEM, written
with file mode 0600 and never copied into any artifact; the public key is
SubjectPublicKeyInfo PEM. A trusted key file is one or more public keys,
concatenated (comments between the blocks are ignored).

Verification (:func:`verify`) accepts an artifact only when its signature
file exists, parses, names a trusted key, matches the artifact's current
bytes and verifies; otherwise it raises :class:`~commcanary.errors.InputError`
naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from commcanary import _core
from commcanary.errors import InputError, OutputError
from commcanary.io import check_output_path, write_bytes_atomic

__all__ = [
    "SIGNATURE_SUFFIX",
    "generate_key",
    "key_id",
    "public_key_path",
    "sign",
    "signature_path",
    "trusted_key_ids",
    "verify",
    "verify_all",
]

#: What a signature file's name adds to its artifact's.
SIGNATURE_SUFFIX = ".sig"
#: What a public key file's name adds to its private key's.
PUBLIC_SUFFIX = ".pub"

PathArg = str | os.PathLike[str]


def signature_path(artifact: PathArg) -> Path:
    """Where the signature of ``artifact`` lives: ``ARTIFACT.sig``."""
    return Path(os.fspath(artifact) + SIGNATURE_SUFFIX)


def public_key_path(private_key: PathArg) -> Path:
    """Where :func:`generate_key` puts the public half of ``private_key``."""
    return Path(os.fspath(private_key) + PUBLIC_SUFFIX)


def generate_key(private_key: PathArg, *, overwrite: bool = False) -> tuple[Path, Path, str]:
    """Write a new key pair: ``private_key`` (mode 0600) and ``private_key.pub``.

    Returns ``(private path, public path, key id)``. An existing private or
    public key file is refused unless ``overwrite``.
    """
    private = check_output_path(private_key)
    public = check_output_path(public_key_path(private))
    if not overwrite:
        for path in (private, public):
            if path.exists():
                raise OutputError(f"cannot write {path}: it exists (a key is never overwritten unless asked)")
    private_pem, public_pem = _core.signing_keypair(os.urandom(32))
    _write_private(private, private_pem.encode("ascii"), overwrite)
    write_bytes_atomic(public, public_pem.encode("ascii"))
    return private, public, key_id(private)


def _write_private(path: Path, data: bytes, overwrite: bool) -> None:
    """Write ``data`` to ``path`` through a temporary file that is 0600 from
    its creation (``mkstemp``), so the key is never readable by others, not
    even for a moment; without ``overwrite`` it is linked into place, which
    fails if a file appeared at ``path`` meanwhile."""
    import tempfile

    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from None
    temporary = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if overwrite:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)
    except FileExistsError:
        raise OutputError(
            f"cannot write {path}: it exists (a key is never overwritten unless asked)"
        ) from None
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        temporary.unlink(missing_ok=True)


def key_id(private_key: PathArg) -> str:
    """The identifier (``ed25519:`` + 16 hex digits) of a private key file's
    public half; checks that the file is an Ed25519 private key."""
    return _core.private_key_id(os.fspath(private_key))


def trusted_key_ids(trusted_keys: PathArg) -> list[str]:
    """The identifiers of the public keys in a trusted key file (checks it)."""
    return _core.trusted_key_ids(os.fspath(trusted_keys))


def sign(artifact: PathArg, private_key: PathArg) -> Path:
    """Sign ``artifact`` with ``private_key``; write and return ``ARTIFACT.sig``."""
    target = check_output_path(signature_path(artifact))
    document = _core.sign_file(os.fspath(artifact), os.fspath(private_key))
    return write_bytes_atomic(target, document)


def verify(artifact: PathArg, trusted_keys: PathArg) -> str:
    """Check that ``artifact`` carries a valid signature by a key of
    ``trusted_keys``; return that key's identifier.

    Raises :class:`InputError` naming the file: unsigned, malformed
    signature, untrusted key, changed since it was signed, or a signature
    that does not verify.
    """
    signature = signature_path(artifact)
    if not Path(artifact).is_file():
        raise InputError(f"{os.fspath(artifact)} does not exist")
    if not signature.is_file():
        raise InputError(
            f"{os.fspath(artifact)}: not signed (no {signature.name} beside it); --trusted-keys requires a signature"
        )
    return _core.verify_file(os.fspath(artifact), os.fspath(signature), os.fspath(trusted_keys))


def verify_all(artifacts: Iterable[PathArg | None], trusted_keys: PathArg | None) -> list[str]:
    """:func:`verify` each artifact given (``None`` entries skipped); nothing
    when ``trusted_keys`` is ``None``. Returns the key identifiers in order."""
    if trusted_keys is None:
        return []
    trusted_key_ids(trusted_keys)
    return [verify(path, trusted_keys) for path in artifacts if path is not None]
