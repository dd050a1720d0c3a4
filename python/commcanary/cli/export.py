"""``commcanary export-param``: a canary as PARAM comms-replay JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import check_paths, errors_exit

__all__ = ["export_param_command"]

CanaryPath = Annotated[Path, typer.Argument(metavar="CANARY", help="The canary to export.")]
Output = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", metavar="PATH", help="Where to write the single PARAM list (the reference shape)."
    ),
]
PerRankDir = Annotated[
    Path | None,
    typer.Option(
        "--per-rank-dir",
        metavar="DIR",
        help="Also (or instead) write PARAM's per-rank <rank>.json files, the shape its replayer runs.",
    ),
]
Dtype = Annotated[
    str | None,
    typer.Option("--dtype", help="Element type of every event (default: each event's own, else float32)."),
]
SkipUnsupported = Annotated[
    bool,
    typer.Option(
        "--skip-unsupported", help="Drop ops with no PARAM equivalent instead of refusing the canary."
    ),
]

Fill = Annotated[
    float | None,
    typer.Option(
        "--compute-fill-us-per-gemm",
        metavar="US",
        help="Single list: a GEMM fill entry before each collective, one GEMM per US microseconds of its gap.",
    ),
]
FillDim = Annotated[
    int | None,
    typer.Option("--compute-fill-gemm-dim", help="Dimension of the fill GEMMs (1-16384; default 1024)."),
]
Overlap = Annotated[
    bool,
    typer.Option(
        "--overlap-structure",
        help="Single list, with a fill: issue each collective asynchronously and wait for it after the next fill.",
    ),
]


def export_param_command(
    ctx: typer.Context,
    canary: CanaryPath,
    output: Output = None,
    per_rank_dir: PerRankDir = None,
    dtype: Dtype = None,
    skip_unsupported: SkipUnsupported = False,
    compute_fill_us_per_gemm: Fill = None,
    compute_fill_gemm_dim: FillDim = None,
    overlap_structure: Overlap = False,
) -> None:
    """Export a canary as PARAM comms-replay JSON (one list, or per-rank files)."""
    with errors_exit(ctx):
        from commcanary.exporters import export_param

        check_paths(ctx, inputs={"canary": canary}, outputs={"output": output})
        done = export_param(
            canary,
            output,
            per_rank_dir=per_rank_dir,
            dtype=dtype,
            skip_unsupported=skip_unsupported,
            compute_fill_us_per_gemm=compute_fill_us_per_gemm,
            compute_fill_gemm_dim=compute_fill_gemm_dim,
            overlap_structure=overlap_structure,
        )
        if output is not None:
            typer.echo(f"exported {done.entries} PARAM comms-replay entries: {output}")
        if per_rank_dir is not None:
            typer.echo(
                f"exported {sum(done.per_rank_entries)} PARAM entries for "
                f"{len(done.per_rank_entries)} ranks: {per_rank_dir}"
            )
