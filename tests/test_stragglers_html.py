"""The straggler diagnosis page: self-contained, escaped, deterministic, and
right in a real browser: the straggler marks of the real gloo traces are
checked by position, on the page and in a screenshot.

The browser tests reuse the headless chromium of ``test_html`` and save a
screenshot (into ``$COMMCANARY_SCREENSHOT_DIR`` when set) for a person to
look at.
"""

from __future__ import annotations

import copy
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import commcanary
import kineto_jobs
from commcanary.cli import app
from commcanary.errors import InputError
from commcanary.html_stragglers import MARK_COLOURS, MAX_DRAWN, render_stragglers
from test_diagnose_stragglers import DECODE, INJECTED, TRACES
from test_html import _rgb, chromium_driver, open_page

runner = CliRunner()
HOSTILE = '<script>alert("pwned")</script> & "quotes"'


@pytest.fixture(scope="module")
def report() -> commcanary.StragglerReport:
    return commcanary.diagnose_stragglers(TRACES)


@pytest.fixture(scope="module")
def page(report: commcanary.StragglerReport, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "stragglers.html"
    path.write_text(report.render_html())
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = chromium_driver()
    yield driver
    driver.quit()


def decode_png(data: bytes) -> tuple[int, int, int, list[bytes]]:
    """Width, height, bytes per pixel and unfiltered rows of an 8-bit,
    non-interlaced RGB or RGBA PNG (what chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, header = 8, b"", b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        at += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0
    bpp = 3 if colour == 2 else 4
    raw, stride, rows = zlib.decompress(idat), width * bpp, []
    previous = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, bpp, rows


def test_the_page_is_deterministic_self_contained_and_escaped(report: commcanary.StragglerReport) -> None:
    html = report.render_html()
    assert html == report.render_html()
    assert "<script" not in html and "Content-Security-Policy" in html
    assert html.count('class="straggler-mark"') == len(INJECTED)
    hostile = copy.deepcopy(report.document)
    hostile["findings"][0]["group"]["desc"] = HOSTILE
    hostile["findings"][0]["op"] = HOSTILE
    columns = {k: v.tolist() for k, v in report.members().items()}
    out = render_stragglers(hostile, columns)
    assert HOSTILE not in out and "&lt;script&gt;" in out
    with pytest.raises(InputError, match=r"not a commcanary\.stragglers\.v1 document"):
        render_stragglers({"format": "commcanary.hang.v1"}, columns)


def test_the_cli_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "view.html"
    result = runner.invoke(app, ["diagnose", "stragglers", str(DECODE), "--html", str(out), "--no-cache"])
    assert result.exit_code == 1, result.output
    assert f"wrote HTML view: {out}" in result.output
    assert out.read_text() == commcanary.diagnose_stragglers(TRACES).render_html()


def test_a_job_too_large_to_draw_is_drawn_around_its_worst_finding(tmp_path: Path) -> None:
    job = kineto_jobs.Job(world=8, steps=1000, late={(5, 700): 20_000.0})
    report = commcanary.diagnose_stragglers(kineto_jobs.write_job(tmp_path, job))
    html = report.render_html()
    assert "around the costliest finding" in html
    assert html.count('class="straggler-mark"') == 1 and 'data-step="700"' in html
    assert html.count("<rect x=") <= 2 * MAX_DRAWN


def test_straggler_marks_sit_on_their_rank_and_step_on_screen(
    browser: Any, page: Path, tmp_path: Path
) -> None:
    open_page(browser, page)
    marks = browser.execute_script(
        """
        const box = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
        const rows = {}; document.querySelectorAll('svg.timeline rect.row').forEach(r => rows[r.dataset.rank] = box(r));
        const steps = {}; document.querySelectorAll('svg.timeline line.step').forEach(l => steps[l.dataset.step] = box(l)[0]);
        window.scrollTo(0, 0);
        return [...document.querySelectorAll('rect.straggler-mark')].map(m => ({
            rank: m.dataset.rank, step: +m.dataset.step, kind: m.dataset.kind, box: box(m), rows, steps}));
        """
    )
    assert sorted(m["step"] for m in marks) == sorted(INJECTED)
    png = browser.get_screenshot_as_png()
    width, height, bpp, rows = decode_png(png)
    scale = width / browser.execute_script("return window.innerWidth")
    red = _rgb(MARK_COLOURS["late_arrival"])
    for m in marks:
        left, top, right, bottom = m["box"]
        row = m["rows"][m["rank"]]
        cx, cy = (left + right) / 2, (top + bottom) / 2
        assert m["rank"] == "2" and m["kind"] == "late_arrival"
        assert row[1] <= cy <= row[3], m
        # Between its step's boundary and the next step's.
        starts = sorted((int(s), x) for s, x in m["steps"].items())
        mine = next(x for s, x in starts if s == m["step"])
        after = next((x for s, x in starts if s > m["step"]), float("inf"))
        assert mine - 1 <= cx <= after + 1, m
        px, py = round(cx * scale), round(cy * scale)
        assert py < height, "the timeline is on the first screen"
        pixel = tuple(rows[py][px * bpp : px * bpp + 3])
        assert all(abs(a - b) <= 12 for a, b in zip(pixel, red, strict=True)), (m, pixel)
    out = Path(os.environ.get("COMMCANARY_SCREENSHOT_DIR", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    (out / "stragglers.png").write_bytes(png)
