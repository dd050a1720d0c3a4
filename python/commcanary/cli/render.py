"""``commcanary render-html``: a report as a self-contained HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from commcanary.cli import check_paths, errors_exit
from commcanary.cli._output import write_text

__all__ = ["render_html_command"]

Report = Annotated[Path, typer.Argument(metavar="REPORT", help="Report to render.")]
Output = Annotated[Path, typer.Option("--output", "-o", metavar="PAGE", help="Where to write the HTML page.")]
CanaryOption = Annotated[
    Path | None,
    typer.Option(
        "--canary",
        metavar="CANARY",
        help="The canary the report was replayed from: a model report written without samples gets its "
        "latency distribution recomputed (the replay is deterministic) and drawn.",
    ),
]


def render_html_command(
    ctx: typer.Context, report: Report, output: Output, canary: CanaryOption = None
) -> None:
    """Render a report as a self-contained HTML page."""
    with errors_exit(ctx):
        from commcanary.html import render_report
        from commcanary.replay import Report as ReplayReport

        check_paths(ctx, inputs={"report": report, "canary": canary}, outputs={"output": output})
        page = render_report(ReplayReport.from_file(report, canary=canary))
        write_text(output, page)
        typer.echo(f"wrote HTML report: {output}")
