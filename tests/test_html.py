"""HTML reports: self-contained, escaped, and correct in a real headless browser."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import commcanary
from commcanary.compare import compare
from commcanary.html import render_comparison, render_report
from commcanary.replay import Backend, Report, replay
from conftest import EXAMPLES

HOSTILE_NAME = '<script>alert("pwned")</script> & "quotes" \'single\''


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("html")
    trace = json.loads((EXAMPLES / "llama70b_tp8_trace.json").read_text())
    trace["workload"]["name"] = HOSTILE_NAME
    canary = commcanary.compile(json.dumps(trace).encode())
    baseline = replay(canary, include_samples=True)
    candidate = replay(canary, include_samples=True, backend=Backend(latency_floor_us=12.0))
    result = compare(baseline, candidate)
    report_page = tmp / "report.html"
    report_page.write_text(render_report(baseline))
    comparison_page = tmp / "comparison.html"
    comparison_page.write_text(render_comparison(result, baseline, candidate))
    no_samples = tmp / "no-samples.html"
    no_samples.write_text(render_report(replay(canary)))
    return {"report": report_page, "comparison": comparison_page, "no_samples": no_samples, "result": result}


def test_pages_are_self_contained_and_escaped(pages: dict[str, Any]) -> None:
    for key in ("report", "comparison", "no_samples"):
        html = pages[key].read_text()
        assert "<script" not in html.lower()
        assert "&lt;script&gt;" in html
        assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in html
        assert "Content-Security-Policy" in html
    assert "<svg" in pages["comparison"].read_text()
    assert "cannot be drawn" in pages["no_samples"].read_text()


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
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver_path), options=options)


@pytest.fixture(scope="module")
def browser() -> Any:
    driver = chromium_driver()
    yield driver
    driver.quit()


def severe_logs(driver: Any) -> list[dict[str, Any]]:
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]


def test_comparison_page_in_a_real_browser(browser: Any, pages: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    browser.get(pages["comparison"].as_uri())
    assert severe_logs(browser) == []
    assert browser.execute_script("return document.scripts.length") == 0
    hero = browser.find_element(By.CSS_SELECTOR, "header.hero h1")
    assert hero.is_displayed() and hero.text == "Comparison FAIL"
    reasons = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "ul.reasons li")]
    for reason in pages["result"]["reasons"]:
        assert any(text.startswith(reason["message"]) for text in reasons), reason["message"]
    for li in browser.find_elements(By.CSS_SELECTOR, "ul.reasons li"):
        assert li.is_displayed()
    body = browser.find_element(By.TAG_NAME, "body").text
    assert HOSTILE_NAME in body
    bars = browser.find_elements(By.CSS_SELECTOR, "svg rect")
    assert len(bars) > 4


def test_report_page_in_a_real_browser(browser: Any, pages: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    browser.get(pages["report"].as_uri())
    assert severe_logs(browser) == []
    assert browser.title == f"commcanary report - {HOSTILE_NAME}"
    assert browser.find_element(By.CSS_SELECTOR, "header.hero h1").text == HOSTILE_NAME
    cards = browser.find_elements(By.CSS_SELECTOR, ".card")
    assert [c.find_element(By.CSS_SELECTOR, ".label").text.upper() for c in cards][:3] == [
        "MEDIAN",
        "P95",
        "P99",
    ]
    assert browser.execute_script("return document.scripts.length") == 0
