"""The HTML views: pages come from the package's templates and stylesheets,
not from Python strings, and the shared pieces behave as every page expects."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import commcanary
from commcanary.views import components, render, stylesheet
from commcanary.views.palette import HANG_VERDICT_COLOURS, VERDICT_COLOURS
from conftest import EXAMPLES

PACKAGE = Path(commcanary.__file__).parent


def test_no_page_shell_or_stylesheet_lives_in_python() -> None:
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "<!DOCTYPE" not in text, path
        assert "<style" not in text, path
        # A CSS rule: a selector, then a declaration block.
        assert not re.search(r"[\w.#\]-]+\{[\w-]+:[^{}]+\}", text.replace("{{", "").replace("}}", "")), path


def test_stylesheets_take_their_colours_from_the_palette() -> None:
    css = str(stylesheet("base", "hang", "stragglers"))
    for verdict, colour in VERDICT_COLOURS.items():
        assert f".badge.verdict-{verdict}{{background:{colour};" in css
    for verdict, colour in HANG_VERDICT_COLOURS.items():
        assert f"header.hero.verdict-{verdict}{{background:{colour};" in css


def test_the_shell_is_one_line_after_its_doctype_and_escapes() -> None:
    page = render("page.html.j2", title='<b>"t"</b>', style=stylesheet("base"))
    head, rest = page.split("\n", 1)
    assert head == "<!DOCTYPE html>"
    assert rest.count("\n") == stylesheet("base").count("\n") + 1 and rest.endswith("</html>\n")
    assert "<title>&lt;b&gt;&#34;t&#34;&lt;/b&gt;</title>" in page
    assert "Content-Security-Policy\" content=\"default-src 'none';" in page


def test_a_table_escapes_text_and_keeps_markup() -> None:
    from markupsafe import Markup

    html = str(components().table(["a", "<b>"], [["<i>x</i>", Markup("<i>y</i>")]], numeric_from=1))
    assert '<th>a</th><th class="num">&lt;b&gt;</th>' in html
    assert '<td>&lt;i&gt;x&lt;/i&gt;</td><td class="num"><i>y</i></td>' in html


def test_a_replay_page_draws_its_distribution_without_samples(tmp_path: Path) -> None:
    """The run keeps the exposed latency it stored nowhere; a file without samples cannot."""
    from commcanary.html import render_report
    from commcanary.replay import Report

    canary = commcanary.compile(EXAMPLES / "llama70b_tp8_trace.json")
    run = commcanary.replay(canary)
    assert run.samples is None and not run.has_samples
    exposed = run.exposed_us()
    sampled = commcanary.replay(canary, include_samples=True)
    assert exposed is not None and sampled.samples is not None
    assert exposed.tolist() == sampled.samples["exposed_us"].tolist()
    page = render_report(run)
    assert "<svg" in page and "drawn from the run that made it" in page
    run.write(tmp_path / "r.json")
    from_file = Report.from_file(tmp_path / "r.json")
    assert from_file.exposed_us() is None and "<svg" not in render_report(from_file)


def test_a_report_file_without_samples_is_drawn_from_its_canary(tmp_path: Path) -> None:
    """Read with its canary, a model report written without samples recomputes the
    exposed latencies its samples would have held, and render-html draws them; a
    canary of another job is refused in one line, with nothing written."""
    from typer.testing import CliRunner

    from commcanary.cli import app
    from commcanary.errors import InputError
    from commcanary.html import render_report
    from commcanary.replay import Report

    canary = commcanary.compile(EXAMPLES / "llama70b_tp8_trace.json")
    canary.write(tmp_path / "c.json")
    other = commcanary.compile(EXAMPLES / "llama70b_tp8_trace_long.json")
    other.write(tmp_path / "other.json")
    settings = {"latency_floor_us": 9.0}
    commcanary.replay(canary, backend=commcanary.Backend(**settings), iterations=3, seed=5).write(
        tmp_path / "r.json"
    )
    sampled = commcanary.replay(
        canary, backend=commcanary.Backend(**settings), iterations=3, seed=5, include_samples=True
    )
    report = Report.from_file(tmp_path / "r.json", canary=tmp_path / "c.json")
    exposed = report.exposed_us()
    assert report.exposed_recomputed and exposed is not None and sampled.samples is not None
    assert exposed.tolist() == sampled.samples["exposed_us"].tolist()
    assert "recomputed from its canary" in render_report(report)
    bare = render_report(Report.from_file(tmp_path / "r.json"))
    assert "<svg" not in bare and "(--canary) to recompute it" in bare

    runner = CliRunner()
    page = tmp_path / "page.html"
    done = runner.invoke(
        app, ["render-html", str(tmp_path / "r.json"), "-o", str(page), "--canary", str(tmp_path / "c.json")]
    )
    assert done.exit_code == 0, done.output
    assert "<svg" in page.read_text()
    refused = tmp_path / "refused.html"
    wrong = runner.invoke(
        app,
        [
            "render-html",
            str(tmp_path / "r.json"),
            "-o",
            str(refused),
            "--canary",
            str(tmp_path / "other.json"),
        ],
    )
    assert wrong.exit_code == 3 and "do not belong together" in wrong.output
    assert not refused.exists()
    with pytest.raises(InputError, match="do not belong together"):
        Report.from_file(tmp_path / "r.json", canary=tmp_path / "other.json")
