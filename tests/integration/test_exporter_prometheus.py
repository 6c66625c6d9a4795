"""A real Prometheus (Debian's package, on the loopback address) scrapes `sk admin exporter` while a devcluster
job runs: PromQL returns the job's GPUs labelled with alice, her account and source="simulated" (the devcluster's
GPUs are pretend: never passed off as measurements), the store counters equal `sk report usage` for the same
window, and every panel of contrib/grafana/slurmkit.json returns data, graphed by Prometheus's own web UI in headless
Chromium (the screenshot's path is printed; Grafana itself cannot be installed here).

No NVIDIA GPU, hence no dcgm-exporter, exists here: the DCGM panel is checked against a synthetic exposition in
dcgm-exporter's format (its metric and label names, UUIDs taken from slurmkit's own series), served by the test;
what is tested is the join, not DCGM.
"""

from __future__ import annotations

import http.server
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.browser import full_page_screenshot, open_chromium
from tests.conftest import as_user
from tests.integration.accounting import DC_DIR
from tests.integration.jobs import state
from tests.report_store import scenario

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SK = str(Path(sys.executable).parent / "sk")
DASHBOARD = ROOT / "contrib" / "grafana" / "slurmkit.json"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args} exited {proc.returncode}")
        try:
            _get(url, 2)
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"{url} did not answer in {timeout} s")


class Prom:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr: str) -> list[dict]:
        body = json.loads(_get(f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def until(self, expr: str, ok, timeout: float = 60) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            got = self.query(expr)
            if ok(got) or time.monotonic() > deadline:
                return got
            time.sleep(0.5)


class _Dcgm(http.server.BaseHTTPRequestHandler):
    text = ""

    def do_GET(self):
        body = type(self).text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def stack(tmp_path):
    """Exporters (node: the devcluster's sampler state; store: a private store with the report scenario),
    a synthetic dcgm-exporter, and Prometheus scraping all three every second."""
    if not shutil.which("prometheus"):
        pytest.fail("Prometheus is missing: contrib/devcluster/test-deps installs Debian's prometheus")
    store = scenario(tmp_path / "acct.db")
    store.execute("UPDATE jobs SET ingested_at = end_time")
    store.close()
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "job-1.json").write_text("{}")
    ports = {k: _port() for k in ("node", "store", "dcgm", "prom")}
    procs = [
        subprocess.Popen([SK, "admin", "exporter", "node", "--state-dir", str(DC_DIR / "state" / "sk-sampler"),
                          "--listen", f"127.0.0.1:{ports['node']}"], stderr=subprocess.PIPE, text=True),
        subprocess.Popen([SK, "admin", "exporter", "store", "--store", str(tmp_path / "acct.db"), "--spool",
                          str(spool), "--refresh", "1", "--listen", f"127.0.0.1:{ports['store']}"],
                         stderr=subprocess.PIPE, text=True)]
    dcgm = http.server.ThreadingHTTPServer(("127.0.0.1", ports["dcgm"]), _Dcgm)
    threading.Thread(target=dcgm.serve_forever, daemon=True).start()
    config = tmp_path / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n" + "".join(
        f"  - job_name: {job}\n    static_configs: [{{targets: ['127.0.0.1:{ports[job]}']}}]\n"
        for job in ("node", "store", "dcgm")))
    procs.append(subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path}/tsdb",
                                   f"--web.listen-address=127.0.0.1:{ports['prom']}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        _wait_http(f"http://127.0.0.1:{ports['node']}/metrics", procs[0])
        _wait_http(f"http://127.0.0.1:{ports['store']}/metrics", procs[1])
        _wait_http(f"http://127.0.0.1:{ports['prom']}/-/ready", procs[2])
        yield Prom(ports["prom"]), ports, tmp_path
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        dcgm.shutdown()


def _submit_as_alice() -> int:
    res = as_user("alice", ["sbatch", "--parsable", "-J", "skexporter", "-p", "gpu", "--gres=gpu:2", "-t", "3",
                            "-o", "/dev/null", "--chdir", "/tmp", "--wrap", "sleep 60"], timeout=60)
    assert res.returncode == 0, res.stderr
    return int(res.stdout.strip().split(";")[0])


def _panel_queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for panel in dash["panels"]:
        for target in panel["targets"]:
            # Grafana's template variables as "All" (their allValue, .*).
            out.append((panel["title"], re.sub(r"\$(jobid|user|account|partition)\b", ".*", target["expr"])))
    return out


def _graph_every_panel(chromium, port: int, out: Path) -> list[Path]:
    """Each dashboard panel's queries graphed over the last minute by the test Prometheus's own web UI (its
    classic graph page, one graph per query), in headless Chromium; returns one screenshot per panel, in the
    dashboard's order. Grafana itself cannot run here (AGPL, in none of the registries), so these show each panel's
    data as Prometheus serves it to Grafana, not Grafana's drawing of it. Fails on a query with nothing to draw."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    panels: dict[str, list[str]] = {}
    for title, expr in _panel_queries():
        panels.setdefault(title, []).append(expr)
    shots = []
    driver = open_chromium(*chromium)
    try:
        for n, (title, exprs) in enumerate(panels.items()):
            params = {k: v for i, e in enumerate(exprs)
                      for k, v in ((f"g{i}.expr", e), (f"g{i}.tab", "0"), (f"g{i}.range_input", "1m"))}
            driver.get(f"http://127.0.0.1:{port}/classic/graph?{urllib.parse.urlencode(params)}")
            shot = out / f"panel-{n + 1:02d}-{re.sub(r'[^a-z0-9]+', '-', title.lower()).strip('-')}.png"

            want = len(exprs)

            def drawn(d, want=want) -> list:  # every graph has its line, or a graph shows its error
                areas = d.find_elements(By.CSS_SELECTOR, ".graph_area")
                errors = [e.text for e in d.find_elements(By.CSS_SELECTOR, ".alert-danger") if e.is_displayed()]
                lines = [a.find_elements(By.CSS_SELECTOR, ".graph svg path.path") for a in areas]
                return [errors] if errors or (len(areas) == want and all(lines)) else []

            try:
                (errors,) = WebDriverWait(driver, 30).until(drawn)
            except TimeoutException:
                pytest.fail(f"panel {title!r}: Prometheus drew no graph in 30 s: {full_page_screenshot(driver, shot)}")
            shots.append(full_page_screenshot(driver, shot))
            assert not errors, f"panel {title!r}: Prometheus graphs nothing: {errors}; {shot}"
        return shots
    finally:
        driver.quit()


def test_prometheus_sees_the_running_jobs_gpus_the_store_and_every_dashboard_panel(stack, chromium, capsys):
    prom, ports, tmp_path = stack
    job = _submit_as_alice()
    try:
        util = prom.until(f'slurmkit_job_gpu_utilization_percent{{jobid="{job}"}}', lambda r: len(r) == 2, 90)
        assert len(util) == 2, (state(job), util)
        for series in util:
            labels = series["metric"]
            assert labels["source"] == "simulated" and labels["user"] == "alice" and labels["partition"] == "gpu"
            assert labels["account"] and labels["node"] in ("gpu01", "gpu02")
            assert labels["uuid"] == f"SIMULATED-{labels['node']}-{labels['gpu']}"
            assert 0 <= float(series["value"][1]) <= 100
        # The synthetic dcgm-exporter serves the job's GPUs by UUID, in dcgm-exporter's names.
        _Dcgm.text = "".join(
            f'DCGM_FI_DEV_GPU_UTIL{{gpu="{s["metric"]["gpu"]}",UUID="{s["metric"]["uuid"]}",device="nvidia'
            f'{s["metric"]["gpu"]}",modelName="synthetic",Hostname="{s["metric"]["node"]}"}} 42\n' for s in util)
        joined = prom.until(
            'DCGM_FI_DEV_GPU_UTIL * on (UUID) group_left (jobid, user) label_replace(slurmkit_job_gpu_info, "UUID", '
            '"$1", "uuid", "(.+)")', lambda r: len(r) == 2)
        assert {(r["metric"]["jobid"], r["metric"]["user"]) for r in joined} == {(str(job), "alice")}

        # Store counters: the same figures as `sk report usage` over the store's whole history.
        res = subprocess.run([SK, "report", "usage", "--db", str(tmp_path / "acct.db"), "--since", "1970-01-01",
                              "--tz", "UTC", "--by", "account,partition", "--format", "json"],
                             capture_output=True, text=True, check=True)
        rows = {(r["account"], r["partition"]): r for r in json.loads(res.stdout)["rows"]}
        for metric, column in (("slurmkit_gpu_hours_allocated_total", "gpu_hours"),
                               ("slurmkit_gpu_hours_used_total", "gpu_hours_used"),
                               ("slurmkit_gpu_hours_wasted_total", "gpu_hours_wasted"),
                               ("slurmkit_jobs_total", "jobs")):
            got = {(r["metric"]["account"], r["metric"]["partition"]): float(r["value"][1])
                   for r in prom.until(metric, lambda r: len(r) == len(rows))}
            assert got == pytest.approx({k: float(v[column]) for k, v in rows.items()}), metric

        empty = []
        for title, expr in _panel_queries():
            if not prom.until(expr, bool, 15):
                empty.append(f"{title}: {expr}")
        assert not empty, "dashboard panels without data:\n" + "\n".join(empty)
        shots = _graph_every_panel(chromium, ports["prom"], tmp_path)
        assert len(shots) == len({title for title, _ in _panel_queries()})
        assert all(s.stat().st_size > 20_000 for s in shots)
        with capsys.disabled():
            print("\nscreenshots of each dashboard panel's queries graphed by Prometheus:\n  "
                  + "\n  ".join(map(str, shots)))
    finally:
        subprocess.run(["scancel", str(job)], check=False)
    # Ended: the node exporter drops the job at the next scrape.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and f'jobid="{job}"' in _get(f"http://127.0.0.1:{ports['node']}/metrics"):
        time.sleep(0.5)
    assert f'jobid="{job}"' not in _get(f"http://127.0.0.1:{ports['node']}/metrics")
