"""PARAM export: a canary (all but the input's last 4 bytes) exported with
options drawn from those 4 bytes. A successful export writes a JSON list
and, without a compute fill or overlap structure, one JSON file per rank."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness

with _harness.instrumented():
    from commcanary.exporters.param import export_param

DTYPES = (None, "float32", "bfloat16", "int8", "float64", "no_such_dtype")


def one(data: bytes) -> None:
    body, options = data[:-4], data[-4:].rjust(4, b"\0")
    canary = _harness.scratch("c.json", body)
    single = _harness.scratch("param.json")
    per_rank = _harness.scratch("ranks")
    fill = options[2] / 4 if options[2] else None
    overlap = bool(options[1] & 2)
    # The fill and the overlap structure shape the single list only.
    ranks = None if fill or overlap else per_rank
    result = export_param(
        canary,
        single,
        per_rank_dir=ranks,
        dtype=DTYPES[options[0] % len(DTYPES)],
        skip_unsupported=bool(options[1] & 1),
        overlap_structure=overlap,
        compute_fill_us_per_gemm=fill,
        compute_fill_gemm_dim=(options[3] or None) if fill else None,
    )
    entries = json.loads(single.read_bytes())
    assert isinstance(entries, list)
    files = sorted(per_rank.glob("*.json")) if ranks else []
    assert len(files) == (len(result.per_rank_entries) if ranks else 0), (files, result)
    for f in files:
        assert isinstance(json.loads(f.read_bytes()), list)


if __name__ == "__main__":
    _harness.fuzz(one)
