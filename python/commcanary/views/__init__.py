"""The HTML views: Jinja2 templates (autoescaped) and their stylesheets,
package files under ``templates/``, shared by the command line's pages and
the server's.

Every page extends one shell (``page.html.j2``: the strict
Content-Security-Policy, the viewport, the inline stylesheet, no scripts)
and draws with shared components (``components.html.j2``: hero, cards,
tables, sections, notes, the latency histogram). A page's Python module
builds its view model (values, rows, drawing primitives) and calls
:func:`render`.

Templates are written one element per line for reading: a line break and
the indentation after it are not part of the output (an extension joins the
lines before compiling), so a page is a single line after its doctype and
the same inputs give the same bytes. Stylesheets (``css/*.css.j2``) keep
their lines.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jinja2
import jinja2.ext
from markupsafe import Markup, escape

from commcanary.views.palette import palette

__all__ = ["CSP", "Markup", "components", "escape", "render", "stylesheet"]

#: The pages' Content-Security-Policy: nothing loads, nothing runs.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

_LINE_BREAK = re.compile(r"\n[ \t]*")


class _OneLine(jinja2.ext.Extension):
    """Joins an HTML template's lines: line breaks and indentation are layout, not output."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        if name is not None and name.endswith(".css.j2"):
            return source
        return _LINE_BREAK.sub("", source)


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("commcanary.views", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        extensions=[_OneLine],
        keep_trailing_newline=True,
    )
    env.globals["CSP"] = Markup(CSP)
    env.globals["palette"] = palette()
    return env


@cache
def stylesheet(*names: str) -> Markup:
    """The stylesheets ``css/{name}.css.j2``, rendered with the palette and joined."""
    env = _environment()
    return Markup("".join(env.get_template(f"css/{name}.css.j2").render() for name in names))


def components() -> Any:
    """The components' macros, callable from Python (``components().table(...)``)."""
    return _environment().get_template("components.html.j2").module


def render(template: str, **context: Any) -> str:
    """The page ``template`` rendered with ``context``."""
    return _environment().get_template(template).render(**context)
