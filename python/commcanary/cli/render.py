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


def render_html_command(ctx: typer.Context, report: Report, output: Output) -> None:
    """Render a report as a self-contained HTML page."""
    with errors_exit(ctx):
        from commcanary.html import render_report
        from commcanary.replay import Report as ReplayReport

        check_paths(ctx, inputs={"report": report}, outputs={"output": output})
        page = render_report(ReplayReport.from_file(report))
        write_text(output, page)
        typer.echo(f"wrote HTML report: {output}")
