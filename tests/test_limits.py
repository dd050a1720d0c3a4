"""The one resource policy: its Python API, its flags, and that readers obey it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app
from commcanary.errors import InputError, OptionError
from commcanary.limits import DEFAULTS, NAMES, current, limits, set_limits

runner = CliRunner()


def trace(tmp_path: Path, ranks: int) -> Path:
    path = tmp_path / "t.json"
    event = {"op": "all_reduce", "bytes": 8, "ranks": list(range(ranks)), "gap_us": 1.0}
    path.write_text(json.dumps({"format": "commcanary.trace.v1", "events": [event, event]}))
    return path


def test_every_limit_is_named_documented_and_has_a_flag() -> None:
    assert current() == DEFAULTS
    doc = (Path(__file__).resolve().parent.parent / "docs" / "resource-limits.md").read_text()
    help_text = runner.invoke(app, ["--help"]).output
    for name in NAMES:
        flag = "--" + name.replace("_", "-")
        assert f"`{name}`" in doc and f"`{flag}`" in doc, name
        assert flag in help_text, name


def test_a_block_runs_under_its_limits_and_the_policy_comes_back(tmp_path: Path) -> None:
    path = trace(tmp_path, 4)
    with limits(max_ranks=3) as inside:
        assert inside["max_ranks"] == 3
        with pytest.raises(InputError, match=r"max_ranks=3 ranks \(raise it with commcanary --max-ranks N\)"):
            commcanary.compile(path)
    assert current() == DEFAULTS
    assert commcanary.compile(path).canary_events >= 1


def test_bad_limits_change_nothing() -> None:
    for bad in ({"max_things": 3}, {"max_ranks": 0}, {"max_ranks": True}, {"max_ranks": 1 << 64}):
        with pytest.raises(OptionError):
            set_limits(**bad)  # type: ignore[arg-type]
        assert current() == DEFAULTS
    with pytest.raises(OptionError):
        set_limits(max_json_depth=1 << 40)
    assert current() == DEFAULTS


def test_the_flags_set_the_policy_for_one_invocation(tmp_path: Path) -> None:
    path = trace(tmp_path, 4)
    out = tmp_path / "c.json"
    refused = runner.invoke(app, ["--max-ranks", "3", "compile", str(path), "-o", str(out)])
    assert refused.exit_code == 3 and "--max-ranks N" in refused.stderr and not out.exists()
    assert current()["max_ranks"] == 3
    # The next invocation starts from the defaults.
    ok = runner.invoke(app, ["compile", str(path), "-o", str(out)])
    assert ok.exit_code == 0, ok.output
    assert current() == DEFAULTS
    bad = runner.invoke(app, ["--max-ranks", "0", "compile", str(path), "-o", str(out)])
    assert bad.exit_code == 2


def test_a_small_input_bound_refuses_before_reading(tmp_path: Path) -> None:
    path = trace(tmp_path, 2)
    with limits(max_input_bytes=16), pytest.raises(InputError, match="exceeds max_input_bytes=16"):
        commcanary.compile(path)
