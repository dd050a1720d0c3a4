"""What every Python fuzz target shares.

A target is a function of one ``bytes`` input. It may return, or raise a
:class:`commcanary.errors.CommCanaryError` (the documented refusal, exit 3 on
the command line) other than ``InternalError`` (a Rust panic, a bug); any
other exception is a finding and stops the fuzzer
with the input saved. Inputs become files in one scratch directory (under
``/dev/shm`` when there is one), rewritten at each execution.

Run a target with atheris (``pip install atheris``); the arguments are
libFuzzer's: ``python fuzz/fuzz_cli.py -runs=100000 CORPUS_DIR...``, or
every target through ``scripts/fuzz.sh --python``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_base = "/dev/shm" if os.path.isdir("/dev/shm") else None
SCRATCH = Path(tempfile.mkdtemp(prefix="commcanary-fuzz-", dir=_base))


def scratch(name: str, data: bytes | None = None) -> Path:
    """``SCRATCH/name``, holding ``data`` when given (else removed if present)."""
    path = SCRATCH / name
    if path.is_dir():
        shutil.rmtree(path)
    elif data is None:
        path.unlink(missing_ok=True)
    if data is not None:
        path.write_bytes(data)
    return path


def fuzz(target: Callable[[bytes], None]) -> None:
    """Run ``target`` under atheris with this process's command line; the
    commcanary package is instrumented for coverage."""
    import atheris

    from commcanary.errors import CommCanaryError, InternalError

    def one(data: bytes) -> None:
        try:
            target(data)
        except InternalError:
            raise  # a Rust panic or another bug: a finding
        except CommCanaryError:
            pass

    try:
        atheris.Setup(sys.argv, one)
        atheris.Fuzz()
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)


def instrumented() -> contextlib.AbstractContextManager[object]:
    """A context in which imports of commcanary are instrumented for coverage."""
    import atheris

    manager: contextlib.AbstractContextManager[object] = atheris.instrument_imports(include=["commcanary"])
    return manager
