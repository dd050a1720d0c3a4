"""Option values out of range are usage errors (exit 2) naming the flag as
typed; the library does the checking (``OptionError`` with the API name) and
the command line spells the name as its flag. Choices list their values."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import commcanary
from commcanary.cli import app, flag_for
from commcanary.cli.replay import ABLATION_NAMES
from commcanary.errors import OptionError
from commcanary.replay import ABLATIONS
from conftest import EXAMPLES

runner = CliRunner()
DEMO = EXAMPLES / "llama70b_tp8_trace.json"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("inputs")
    trace = d / "t.json"
    shutil.copyfile(DEMO, trace)
    canary = d / "c.canary.json"
    commcanary.compile(trace).write(canary)
    report = d / "a.report.json"
    commcanary.replay(canary).write(report)
    return {"trace": trace, "canary": canary, "report": report}


BUDGETS = [
    "--max-gap-error-us",
    "--max-skew-error-us",
    "--max-arrival-offset-error-us",
    "--max-compute-before-error-us",
    "--max-overlap-error-us",
    "--max-pressure-error",
    "--max-observed-exposed-error-us",
    "--max-prefix-gap-error-us",
]
THRESHOLDS = [
    "--p99-threshold-pct",
    "--p95-threshold-pct",
    "--median-threshold-pct",
    "--p99-absolute-threshold-us",
    "--p95-absolute-threshold-us",
    "--median-absolute-threshold-us",
    "--hidden-drop-threshold-points",
    "--breakdown-threshold-pct",
    "--breakdown-absolute-threshold-us",
]
TOLERANCES = [
    "--relative-tolerance-pct",
    "--absolute-tolerance-us",
    "--hidden-tolerance-points",
    "--ranking-tie-tolerance-us",
]

# (command, extra arguments, the flag named, its rule)
BAD: list[tuple[str, list[str], str, str]] = [
    ("compile", ["--timing-sample-limit", "1"], "--timing-sample-limit", "must be at least 2"),
    ("compile", ["--max-events", "-1"], "--max-events", "must be non-negative"),
    *[("compile", [flag, "-1"], flag, "must be non-negative") for flag in BUDGETS],
    ("compile", ["--max-gap-error-us", "nan"], "--max-gap-error-us", "must be non-negative"),
    (
        "compile",
        ["--behavior-search", "--behavior-search-min-sample-limit", "1"],
        "--behavior-search-min-sample-limit",
        "must be at least 2",
    ),
    ("replay", ["--bandwidth-gbps", "0"], "--bandwidth-gbps", "must be positive"),
    ("replay", ["--latency-floor-us", "-1"], "--latency-floor-us", "must be non-negative"),
    ("replay", ["--compute-pressure", "-0.5"], "--compute-pressure", "must be non-negative"),
    ("replay", ["--overlap-efficiency", "1.5"], "--overlap-efficiency", "must be between 0 and 1"),
    ("replay", ["--iterations", "0"], "--iterations", "must be at least 1"),
    ("replay", ["--max-replay-events", "0"], "--max-replay-events", "must be between 1 and 10000000"),
    ("replay", ["--backend-label", ""], "--backend-label", "must be non-empty"),
    *[("compare", [flag, "-1"], flag, "must be non-negative") for flag in THRESHOLDS],
    *[("verify-behavior", [flag, "-1"], flag, "must be non-negative") for flag in TOLERANCES],
    (
        "verify-behavior",
        ["--ranking-tie-tolerance-us", "nan"],
        "--ranking-tie-tolerance-us",
        "must be non-negative",
    ),
    (
        "verify-behavior",
        ["--tail-recall-threshold", "2"],
        "--tail-recall-threshold",
        "must be between 0 and 1",
    ),
]


def command_line(command: str, inputs: dict[str, Path], out: Path) -> list[str]:
    positional = {
        "compile": [inputs["trace"]],
        "replay": [inputs["canary"]],
        "compare": [inputs["report"], inputs["report"]],
        "verify-behavior": [inputs["trace"], inputs["canary"]],
    }[command]
    return [command, *map(str, positional), "-o", str(out)]


@pytest.mark.parametrize(
    ("command", "extra", "flag", "rule"), BAD, ids=[f"{c} {' '.join(e)}" for c, e, _, _ in BAD]
)
def test_bad_option_value_is_a_usage_error_naming_the_flag(
    inputs: dict[str, Path], tmp_path: Path, command: str, extra: list[str], flag: str, rule: str
) -> None:
    out = tmp_path / "out.json"
    result = runner.invoke(app, [*command_line(command, inputs, out), *extra])
    assert result.exit_code == 2, result.output
    *announced, last = result.stderr.splitlines()
    assert last == f"commcanary: {flag} {rule}"
    # The search announces itself before the library checks its options.
    assert all(line.startswith("behavior search: ") for line in announced)
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--search-evidence-output", "e.json"], "--search-evidence-output needs --behavior-search"),
        (
            ["--behavior-search-min-sample-limit", "4"],
            "--behavior-search-min-sample-limit needs --behavior-search",
        ),
        (
            ["--allow-partial-source"],
            "--reference-trace and --allow-partial-source need --require-behavior-verification",
        ),
        (
            ["--require-behavior-verification", "--allow-partial-source", "--reference-trace", "r.json"],
            "--reference-trace and --allow-partial-source are alternatives; give one",
        ),
    ],
)
def test_flags_that_need_each_other(
    inputs: dict[str, Path], tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "c.json"
    result = runner.invoke(app, ["compile", str(inputs["trace"]), "-o", str(out), *args])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"commcanary: {message}\n"
    assert list(tmp_path.iterdir()) == []


def test_unparseable_values_are_usage_errors(inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    for args in (["--timing-sample-limit", "x"], ["--max-gap-error-us", "wide"]):
        result = runner.invoke(app, ["compile", str(inputs["trace"]), "-o", str(out), *args])
        assert result.exit_code == 2, args
        assert args[0] in result.stderr
    assert not out.exists()


# --- --ablate ---


def test_ablation_names_are_the_models() -> None:
    assert tuple(ABLATIONS) == ABLATION_NAMES
    assert set(ABLATION_NAMES) == {
        "arrival_skew",
        "compute_overlap",
        "observed_exposed_us",
        "operation_ordering",
        "pressure",
        "queue_reset_gaps",
        "rare_tail_windows",
    }


def test_ablate_help_lists_every_name() -> None:
    result = runner.invoke(app, ["replay", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert f"comma-separated): {', '.join(ABLATION_NAMES)}." in text.replace(
        "comma- separated", "comma-separated"
    )


def test_unknown_ablation_lists_the_valid_ones(inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = runner.invoke(
        app, ["replay", str(inputs["canary"]), "-o", str(out), "--ablate", "pressure,bogus"]
    )
    assert result.exit_code == 2
    assert "'bogus'" in result.stderr and "--ablate" in result.stderr
    assert ", ".join(ABLATION_NAMES) in result.stderr
    assert not out.exists()


def test_ablations_comma_separated_or_repeated(inputs: dict[str, Path], tmp_path: Path) -> None:
    reports = {}
    for name, args in {
        "commas": ["--ablate", "pressure, arrival_skew"],
        "repeated": ["--ablate", "pressure", "--ablate", "arrival_skew"],
    }.items():
        out = tmp_path / f"{name}.json"
        result = runner.invoke(app, ["replay", str(inputs["canary"]), "-o", str(out), *args])
        assert result.exit_code == 0, result.output
        reports[name] = out.read_bytes()
    assert reports["commas"] == reports["repeated"]
    expected = commcanary.replay(inputs["canary"], ablations=["arrival_skew", "pressure"]).to_bytes()
    assert reports["commas"] == expected


# --- the error boundary's flag names ---


def test_flag_for_falls_back_to_the_api_name_with_dashes() -> None:
    assert flag_for(None, "timing_sample_limit") == "--timing-sample-limit"


def test_option_error_keeps_api_name_and_rule() -> None:
    error = OptionError("label", "must be non-empty")
    assert (error.option, error.rule, str(error)) == ("label", "must be non-empty", "label must be non-empty")


def test_python_side_checks_raise_option_errors_with_api_names() -> None:
    from commcanary.behavior import Tolerances
    from commcanary.compare import Thresholds

    with pytest.raises(OptionError) as caught:
        Thresholds(breakdown_absolute_threshold_us=-1)
    assert (caught.value.option, caught.value.rule) == (
        "breakdown_absolute_threshold_us",
        "must be non-negative",
    )
    with pytest.raises(OptionError) as caught:
        Tolerances(tail_recall_threshold=2).validate()
    assert (caught.value.option, caught.value.rule) == ("tail_recall_threshold", "must be between 0 and 1")
    with pytest.raises(OptionError) as caught:
        commcanary.search_behavior(DEMO, min_limit=1)
    assert caught.value.option == "behavior_search_min_sample_limit"
