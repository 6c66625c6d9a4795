"""The HTML report in a real headless Chromium (selenium + chromedriver): renders without console errors, shows
its plots at a non-zero size, makes no network request, and an empty window gives a clear "no jobs" page.

One browser session for the whole module (Chromium start-up is the slow part on the 2 shared cores).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from report_store import T0, H, add_job, scenario

pytestmark = pytest.mark.browser

DAY = ("--since", "2026-11-01", "--until", "2026-11-02")
PLOTS = ("gpu-hours-over-time", "utilization-histogram", "top-users-gpu-hours", "top-users-waste",
         "waste-by-partition")


def sk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "sk"), *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def browser(chromium):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = chromium
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1200,900", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    # browser: console messages; performance: the DevTools network events, to prove nothing is fetched.
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def report_file(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("html")
    scenario(d / "a.db").close()
    out = sk("report", "usage", *DAY, "--db", str(d / "a.db"), "--format", "html", "-o", str(d / "usage.html"))
    assert out.returncode == 0, out.stderr
    return d / "usage.html"


def _load(driver, path: Path) -> None:
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get_log("performance")
    driver.get(path.as_uri())


class _Links(HTMLParser):
    """Every src/href (and the CSS url()s) in the document: they must all be data: or in-page (#...)."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.refs += [v for k, v in attrs if k in ("src", "href", "xlink:href", "action", "poster") and v]


def test_report_renders_with_plots_and_no_network(browser, report_file, tmp_path):
    from selenium.webdriver.common.by import By

    html = report_file.read_text()
    parser = _Links()
    parser.feed(html)
    external = [r for r in parser.refs if not r.startswith(("data:", "#"))]
    external += [u for u in re.findall(r"url\(\s*['\"]?([^)'\"]+)", html) if not u.startswith(("#", "data:"))]
    external += re.findall(r"@import|<script\b", html)
    assert parser.refs and not external, external

    _load(browser, report_file)
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert not errors, errors
    # The DevTools log: the only request is the file itself (data: URLs never show up as network requests).
    requests = [json.loads(e["message"])["message"] for e in browser.get_log("performance")]
    urls = {m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"}
    assert urls <= {report_file.as_uri()}, urls

    for name in PLOTS:
        svg = browser.find_element(By.CSS_SELECTOR, f"#plot-{name} svg")
        size = svg.size
        assert size["width"] > 200 and size["height"] > 100, (name, size)
        # a real plot, not an empty frame: matplotlib draws bars and axes as many paths
        assert len(svg.find_elements(By.TAG_NAME, "path")) > 10, name
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.plot")) == len(PLOTS)

    body = browser.find_element(By.TAG_NAME, "body").text
    # summary figures from the hand-computed scenario (tests/test_report.py): 5 job runs, 18 GPU-h allocated
    cards = {c.find_element(By.CLASS_NAME, "l").text: c.text.split("\n")[0]
             for c in browser.find_elements(By.CLASS_NAME, "card")}
    assert cards["GPU jobs"] == "5" and cards["GPU-hours allocated"] == "18.0"
    assert cards["jobs without GPU metrics"] == "1" and cards["GPU-hours without metrics"] == "6.0"
    assert "SIMULATED" in body and "grades by mean GPU utilization: A >= 70 %" in body
    assert "metric sources: nvml (2 GPU records), simulated (5 GPU records)" in body
    table = browser.find_element(By.CSS_SELECTOR, "#table-usage table")
    assert [td.text for td in table.find_elements(By.CSS_SELECTOR, "tbody tr:first-child td")][:3] == \
        ["alice", "2", "9.00"]

    shot = tmp_path / "usage.png"
    assert browser.save_screenshot(str(shot))
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # a blank 1200x900 page is ~5 kB


def test_empty_window_gives_no_jobs_page(browser, report_file, tmp_path):
    from selenium.webdriver.common.by import By

    out = tmp_path / "empty.html"
    res = sk("report", "usage", "--since", "2025-01-01", "--until", "2025-02-01",
             "--db", str(report_file.parent / "a.db"), "--format", "html", "-o", str(out))
    assert res.returncode == 0, res.stderr
    _load(browser, out)
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    msg = browser.find_element(By.ID, "no-jobs").text
    assert msg == "no GPU jobs between 2025-01-01 00:00 UTC and 2025-02-01 00:00 UTC (UTC)"
    assert not browser.find_elements(By.TAG_NAME, "svg")


def test_page_without_metrics_says_so_never_zero(browser, tmp_path):
    """Allocation-only data (as from --from-sacct): utilization reads "no GPU metrics", never 0 %."""
    from selenium.webdriver.common.by import By

    from slurmkit.store.db import open_store

    with open_store(str(tmp_path / "alloc.db")) as s:
        add_job(s, 1, user="erin", gpus=2, start=T0, end=T0 + 3 * H)
    out = tmp_path / "alloc.html"
    res = sk("report", "usage", *DAY, "--db", str(tmp_path / "alloc.db"), "--format", "html", "-o", str(out))
    assert res.returncode == 0, res.stderr
    _load(browser, out)
    cards = {c.find_element(By.CLASS_NAME, "l").text: c.text.split("\n")[0]
             for c in browser.find_elements(By.CLASS_NAME, "card")}
    assert cards["GPU-hours allocated"] == "6.0" and cards["mean GPU utilization"] == "no GPU metrics"
    assert cards["GPU-hours wasted (allocated, idle)"] == "no GPU metrics"
    assert "0.0 %" not in browser.find_element(By.ID, "summary").text
    # the allocation plots are drawn; the utilization ones say why they are missing
    assert browser.find_elements(By.CSS_SELECTOR, "#plot-gpu-hours-over-time svg")
    assert browser.find_element(By.ID, "plot-utilization-histogram").text.endswith("no GPU metrics")
