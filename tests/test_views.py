"""The HTML views: pages come from the package's templates and stylesheets,
not from Python strings, and the shared pieces behave as every page expects."""

from __future__ import annotations

import re
from pathlib import Path

import commcanary
from commcanary.views import components, render, stylesheet
from commcanary.views.palette import HANG_VERDICT_COLOURS, VERDICT_COLOURS

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
