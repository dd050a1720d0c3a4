"""The comparison page of repeated runs in Chromium: the verdict banner has a
colour for each of the four verdicts, and every statistic's interval is drawn
against its threshold band."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import commcanary
from commcanary.compare_runs import compare_runs
from commcanary.html import render_comparison
from commcanary.views.palette import VERDICT_COLOURS
from conftest import EXAMPLES
from test_compare_runs import _measured
from test_html import _warn_thresholds, browser, open_page

__all__ = ["browser"]


def _rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, 1)"


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("runs-html")
    canary = commcanary.compile(EXAMPLES / "llama70b_tp8_trace_long.json").write(tmp / "c.json")
    base = [commcanary.replay(canary, include_samples=True) for _ in range(2)]
    slow = [
        commcanary.replay(canary, include_samples=True, backend=commcanary.Backend(latency_floor_us=12.0))
    ] * 2
    rng = np.random.default_rng(5)
    noisy_a = [_measured(canary, rng, run_cv=0.25) for _ in range(3)]
    noisy_b = [_measured(canary, rng, 1.1, run_cv=0.25) for _ in range(3)]
    docs = {
        "pass": (compare_runs(base, base), base, base),
        "fail": (compare_runs(base, slow), base, slow),
        "warn": (compare_runs(base, slow, _warn_thresholds(compare_runs(base, slow))), base, slow),
        "inconclusive": (compare_runs(noisy_a, noisy_b, resamples=300), noisy_a, noisy_b),
    }
    paths = {}
    for verdict, (doc, b, c) in docs.items():
        assert doc["verdict"] == verdict
        paths[verdict] = tmp / f"{verdict}.html"
        paths[verdict].write_text(render_comparison(doc, b[0], c[0]))
    return paths


def test_four_verdicts_four_banner_colours_and_interval_bands(browser: Any, pages: dict[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    seen = set()
    for verdict, path in pages.items():
        open_page(browser, path)
        hero = browser.find_element(By.CSS_SELECTOR, "header.hero")
        assert hero.find_element(By.TAG_NAME, "h1").text == f"Comparison {verdict.upper()}"
        colour = hero.value_of_css_property("background-color")
        assert colour == _rgb(VERDICT_COLOURS[verdict])
        seen.add(colour)
        rows = browser.find_elements(By.CSS_SELECTOR, "table.intervals tbody tr")
        assert rows and all(r.find_element(By.CSS_SELECTOR, "svg.band").is_displayed() for r in rows)
        results = {r.find_element(By.CSS_SELECTOR, ".badge").text for r in rows}
        if verdict == "inconclusive":
            assert "inconclusive" in results
            band = rows[0].find_element(By.CSS_SELECTOR, "rect.fail")
            assert band.value_of_css_property("fill") != "rgb(0, 0, 0)"
    assert len(seen) == 4
