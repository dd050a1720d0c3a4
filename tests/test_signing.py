"""Signed artifacts: ``keygen``, ``sign``, ``--sign-key`` on the writers and
``--trusted-keys`` on every verifier. A signed canary or report verifies;
one changed byte of the artifact or of its signature, a key outside the
trusted set, or no signature at all is refused by each verifying command
(exit 3, one line naming the file, nothing written). Private keys never
appear in an artifact."""

from __future__ import annotations

import base64
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

import commcanary
from commcanary import signing
from commcanary.cli import app
from commcanary.errors import InputError
from conftest import EXAMPLES

runner = CliRunner()
DEMO = EXAMPLES / "llama70b_tp8_trace.json"


def run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A key pair, a second (untrusted) one, and a canary and a report signed as they were written."""
    d = tmp_path_factory.mktemp("signed")
    trace = d / "t.json"
    shutil.copyfile(DEMO, trace)
    for name in ("k.pem", "other.pem"):
        code, out, err = run("keygen", "-o", d / name)
        assert code == 0, err
    canary, report = d / "c.json", d / "r.json"
    code, out, err = run("compile", trace, "-o", canary, "--sign-key", d / "k.pem")
    assert code == 0, err
    assert f"signed {canary} with " in out
    code, out, err = run("replay", canary, "-o", report, "--sign-key", d / "k.pem")
    assert code == 0, err
    return {
        "dir": d,
        "trace": trace,
        "key": d / "k.pem",
        "trusted": d / "k.pem.pub",
        "untrusted": d / "other.pem.pub",
        "canary": canary,
        "report": report,
    }


# Each verifying command, given (files, canary, report, output): its command line.
Verifier = Callable[[dict[str, Path], Path, Path, Path], list[str | Path]]
VERIFIERS: dict[str, Verifier] = {
    "verify-report": lambda f, c, r, o: ["verify-report", r, c, "-o", o],
    "verify-fidelity": lambda f, c, r, o: ["verify-fidelity", f["trace"], c, "-o", o],
    "verify-behavior": lambda f, c, r, o: ["verify-behavior", f["trace"], c, "-o", o],
    "compare": lambda f, c, r, o: ["compare", r, r, "-o", o],
}


def test_keygen_writes_a_private_key_only_its_owner_reads(tmp_path: Path) -> None:
    code, out, err = run("keygen", "-o", tmp_path / "id.pem")
    assert code == 0, err
    private, public = tmp_path / "id.pem", tmp_path / "id.pem.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    ident = signing.key_id(private)
    assert out.splitlines()[0] == f"key {ident}"
    assert signing.trusted_key_ids(public) == [ident]
    before = private.read_bytes()
    code, _, err = run("keygen", "-o", private)
    assert code == 3 and "it exists" in err
    assert private.read_bytes() == before
    assert run("keygen", "-o", private, "--force")[0] == 0
    assert private.read_bytes() != before
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("command", VERIFIERS)
def test_a_signed_input_verifies(signed: dict[str, Path], tmp_path: Path, command: str) -> None:
    out = tmp_path / "v.json"
    args = VERIFIERS[command](signed, signed["canary"], signed["report"], out)
    code, stdout, err = run(*args, "--trusted-keys", signed["trusted"])
    assert code == 0, err
    ident = signing.key_id(signed["key"])
    assert f"signed by {ident} (trusted)" in stdout
    assert out.exists()


def _tampered(signed: dict[str, Path], tmp_path: Path, how: str) -> tuple[Path, Path]:
    """Copies of the canary and report, both changed as ``how`` says."""
    copies = []
    for name in ("canary", "report"):
        artifact = tmp_path / signed[name].name
        shutil.copyfile(signed[name], artifact)
        signature = signing.signature_path(artifact)
        shutil.copyfile(signing.signature_path(signed[name]), signature)
        if how == "artifact byte":
            data = bytearray(artifact.read_bytes())
            data[len(data) // 2] ^= 0x01
            artifact.write_bytes(bytes(data))
        elif how == "signature byte":
            data = bytearray(signature.read_bytes())
            at = data.index(b'"signature":"') + len(b'"signature":"') + 7
            data[at] = ord("0") if data[at] != ord("0") else ord("1")
            signature.write_bytes(bytes(data))
        elif how == "unsigned":
            signature.unlink()
        elif how == "untrusted key":
            signing.sign(artifact, signed["dir"] / "other.pem")
        copies.append(artifact)
    return copies[0], copies[1]


REFUSALS = {
    "artifact byte": "changed after it was signed",
    "signature byte": "does not verify",
    "unsigned": "not signed",
    "untrusted key": "which is not among the trusted keys",
}


@pytest.mark.parametrize("how", REFUSALS)
@pytest.mark.parametrize("command", VERIFIERS)
def test_a_tampered_input_is_refused(signed: dict[str, Path], tmp_path: Path, command: str, how: str) -> None:
    canary, report = _tampered(signed, tmp_path, how)
    out = tmp_path / "v.json"
    args = VERIFIERS[command](signed, canary, report, out)
    code, stdout, err = run(*args, "--trusted-keys", signed["trusted"])
    assert code == 3, (stdout, err)
    (line,) = err.splitlines()
    assert REFUSALS[how] in line
    first = report if command in ("verify-report", "compare") else canary
    assert line.startswith(f"commcanary: {first}"), line
    assert not out.exists()


def test_without_trusted_keys_nothing_is_checked(signed: dict[str, Path], tmp_path: Path) -> None:
    canary, report = _tampered(signed, tmp_path, "unsigned")
    assert run("verify-report", report, canary, "-o", tmp_path / "v.json")[0] == 0


def test_private_keys_never_appear_in_artifacts(signed: dict[str, Path]) -> None:
    pem = signed["key"].read_text()
    body = "".join(line for line in pem.splitlines() if not line.startswith("-----"))
    der = base64.b64decode(body)
    assert len(der) == 48  # PKCS#8 v1: a 16-byte header and the 32-byte seed
    seed = der[16:]
    for path in (signed["canary"], signed["report"], *signed["dir"].glob("*.sig"), signed["trusted"]):
        data = path.read_bytes()
        for secret in (body.encode(), der, seed, seed.hex().encode()):
            assert secret not in data, path


def test_a_wrong_signing_key_is_refused_before_any_work(signed: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    code, stdout, err = run("compile", signed["trace"], "-o", out, "--sign-key", signed["trusted"])
    assert code == 3
    assert (
        err
        == f"commcanary: {signed['trusted']}: not an Ed25519 private key (PKCS#8 PEM, as `commcanary keygen` writes)\n"
    )
    assert stdout == "" and not out.exists()


def test_a_private_key_given_as_trusted_keys_is_named(signed: dict[str, Path], tmp_path: Path) -> None:
    code, _, err = run(
        "verify-report",
        signed["report"],
        signed["canary"],
        "-o",
        tmp_path / "v.json",
        "--trusted-keys",
        signed["key"],
    )
    assert code == 3
    assert (
        err == f"commcanary: {signed['key']}: holds a private key; trust its public half (KEY.pub) instead\n"
    )


def test_a_trusted_key_file_may_hold_several_keys(signed: dict[str, Path], tmp_path: Path) -> None:
    both = tmp_path / "team.pub"
    both.write_text(
        "# ours\n" + signed["untrusted"].read_text() + "# theirs\n" + signed["trusted"].read_text()
    )
    assert len(signing.trusted_key_ids(both)) == 2
    assert signing.verify(signed["canary"], both) == signing.key_id(signed["key"])


def test_sign_signs_any_file_and_the_library_verifies_it(signed: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "notes.txt"
    page.write_text("anything at all\n")
    code, out, err = run("sign", page, "--key", signed["key"])
    assert code == 0, err
    assert out == f"signed {page} with {signing.key_id(signed['key'])}: {page}.sig\n"
    assert signing.verify(page, signed["trusted"]) == signing.key_id(signed["key"])
    page.write_text("anything at all!\n")
    with pytest.raises(InputError, match="changed after it was signed"):
        signing.verify(page, signed["trusted"])


def test_signing_leaves_the_canonical_bytes_alone(signed: dict[str, Path], tmp_path: Path) -> None:
    plain = tmp_path / "c.json"
    commcanary.compile(signed["trace"]).write(plain)
    assert plain.read_bytes() == signed["canary"].read_bytes()


def test_a_trusted_key_file_with_a_private_key_anywhere_is_refused(
    signed: dict[str, Path], tmp_path: Path
) -> None:
    mixed = tmp_path / "mixed.pub"
    mixed.write_text(signed["trusted"].read_text() + signed["key"].read_text())
    with pytest.raises(InputError, match="holds a private key"):
        signing.trusted_key_ids(mixed)


def test_no_output_overwrites_a_signature(signed: dict[str, Path], tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    # replay --sign-key: the page would be overwritten by the report's signature.
    code, _, err = run(
        "replay", signed["canary"], "-o", report, "--html", f"{report}.sig", "--sign-key", signed["key"]
    )
    assert code == 2 and "--sign-key" in err, err
    assert not report.exists()
    # A verifier's output would overwrite the signature it checks.
    sig = signing.signature_path(signed["canary"])
    before = sig.read_bytes()
    code, _, err = run(
        "verify-fidelity", signed["trace"], signed["canary"], "-o", sig, "--trusted-keys", signed["trusted"]
    )
    assert code == 2 and f"is the signature of {signed['canary']}" in err, err
    assert sig.read_bytes() == before
