"""A document of the wrong kind is named as such, by every command that reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from commcanary.cli import app
from conftest import EXAMPLES

TRACE = EXAMPLES / "llama70b_tp8_trace.json"


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("kinds")
    run = CliRunner().invoke
    canary, report, other = d / "c.canary.json", d / "r.report.json", d / "o.report.json"
    assert run(app, ["compile", str(TRACE), "-o", str(canary)]).exit_code == 0
    assert run(app, ["replay", str(canary), "-o", str(report)]).exit_code == 0
    assert run(app, ["replay", str(canary), "-o", str(other), "--latency-floor-us", "9"]).exit_code == 0
    comparison, verification = d / "cmp.json", d / "ver.json"
    assert run(app, ["compare", str(report), str(other), "-o", str(comparison)]).exit_code in (0, 1)
    assert run(app, ["verify-report", str(report), str(canary), "-o", str(verification)]).exit_code == 0
    fidelity = d / "fid.json"
    assert run(app, ["verify-fidelity", str(TRACE), str(canary), "-o", str(fidelity)]).exit_code == 0
    return {
        "trace": TRACE,
        "canary": canary,
        "report": report,
        "comparison": comparison,
        "report verification": verification,
        "fidelity verification": fidelity,
    }


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output


@pytest.mark.parametrize("given", ["canary", "report", "comparison", "report verification"])
def test_compile_names_what_it_was_given(documents: dict[str, Path], given: str, tmp_path: Path) -> None:
    out = tmp_path / "x.canary.json"
    code, text = _run(["compile", str(documents[given]), "-o", str(out)])
    assert code == 3
    assert f"(a {given}); a commcanary.trace.v1 trace was expected" in text
    assert not out.exists()


@pytest.mark.parametrize("given", ["trace", "report", "comparison", "fidelity verification"])
def test_replay_names_what_it_was_given(documents: dict[str, Path], given: str, tmp_path: Path) -> None:
    out = tmp_path / "x.report.json"
    code, text = _run(["replay", str(documents[given]), "-o", str(out)])
    assert code == 3
    assert "a commcanary.canary.v3 canary was expected" in text
    assert f"(a {given})" in text
    assert not out.exists()


@pytest.mark.parametrize("given", ["trace", "canary", "comparison", "report verification"])
def test_compare_names_what_it_was_given(documents: dict[str, Path], given: str, tmp_path: Path) -> None:
    out = tmp_path / "x.cmp.json"
    code, text = _run(["compare", str(documents["report"]), str(documents[given]), "-o", str(out)])
    assert code == 3
    assert "a commcanary.report.v3 report was expected" in text
    assert f"(a {given})" in text
    assert not out.exists()


def test_verify_report_names_a_swapped_pair(documents: dict[str, Path], tmp_path: Path) -> None:
    code, text = _run(
        ["verify-report", str(documents["canary"]), str(documents["report"]), "-o", str(tmp_path / "v.json")]
    )
    assert code == 3
    assert "(a canary); a commcanary.report.v3 report was expected" in text


def test_verify_behavior_names_a_canary_given_as_trace(documents: dict[str, Path], tmp_path: Path) -> None:
    code, text = _run(
        [
            "verify-behavior",
            str(documents["canary"]),
            str(documents["canary"]),
            "-o",
            str(tmp_path / "b.json"),
        ]
    )
    assert code in (2, 3)
    if code == 3:
        assert "(a canary); a commcanary.trace.v1 trace was expected" in text
