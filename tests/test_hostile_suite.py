"""The hostile-input suite (``docs/resource-limits.md``).

Each case runs the real command line in its own process and checks what a
user would see: the documented exit status, one line on stderr naming the
limit or the field, a peak resident set of at most 200 MiB (read from the
child's own rusage), no output written and a previous output left intact.
Wall times are measured by ``benches/hostile_bench.py``, not asserted here:
this machine is shared.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import commcanary
from commcanary import _core

RSS_LIMIT_MIB = 200
PREVIOUS = b"previous output\n"


#: Runs the command line and prints its peak RSS in KiB. A small process
#: between the test and the command: a child's peak counts the pages of the
#: process it was forked from, and a test runner is large.
_MEASURE = """
import os, subprocess, sys
proc = subprocess.Popen([sys.executable, "-m", "commcanary", *sys.argv[1:]], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def run_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """Exit status, stderr and peak RSS (MiB) of ``commcanary ARGS``."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=True,
    )
    status, kib = done.stdout.split()
    return int(status), done.stderr, int(kib) / 1024


def trace_text(events: int = 4) -> str:
    ev = [{"op": "all_reduce", "bytes": 1024, "ranks": [0, 1], "gap_us": 10.0} for _ in range(events)]
    return json.dumps({"format": "commcanary.trace.v1", "events": ev})


def gzip_bomb(d: Path) -> list[str]:
    """About 4 MB inflating to 4 GiB: one member of 16 MiB of spaces, 256 times."""
    member = gzip.compress(b" " * (16 << 20), compresslevel=9)
    (d / "bomb.json.gz").write_bytes(member * 256)
    return ["compile", "bomb.json.gz", "-o", "out.json"]


def expansion_bomb(d: Path) -> list[str]:
    """A 2 KB canary whose weights multiply to 10^18 occurrences."""
    (d / "t.json").write_text(trace_text(6))
    commcanary.compile(d / "t.json").write(d / "c.json")
    doc = json.loads((d / "c.json").read_text())
    doc["events"][0]["timing"][0][0] = 10**18
    (d / "bomb.canary.json").write_text(json.dumps(doc))
    assert (d / "bomb.canary.json").stat().st_size < 4096
    return ["replay", "bomb.canary.json", "-o", "out.json"]


def deep_nesting(d: Path) -> list[str]:
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    return ["compile", "deep.json", "-o", "out.json"]


def huge_rank_list(d: Path) -> list[str]:
    """A 10^8-element rank list: a 200 MB plain file."""
    with (d / "ranks.json").open("w") as f:
        f.write('{"format":"commcanary.trace.v1","events":[{"op":"all_reduce","bytes":8,"ranks":[')
        chunk = "1," * 1_000_000
        for _ in range(100):
            f.write(chunk)
        f.write("1]}]}")
    return ["compile", "ranks.json", "-o", "out.json"]


def literal(name: str, text: bytes) -> Callable[[Path], list[str]]:
    def build(d: Path) -> list[str]:
        (d / name).write_bytes(text)
        return ["compile", name, "-o", "out.json"]

    return build


def kineto_empties(d: Path) -> list[str]:
    (d / "kineto.json").write_text('{"traceEvents":[' + ",".join(["{}"] * 10_000_000) + "]}")
    return ["import-kineto", "kineto.json", "-o", "out.json"]


def code_running_pickle(d: Path) -> list[str]:
    """A Flight Recorder dump whose pickle calls os.system on load."""
    witness = d / "pwned"
    # GLOBAL os.system, the command, TUPLE1, REDUCE: what __reduce__ pickles.
    payload = b"cos\nsystem\n(V" + f"touch {witness}".encode() + b"\ntR."
    (d / "fr_trace_rank_0").write_bytes(payload)
    return ["diagnose", "hang", "fr_trace_rank_0", "-o", "out.json"]


EVENT = b'{"op":"all_reduce","bytes":8,"ranks":[0,1]'
CASES: dict[str, tuple[Callable[[Path], list[str]], int, str]] = {
    "gzip bomb": (gzip_bomb, 3, "max_decompression_ratio=200"),
    "expansion bomb": (expansion_bomb, 3, "max_expanded_occurrences=100000000"),
    "10^5-deep nesting": (deep_nesting, 3, "max_json_depth=64"),
    "10^8-element rank list": (huge_rank_list, 3, "field 'ranks'"),
    "duplicate keys": (
        literal("dup.json", b'{"format":"commcanary.trace.v1","format":"x","events":[]}'),
        3,
        'duplicate object key "format"',
    ),
    "NaN literal": (
        literal("nan.json", b'{"format":"commcanary.trace.v1","events":[' + EVENT + b',"gap_us":NaN}]}'),
        3,
        "NaN and Infinity are not allowed",
    ),
    "Infinity literal": (
        literal(
            "inf.json", b'{"format":"commcanary.trace.v1","events":[' + EVENT + b',"gap_us":-Infinity}]}'
        ),
        3,
        "NaN and Infinity are not allowed",
    ),
    "number beyond f64": (
        literal("f.json", b'{"format":"commcanary.trace.v1","events":[' + EVENT + b',"gap_us":1e400}]}'),
        3,
        "field 'gap_us'",
    ),
    "number beyond i64": (
        literal(
            "i.json",
            b'{"format":"commcanary.trace.v1","events":[{"op":"all_reduce","bytes":'
            + b"9" * 30
            + b',"ranks":[0,1]}]}',
        ),
        3,
        "field 'bytes'",
    ),
    "invalid UTF-8": (
        literal(
            "u.json",
            b'{"format":"commcanary.trace.v1","events":[{"op":"all_reduce\xff","bytes":8,"ranks":[0,1]}]}',
        ),
        3,
        "is not UTF-8 JSON",
    ),
    "10^7 empty Kineto events": (kineto_empties, 3, "no importable record_param_comms"),
    "a pickle that runs code": (code_running_pickle, 3, "fr_trace_rank_0"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_is_refused_cheaply_and_cleanly(tmp_path: Path, name: str) -> None:
    build, code, fragment = CASES[name]
    args = build(tmp_path)
    (tmp_path / "out.json").write_bytes(PREVIOUS)
    before = sorted(p.name for p in tmp_path.iterdir())
    status, err, rss = run_cli(args, tmp_path)
    for big in tmp_path.iterdir():  # hundreds of MB: not kept for the next tests
        if big.stat().st_size > 1 << 20:
            big.unlink()
    assert status == code, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("commcanary: "), err
    assert fragment in lines[0], err
    assert rss <= RSS_LIMIT_MIB, f"peak RSS {rss:.0f} MiB"
    assert (tmp_path / "out.json").read_bytes() == PREVIOUS
    assert {p.name for p in tmp_path.iterdir()} <= set(before)
    assert not (tmp_path / "pwned").exists()


def good_trace(d: Path) -> None:
    (d / "t.json").write_text(trace_text())


def test_a_symlinked_output_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    good_trace(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim").write_bytes(PREVIOUS)
    (tmp_path / "out.json").symlink_to(elsewhere / "victim")
    status, err, _ = run_cli(["compile", "t.json", "-o", "out.json"], tmp_path)
    assert status == 3 and err.strip().endswith("final path is a symlink"), err
    assert (elsewhere / "victim").read_bytes() == PREVIOUS


def test_an_output_equal_to_an_input_is_refused(tmp_path: Path) -> None:
    good_trace(tmp_path)
    (tmp_path / "alias.json").symlink_to(tmp_path / "t.json")
    original = (tmp_path / "t.json").read_bytes()
    for out in ("t.json", "./t.json", "alias.json"):  # the same file, spelled three ways
        status, err, _ = run_cli(["compile", "t.json", "-o", out], tmp_path)
        assert (
            status == 2
            and err == f"commcanary: --output {Path(out)} is the input TRACE; choose another path\n"
        )
        assert (tmp_path / "t.json").read_bytes() == original


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("EACCES", "Permission denied"),
        ("EROFS", "Read-only file system"),
        ("ENOSPC", "No space left on device"),
    ],
)
def test_a_failed_write_is_exit_3_with_the_previous_file_intact(
    tmp_path: Path, fault: str, message: str
) -> None:
    good_trace(tmp_path)
    (tmp_path / "out.json").write_bytes(PREVIOUS)
    before = sorted(p.name for p in tmp_path.iterdir())
    env = {_core.INJECT_WRITE_ERROR_VAR: fault}
    status, err, _ = run_cli(["compile", "t.json", "-o", "out.json"], tmp_path, env)
    assert status == 3 and len(err.splitlines()) == 1, err
    assert err.startswith("commcanary: cannot write out.json: ") and message in err, err
    assert (tmp_path / "out.json").read_bytes() == PREVIOUS
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only directories"
)
def test_a_read_only_directory_is_exit_3(tmp_path: Path) -> None:
    good_trace(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        status, err, _ = run_cli(["compile", "t.json", "-o", "locked/out.json"], tmp_path)
    finally:
        locked.chmod(0o755)
    assert status == 3 and "cannot write locked/out.json" in err, err
    assert list(locked.iterdir()) == []


def test_limits_are_raised_by_their_flags(tmp_path: Path) -> None:
    (tmp_path / "deep.json").write_text(
        '{"format":"commcanary.trace.v1","events":[' + "[" * 70 + "]" * 70 + "]}"
    )
    status, err, _ = run_cli(["compile", "deep.json", "-o", "out.json"], tmp_path)
    assert status == 3 and "raise it with commcanary --max-json-depth N" in err, err
    status, err, _ = run_cli(["--max-json-depth", "200", "compile", "deep.json", "-o", "out.json"], tmp_path)
    assert status == 3 and "max_json_depth" not in err and "event 0" in err, err
