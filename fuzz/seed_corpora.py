"""Writes the fuzz targets' seed corpora (rust/fuzz/corpus/TARGET/ for the
Rust targets, fuzz/corpus/TARGET/ for the Python ones) from the project's
golden files and examples, the real fixtures and a real capture.

Seeds are kept small (a few KB each) so the fuzzer spends its executions on
mutations, not on re-reading large files: a profiler trace keeps its header
and its first collectives, kernels and ``c10d::`` calls; a Flight Recorder
dump keeps its first entries. Rerun after a format change:

    python fuzz/seed_corpora.py [--fixtures ../shared/fixtures]

Needs the installed package (``make dev``) and atheris (the CLI target
writes its own seeds). Fixture pickles are rewritten
with a restricted unpickler that resolves no class, so reading them can run
nothing.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "rust" / "fuzz" / "corpus"
PY_CORPUS = ROOT / "fuzz" / "corpus"


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"seed pickles may not name {module}.{name}")


def _put(target: str, name: str, data: bytes) -> None:
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(data)


def _dumps(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def json_seeds() -> None:
    vectors = json.loads((ROOT / "tests" / "golden" / "canonical_json.json").read_text())
    for i, case in enumerate(vectors.get("cases", vectors) if isinstance(vectors, dict) else vectors):
        text = case.get("input") if isinstance(case, dict) else None
        if isinstance(text, str):
            _put("json_reader", f"golden-{i:02d}", text.encode())
    _put("json_reader", "nesting", b'{"a":[1,2.5,-3e-7,{"b":null,"c":true}],"d":"\\u00e9\\ud83d\\ude00"}')


def trace_and_canary_seeds() -> None:
    import commcanary

    traces = [
        ROOT / "examples" / "traces" / "llama70b_tp8_trace.json",
        ROOT / "tests" / "data" / "gen100.json",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for trace in traces:
            _put("trace_loader", trace.stem, trace.read_bytes())
            canary = commcanary.compile(trace)
            path = Path(tmp) / "c.json"
            canary.write(path)
            for target in ("canary_reader", "canary_expansion"):
                _put(target, trace.stem, path.read_bytes())
            lossless = commcanary.compile(trace, lossless_timing=True)
            lossless.write(path)
            _put("canary_expansion", trace.stem + "-lossless", path.read_bytes())
            report = commcanary.replay(canary, include_samples=True)
            report.write(Path(tmp) / "r.json")
            _put("report_reader", trace.stem, (Path(tmp) / "r.json").read_bytes())


def step_loop_seeds() -> None:
    """Step loop canaries (``commcanary.canary.v4``), exact and bounded, of a
    small job with a warm-up iteration and a metric every third step."""
    import commcanary

    events, t = [], 0.0
    for step in range(9):
        sizes = [4096, 2048] + ([4] if step % 3 == 2 else []) + ([64] if step == 0 else [])
        for size in sizes:
            t += 100.0 + (step * 37 + size) % 17 * 3.25
            events.append(
                {
                    "op": "all_reduce",
                    "bytes": size,
                    "ranks": [0, 1, 2],
                    "group": "0",
                    "start_us": t,
                    "step": step,
                    "rank_arrival_us": [0.0, (step * 13) % 7 * 0.5, 1.5],
                }
            )
    trace = _dumps({"format": "commcanary.trace.v1", "workload": {"name": "loop-seed"}, "events": events})
    for name, limit in (("step-loop", 128), ("step-loop-bounded", 3)):
        canary = commcanary.compile(trace, timing_sample_limit=limit).to_bytes()
        assert b"commcanary.canary.v4" in canary
        for target in ("canary_reader", "canary_expansion"):
            _put(target, name, canary)


def _kineto_excerpt(path: Path, keep: int) -> bytes:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc.get("traceEvents", [])
    wanted = [
        e
        for e in events
        if e.get("cat") in ("kernel", "gpu_user_annotation")
        or str(e.get("name", "")).startswith(
            ("c10d::", "record_param_comms", "ProfilerStep", "nccl:", "gloo:")
        )
    ]
    doc["traceEvents"] = wanted[:keep]
    return _dumps(_basenames(doc))


def _basenames(value: Any) -> Any:
    """``value`` with every absolute path cut to its file name (a profiler
    records the path it wrote to)."""
    if isinstance(value, dict):
        return {k: _basenames(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_basenames(v) for v in value]
    if isinstance(value, str) and value.startswith("/"):
        return value.rsplit("/", 1)[-1]
    return value


def kineto_seeds(fixtures: Path) -> None:
    decode = fixtures / "kineto" / "gloo_tp4_decode"
    for rank in (0, 3):
        _put("kineto_import", f"gloo-rank{rank}", _kineto_excerpt(decode / f"rank{rank}.json.gz", 40))
    _put("json_reader", "kineto-gloo", _kineto_excerpt(decode / "rank0.json.gz", 8))


def flight_recorder_seeds(fixtures: Path) -> None:
    hang = fixtures / "hang" / "gloo_tp4_rank3_skips_allreduce" / "fr_during_hang"
    for rank in (0, 3):
        raw = (hang / f"fr_trace_rank_{rank}").read_bytes()
        dump = _NoClasses(io.BytesIO(raw)).load()
        dump["entries"] = dump.get("entries", [])[-6:]
        protocol = raw[1] if raw[:1] == b"\x80" else 0
        _put("flight_recorder", f"pickle-rank{rank}", pickle.dumps(dump, protocol=protocol))
        doc = json.loads((hang / f"fr_trace_rank_{rank}.json").read_text())
        doc["entries"] = doc.get("entries", [])[-6:]
        _put("flight_recorder", f"json-rank{rank}", _dumps(doc))
    for name in ("rank0_stacks.txt", "rank3_stacks.txt", "rank0_exception.txt", "rank3_exception.txt"):
        _put("text_evidence", name.removesuffix(".txt"), (hang.parent / name).read_bytes())


def _capture() -> bytes:
    """Two real shards of one capture session ``s``, joined by a NUL byte."""
    import os
    import subprocess
    import sys

    code = (
        "from commcanary.capture import record_collective as r, step\n"
        "import os\nrank = int(os.environ['RANK'])\n"
        "for i in range(3):\n"
        "    step(i)\n"
        "    r('all_reduce', 2, bytes=4096, collective_id=f'ar{i}', compute_before_us=5.0, duration_us=12.5)\n"
        "r('send' if rank == 0 else 'recv', [0, 1], bytes=64, collective_id='p', sender_rank=0, receiver_rank=1)\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for rank in (0, 1):
            env = dict(
                os.environ, COMMCANARY_TRACE_DIR=tmp, COMMCANARY_CAPTURE_SESSION_ID="s", RANK=str(rank)
            )
            subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
        shards = sorted(Path(tmp).glob("*.shard.jsonl"))
        return b"\0".join(p.read_bytes() for p in shards)


def python_seeds() -> None:
    import subprocess
    import sys

    def put(target: str, name: str, data: bytes) -> None:
        (PY_CORPUS / target).mkdir(parents=True, exist_ok=True)
        (PY_CORPUS / target / name).write_bytes(data)

    put("capture_shards", "two-ranks", _capture())
    for seed in sorted((CORPUS / "flight_recorder").iterdir()):
        put("flight_recorder", seed.name, seed.read_bytes())
    for seed in sorted((CORPUS / "canary_reader").iterdir()):
        put("param_export", seed.name, seed.read_bytes() + bytes(4))
        put("param_export", seed.name + "-fill", seed.read_bytes() + bytes([1, 3, 8, 64]))
    subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "fuzz_cli.py"), "--write-seeds", str(PY_CORPUS / "cli")],
        check=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", type=Path, default=ROOT.parent / "shared" / "fixtures")
    args = parser.parse_args()
    for corpus in (CORPUS, PY_CORPUS):
        if corpus.exists():
            shutil.rmtree(corpus)
    json_seeds()
    trace_and_canary_seeds()
    step_loop_seeds()
    kineto_seeds(args.fixtures)
    flight_recorder_seeds(args.fixtures)
    python_seeds()
    for directory in [*sorted(CORPUS.iterdir()), *sorted(PY_CORPUS.iterdir())]:
        files = sorted(directory.iterdir())
        digest = hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:12]
        size = sum(f.stat().st_size for f in files)
        print(f"{directory.name}: {len(files)} seeds, {size} bytes ({digest})")


if __name__ == "__main__":
    main()
