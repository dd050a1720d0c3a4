"""Every command that reads a file, through the real entry point
(``commcanary.cli.main``), with the fuzzed bytes as one of its inputs.

The input's first byte picks the command line; the rest is the file. The
property is the command line's contract: exit 0, 1 (a negative result), 2 (a
usage refusal) or 3 (a refusal, exactly one ``commcanary: ...`` line on
stderr), never 70 (an internal error) and never an exception. Physical
replay is reached with torch hidden, so its input checks run and no process
starts; ``capture`` (which runs a program), ``keygen`` (which reads
nothing), ``serve`` (which runs a server; its uploads have their own tests,
``tests/test_serve_*.py``) and ``push`` (which talks to one) are left out, and the shards ``capture`` reads have their own
target (``fuzz_capture_shards.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness

sys.modules["torch"] = None  # type: ignore[assignment]  # physical replay stops at "needs torch"

with _harness.instrumented():
    import commcanary
    from commcanary import _core, signing
    from commcanary.cli import main

TRACE = _harness.ROOT / "examples" / "traces" / "llama70b_tp8_trace.json"
OUT = str(_harness.SCRATCH / "out")


def _fixtures() -> dict[str, str]:
    """A trace, its canary and a report (both signed), and the key pair."""
    d = _harness.SCRATCH
    shutil.copyfile(TRACE, d / "t.json")
    commcanary.compile(d / "t.json").write(d / "c.json")
    commcanary.replay(d / "c.json").write(d / "r.json")
    signing.generate_key(d / "k.pem")
    for artifact in ("c.json", "r.json"):
        signing.sign(d / artifact, d / "k.pem")
    return {n: str(d / n) for n in ("t.json", "c.json", "r.json", "k.pem", "k.pem.pub")}


FIX = _fixtures()
T, C, R, K, P = FIX["t.json"], FIX["c.json"], FIX["r.json"], FIX["k.pem"], FIX["k.pem.pub"]

# Each command line, given the fuzzed file F, and the kind of file F stands for
# (what its seeds are: see seeds()).
LINES: list[tuple[str, Callable[[str], list[str]]]] = [
    ("trace", lambda f: ["compile", f, "-o", OUT]),
    ("trace", lambda f: ["compile", f, "-o", OUT, "--lossless-timing", "--require-behavior-verification"]),
    ("canary", lambda f: ["replay", f, "-o", OUT, "--include-samples"]),
    ("backend", lambda f: ["replay", C, "-o", OUT, "--backend-file", f]),
    ("canary", lambda f: ["replay", f, "-o", OUT, "--physical", "gloo", "--nproc", "8"]),
    ("report", lambda f: ["compare", f, R, "-o", OUT]),
    ("report", lambda f: ["compare", R, f, "-o", OUT, "--html", OUT + ".html"]),
    ("report", lambda f: ["calibrate", f, "--canary", C, "-o", OUT]),
    (
        "configurations",
        lambda f: ["validate-model", C, "--configurations", f, "--physical", "gloo", "-o", OUT],
    ),
    ("report", lambda f: ["verify-report", f, C, "-o", OUT]),
    ("canary", lambda f: ["verify-report", R, f, "-o", OUT]),
    ("trace", lambda f: ["verify-fidelity", f, C, "-o", OUT]),
    ("canary", lambda f: ["verify-fidelity", T, f, "-o", OUT]),
    ("canary", lambda f: ["verify-behavior", T, f, "-o", OUT]),
    ("configurations", lambda f: ["verify-behavior", T, C, "--configurations", f, "-o", OUT]),
    ("report", lambda f: ["render-html", f, "-o", OUT]),
    ("kineto", lambda f: ["import-kineto", f, "-o", OUT]),
    ("canary", lambda f: ["export-param", f, "-o", OUT]),
    ("trace", lambda f: ["baseline", f, "-o", OUT, "--method", "frequency"]),
    ("trace", lambda f: ["reduce", f, "-o", OUT, "--max-oracle-calls", "8"]),
    ("evidence", lambda f: ["diagnose", "hang", f, "-o", OUT]),
    ("kineto", lambda f: ["diagnose", "stragglers", f, "-o", OUT]),
    ("kineto", lambda f: ["steps", f, "-o", OUT]),
    ("kineto", lambda f: ["timeline", f, "-o", OUT]),
    ("report", lambda f: ["sign", f, "--key", K]),
    ("key", lambda f: ["sign", C, "--key", f]),
    ("public", lambda f: ["verify-report", R, C, "-o", OUT, "--trusted-keys", f]),
    ("signature", lambda f: ["compare", _signed_report(f), R, "-o", OUT, "--trusted-keys", P]),
]


def seeds(directory: Path) -> None:
    """Write a seed for every command line: its index byte, then each file of its kind."""
    rust = _harness.ROOT / "rust" / "fuzz" / "corpus"
    backend = {
        "format": "commcanary.backend.v1",
        "backend": {
            "label": "fitted",
            "bandwidth_gbps": 10.7,
            "latency_floor_us": 293.0,
            "compute_pressure": 0.0,
            "overlap_efficiency": 1.0,
            "op_overrides": [{"op": "all_reduce", "latency_floor_us": 120.5, "bandwidth_gbps": 8.0}],
        },
    }
    configurations = b'[{"name":"a"},{"name":"b","latency_floor_us":3.5,"bandwidth_gbps":50.0}]'
    kinds: dict[str, list[bytes]] = {
        "trace": [Path(T).read_bytes()],
        "canary": [Path(C).read_bytes()],
        "report": [Path(R).read_bytes()],
        "configurations": [configurations],
        "backend": [json.dumps(backend).encode()],
        "kineto": [p.read_bytes() for p in sorted((rust / "kineto_import").iterdir())],
        "evidence": [
            p.read_bytes() for d in ("flight_recorder", "text_evidence") for p in sorted((rust / d).iterdir())
        ],
        # A test key from the all-zero seed: never commit a real private key.
        "key": [_core.signing_keypair(bytes(32))[0].encode()],
        "public": [Path(P).read_bytes()],
        "signature": [signing.signature_path(R).read_bytes()],
    }
    directory.mkdir(parents=True, exist_ok=True)
    for i, (kind, _) in enumerate(LINES):
        for j, body in enumerate(kinds[kind]):
            (directory / f"{i:02d}-{kind}-{j}").write_bytes(bytes([i]) + body)


def _signed_report(signature: str) -> str:
    """A copy of the report whose signature file holds the fuzzed bytes."""
    copy = _harness.SCRATCH / "signed.json"
    shutil.copyfile(R, copy)
    shutil.copyfile(signature, signing.signature_path(copy))
    return str(copy)


# One pair of buffers for every call: click caches a wrapper per stream it
# writes to (in a WeakKeyDictionary whose values hold the stream), so a new
# StringIO per call would be kept alive, call after call.
_OUT, _ERR = io.StringIO(), io.StringIO()


def one(data: bytes) -> None:
    if not data:
        return
    _, line = LINES[data[0] % len(LINES)]
    fuzzed = str(_harness.scratch("input.json", data[1:]))
    _harness.scratch("out")
    argv = ["--debug", *line(fuzzed)]
    out, err = _OUT, _ERR
    for buffer in (out, err):
        buffer.seek(0)
        buffer.truncate()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    problem = code not in (0, 1, 2, 3)
    if code == 3:
        lines = err.getvalue().splitlines()
        problem = len(lines) != 1 or not lines[0].startswith("commcanary: ")
    if problem:
        raise AssertionError(f"commcanary {' '.join(argv)} -> exit {code}\n{err.getvalue()}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write-seeds"]:
        seeds(Path(sys.argv[2]))
    else:
        _harness.fuzz(one)
