"""The team server end to end in a real browser (Selenium, headless
Chromium), the server a process on SQLite and on PostgreSQL: the first
start and its bootstrap token, the root password, a user and an API token
made through the pages, ``commcanary push`` of a job's raw evidence, the
background analysis and its hang page naming the root rank, a second user
who cannot see the workload until it is shared, and the gate history of 10
pushed comparisons with the failing one marked. Pages are checked by what
their elements say and where they are, not by pixels."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import DATA, FIXTURES
from server_harness import ROOT_PASSWORD, USER_PASSWORD, Server, make_comparisons, push

pytest.importorskip("fastapi")

HANG = FIXTURES / "hang" / "gloo_tp4_rank3_skips_allreduce" / "fr_during_hang"


@pytest.fixture
def browser() -> Iterator[Any]:
    from test_html import chromium_driver

    driver = chromium_driver()
    yield driver
    driver.quit()


def by_id(browser: Any, element_id: str) -> Any:
    """The element, once the page has it (a form's answer loads after the click)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, 20).until(
        expected_conditions.presence_of_element_located((By.ID, element_id))
    )


def at(browser: Any, path: str) -> None:
    """Waits until the browser is at a URL ending with ``path``."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 20).until(lambda b: b.current_url.endswith(path))


def submit(browser: Any, form_id: str, **fields: str) -> None:
    from selenium.webdriver.common.by import By

    form = by_id(browser, form_id)
    for name, value in fields.items():
        box = form.find_element(By.NAME, name)
        if box.tag_name == "select":
            from selenium.webdriver.support.ui import Select

            Select(box).select_by_value(value)
        else:
            box.clear()
            box.send_keys(value)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def login(browser: Any, server: Server, name: str, password: str) -> None:
    browser.delete_all_cookies()
    browser.get(f"{server.url}/login")
    submit(browser, "login", name=name, password=password)
    at(browser, "/workloads")
    assert by_id(browser, "me").text.startswith(name)


def rect(browser: Any, element: Any) -> dict[str, float]:
    r: dict[str, float] = browser.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height};",
        element,
    )
    return r


def test_the_server_end_to_end(browser: Any, server: Server, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    # First start: the browser is sent to the setup page; the token is in the file.
    browser.get(server.url + "/")
    assert browser.current_url.endswith("/setup")
    token_file = server.data_dir / "bootstrap-token"
    submit(browser, "setup", token=token_file.read_text().strip(), name="root", password=ROOT_PASSWORD)
    at(browser, "/workloads")
    assert by_id(browser, "me").text == "root (root)"
    assert not token_file.exists()
    # Root makes a user and an API token.
    browser.get(f"{server.url}/users")
    submit(browser, "new-user", name="dana", password=USER_PASSWORD, role="user")
    at(browser, "/users")
    users = by_id(browser, "users").text
    assert "dana" in users and "root" in users
    browser.get(f"{server.url}/settings/tokens")
    submit(browser, "new-token-form", name="ci")
    token = by_id(browser, "new-token").text.strip()
    assert token.startswith("cc_")
    # commcanary push of a job's raw evidence; the analysis runs.
    token_path = tmp_path / "token"
    token_path.write_text(token)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "commcanary",
            "push",
            *map(str, sorted(HANG.iterdir())),
            "--server",
            server.url,
            "--token-file",
            str(token_path),
            "--workload",
            "tp4-hang",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    browser.get(f"{server.url}/workloads")
    browser.find_element(By.LINK_TEXT, "tp4-hang").click()
    workload_url = browser.current_url
    deadline = time.monotonic() + 120
    while not browser.find_elements(By.CSS_SELECTOR, "td.status-done") and time.monotonic() < deadline:
        time.sleep(0.5)
        browser.get(workload_url)
    assert browser.find_elements(By.CSS_SELECTOR, "td.status-done"), browser.page_source[:2000]
    by_id(browser, "analyses").find_element(By.LINK_TEXT, "view").click()
    by_id(browser, "view").click()
    roots = browser.find_elements(By.CSS_SELECTOR, "table.grid tr.row-root")
    assert len(roots) == 1 and roots[0].text.startswith("3"), [r.text for r in roots]
    hero = browser.find_element(By.CSS_SELECTOR, "header.hero")
    assert hero.text.startswith("Hang") and rect(browser, hero)["y"] < rect(browser, roots[0])["y"]
    # A second user does not see it until it is shared.
    login(browser, server, "dana", USER_PASSWORD)
    assert "tp4-hang" not in browser.find_element(By.TAG_NAME, "main").text
    browser.get(workload_url)
    assert by_id(browser, "message").text.startswith("There is no such page")
    login(browser, server, "root", ROOT_PASSWORD)
    browser.get(workload_url)
    submit(browser, "share", user="dana")
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 20).until(lambda b: '<span class="tag">dana</span>' in b.page_source)
    login(browser, server, "dana", USER_PASSWORD)
    browser.get(f"{server.url}/workloads")
    browser.find_element(By.LINK_TEXT, "tp4-hang").click()
    assert by_id(browser, "workload-name").text == "tp4-hang"
    # The gate history: 10 comparisons, the first failing one marked.
    passing, failing = make_comparisons(tmp_path, DATA / "gen100.json")
    wid = 0
    for i in range(10):
        r = push(
            server,
            token,
            passing if i < 7 else failing,
            workload="lane",
            name=f"cmp{i}.json",
            branch="main",
            commit=f"commit{i:02d}",
        )
        assert r.status_code == 201
        wid = r.json()["workload_id"]
    login(browser, server, "root", ROOT_PASSWORD)
    browser.get(f"{server.url}/workloads/{wid}")
    browser.find_element(By.CSS_SELECTOR, "a.gate-link").click()
    chart = by_id(browser, "gate-chart")
    circles = chart.find_elements(By.TAG_NAME, "circle")
    assert len(circles) == 10
    assert [c.get_attribute("data-verdict") for c in circles] == ["pass"] * 7 + ["fail"] * 3
    assert by_id(browser, "first-fail-commit").text == "commit07"
    marker = rect(browser, by_id(browser, "first-fail"))
    centres = [rect(browser, c)["x"] + rect(browser, c)["w"] / 2 for c in circles]
    # The marker stands on the 8th point, and the points run left to right.
    assert abs(marker["x"] - centres[7]) < 2
    assert centres == sorted(centres)
    fails_y = [rect(browser, c)["y"] for c in circles[7:]]
    passes_y = [rect(browser, c)["y"] for c in circles[:7]]
    assert max(fails_y) < min(passes_y), "a regression is drawn above the passing commits"
    rows = by_id(browser, "gate-rows").find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) == 10 and "first-fail" in (rows[7].get_attribute("class") or "")
    browser.save_screenshot(str(tmp_path / "gate.png"))
    # Nothing went wrong in the pages (a CSP violation would be one) but the
    # refusal Dana was shown, a 404.
    severe = [
        e
        for e in browser.get_log("browser")
        if e["level"] == "SEVERE" and not (e["source"] == "network" and "status of 404" in e["message"])
    ]
    assert not severe, severe
