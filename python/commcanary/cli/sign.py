"""Signed artifacts on the command line: ``keygen``, ``sign``, and the
``--sign-key`` and ``--trusted-keys`` options other commands share."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import errors_exit

__all__ = [
    "SignKey",
    "TrustedKeys",
    "check_signing_key",
    "check_trusted",
    "keygen_command",
    "sign_command",
    "sign_output",
]

SignKey = Annotated[
    Path | None,
    typer.Option(
        "--sign-key",
        metavar="KEY",
        help="Sign what is written with this Ed25519 private key (commcanary keygen): a detached OUT.sig beside it.",
    ),
]
TrustedKeys = Annotated[
    Path | None,
    typer.Option(
        "--trusted-keys",
        metavar="FILE",
        help=(
            "Public keys (PEM, one or more) to trust: refuse any canary or report input that is not signed "
            "by one of them (a valid ARTIFACT.sig beside it)."
        ),
    ),
]


def check_signing_key(
    ctx: typer.Context,
    key: Path | None,
    inputs: Mapping[str, Path | None],
    outputs: Mapping[str, Path | None],
    option: str = "sign_key",
) -> None:
    """Before any work, when ``key`` (the parameter ``option``) is given: refuse
    a signature file to be written (``OUT.sig`` for each output) that is an
    input, an output or the key itself, then check the key is a private key."""
    if key is None:
        return
    from commcanary.cli import describe
    from commcanary.io import check_distinct_paths, check_output_path
    from commcanary.signing import key_id, signature_path

    signed = {"output", "search_evidence_output", "artifact"}
    signatures = [signature_path(p) for name, p in outputs.items() if p is not None and name in signed]
    known = [(describe(ctx, name), path) for name, path in {**inputs, **outputs}.items()]
    check_distinct_paths(
        [(option, "a signature file", p) for p in signatures], [*known, (describe(ctx, option), key)]
    )
    for path in signatures:
        check_output_path(path)
    key_id(key)


def sign_output(key: Path | None, *artifacts: Path) -> None:
    """After writing: sign each artifact with ``key`` (when given) and say so."""
    if key is None:
        return
    from commcanary.signing import key_id, sign

    ident = key_id(key)
    for artifact in artifacts:
        typer.echo(f"signed {artifact} with {ident}: {sign(artifact, key)}")


def check_trusted(
    trusted: Path | None, artifacts: Mapping[str, Path | None], outputs: Mapping[str, Path | None]
) -> None:
    """Before any work: with ``--trusted-keys``, refuse an output that would
    overwrite the signature of an input, then each named artifact that a
    trusted key has not signed; print who signed each."""
    if trusted is None:
        return
    from commcanary.io import check_distinct_paths
    from commcanary.signing import signature_path, verify_all

    paths = [p for p in artifacts.values() if p is not None]
    check_distinct_paths(
        [(name, f"the --{name} file", p) for name, p in outputs.items()],
        [(f"the signature of {p}", signature_path(p)) for p in paths],
    )
    for path, ident in zip(paths, verify_all(paths, trusted), strict=True):
        typer.echo(f"signature: {path} signed by {ident} (trusted)")


PrivateKeyOut = Annotated[
    Path,
    typer.Option(
        "--output",
        "-o",
        metavar="KEY",
        help="Where to write the private key (mode 0600); the public key goes to KEY.pub.",
    ),
]
Force = Annotated[bool, typer.Option("--force", help="Overwrite an existing KEY or KEY.pub.")]


def keygen_command(ctx: typer.Context, output: PrivateKeyOut, force: Force = False) -> None:
    """Write a new Ed25519 key pair for signing canaries and reports."""
    with errors_exit(ctx):
        from commcanary.signing import generate_key

        private, public, ident = generate_key(output, overwrite=force)
        typer.echo(f"key {ident}")
        typer.echo(f"private key: {private} (keep it secret; mode 0600)")
        typer.echo(f"public key: {public} (give it to verifiers: --trusted-keys)")


Artifact = Annotated[
    Path, typer.Argument(metavar="ARTIFACT", help="The canary, report or other file to sign.")
]
Key = Annotated[
    Path, typer.Option("--key", metavar="KEY", help="The Ed25519 private key (commcanary keygen).")
]


def sign_command(ctx: typer.Context, artifact: Artifact, key: Key) -> None:
    """Sign a file with an Ed25519 key: write a detached ARTIFACT.sig beside it."""
    with errors_exit(ctx):
        if not artifact.is_file():
            from commcanary.errors import InputError

            raise InputError(f"{os.fspath(artifact)} does not exist")
        check_signing_key(ctx, key, inputs={}, outputs={"artifact": artifact}, option="key")
        sign_output(key, artifact)
