"""The example traces name their generator; it exists, and what it writes compiles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import commcanary
from conftest import EXAMPLES

SCRIPT = EXAMPLES.parent / "make_synthetic_trace.py"


def test_the_named_generator_writes_a_trace_that_compiles(tmp_path: Path) -> None:
    for trace in EXAMPLES.glob("*.json"):
        if "make_synthetic_trace.py" in trace.read_text():
            assert SCRIPT.is_file()
    out = tmp_path / "synthetic.trace.json"
    subprocess.run([sys.executable, str(SCRIPT), "--events", "300", "-o", str(out)], check=True)
    again = tmp_path / "again.trace.json"
    subprocess.run([sys.executable, str(SCRIPT), "--events", "300", "-o", str(again)], check=True)
    assert out.read_bytes() == again.read_bytes()
    canary = commcanary.compile(out)
    assert canary.summary["source_events"] == 300
    assert canary.summary["canary_events"] < 300


def test_the_generator_refuses_to_overwrite_the_fixtures() -> None:
    target = EXAMPLES / "llama70b_tp8_trace.json"
    before = target.read_bytes()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "-o", str(target)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert target.read_bytes() == before
