"""The walkthrough transcript, run against the installed CLI.

Every check listed in ``REQUIRED`` must print PASS, and the transcript as a
whole must close with ``N passed, 0 failed``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REQUIRED = [
    "compile-demo",
    "compile-demo-byte-fields",
    "compile-demo-no-larger-than-seed",
    "compile-long",
    "compile-long-no-larger-than-seed",
    "compile-budget-refused",
    "replay-baseline",
    "replay-candidate",
    "compare-fail",
    "compare-json-written",
    "compare-abs-warn",
    "compare-abs-warn-names-hidden-drop (FIX)",
    "compare-pct-warn",
    "verify-report-clean",
    "verify-report-tamper",
    "behavior-search-compile",
    "behavior-search-approximation",
    "behavior-search-announced",
    "behavior-search-ledger-not-in-bytes (FIX)",
    "behavior-search-verifies",
    "import-kineto",
    "import-kineto-events",
    "import-kineto-notes",
    "import-kineto-truncated-refused",
    "export-param",
    "export-param-init-entry",
    "capture-empty-refused",
    "reduce",
    "reduce-budget-line",
    "reduce-ledger",
    "compile-reduced",
    "verify-behavior-reduced",
    "verify-behavior-reduced-partial-source",
    "require-behavior-verification-refuses-reduced (FIX)",
    "baseline-cluster",
    "compile-cluster",
    "verify-behavior-cluster",
]


def transcript_script() -> Path:
    return HERE / "conformance" / "seed_transcript.py"


# Runs the transcript and prints every check it reached, even when a later step
# of the walkthrough (a command a later issue adds) makes the script stop early.
RUNNER = """
import sys
sys.path.insert(0, sys.argv[1])
import seed_transcript as t
sys.argv = ["seed_transcript.py", "--cli", sys.argv[2]]
try:
    t.main()
except BaseException as exc:
    for name, ok, why in t.results:
        print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
    print("stopped early:", type(exc).__name__, exc)
"""


@pytest.fixture(scope="module")
def transcript() -> dict[str, str]:
    cli = shutil.which("commcanary")
    assert cli is not None, "the commcanary console script must be installed"
    script = transcript_script()
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, str(script.parent), cli],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    results: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if line.endswith(" failed") and " passed, " in line:
            results["closing line"] = line
        if line.startswith(("PASS ", "FAIL ")):
            _status, _, rest = line.partition(" ")
            name = rest.split(": ", 1)[0]
            results[name] = line
    assert results, f"transcript printed no results: {proc.stdout!r} {proc.stderr!r}"
    return results


@pytest.mark.parametrize("check", REQUIRED)
def test_walkthrough_check_passes(transcript: dict[str, str], check: str) -> None:
    line = transcript.get(check)
    assert line is not None, f"{check} missing from transcript"
    assert line.startswith("PASS"), line


def test_the_whole_walkthrough_passes(transcript: dict[str, str]) -> None:
    closing = transcript.get("closing line", "")
    assert closing.endswith(" passed, 0 failed"), closing or "no closing line"
    failed = [line for line in transcript.values() if line.startswith("FAIL")]
    assert failed == []
