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
from browser import full_page_screenshot, open_chromium
from report_store import T0, H, add_job, scenario

pytestmark = pytest.mark.browser

DAY = ("--since", "2026-11-01", "--until", "2026-11-02")
# The usage page's plots (usage, top) and the efficiency page's (efficiency, idle), in page order.
PLOTS = ("gpu-hours-over-time", "job-sizes", "queue-wait", "top-users-gpu-hours", "utilization-histogram")
EFFICIENCY_PLOTS = ("utilization-by-partition", "grades", "waste-by-account", "top-users-waste", "waste-by-partition",
                    "idle-heatmap", "gpu-memory")


def sk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "sk"), *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def browser(chromium):
    driver = open_chromium(*chromium)
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
    first, second = table.find_elements(By.CSS_SELECTOR, "tbody tr")[:2]
    assert first.get_attribute("class") == "total" and first.text.startswith("TOTAL 5 18.00")
    assert [td.text for td in second.find_elements(By.TAG_NAME, "td")][:3] == ["alice", "2", "9.00"]

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


# --- the plots that answer a director's questions (issue 15) --------------------------------------------------------

def _html(kind: str, db: Path, out: Path, *args: str) -> Path:
    res = sk("report", kind, *args, "--db", str(db), "--format", "html", "-o", str(out))
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def year_pages(tmp_path_factory) -> dict[str, Path]:
    """A year of synthetic records (bench/synth.py, 100k job runs, 40 accounts, 64 nodes), as usage and efficiency
    pages by account."""
    import importlib.util

    d = tmp_path_factory.mktemp("year")
    spec = importlib.util.spec_from_file_location("synth", Path(__file__).resolve().parents[1] / "bench" / "synth.py")
    synth = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(synth)
    synth.generate(d / "year.db", 100_000)
    year = ("--since", "2025-12-01", "--until", "2026-12-01", "--by", "account")
    return {kind: _html(kind, d / "year.db", d / f"{kind}.html", *year) for kind in ("usage", "efficiency")}


def _figures(driver) -> dict[str, object]:
    from selenium.webdriver.common.by import By

    figures = driver.find_elements(By.CSS_SELECTOR, "#plots figure")
    return {f.get_attribute("id").removeprefix("plot-"): f for f in figures}


def _numbers(driver, name: str) -> list[list[str]]:
    """The rows of the folded "numbers" table under plot `name` (textContent: the <details> is closed)."""
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, f"#plot-{name} details.data tbody tr")
    return [[td.get_attribute("textContent") for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]


@pytest.mark.parametrize("kind", ["usage", "efficiency"])
def test_year_page_has_its_own_plots_and_a_screenshot(browser, year_pages, kind, tmp_path, capsys):
    from selenium.webdriver.common.by import By

    _load(browser, year_pages[kind])
    assert not [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    requests = [json.loads(e["message"])["message"] for e in browser.get_log("performance")]
    urls = {m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"}
    # the heat map's matrix is an inline data: PNG inside its SVG: DevTools lists it, nothing is fetched for it
    assert {u for u in urls if not u.startswith("data:image/png;base64,")} <= {year_pages[kind].as_uri()}
    mine, theirs = (PLOTS, EFFICIENCY_PLOTS) if kind == "usage" else (EFFICIENCY_PLOTS, PLOTS)
    figures = _figures(browser)
    assert list(figures) == list(mine)  # the page's own plots, in order; none of the other page's
    assert not set(figures) & (set(theirs) - set(mine))
    for name, fig in figures.items():
        svg = fig.find_element(By.CSS_SELECTOR, "svg.plot")
        assert svg.size["width"] > 200 and svg.size["height"] > 100, name
        assert len(svg.find_elements(By.TAG_NAME, "path")) > 10, name
        # the title is drawn into the SVG as paths; matplotlib keeps the text as a comment beside them
        assert fig.get_attribute("data-title") in svg.get_attribute("innerHTML"), name
    if kind == "efficiency":
        assert figures["idle-heatmap"].find_elements(By.CSS_SELECTOR, "svg image")  # the matrix, as one image
        assert "idle GPU-hours of a node on a day = " in figures["idle-heatmap"].text
    shot = full_page_screenshot(browser, tmp_path / f"{kind}-year.png")
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 200_000
    with capsys.disabled():
        print(f"\nscreenshot of the {kind} page, a year of synthetic data (100k job runs): {shot}")


def test_account_chart_has_at_most_nine_distinct_colours(browser, year_pages):
    from selenium.webdriver.common.by import By

    _load(browser, year_pages["usage"])
    fig = browser.find_element(By.ID, "plot-gpu-hours-over-time")
    series = json.loads(fig.get_attribute("data-series"))
    labels, colors = [s[0] for s in series], [s[1] for s in series]
    assert len(series) == 9 and labels[-1] == "other"  # 40 accounts: the top 8 by name, the 32 others summed
    assert len(set(colors)) == len(colors) and len(set(labels)) == len(labels)
    svg = fig.find_element(By.TAG_NAME, "svg").get_attribute("innerHTML")
    assert all(f"fill: {c}" in svg for c in colors)
    # the legend's order is the accounts' total GPU-hours, largest first (the numbers under the plot)
    hours = [float(r[1].replace(",", "")) for r in _numbers(browser, "gpu-hours-over-time")][:-1]
    assert hours == sorted(hours, reverse=True)


def test_long_table_totals_first_sorted_and_folded(browser, year_pages):
    from selenium.webdriver.common.by import By

    _load(browser, year_pages["usage"])
    section = browser.find_element(By.ID, "table-usage")
    shown = section.find_elements(By.CSS_SELECTOR, "#table-usage > div.scroll > table tbody tr")
    assert shown[0].get_attribute("class") == "total" and shown[0].text.startswith("TOTAL")
    assert len(shown) == 1 + 25
    more = section.find_element(By.CSS_SELECTOR, "details.more")
    assert more.get_attribute("open") is None and more.find_element(By.TAG_NAME, "summary").text == "15 more rows"
    folded = more.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(folded) == 15 and not folded[0].is_displayed()
    col = [th.text for th in section.find_elements(By.CSS_SELECTOR, "thead th")].index("GPU-h")
    rows = [[td.get_attribute("textContent") for td in r.find_elements(By.TAG_NAME, "td")]
            for r in [*shown[1:], *folded]]
    hours = [float(r[col]) for r in rows]
    assert len(rows) == 40 and hours == sorted(hours, reverse=True)
    assert float(shown[0].find_elements(By.TAG_NAME, "td")[col].text) == pytest.approx(sum(hours), abs=0.05)
    header = {dt.text: dd.text for dt, dd in zip(browser.find_elements(By.CSS_SELECTOR, "#header dt"),
                                                 browser.find_elements(By.CSS_SELECTOR, "#header dd"), strict=True)}
    assert header["cluster"] == "bench" and header["time zone"] == "UTC"
    assert header["metric sources"].startswith("simulated (") and "store freshness" in header


# A small hand-built store (window 2026-11-01 .. 2026-11-03), its figures computed by hand below.
#   job 1 alice, cluster dev, gpu, 2 GPUs on gpu01 (util 10 / 5 %, idle_fraction 0.5 / 0.25): submit 22:00, runs
#         2026-11-01 23:00 .. 11-02 02:00 UTC -> waits 1 h; idle 0.75 GPU per hour, 1 h on 11-01 and 2 h on 11-02
#         (UTC), all 3 h on 11-02 in Europe/Berlin (UTC+1); grade F (7.5 %), 6 GPU-h
#   job 2 alice, dev, gpu, 1 GPU, no metrics: submit 00:00, runs 02:00 .. 03:00 -> waits 2 h; n/a, 1 GPU-h
#   job 3 alice, dev, gpu, 1 GPU on gpu01 at 90 %: submit 00:00, runs 04:00 .. 05:00 -> waits 4 h; A, 1 GPU-h
#   job 4 bob, cluster dev2, debug, 1 GPU on gpu02 at 10 %: submit 05:00, runs 05:30 .. 06:00 -> 0.5 h; F, 0.5 GPU-h
# gpu's waits 1, 2, 4 h: nearest-rank p50 = the 2nd (2 h), p90 = the 3rd (4 h).
SMALL = ("--since", "2026-11-01", "--until", "2026-11-03")


def _fill_small(s) -> None:
    from report_store import add_gpus

    add_job(s, 1, user="alice", gpus=2, submit=T0 + 22 * H, start=T0 + 23 * H, end=T0 + 26 * H)
    add_gpus(s, 1, [10, 5], idle=[0.5, 0.25])
    add_job(s, 2, user="alice", submit=T0, start=T0 + 2 * H, end=T0 + 3 * H)
    add_job(s, 3, user="alice", submit=T0, start=T0 + 4 * H, end=T0 + 5 * H)
    add_gpus(s, 3, [90], idle=[0.0])
    add_job(s, 4, user="bob", account="chem", partition="debug", cluster="dev2", submit=T0 + 5 * H,
            start=T0 + 5 * H + H // 2, end=T0 + 6 * H)
    add_gpus(s, 4, [10], idle=[0.9], cluster="dev2", node="gpu02")
    if s.dialect == "postgresql":
        s.conn.commit()


@pytest.fixture(scope="module")
def small_db(tmp_path_factory) -> Path:
    from slurmkit.store.db import open_store

    db = tmp_path_factory.mktemp("small") / "small.db"
    with open_store(str(db)) as s:
        _fill_small(s)
    return db


def test_hand_computed_waits_sizes_grades_and_idle_node_days(browser, small_db, tmp_path):
    from selenium.webdriver.common.by import By

    _load(browser, _html("usage", small_db, tmp_path / "u.html", *SMALL))
    assert browser.find_element(By.CSS_SELECTOR, '#header dd[data-field="clusters"]').text == "dev, dev2"
    assert _numbers(browser, "queue-wait") == [["debug", "1", "0.50", "0.50"], ["gpu", "3", "2.00", "4.00"]]
    assert _numbers(browser, "job-sizes") == [["1", "3", "2.5"], ["2", "1", "6.0"], ["3-4", "0", "0.0"],
                                              ["5-8", "0", "0.0"], ["> 8", "0", "0.0"]]

    _load(browser, _html("efficiency", small_db, tmp_path / "e.html", *SMALL))
    assert _numbers(browser, "grades") == [["A", "1", "1.0"], ["B", "0", "0.0"], ["C", "0", "0.0"],
                                           ["D", "0", "0.0"], ["F", "2", "6.5"], ["n/a", "1", "1.0"]]
    # node-days, most idle first: gpu01 11-02 0.75 x 2 h; gpu01 11-01 0.75 x 1 h (+ job 3, 0 idle); gpu02 0.9 x 0.5 h
    assert _numbers(browser, "idle-heatmap") == [["gpu01", "2026-11-02", "1.50", "4.00"],
                                                 ["gpu01", "2026-11-01", "0.75", "3.00"],
                                                 ["gpu02", "2026-11-01", "0.45", "0.50"]]
    util = {r[0]: r[1:] for r in _numbers(browser, "utilization-by-partition")}
    assert util == {"debug": ["1", *["10.0"] * 5], "gpu": ["2", "7.5", "7.5", "7.5", "90.0", "90.0"]}

    # days in the report's zone: in Berlin (UTC+1) job 1 runs 00:00 .. 03:00 on 11-02, all 3 h that day
    _load(browser, _html("efficiency", small_db, tmp_path / "b.html", *SMALL, "--tz", "Europe/Berlin"))
    assert browser.find_element(By.CSS_SELECTOR, '#header dd[data-field="time zone"]').text == "Europe/Berlin"
    assert ["gpu01", "2026-11-02", "2.25", "6.00"] in _numbers(browser, "idle-heatmap")


def test_plots_respect_scope(small_db):
    """A non-admin's page (Scope(user)) is made of their own jobs only: header, plots and their numbers."""
    from slurmkit.report.build import build
    from slurmkit.report.html import page
    from slurmkit.report.query import Scope
    from slurmkit.report.window import parse_window
    from slurmkit.store.db import open_store

    with open_store(str(small_db), migrate=False) as store:
        window = parse_window(*SMALL[1::2])
        for kind in ("usage", "efficiency"):
            text = page(build(kind, store, window, ["user"], None, Scope("alice")), store)
            assert "alice" in text and "bob" not in text and "chem" not in text and "dev2" not in text
            assert "gpu02" not in text and "debug" not in text


def test_efficiency_page_without_metrics_says_so(browser, tmp_path):
    """Allocation-only data: every efficiency plot shows its `missing` text, none a zero plot."""
    from selenium.webdriver.common.by import By

    from slurmkit.store.db import open_store

    with open_store(str(tmp_path / "alloc.db")) as s:
        add_job(s, 1, user="erin", gpus=2, start=T0, end=T0 + 3 * H)
    _load(browser, _html("efficiency", tmp_path / "alloc.db", tmp_path / "e.html", *DAY))
    figures = _figures(browser)
    assert list(figures) == list(EFFICIENCY_PLOTS)
    assert not browser.find_elements(By.CSS_SELECTOR, "#plots svg")
    for name, fig in figures.items():
        assert fig.text.endswith(("no GPU metrics", "no GPU memory figures")), (name, fig.text)


@pytest.mark.parametrize("tz", ["UTC", "Europe/Berlin"])
def test_plot_queries_agree_on_postgres(small_db, pg_schema_url, tz):
    """The plots' SQL (slurmkit/report/plotdata.py) gives the same figures on PostgreSQL as on SQLite."""
    import pandas as pd

    from slurmkit.report import plotdata
    from slurmkit.report.query import Scope
    from slurmkit.report.window import parse_window
    from slurmkit.store.db import open_store

    window = parse_window(*SMALL[1::2], tz=tz)
    with open_store(str(small_db), migrate=False) as lite, open_store(pg_schema_url()) as pg:
        _fill_small(pg)
        for scope in (Scope(), Scope("alice")):
            assert plotdata.clusters(lite, window, scope) == plotdata.clusters(pg, window, scope)
            for f in (plotdata.wait_percentiles, plotdata.util_percentiles, plotdata.per_run_groups,
                      plotdata.memory_histogram, plotdata.idle_by_node_day):
                a, b = f(lite, window, scope), f(pg, window, scope)
                pd.testing.assert_frame_equal(a.astype(float, errors="ignore"), b.astype(float, errors="ignore"),
                                              check_dtype=False, obj=f.__name__)


def test_occupancy_page_draws_allocated_against_capacity(browser, tmp_path, capsys):
    """The occupancy page on the hand-computed scenario of tests/test_report_occupancy.py (Slurm's events faked
    there; the devcluster test reads real ones): its one plot, its numbers and its cards."""
    from selenium.webdriver.common.by import By
    from test_report_occupancy import _events

    from slurmkit.report.html import page
    from slurmkit.report.occupancy import build_occupancy
    from slurmkit.report.query import Scope
    from slurmkit.report.window import parse_window

    store = scenario(tmp_path / "a.db")
    rep = build_occupancy(store, parse_window("2026-11-01", "2026-11-03"), "day", Scope(), admin_group="hpcadm",
                          now=T0 + 36 * H, load_events=_events())
    out = tmp_path / "occupancy.html"
    out.write_text(page(rep, store))
    _load(browser, out)
    figures = _figures(browser)
    assert list(figures) == ["occupancy-over-time"]
    assert figures["occupancy-over-time"].find_elements(By.CSS_SELECTOR, "svg.plot")
    assert _numbers(browser, "occupancy-over-time") == [
        ["2026-11-01", "18.0", "384.0", "360.0", "5.0"], ["2026-11-02", "8.0", "192.0", "184.0", "4.3"]]
    cards = browser.find_element(By.ID, "summary").text
    assert "GPU-hours available" in cards and "4.8 %" in cards  # 26 / (360 + 184) over both days
    assert "No GPU metrics" not in browser.find_element(By.TAG_NAME, "body").text
    sources = browser.find_element(By.CSS_SELECTOR, '#header dd[data-field="metric sources"]').text
    assert "sacctmgr show event" in sources and "accounting store" in sources
    shot = full_page_screenshot(browser, tmp_path / "occupancy.png")
    with capsys.disabled():
        print(f"\nscreenshot of the occupancy page: {shot}")
