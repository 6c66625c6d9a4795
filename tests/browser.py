"""Headless Chromium for the tests that look at pages (the HTML report, the user guide, Prometheus's graphs):
one way to start it and one full-page screenshot, so every page is seen by the same browser."""

from __future__ import annotations

import base64
from pathlib import Path


def open_chromium(binary: str, driver_path: str, window: str = "1200,900"):
    """A selenium driver for headless Chromium that keeps the console (browser) and the DevTools network events
    (performance) in its logs, so a test can show a page fetched nothing and logged no error."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={window}", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    driver.set_page_load_timeout(60)
    return driver


def full_page_screenshot(driver, path: Path, width: int = 1200) -> Path:
    """The whole page, not the viewport: Chromium's DevTools capture beyond the viewport."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": int(size["height"]),
                                                                  "deviceScaleFactor": 1, "mobile": False})
    try:
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    path.write_bytes(base64.b64decode(shot["data"]))
    return path
