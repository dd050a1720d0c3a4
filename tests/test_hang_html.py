"""The hang diagnosis page: self-contained, escaped, deterministic, and right in a real browser.

Inputs are two diagnoses of the same 4-rank gloo job where rank 3 skipped an all_reduce on
default_pg (``tests/data/hang``): one from Flight Recorder dumps and stacks (verdict hang, root
rank 3) and one from stacks alone (inconclusive: no groups, no edges, no root). Synthetic
variants cover no_hang, hostile strings and a job of hundreds of ranks. The browser tests reuse
the headless chromium of ``test_html`` and save screenshots (into
``$COMMCANARY_SCREENSHOT_DIR`` when set) for a person to look at.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from commcanary.errors import InputError
from commcanary.html_hang import HANG_VERDICT_COLOURS, MAX_GRAPH_NODES, render_hang
from conftest import DATA
from test_html import NARROW, WIDE, _parse_css_colour, _rgb, chromium_driver, open_page

HANG = DATA / "hang"
HOSTILE = '<script>alert("pwned")</script> & "quotes" \'single\''


def load(kind: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((HANG / f"gloo_tp4_rank3_skips_allreduce.{kind}.json").read_text())
    return doc


@pytest.fixture(scope="module")
def fr() -> dict[str, Any]:
    return load("fr")


@pytest.fixture(scope="module")
def stacks() -> dict[str, Any]:
    return load("stacks")


def no_hang(fr: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(fr)
    doc.update(verdict="no_hang", summary="no_hang: every rank finished", root=[], wait_for=[])
    doc.update(partial_collectives=[], mismatches=[])
    for rank in doc["ranks"]:
        rank.update(state="not_blocked", in_flight=None)
    return doc


def many_ranks(world: int = 300, root: int = 7) -> dict[str, Any]:
    """Every rank waits for ``root`` on default_pg; the root waits for rank 0 in a send on a pair."""
    doc = load("fr")
    everyone = list(range(world))
    others = [r for r in everyone if r != root]
    default = {"name": "0", "desc": "default_pg", "ranks": everyone}
    pair = {"name": "1", "desc": "pair", "ranks": [0, root]}
    doc.update(world_size=world, mismatches=[], notes=["synthetic"])
    doc["groups"] = [default | {"membership": "every rank"}, pair | {"membership": "the pair"}]
    flight = {"group": default, "collective_seq_id": 5, "op": "all_reduce"}
    send = {"group": pair, "collective_seq_id": None, "p2p_seq_id": 2, "op": "send"}
    doc["partial_collectives"] = [
        flight | {"present_ranks": others, "missing_ranks": [root], "state": "in_flight", "p2p": False},
        send | {"present_ranks": [root], "missing_ranks": [0], "state": "in_flight", "p2p": True},
    ]
    doc["root"] = [doc["root"][0] | {"rank": root, "reason": "skipped all_reduce #5"}]
    doc["wait_for"] = [flight | {"rank": r, "waits_for": root} for r in others]
    doc["wait_for"].append(send | {"rank": root, "waits_for": 0})
    doc["ranks"] = [
        {"rank": r, "state": "blocked", "in_flight": send if r == root else flight}
        | {"last_completed": None, "stack": None, "exception": None, "evidence": []}
        for r in everyone
    ]
    return doc


class Grid(HTMLParser):
    """The grid table: its group headers and, per row, the row's class and (class, text) cells."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.headers: list[str] = []
        self.rows: dict[int, tuple[str, list[tuple[str, str]]]] = {}
        self.cell: list[str] | None = None
        self.cell_class = ""
        self.row: int | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("class") == "grid":
            self.inside = True
        if not self.inside:
            return
        if tag == "tr" and a.get("data-rank") is not None:
            self.row = int(a["data-rank"] or "")
            self.rows[self.row] = (a.get("class") or "", [])
        if tag in ("td", "th"):
            self.cell, self.cell_class = [], a.get("class") or ""

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        if tag in ("td", "th") and self.cell is not None:
            text = " ".join("".join(self.cell).split())
            if self.row is None and "group" in self.cell_class:
                self.headers.append(self.cell[0])
            elif self.row is not None and tag == "td":
                self.rows[self.row][1].append((self.cell_class, text))
            self.cell = None

    def at(self, rank: int, group: str) -> tuple[str, str]:
        """(class, text) of a rank's cell on a group (by desc); the state column comes first."""
        return self.rows[rank][1][1 + self.headers.index(group)]


def grid(html: str) -> Grid:
    parser = Grid()
    parser.feed(html)
    return parser


# --- the page as text ----------------------------------------------------------------------------


def test_self_contained_and_escaped(fr: dict[str, Any]) -> None:
    doc = copy.deepcopy(fr)
    doc["root"][0]["reason"] = HOSTILE
    doc["summary"] = HOSTILE
    doc["groups"][1]["desc"] = HOSTILE
    doc["groups"][1]["membership"] = '" onmouseover="alert(1)'
    doc["ranks"][0]["stack"]["frame"]["func"] = "<module>"
    doc["notes"] = [HOSTILE]
    doc["wait_for"][0]["group"]["desc"] = "<b>pg</b>"
    doc["evidence"][0]["file"] = "<img src=x>"
    html = render_hang(doc)
    assert "<script" not in html.lower() and "<b>" not in html and "<img" not in html
    assert 'onmouseover="alert' not in html and "&#34; onmouseover=&#34;alert(1)" in html
    assert html.count("&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt; &amp;") >= 4
    assert "&lt;module&gt;" in html and "&lt;b&gt;pg&lt;/b&gt;" in html
    for page in (html, render_hang(fr)):
        assert 'http-equiv="Content-Security-Policy" content="default-src \'none\';' in page
        assert "https://" not in page
        assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_deterministic(fr: dict[str, Any], stacks: dict[str, Any]) -> None:
    for doc in (fr, stacks, many_ranks()):
        first = render_hang(doc)
        assert render_hang(copy.deepcopy(doc)).encode() == first.encode()
        # Key order in the input does not matter either.
        reordered = json.loads(json.dumps(doc, sort_keys=True))
        assert render_hang(reordered) == first


def test_refuses_other_documents(fr: dict[str, Any]) -> None:
    with pytest.raises(InputError, match=r"commcanary\.hang\.v1"):
        render_hang(fr | {"format": "commcanary.report.v3"})
    with pytest.raises(InputError):
        render_hang([])  # type: ignore[arg-type]


def test_sections_in_order(fr: dict[str, Any]) -> None:
    html = render_hang(fr)
    marks = ['<header class="hero', 'class="cards"', 'class="grid"', 'class="wait-for"']
    marks += ['class="roots"', 'class="partials"', 'class="mismatches"', 'class="ranks"']
    marks += ['class="conclusions"', 'class="evidence"', 'class="notes"']
    where = [html.index(m) for m in marks]
    assert where == sorted(where)
    assert '<header class="hero verdict verdict-hang"><h1>Hang</h1>' in html
    assert "header.hero.verdict-hang{background:#a32424" in html


def test_grid(fr: dict[str, Any]) -> None:
    g = grid(render_hang(fr))
    assert g.headers == ["default_pg", "tp_pair_0", "tp_pair_1"]
    assert sorted(g.rows) == [0, 1, 2, 3]
    assert [r for r, (cls, _) in g.rows.items() if cls == "row-root"] == [3]
    assert g.at(3, "default_pg") == ("cell cell-missing", "missing #86")
    assert g.at(2, "tp_pair_1") == ("cell cell-missing", "missing #27")
    for rank in (0, 1, 2):
        assert g.at(rank, "default_pg") == ("cell cell-stuck", "stuck all_reduce #86")
    assert g.at(3, "tp_pair_1") == ("cell cell-stuck", "stuck all_gather #27")
    assert g.at(0, "tp_pair_0") == ("cell cell-ok", "ok")
    for rank, group in ((0, "tp_pair_1"), (1, "tp_pair_1"), (2, "tp_pair_0"), (3, "tp_pair_0")):
        assert g.at(rank, group) == ("cell cell-none", "")


def test_wait_for_chain(fr: dict[str, Any]) -> None:
    html = render_hang(fr)
    svg = html[html.index('<svg xmlns="http://www.w3.org/2000/svg" class="wait-for"') : html.index("</svg>")]
    assert '<g class="edge" data-src="0" data-dst="3">' in svg
    assert '<g class="edge" data-src="3" data-dst="2">' in svg
    assert svg.count('<g class="edge"') == 4 and svg.count('<g class="node') == 4
    root = re.search(r'<g class="node root" data-rank="3">.*?fill="([^"]+)"', svg)
    assert root and root.group(1) == HANG_VERDICT_COLOURS["hang"]
    assert svg.count('class="node root"') == 1
    assert ">default_pg #86</text>" in svg and ">tp_pair_1 #27</text>" in svg
    assert "<li>0 → 3 default_pg #86 all_reduce</li>" in html
    assert "<li>3 → 2 tp_pair_1 #27 all_gather</li>" in html
    assert "left out" not in html


def test_stacks_only_says_what_is_missing(stacks: dict[str, Any]) -> None:
    html = render_hang(stacks)
    assert '<header class="hero verdict verdict-inconclusive"><h1>Inconclusive</h1>' in html
    assert "<svg" not in html and 'class="grid"' not in html.replace('<section class="grid"', "")
    assert "No process groups are known" in html
    assert "No wait-for edges: the evidence carries no process groups or sequence numbers" in html
    assert "No root rank was identified" in html
    assert "None found (no collectives could be compared across ranks)." in html
    assert "all_gather_into_tensor (all_gather_single)" in html  # rank 3's stack
    assert "4 used, 0 skipped." in html


def test_no_hang(fr: dict[str, Any]) -> None:
    html = render_hang(no_hang(fr))
    assert '<header class="hero verdict verdict-no_hang"><h1>No hang</h1>' in html
    assert "<svg" not in html and 'class="row-root"' not in html
    assert "No rank waits for another: the job is not hung" in html
    assert "No root rank: the job is not hung." in html
    g = grid(html)
    assert {cls for _, cells in g.rows.values() for cls, _ in cells[1:]} == {"cell cell-ok", "cell cell-none"}


def test_mismatch_exception_and_skipped_evidence(fr: dict[str, Any]) -> None:
    doc = copy.deepcopy(fr)
    group = {"name": "1", "desc": "tp_pair_0", "ranks": [0, 1]}
    expected = {"op": "all_reduce", "input_sizes": "[[4]]", "input_dtypes": "Float"}
    expected |= {"output_sizes": None, "output_dtypes": None}
    doc["mismatches"] = [
        {"group": group, "collective_seq_id": 9, "kind": "dtype", "majority_ranks": [0]}
        | {"minority_ranks": [1], "expected": expected, "state": "in_flight", "step": 3}
        | {"seen": [{"rank": 1, "op": "all_reduce", "input_sizes": "[[4]]", "input_dtypes": "Half"}]}
    ]
    doc["ranks"][1]["exception"] = {"type": "DistBackendError", "message": "Timed out", "timeout_ms": 600000}
    doc["ranks"][1]["exception"] |= {"backend": "gloo", "collective_seq_id": 86, "op": "all_reduce"}
    doc["evidence"].append({"file": "junk.bin", "kind": "unknown", "rank": None, "used": False})
    doc["evidence"][-1]["reason"] = "not a dump"
    html = render_hang(doc)
    assert "op all_reduce · input sizes [[4]] · input dtypes Float" in html
    assert "rank 1: op all_reduce · input sizes [[4]] · input dtypes Half" in html
    assert (
        "DistBackendError: Timed out" in html and "timeout 600000 ms · backend gloo · all_reduce #86" in html
    )
    assert '<tr class="skipped">' in html and "reason not a dump" in html and "8 used, 1 skipped." in html
    g = grid(html)
    assert g.at(1, "tp_pair_0") == ("cell cell-stuck", "stuck all_reduce #9 (dtype mismatch)")
    assert g.at(0, "tp_pair_0") == ("cell cell-stuck", "stuck all_reduce #9 (dtype mismatch)")


def test_a_cycle_without_a_root(fr: dict[str, Any]) -> None:
    """Ranks 0 and 1 wait for each other and no root is named: the cycle is still drawn."""
    doc = copy.deepcopy(fr) | {"verdict": "inconclusive", "root": []}
    pair = {"name": "1", "desc": "tp_pair_0"}
    doc["wait_for"] = [
        {"rank": 0, "waits_for": 1, "group": pair, "collective_seq_id": 4, "op": "send"},
        {"rank": 1, "waits_for": 0, "group": pair, "collective_seq_id": 5, "op": "recv"},
    ]
    html = render_hang(doc)
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert re.findall(r'<g class="node" data-rank="(\d+)">', svg) == ["0", "1"]
    assert svg.count('<g class="edge"') == 2 and "node root" not in svg
    assert "No root rank was identified" in html and 'class="row-root"' not in html


def test_hundreds_of_ranks() -> None:
    doc = many_ranks(300, root=7)
    html = render_hang(doc)
    svg = html[html.index("<svg") : html.index("</svg>")]
    nodes = re.findall(r'<g class="node[^"]*" data-rank="(\d+)">', svg)
    assert len(nodes) == MAX_GRAPH_NODES and nodes[0] == "7" and "0" in nodes
    assert f"The drawing shows {MAX_GRAPH_NODES} ranks; {300 - MAX_GRAPH_NODES} more ranks" in html
    assert "the drawing is unlabelled" in html and 'class="edge-label"' not in svg
    assert html.count("<li>") >= 300 and "<li>7 → 0 pair p2p #2 send</li>" in html
    g = grid(html)
    assert len(g.rows) == 300 and g.rows[7][0] == "row-root"
    assert g.at(7, "default_pg") == ("cell cell-missing", "missing #5")
    assert g.at(7, "pair") == ("cell cell-stuck", "stuck send p2p #2")
    assert g.at(0, "pair") == ("cell cell-missing", "missing p2p #2")
    assert g.at(1, "pair") == ("cell cell-none", "")


# --- in a real browser ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = chromium_driver()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def pages(
    tmp_path_factory: pytest.TempPathFactory, fr: dict[str, Any], stacks: dict[str, Any]
) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("hang-html")
    docs = {"fr": fr, "stacks": stacks, "no_hang": no_hang(fr), "many": many_ranks()}
    paths = {}
    for key, doc in docs.items():
        paths[key] = tmp / f"{key}.html"
        paths[key].write_text(render_hang(doc), encoding="utf-8")
    return paths


def box(browser: Any, element: Any) -> tuple[float, float]:
    rect = browser.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.width, r.height];", element
    )
    return float(rect[0]), float(rect[1])


def test_hang_page_in_a_real_browser(browser: Any, pages: dict[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, pages["fr"])  # no console errors (a CSP violation is one), no scripts
    hero = browser.find_element(By.CSS_SELECTOR, "header.hero")
    assert hero.find_element(By.TAG_NAME, "h1").text == "Hang"
    assert _parse_css_colour(hero.value_of_css_property("background-color")) == _rgb(
        HANG_VERDICT_COLOURS["hang"]
    )
    table = browser.find_element(By.CSS_SELECTOR, "table.grid")
    assert table.is_displayed() and min(box(browser, table)) > 0
    root_row = browser.find_element(By.CSS_SELECTOR, "table.grid tr.row-root")
    label = root_row.find_element(By.TAG_NAME, "th").text
    assert root_row.is_displayed() and label.startswith("3") and label.endswith("ROOT")
    missing = browser.find_elements(By.CSS_SELECTOR, "table.grid td.cell-missing")
    assert [m.text for m in missing] == ["MISSING #27", "MISSING #86"]
    assert all(m.is_displayed() for m in missing)
    stuck = browser.find_elements(By.CSS_SELECTOR, "td.cell-stuck")[0]
    assert _parse_css_colour(stuck.value_of_css_property("background-color")) != (255, 255, 255)

    svg = browser.find_element(By.CSS_SELECTOR, "section.wait-for svg.wait-for")
    width, height = box(browser, svg)
    assert svg.is_displayed() and width > 200 and height > 200
    root = svg.find_element(By.CSS_SELECTOR, 'g.node.root[data-rank="3"] circle')
    assert min(box(browser, root)) > 20
    line = svg.find_element(By.CSS_SELECTOR, 'g.edge[data-src="0"][data-dst="3"] line')
    assert max(box(browser, line)) > 40
    edges = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "ul.edges li")]
    assert "0 → 3 default_pg #86 all_reduce" in edges and len(edges) == 4


def test_empty_states_in_a_real_browser(browser: Any, pages: dict[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    for key, verdict in (("stacks", "inconclusive"), ("no_hang", "no_hang")):
        open_page(browser, pages[key])
        hero = browser.find_element(By.CSS_SELECTOR, "header.hero")
        colour = _parse_css_colour(hero.value_of_css_property("background-color"))
        assert colour == _rgb(HANG_VERDICT_COLOURS[verdict])
        assert browser.find_elements(By.CSS_SELECTOR, "svg") == []
        empty = browser.find_element(By.CSS_SELECTOR, "section.wait-for p.empty")
        assert empty.is_displayed() and empty.text.startswith("No ")
        assert browser.find_element(By.CSS_SELECTOR, "section.roots p.empty").is_displayed()


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_large_job_fits(browser: Any, pages: dict[str, Path], width: int) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, pages["many"], width)
    svg = browser.find_element(By.CSS_SELECTOR, "svg.wait-for")
    assert len(svg.find_elements(By.CSS_SELECTOR, "g.node")) == MAX_GRAPH_NODES
    svg_width, _ = box(browser, svg)
    assert 0 < svg_width <= width
    assert len(browser.find_elements(By.CSS_SELECTOR, "table.grid tbody tr")) == 300
    # The grid scrolls inside its card; the page itself never scrolls sideways.
    assert browser.execute_script(
        "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )


def test_screenshots(browser: Any, pages: dict[str, Path], tmp_path: Path) -> None:
    """Screenshots of every page, wide and narrow, for a person to look at."""
    out = Path(os.environ.get("COMMCANARY_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    for key in ("fr", "stacks", "no_hang", "many"):
        for width in (WIDE, NARROW):
            open_page(browser, pages[key], width)
            height = browser.execute_script("return document.documentElement.scrollHeight")
            browser.set_window_size(width, min(int(height) + 140, 8000))
            target = out / f"hang-{key}-{width}.png"
            assert browser.save_screenshot(str(target))
            assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
