"""HTML reports: self-contained, escaped, deterministic, and correct in a real headless browser.

The browser tests drive Debian's chromium through selenium and check what a
reader sees: the verdict's computed colour, the plot's axes, markers, legend
and width, both sides' settings and the thresholds, and the no-samples
message. They also save a screenshot of every page (into
``$COMMCANARY_SCREENSHOT_DIR`` when set, else a temporary directory) for a
person to look at.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import commcanary
from commcanary.compare import Thresholds, compare
from commcanary.html import VERDICT_COLOURS, render_comparison, render_report
from commcanary.replay import Backend, Report, replay
from conftest import EXAMPLES

HOSTILE_NAME = '<script>alert("pwned")</script> & "quotes" \'single\''
HOSTILE_LABEL = "<b>nccl</b> & 'co'"
WIDE, NARROW = 1280, 420


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def _parse_css_colour(value: str) -> tuple[int, int, int]:
    found = re.findall(r"[\d.]+", value)
    assert len(found) >= 3, value
    return int(float(found[0])), int(float(found[1])), int(float(found[2]))


def _warn_thresholds(fail: dict[str, Any]) -> Thresholds:
    """Thresholds at which the fail comparison's regressions only warn.

    Every relative delta (overall and per row) stays below the percentage
    thresholds, the largest is above half of them, and the absolute ones are
    tiny; the hidden-drop threshold is just above the observed drop.
    """
    deltas = [fail["delta"][f"{m}_pct"] for m in ("median", "p95", "p99")]
    for section in ("by_phase", "by_op"):
        for row in fail["breakdown_delta"][section]:
            deltas += [row[f"{m}_pct"] for m in ("median", "p95", "p99")]
    worst = max(abs(d) for d in deltas if d is not None)
    pct = round(worst * 1.25, 2)
    drop = max(0.0, -fail["delta"]["communication_hidden_pct_points"])
    return Thresholds(
        p99_threshold_pct=pct,
        p95_threshold_pct=pct,
        median_threshold_pct=pct,
        p99_absolute_threshold_us=0.25,
        p95_absolute_threshold_us=0.25,
        median_absolute_threshold_us=0.25,
        hidden_drop_threshold_points=round(drop * 1.5 + 0.01, 2),
    )


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("html")
    trace = json.loads((EXAMPLES / "llama70b_tp8_trace_long.json").read_text())
    trace["workload"]["name"] = HOSTILE_NAME
    canary = commcanary.compile(json.dumps(trace).encode())
    baseline = replay(canary, include_samples=True)
    slower = replay(canary, include_samples=True, backend=Backend(label=HOSTILE_LABEL, latency_floor_us=12.0))
    same = replay(canary, include_samples=True, backend=Backend(label="same-settings"))
    # A report written without --include-samples, read back from its file.
    slower.write(tmp / "slower.json")
    replay(canary, backend=Backend(latency_floor_us=12.0)).write(tmp / "no-samples.json")
    no_samples = Report.from_file(tmp / "no-samples.json")
    assert no_samples.samples is None and not no_samples.has_samples
    protocol = replay(canary, include_samples=True, iterations=2, seed=11, ablations=["pressure"])

    fail = compare(baseline, slower)
    warn_thresholds = _warn_thresholds(fail)
    warn = compare(baseline, slower, warn_thresholds)
    passed = compare(baseline, same)
    no_samples_result = compare(baseline, no_samples)
    protocol_result = compare(baseline, protocol, allow_mismatch=True)
    assert (fail["verdict"], warn["verdict"], passed["verdict"]) == ("fail", "warn", "pass")

    rendered = {
        "report": render_report(baseline),
        "report_no_samples": render_report(no_samples),
        "fail": render_comparison(fail, baseline, slower),
        "warn": render_comparison(warn, baseline, slower),
        "pass": render_comparison(passed, baseline, same),
        "no_samples": render_comparison(no_samples_result, baseline, no_samples),
        "none_sampled": render_comparison(compare(no_samples, no_samples), no_samples, no_samples),
        "protocol": render_comparison(protocol_result, baseline, protocol),
    }
    paths = {}
    for key, html in rendered.items():
        paths[key] = tmp / f"{key}.html"
        paths[key].write_text(html, encoding="utf-8")
    return {
        "paths": paths,
        "html": rendered,
        "results": {"fail": fail, "warn": warn, "pass": passed, "no_samples": no_samples_result},
        "warn_thresholds": warn_thresholds,
        "reports": {"baseline": baseline, "slower": slower, "no_samples": no_samples},
        "canary": canary,
        "tmp": tmp,
    }


def test_pages_are_self_contained_and_escaped(pages: dict[str, Any]) -> None:
    for key, html in pages["html"].items():
        assert "<script" not in html.lower(), key
        assert "&lt;script&gt;" in html, key
        assert "http://" not in html.replace("http://www.w3.org/2000/svg", ""), key
        assert "https://" not in html, key
        assert "Content-Security-Policy" in html, key
        assert "<b>" not in html, key
    assert "&lt;b&gt;nccl&lt;/b&gt; &amp; &#39;co&#39;" in pages["html"]["fail"]
    assert "<svg" in pages["html"]["fail"] and "<svg" in pages["html"]["report"]
    assert "<svg" not in pages["html"]["report_no_samples"]
    assert "cannot be drawn" in pages["html"]["report_no_samples"]
    assert "<svg" not in pages["html"]["none_sampled"]


def test_pages_are_deterministic(pages: dict[str, Any]) -> None:
    reports, results = pages["reports"], pages["results"]
    assert render_report(reports["baseline"]) == pages["html"]["report"]
    again = render_comparison(results["fail"], reports["baseline"], reports["slower"])
    assert again.encode() == pages["html"]["fail"].encode()
    # The same report file read twice renders to the same bytes.
    path = pages["tmp"] / "slower.json"
    assert render_report(Report.from_file(path)) == render_report(Report.from_file(path))


def test_thresholds_come_from_the_comparison(pages: dict[str, Any]) -> None:
    html = pages["html"]["warn"]
    t = pages["results"]["warn"]["thresholds"]
    assert f"{t['p99_threshold_pct']:.2f}% and {t['p99_absolute_threshold_us']:.3f} µs" in html
    assert f"{t['p99_threshold_pct'] / 2:.2f}% and {t['p99_absolute_threshold_us'] / 2:.3f} µs" in html
    assert f"{t['hidden_drop_threshold_points']:.2f} points" in html
    assert f"{Thresholds().resolved()['p99_threshold_pct']:.2f}% and" not in html


def test_plot_of_a_degenerate_distribution() -> None:
    """All samples equal (say, fully hidden communication): still a plot with axes around them."""
    import numpy as np

    from commcanary.html import LAYOUTS, Series, _histogram

    quantiles = (("p50", 0.0), ("p95", 0.0), ("p99", 0.0))
    series = [Series("zeros", np.zeros(5), quantiles, "#2e86c1", "#1d2430")]
    for layout in LAYOUTS:
        svg = _histogram(series, "t", layout, named=False)
        assert svg == _histogram(series, "t", layout, named=False)
        assert 'width="100%"' in svg and f'viewBox="0 0 {layout.width} ' in svg
        ticks = [
            float(t)
            for t in re.findall(r'class="tick" x="[\d.]+" y="[\d.]+" text-anchor="middle">([^<]+)<', svg)
        ]
        assert len(ticks) >= 2 and ticks[0] == 0.0
        assert svg.count('class="marker"') == 3 and "5 events in" in svg


def test_cli_writes_html(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from commcanary.cli import app

    runner = CliRunner()
    canary = tmp_path / "w.json"
    assert (
        runner.invoke(
            app, ["compile", str(EXAMPLES / "llama70b_tp8_trace.json"), "-o", str(canary)]
        ).exit_code
        == 0
    )
    base, cand = tmp_path / "b.json", tmp_path / "c.json"
    r = runner.invoke(
        app, ["replay", str(canary), "-o", str(base), "--include-samples", "--html", str(tmp_path / "b.html")]
    )
    assert r.exit_code == 0, r.output
    runner.invoke(
        app, ["replay", str(canary), "-o", str(cand), "--include-samples", "--latency-floor-us", "12"]
    )
    r = runner.invoke(
        app,
        ["compare", str(base), str(cand), "-o", str(tmp_path / "x.json"), "--html", str(tmp_path / "x.html")],
    )
    assert r.exit_code == 1
    assert "Comparison FAIL" in (tmp_path / "x.html").read_text()
    r = runner.invoke(app, ["render-html", str(base), "-o", str(tmp_path / "r.html")])
    assert r.exit_code == 0 and r.stdout.strip() == f"wrote HTML report: {tmp_path / 'r.html'}"
    assert Report.from_file(base).samples is not None
    runner.invoke(app, ["render-html", str(base), "-o", str(tmp_path / "r2.html")])
    assert (tmp_path / "r.html").read_bytes() == (tmp_path / "r2.html").read_bytes()
    assert "<svg" in (tmp_path / "b.html").read_text()


# --- in a real browser ---------------------------------------------------------------------------


def chromium_driver() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver_path = shutil.which("chromedriver")
    assert binary and driver_path, (
        "chromium and chromedriver must be installed (scripts/test.sh installs them)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={WIDE},1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver_path), options=options)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = chromium_driver()
    yield driver
    driver.quit()


def severe_logs(driver: Any) -> list[dict[str, Any]]:
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]


def open_page(browser: Any, path: Path, width: int = WIDE) -> None:
    browser.set_window_size(width, 1000)
    browser.get(path.as_uri())
    assert severe_logs(browser) == []
    assert browser.execute_script("return document.scripts.length") == 0


def visible_plot(browser: Any) -> Any:
    from selenium.webdriver.common.by import By

    shown = [svg for svg in browser.find_elements(By.CSS_SELECTOR, "svg.histogram") if svg.is_displayed()]
    assert len(shown) == 1
    return shown[0]


def test_comparison_page_in_a_real_browser(browser: Any, pages: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, pages["paths"]["fail"])
    hero = browser.find_element(By.CSS_SELECTOR, "header.hero h1")
    assert hero.is_displayed() and hero.text == "Comparison FAIL"
    reasons = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "ul.reasons li")]
    for reason in pages["results"]["fail"]["reasons"]:
        assert any(text.startswith(reason["message"]) for text in reasons), reason["message"]
    for li in browser.find_elements(By.CSS_SELECTOR, "ul.reasons li"):
        assert li.is_displayed()
    body = browser.find_element(By.TAG_NAME, "body").text
    assert HOSTILE_NAME in body and HOSTILE_LABEL in body
    assert len(visible_plot(browser).find_elements(By.CSS_SELECTOR, "rect.bar")) > 4


def test_report_page_in_a_real_browser(browser: Any, pages: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, pages["paths"]["report"])
    assert browser.title == f"commcanary report - {HOSTILE_NAME}"
    assert browser.find_element(By.CSS_SELECTOR, "header.hero h1").text == HOSTILE_NAME
    cards = browser.find_elements(By.CSS_SELECTOR, ".card")
    assert [c.find_element(By.CSS_SELECTOR, ".label").text.upper() for c in cards][:3] == [
        "MEDIAN",
        "P95",
        "P99",
    ]
    settings = settings_table(browser)
    assert settings["Latency floor (µs)"] == ["7.5"]
    assert settings["Samples embedded"] == [f"yes ({pages['reports']['baseline'].metrics['count']})"]


def test_verdict_colours(browser: Any, pages: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    seen = {}
    for verdict in ("pass", "warn", "fail"):
        open_page(browser, pages["paths"][verdict])
        hero = browser.find_element(By.CSS_SELECTOR, "header.hero")
        assert hero.find_element(By.TAG_NAME, "h1").text == f"Comparison {verdict.upper()}"
        expected = _rgb(VERDICT_COLOURS[verdict])
        assert _parse_css_colour(hero.value_of_css_property("background-color")) == expected
        assert _parse_css_colour(hero.value_of_css_property("color")) == (255, 255, 255)
        badge = browser.find_element(By.CSS_SELECTOR, ".card .badge")
        assert badge.text == verdict.upper()
        assert _parse_css_colour(badge.value_of_css_property("background-color")) == expected
        seen[verdict] = expected
    assert len(set(seen.values())) == 3
    # The neutral banner colour (what the report page uses) is none of them.
    open_page(browser, pages["paths"]["report"])
    neutral = browser.find_element(By.CSS_SELECTOR, "header.hero").value_of_css_property("background-color")
    assert _parse_css_colour(neutral) not in seen.values()


def _texts(element: Any, selector: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in element.find_elements(By.CSS_SELECTOR, selector)]


def check_plot(browser: Any, sides: dict[str, Report]) -> None:
    """Axes, markers, legend and width of the visible plot, against the reports drawn in it."""
    from selenium.webdriver.common.by import By

    svg = visible_plot(browser)
    x_axis = svg.find_element(By.CSS_SELECTOR, "g.x-axis")
    y_axis = svg.find_element(By.CSS_SELECTOR, "g.y-axis")
    x_ticks = [float(t) for t in _texts(x_axis, "text.tick")]
    y_ticks = [int(t) for t in _texts(y_axis, "text.tick")]
    assert len(x_ticks) >= 3 and x_ticks == sorted(x_ticks) and len(set(x_ticks)) == len(x_ticks)
    assert len(y_ticks) >= 2 and y_ticks[0] == 0 and y_ticks == sorted(y_ticks)
    assert _texts(x_axis, "text.axis-title") == ["Exposed latency (µs)"]
    assert _texts(y_axis, "text.axis-title") == ["Events (count)"]

    named = len(sides) > 1 or "baseline" in sides or "candidate" in sides
    markers = svg.find_elements(By.CSS_SELECTOR, "line.marker")
    labels = svg.find_elements(By.CSS_SELECTOR, "text.marker-label")
    assert len(markers) == len(labels) == 3 * len(sides)
    for name, report in sides.items():
        m = report.metrics
        xs = []
        for q, key in (("p50", "median_us"), ("p95", "p95_us"), ("p99", "p99_us")):
            selector = f'[data-series="{name}"][data-quantile="{q}"]'
            line = svg.find_element(By.CSS_SELECTOR, f"line.marker{selector}")
            label = svg.find_element(By.CSS_SELECTOR, f"text.marker-label{selector}")
            prefix = f"{name} " if named else ""
            assert label.text == f"{prefix}{q} {m[key]:.1f} µs"
            assert _parse_css_colour(label.value_of_css_property("fill")) == _rgb(
                line.get_attribute("stroke")
            )
            xs.append(float(line.get_attribute("x1")))
        assert xs == sorted(xs)
    # Marker labels never overlap each other.
    boxes = browser.execute_script(
        "return Array.from(arguments[0].querySelectorAll('text.marker-label')).map(t => {"
        "const b = t.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; });",
        svg,
    )
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)

    # Every colour drawn has a legend entry; bars count every sample.
    bar_colours = {r.get_attribute("fill") for r in svg.find_elements(By.CSS_SELECTOR, "rect.bar")}
    marker_colours = {line.get_attribute("stroke") for line in markers}
    legend = {
        item.get_attribute("data-colour"): item.text
        for item in svg.find_elements(By.CSS_SELECTOR, "g.legend g.legend-item")
    }
    assert bar_colours | marker_colours == set(legend)
    assert len(bar_colours) == len(marker_colours) == len(sides)
    for name, report in sides.items():
        n = int(report.metrics["count"])
        titles = [
            t.get_attribute("textContent")
            for t in svg.find_elements(By.CSS_SELECTOR, "rect.bar title")
            if not named or t.get_attribute("textContent").startswith(f"{name}:")
        ]
        assert sum(int(t.split(": ")[1].split(" ")[0]) for t in titles) == n
        if named:
            assert f"{name} ({n} events)" in legend.values()
            assert f"{name} p50 / p95 / p99 markers" in legend.values()

    # The plot fills its card, and its text stays legible.
    card_width, svg_width, tick_height = browser.execute_script(
        "const svg = arguments[0]; const card = svg.closest('section'); const s = getComputedStyle(card);"
        "const inner = card.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);"
        "const tick = svg.querySelector('g.x-axis text.tick').getBoundingClientRect().height;"
        "return [inner, svg.getBoundingClientRect().width, tick];",
        svg,
    )
    assert abs(card_width - svg_width) <= 2, (card_width, svg_width)
    assert tick_height >= 9, tick_height


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_report_plot(browser: Any, pages: dict[str, Any], width: int) -> None:
    open_page(browser, pages["paths"]["report"], width)
    check_plot(browser, {"exposed latency": pages["reports"]["baseline"]})
    assert browser.execute_script(
        "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_comparison_plot(browser: Any, pages: dict[str, Any], width: int) -> None:
    open_page(browser, pages["paths"]["fail"], width)
    reports = pages["reports"]
    check_plot(browser, {"baseline": reports["baseline"], "candidate": reports["slower"]})
    assert browser.execute_script(
        "return document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )


def settings_table(browser: Any) -> dict[str, list[str]]:
    from selenium.webdriver.common.by import By

    rows = {}
    for tr in browser.find_elements(By.CSS_SELECTOR, "section.settings tbody tr"):
        cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        rows[cells[0].removesuffix("differs").strip()] = cells[1:]
    return rows


def test_comparison_shows_both_sides_settings(browser: Any, pages: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, pages["paths"]["fail"])
    rows = settings_table(browser)
    backend = Backend()
    assert rows["Backend label"] == [backend.label, HOSTILE_LABEL]
    assert rows["Bandwidth"] == [f"{backend.bandwidth_gbps} Gbit/s"] * 2
    assert rows["Latency floor (µs)"] == ["7.5", "12.0"]
    assert rows["Compute pressure"] == [str(backend.compute_pressure)] * 2
    assert rows["Overlap efficiency"] == [str(backend.overlap_efficiency)] * 2
    assert rows["Iterations"] == ["1", "1"] and rows["Seed"] == ["7", "7"]
    assert rows["Ablations"] == ["none", "none"]
    differing = {
        tr.find_element(By.TAG_NAME, "td").text.removesuffix("differs").strip()
        for tr in browser.find_elements(By.CSS_SELECTOR, "section.settings tr.differs")
    }
    assert differing == {"Backend label", "Latency floor (µs)"}

    open_page(browser, pages["paths"]["protocol"])
    rows = settings_table(browser)
    assert rows["Iterations"] == ["1", "2"]
    assert rows["Seed"] == ["7", "11"]
    assert rows["Ablations"] == ["none", "pressure"]


def test_comparison_shows_thresholds(browser: Any, pages: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, pages["paths"]["warn"])
    t = pages["results"]["warn"]["thresholds"]
    section = browser.find_element(By.CSS_SELECTOR, "section.thresholds")
    rows = {
        cells[0]: cells[1:]
        for tr in section.find_elements(By.CSS_SELECTOR, "tbody tr")
        for cells in [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]]
    }
    for m, label in (("median", "Median"), ("p95", "P95"), ("p99", "P99")):
        pct, ab = t[f"{m}_threshold_pct"], t[f"{m}_absolute_threshold_us"]
        assert rows[f"{label} exposed latency"] == [
            f"{pct:.2f}% and {ab:.3f} µs",
            f"{pct / 2:.2f}% and {ab / 2:.3f} µs",
        ]
    pct, ab = t["breakdown_threshold_pct"], t["breakdown_absolute_threshold_us"]
    assert rows["Each phase and operation (p50/p95/p99)"][0] == f"{pct:.2f}% and {ab:.3f} µs"
    h = t["hidden_drop_threshold_points"]
    assert rows["Hidden communication drop"] == [f"{h:.2f} points", f"{h / 2:.2f} points"]
    assert pages["warn_thresholds"].resolved() == t


def test_no_samples_side(browser: Any, pages: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, pages["paths"]["no_samples"])
    notes = browser.find_elements(By.CSS_SELECTOR, "section.plot-card p.no-samples")
    assert [n.get_attribute("data-side") for n in notes] == ["candidate"]
    assert notes[0].is_displayed()
    assert "candidate report has no embedded samples" in notes[0].text
    assert "--include-samples" in notes[0].text
    check_plot(browser, {"baseline": pages["reports"]["baseline"]})
    assert settings_table(browser)["Samples embedded"][1] == "no (written without --include-samples)"

    open_page(browser, pages["paths"]["none_sampled"])
    notes = browser.find_elements(By.CSS_SELECTOR, "section.plot-card p.no-samples")
    assert [n.get_attribute("data-side") for n in notes] == ["baseline", "candidate"]
    assert all(n.is_displayed() for n in notes)
    assert browser.find_elements(By.CSS_SELECTOR, "svg") == []

    open_page(browser, pages["paths"]["report_no_samples"])
    note = browser.find_element(By.CSS_SELECTOR, "section.plot-card p.no-samples")
    assert note.text.startswith("This report has no embedded samples")


def test_screenshots(browser: Any, pages: dict[str, Any], tmp_path: Path) -> None:
    """Screenshots of every page, wide and narrow, for a person to look at."""
    out = Path(os.environ.get("COMMCANARY_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    for key in ("report", "fail", "warn", "no_samples"):
        for width in (WIDE, NARROW):
            open_page(browser, pages["paths"][key], width)
            height = browser.execute_script("return document.documentElement.scrollHeight")
            browser.set_window_size(width, min(int(height) + 140, 8000))
            target = out / f"{key}-{width}.png"
            assert browser.save_screenshot(str(target))
            assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
