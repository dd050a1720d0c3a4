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


def test_text_evidence_is_bounded_by_the_policy(tmp_path: Path) -> None:
    stacks = tmp_path / "rank0_stacks.txt"
    stacks.write_text('Thread 0x1 (most recent call first):\n  File "train.py", line 3 in step\n' * 40)
    out = tmp_path / "h.json"
    result = runner.invoke(app, ["--max-text-bytes", "64", "diagnose", "hang", str(stacks), "-o", str(out)])
    assert result.exit_code == 3
    size = stacks.stat().st_size
    assert result.stderr == (
        f"commcanary: {stacks} ({size} bytes) exceeds max_text_bytes=64 (raise it with commcanary --max-text-bytes N)\n"
    )
    assert not out.exists()
    assert runner.invoke(app, ["diagnose", "hang", str(stacks), "-o", str(out)]).exit_code in (0, 1)


def _shard(tmp_path: Path, *events: dict[str, object]) -> Path:
    from commcanary.capture import SHARD_FORMAT

    header = {"format": SHARD_FORMAT, "capture_session_id": "s", "rank": "0"}
    path = tmp_path / "a.shard.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in (header, *events)))
    return path


GOOD = {
    "op": "all_reduce",
    "bytes": 64,
    "ranks": [0, 1],
    "group": "default",
    "phase": "unknown",
    "id": "event-000000",
    "wall_ns": 1,
    "compute_before_us": 0.0,
    "compute_overlap_us": 0.0,
}


def test_capture_shards_are_bounded_by_the_policy(tmp_path: Path) -> None:
    from commcanary.capture.merge import read_shard

    path = _shard(tmp_path, GOOD)
    assert read_shard(path)[1] == [GOOD]
    with (
        limits(max_input_bytes=64),
        pytest.raises(InputError, match=r"exceeds max_input_bytes=64 \(raise it"),
    ):
        read_shard(path)
    with (
        limits(max_json_string_bytes=100),
        pytest.raises(InputError, match=r"line 2 \(\d+ bytes\) exceeds max_json_string_bytes"),
    ):
        read_shard(path)
    with (
        limits(max_ranks=1),
        pytest.raises(InputError, match="line 2: field 'ranks' must be a list of 1 to max_ranks=1"),
    ):
        read_shard(path)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"bytes": -1}, "bytes"),
        ({"bytes": True}, "bytes"),
        ({"wall_ns": "soon"}, "wall_ns"),
        ({"ranks": [0, 0]}, "ranks"),
        ({"ranks": "01"}, "ranks"),
        ({"op": 3}, "op"),
        ({"compute_before_us": -2.0}, "compute_before_us"),
        ({"duration_us": None}, "duration_us"),
        ({"root_rank": 7}, "root_rank"),
        ({"metadata": [1]}, "metadata"),
        ({"step": 1.5}, "step"),
        ({"compute_before_us": 10**400}, "compute_before_us"),
        ({"duration_us": 1.7e308}, "duration_us"),
        ({"wall_ns": 10**30}, "wall_ns"),
        ({"root_rank": True}, "root_rank"),
        ({"sender_rank": 0, "receiver_rank": 0}, "receiver_rank"),
        ({"tag": ""}, "tag"),
        ({"step": -1}, "step"),
    ],
)
def test_a_malformed_shard_record_names_its_line_and_field(
    tmp_path: Path, change: dict[str, object], field: str
) -> None:
    from commcanary.capture.merge import read_shard

    path = _shard(tmp_path, GOOD, {**GOOD, **change})
    with pytest.raises(InputError, match=rf"^{path}: line 3: field '{field}' must "):
        read_shard(path)


def test_a_shard_with_nan_is_not_json(tmp_path: Path) -> None:
    from commcanary.capture.merge import read_shard

    path = tmp_path / "a.shard.jsonl"
    path.write_text('{"format": "commcanary.capture-shard.v1", "clock_offset_us": NaN}\n')
    with pytest.raises(InputError, match="line 1 is not JSON: NaN is not a JSON number"):
        read_shard(path)


@pytest.mark.parametrize("rank", ["\u00b2", "1" * 5000, "-1", 2.5])
def test_a_shard_header_rank_must_be_a_small_decimal(tmp_path: Path, rank: object) -> None:
    from commcanary.capture import SHARD_FORMAT
    from commcanary.capture.merge import merge_shards

    paths = []
    for i in range(2):
        path = tmp_path / f"{i}.shard.jsonl"
        header = {"format": SHARD_FORMAT, "capture_session_id": "s", "rank": rank if i else "0"}
        path.write_text(json.dumps(header) + "\n" + json.dumps(GOOD) + "\n")
        paths.append(path)
    with pytest.raises(InputError, match="field 'rank'"):
        merge_shards(paths, session="s", workload_name="w")


def test_shards_spanning_more_than_a_trace_holds_are_refused(tmp_path: Path) -> None:
    from commcanary.capture.merge import merge_shards

    late = {**GOOD, "id": "event-000001", "wall_ns": 2 * 10**18}
    path = _shard(tmp_path, GOOD, late)
    with pytest.raises(InputError, match="span more than 1e"):
        merge_shards([path], session="s", workload_name="w")


def test_members_of_one_collective_far_apart_are_refused(tmp_path: Path) -> None:
    from commcanary.capture import SHARD_FORMAT
    from commcanary.capture.merge import merge_shards

    paths = []
    for rank, wall in ((0, 1), (1, 2 * 10**18)):
        path = tmp_path / f"{rank}.shard.jsonl"
        header = {"format": SHARD_FORMAT, "capture_session_id": "s", "rank": str(rank)}
        event = {**GOOD, "wall_ns": wall, "collective_id": "a"}
        path.write_text(json.dumps(header) + "\n" + json.dumps(event) + "\n")
        paths.append(path)
    with pytest.raises(InputError, match="collective a: its members' calls are more than 1e"):
        merge_shards(paths, session="s", workload_name="w")


def test_a_shard_op_the_model_does_not_know_is_a_custom_op(tmp_path: Path) -> None:
    # Found by the capture-shard fuzz target: the merge wrote a trace the loader refused.
    from commcanary.capture.merge import merge_shards
    from commcanary.fidelity import canonical

    path = _shard(tmp_path, {**GOOD, "op": "all_r''educe"}, {**GOOD, "id": "event-000001", "wall_ns": 9})
    merged = merge_shards([path], session="s", workload_name="w")
    first, second = merged.trace["events"]
    assert first["custom_op"] is True and "custom_op" not in second
    trace = tmp_path / "t.json"
    trace.write_bytes(canonical(merged.trace))
    assert commcanary.load_trace(trace).signature_count == 2
