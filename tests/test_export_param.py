"""`export-param`: the reference single list, PARAM's per-rank files checked
field by field against the trace PARAM's replayer ran, occurrence counts
against the canary's expansion, and refusals."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from commcanary.cli import app
from conftest import FIXTURES, fixture_json

DECODE = FIXTURES / "kineto" / "gloo_tp4_decode"
PARAM_RAN = FIXTURES / "param" / "basic_4rank_gloo"


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def load(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("param")
    assert run("import-kineto", str(DECODE), "-o", str(d / "job.trace.json")).exit_code == 0
    assert run("compile", str(d / "job.trace.json"), "-o", str(d / "job.canary.json")).exit_code == 0
    return d / "job.canary.json"


def test_per_rank_files_have_the_shape_param_ran(canary: Path, tmp_path: Path) -> None:
    out = tmp_path / "ranks"
    result = run("export-param", str(canary), "--per-rank-dir", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("exported ") and "for 4 ranks" in result.stdout
    ours = {r: load(out / f"{r}.json") for r in range(4)}
    ran = {r: fixture_json(PARAM_RAN / f"{r}.json.gz") for r in range(4)}
    for r in range(4):
        # Every group is initialised on every rank, with its size.
        inits = [e for e in ours[r] if e["comms"] == "init"]
        assert sorted(tuple(e["global_ranks"]) for e in inits) == sorted(
            tuple(e["global_ranks"]) for e in ran[r] if e["comms"] == "init"
        )
        assert all(e["world_size"] == len(e["global_ranks"]) for e in inits)
        kinds = {e["comms"] for e in ours[r]}
        theirs_kinds = {e["comms"] for e in ran[r]} - {"barrier"}  # barriers are control ops
        assert kinds >= theirs_kinds  # the imported job also has the ack transfers
        for kind in theirs_kinds - {"init"}:
            mine = [e for e in ours[r] if e["comms"] == kind]
            theirs = [e for e in ran[r] if e["comms"] == kind]
            assert set(theirs[0]) - {"markers"} <= set(mine[0]), kind  # every field PARAM read
            if kind in ("send", "recv"):
                assert {(e["src_rank"], e["dst_rank"]) for e in theirs} <= {
                    (e["src_rank"], e["dst_rank"]) for e in mine
                }
                assert all(e["use_batch"] is False for e in mine)
            decode = {(e["in_msg_size"], e["out_msg_size"], e["dtype"]) for e in mine}
            assert {(e["in_msg_size"], e["out_msg_size"], e["dtype"]) for e in theirs} <= decode, kind
        reqs = [e["req"] for e in ours[r]]
        assert reqs == list(range(len(reqs)))


def test_entry_counts_follow_the_canary_expansion(canary: Path, tmp_path: Path) -> None:
    import commcanary

    data = load(canary)
    signatures = data["signatures"]
    compiled = commcanary.compile(commcanary.load_trace(canary.parent / "job.trace.json"))
    compiled.write(tmp_path / "same.canary.json")
    assert (tmp_path / "same.canary.json").read_bytes() == canary.read_bytes()
    occurrence_signatures = [int(s) for s in compiled.occurrences()["signature"]]
    done = commcanary.export_param(canary, tmp_path / "basic.json", per_rank_dir=tmp_path / "ranks")
    p2p = sum("sender_rank" in signatures[s] for s in occurrence_signatures)
    groups = {signatures[s]["group"] for s in occurrence_signatures}
    assert done.entries == len(groups) + len(occurrence_signatures) + p2p
    assert len(load(tmp_path / "basic.json")) == done.entries
    per_rank: Counter[int] = Counter()
    for s in occurrence_signatures:
        sig = signatures[s]
        for r in [sig["sender_rank"], sig["receiver_rank"]] if "sender_rank" in sig else sig["ranks"]:
            per_rank[r] += 1
    assert done.per_rank_entries == tuple(per_rank[r] + len(groups) for r in range(4))


def test_refusals_write_nothing(canary: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    bad = run("export-param", str(canary), "-o", str(out), "--dtype", "quaternion")
    assert bad.exit_code == 3 and "unsupported PARAM export dtype 'quaternion'" in bad.stderr
    assert not out.exists()
    a_file = tmp_path / "ranks"
    a_file.write_text("x")
    bad = run("export-param", str(canary), "-o", str(out), "--per-rank-dir", str(a_file))
    assert bad.exit_code == 3 and "is not a directory" in bad.stderr
    assert not out.exists() and a_file.read_text() == "x"
    # A canary with an op PARAM has no equivalent for: refused, or skipped and marked.
    trace = tmp_path / "custom.trace.json"
    trace.write_text(
        json.dumps(
            {
                "format": "commcanary.trace.v1",
                "events": [
                    {"op": "all_reduce", "bytes": 1024, "ranks": 2, "start_us": 0},
                    {"op": "frobnicate", "custom_op": True, "bytes": 1024, "ranks": 2, "start_us": 10},
                ],
            }
        )
    )
    custom = tmp_path / "custom.canary.json"
    assert run("compile", str(trace), "-o", str(custom)).exit_code == 0
    bad = run("export-param", str(custom), "-o", str(out))
    assert bad.exit_code == 3 and "op 'frobnicate' has no PARAM comms-replay equivalent" in bad.stderr
    assert not out.exists()
    ok = run("export-param", str(custom), "-o", str(out), "--skip-unsupported")
    assert ok.exit_code == 0, ok.output
    entries = load(out)
    assert [e["comms"] for e in entries] == ["init", "all_reduce"]
    assert "commcanary:skipped_unsupported=1" in entries[1]["markers"]


def test_random_canaries_export_one_entry_per_occurrence(tmp_path: Path) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    import commcanary
    from commcanary.errors import InputError

    ops = st.sampled_from(
        ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "p2p", "custom"]
    )
    event = st.tuples(ops, st.integers(1, 64), st.sampled_from([2, 4]), st.floats(0, 100, allow_nan=False))

    @settings(max_examples=40, deadline=None)
    @given(st.lists(event, min_size=1, max_size=30), st.booleans())
    def check(events: list[tuple[str, int, int, float]], skip: bool) -> None:
        out = []
        for op, k, w, gap in events:
            e: dict[str, Any] = {
                "bytes": 4 * w * k,
                "ranks": w,
                "gap_us": gap,
                "group": f"g{w}",
                "dtype": "float32",
            }
            if op == "p2p":
                e.update(op="point_to_point", ranks=[0, 1], sender_rank=0, receiver_rank=1, group="p2p")
            elif op == "custom":
                e.update(op="frobnicate", custom_op=True)
            elif op == "broadcast":
                e.update(op=op, root_rank=0)
            else:
                e["op"] = op
            out.append(e)
        trace = tmp_path / "t.json"
        trace.write_text(json.dumps({"format": "commcanary.trace.v1", "events": out}))
        canary = commcanary.compile(commcanary.load_trace(trace))
        canary.write(tmp_path / "c.json")
        target = tmp_path / "p.json"
        target.unlink(missing_ok=True)
        try:
            done = commcanary.export_param(tmp_path / "c.json", target, skip_unsupported=skip)
        except InputError as exc:
            assert "frobnicate" in str(exc) or "no PARAM-exportable" in str(exc)
            assert not target.exists()
            return
        entries = load(target)
        assert len(entries) == done.entries
        kept = [e for e in out if e["op"] != "frobnicate"]
        transfers = sum(e["op"] == "point_to_point" for e in kept)
        groups = {e["group"] for e in kept}
        assert done.entries == len(groups) + len(kept) + transfers
        assert done.skipped == len(out) - len(kept)
        assert [e["req"] for e in entries] == list(range(len(entries)))
        starts = [e["startTime_ns"] for e in entries if e["comms"] != "init"]
        assert starts == sorted(starts)

    check()


def test_the_demo_canary_exports_as_the_reference_did(tmp_path: Path) -> None:
    """Spec §8.3, observed: 11 entries, 20 with a 5 us fill, 30 with the overlap
    structure; all_reduce entries of 65536 elements at 0, 75629, 153354 ns."""
    demo = Path(__file__).resolve().parent.parent / "examples" / "traces" / "llama70b_tp8_trace.json"
    canary = tmp_path / "demo.canary.json"
    assert run("compile", str(demo), "-o", str(canary)).exit_code == 0
    out = tmp_path / "p.json"
    for extra, count in (
        ((), 11),
        (("--compute-fill-us-per-gemm", "5"), 20),
        (("--compute-fill-us-per-gemm", "5", "--overlap-structure"), 30),
    ):
        result = run("export-param", str(canary), "-o", str(out), "--dtype", "float32", *extra)
        assert result.stdout == f"exported {count} PARAM comms-replay entries: {out}\n", result.output
    entries = load(out)
    collectives = [e for e in entries if e.get("comms") == "all_reduce"]
    assert [e["startTime_ns"] for e in collectives[:3]] == [0, 75629, 153354]
    assert collectives[0]["in_msg_size"] == collectives[0]["out_msg_size"] == 65536  # 262144 B / 4
    waits = [e for e in entries if e.get("comms") == "wait"]
    assert [w["req"] for w in waits] == [c["req"] for c in collectives]
    fills = [e for e in entries if e.get("compute") == "gemm"]
    assert len(fills) == 9 and all(f["mm_dim"] == 1024 and f["count"] > 0 for f in fills)
    bad = run("export-param", str(canary), "-o", str(out), "--overlap-structure")
    assert bad.exit_code == 2 and "--overlap-structure requires compute_fill_us_per_gemm" in bad.stderr
