"""The generated user guide, checked like a reader would: it builds (mkdocs --strict, offline), every internal link
and anchor resolves, every example script is what `sk render` prints, every troubleshooting message is what
`sk validate` prints, the figure shows the configured topology, and the pages open in headless Chromium without
console errors. Each site's guide is built once per test module (builds are CPU-heavy on shared cores).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from slurmkit.cli.docs import command_help, command_output
from slurmkit.docs.build import build_guide
from slurmkit.docs.html import external_assets
from slurmkit.site.model import load_site
from slurmkit.spec import JobSpec

ROOT = Path(__file__).resolve().parents[1]
SK = str(Path(sys.executable).parent / "sk")
SITES = ["dgx-a100", "devcluster"]
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
def guides(tmp_path_factory) -> dict[str, Path]:
    """site name -> output directory of `build_guide` (strict mkdocs build, HTML in <dir>/site)."""
    out = {}
    for name in SITES:
        d = tmp_path_factory.mktemp(f"guide-{name}")
        build_guide(ROOT / "site_config" / f"{name}.yaml", d, command_help=command_help,
                    command_output=command_output)
        out[name] = d
    return out


class Page(HTMLParser):
    """Links, ids, <pre> texts (with the classes/data of their enclosing div) and topology boxes of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.blocks: list[tuple[dict[str, str], str]] = []  # (attributes of the nearest div, text)
        self.gpus: list[dict[str, str]] = []
        self._divs: list[dict[str, str]] = []
        self._pre: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and "name" in a:
            self.ids.add(a["name"])
        for attr in ("href", "src"):
            if attr in a and tag in ("a", "link", "script", "img"):
                self.links.append(a[attr])
        if tag == "div":
            self._divs.append(a)
        if tag == "pre":
            self._pre = []
        if tag == "g" and "data-gpu" in a:
            self.gpus.append(a)

    def handle_endtag(self, tag):
        if tag == "div" and self._divs:
            self._divs.pop()
        if tag == "pre" and self._pre is not None:
            owner = next((d for d in reversed(self._divs) if d.get("class", "").startswith("sk-")), {})
            self.blocks.append((owner, "".join(self._pre)))
            self._pre = None

    def handle_data(self, data):
        if self._pre is not None:
            self._pre.append(data)


def parse(path: Path) -> Page:
    p = Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def sk(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SK, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("site", SITES)
def test_guide_is_offline_and_has_every_page(guides, site):
    html = guides[site] / "site"
    assert external_assets(html) == []
    assert (guides[site] / "mkdocs.yml").is_file()
    for md in (guides[site] / "docs").rglob("*.md"):
        rel = md.relative_to(guides[site] / "docs").with_suffix(".html")
        assert (html / rel).is_file(), f"{md.name} was not built"
    nt = load_site(ROOT / "site_config" / f"{site}.yaml").node_types
    for name in nt:
        assert (html / "why" / f"{name}-binding.html").is_file()
        assert (html / "why" / f"{name}-nccl.html").is_file()


@pytest.mark.parametrize("site", SITES)
def test_no_broken_internal_link_or_anchor(guides, site):
    html = guides[site] / "site"
    pages = {p: parse(p) for p in html.rglob("*.html")}
    broken, checked = [], 0
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//") or link.startswith("mailto:"):
                continue
            checked += 1
            if not parts.path:
                target = path
            elif parts.path.startswith("/"):  # 404.html: root-relative, for a server; the root is the guide's
                target = html / unquote(parts.path).lstrip("/")
            else:
                target = (path.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(html)}: {link}")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{path.relative_to(html)}: {link} (no such anchor)")
    assert broken == []
    assert checked > 20 * len(pages)  # the parser saw the navigation of every page, not nothing


@pytest.mark.parametrize("site", SITES)
def test_every_example_script_is_what_sk_render_prints(guides, site):
    html = guides[site] / "site"
    site_file = str(ROOT / "site_config" / f"{site}.yaml")
    shown = []
    for name in EXAMPLES:
        page = html / "examples" / f"{name}.html"
        real = sk("render", str(ROOT / "examples" / f"{name}.yaml"), "--site", site_file)
        if not page.exists():
            # Not fitting the site: sk render refuses it, and the examples index says why, in sk's words.
            assert real.returncode == 2, real.stderr
            index = (html / "examples" / "index.html").read_text()
            assert f"{name}.yaml" in index
            first = real.stderr.splitlines()[0].split(": error: ", 1)[1]
            assert first.replace("'", "&#x27;") in index or first in index
            continue
        assert real.returncode == 0, real.stderr
        scripts = [text for owner, text in parse(page).blocks if owner.get("data-example") == name]
        assert len(scripts) == 1
        assert scripts[0] == real.stdout
        assert (html / "examples" / f"{name}.sh").read_text() == real.stdout
        shown.append(name)
    assert shown, "no example fits the site"


@pytest.mark.parametrize("site", SITES)
def test_troubleshooting_messages_are_what_sk_validate_prints(guides, site, tmp_path):
    page = parse(guides[site] / "site" / "troubleshooting.html")
    cases: dict[int, list[str]] = {}
    exits: dict[int, int] = {}
    for owner, text in page.blocks:
        if owner.get("class", "").startswith("sk-case"):
            key = id(owner)
            cases.setdefault(key, []).append(text)
            exits[key] = int(owner["data-exit"])
    assert len(cases) >= 10
    site_file = str(ROOT / "site_config" / f"{site}.yaml")
    (tmp_path / "train.py").touch()  # the user's script is there: the cases are about the spec
    for key, (spec_text, printed) in cases.items():
        (tmp_path / "train.yaml").write_text(spec_text)
        real = sk("validate", "train.yaml", "--site", site_file, cwd=tmp_path)
        assert real.returncode == exits[key], spec_text
        assert real.stderr == printed, spec_text
    assert 2 in exits.values() and 0 in exits.values()  # errors and warnings are both documented


@pytest.mark.parametrize("site", SITES)
def test_topology_figure_shows_the_configured_gpus(guides, site):
    cfg = load_site(ROOT / "site_config" / f"{site}.yaml")
    page = parse(guides[site] / "site" / "index.html")
    drawn = [(int(g["data-gpu"]), int(g["data-numa"]), g["data-hca"]) for g in page.gpus]
    configured = [(g.index, g.numa, g.hca or "") for nt in cfg.node_types.values() for g in nt.gpus]
    assert sorted(drawn) == sorted(configured)


def _spec_keys(model, prefix="") -> set[str]:
    from slurmkit.docs.schema import _is_mapping_of_models, _nested_model

    keys = set()
    schema = model.model_json_schema()
    for name, info in model.model_fields.items():
        dotted = f"{prefix}{name}"
        keys.add(dotted)
        sub = _nested_model(info.annotation)
        if sub is not None and not _is_mapping_of_models(schema["properties"][name]):
            keys |= _spec_keys(sub, dotted + ".")
    return keys


def test_spec_reference_lists_every_schema_field_and_no_other(guides):
    md = (guides["dgx-a100"] / "docs" / "job-spec.md").read_text()
    documented = {line.split("`")[1] for line in md.splitlines() if line.startswith("| `")}
    assert documented == _spec_keys(JobSpec)


def test_browser_opens_pages_without_console_errors(guides, chromium, tmp_path):
    from browser import open_chromium

    # its logs: console messages, and DevTools network events, to prove nothing leaves file://
    d = open_chromium(*chromium, window="1280,1400")
    fetched: set[str] = set()

    def requests() -> None:
        for entry in d.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg["method"] == "Network.requestWillBeSent":
                fetched.add(msg["params"]["request"]["url"])

    try:
        for site, out in guides.items():
            for rel in ("index.html", "examples/index.html", "troubleshooting.html", "job-spec.html"):
                d.get((out / "site" / rel).as_uri())
                d.find_element("css selector", "article.md-content__inner")
                requests()
                errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
                assert errors == [], f"{site}/{rel}: {errors}"
                if rel == "index.html":
                    fig = d.find_element("css selector", "svg.sk-topology")
                    assert fig.is_displayed() and fig.size["width"] > 300
                    shot = tmp_path / f"{site}-index.png"
                    assert d.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
            # Search works from file:// (the offline plugin's inlined index + the local iframe-worker shim).
            d.get((out / "site" / "index.html").as_uri())
            query = d.find_element("css selector", "input[data-md-component=search-query]")
            query.click()
            query.send_keys("NCCL_IB_HCA")
            from selenium.webdriver.support.ui import WebDriverWait

            WebDriverWait(d, 10).until(lambda drv: drv.find_elements("css selector", ".md-search-result__item"))
            assert [e for e in d.get_log("browser") if e["level"] == "SEVERE"] == []
            requests()
        remote = {u for u in fetched if not u.startswith(("file:", "data:", "blob:", "about:"))}
        assert fetched and remote == set()
    finally:
        d.quit()


def test_cli_writes_markdown_only_with_no_html(tmp_path):
    res = sk("docs", "build", "--site", str(ROOT / "site_config" / "pcie-roce.yaml"), "-o", str(tmp_path),
             "--no-html", "--json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    from tests.golden import render_case

    assert info["html"] is None and not (tmp_path / "site").exists()
    assert (tmp_path / "mkdocs.yml").is_file()
    site = ROOT / "site_config" / "pcie-roce.yaml"
    misfits = {e for e in EXAMPLES if render_case(ROOT / "examples" / f"{e}.yaml", site) is None}
    assert misfits and set(info["skipped_examples"]) == misfits  # 4-GPU nodes: the 8-GPU examples do not fit
    assert all((tmp_path / "docs" / p).is_file() for p in info["pages"])


def test_cli_bad_site_config_is_a_usage_error(tmp_path):
    bad = tmp_path / "site.yaml"
    bad.write_text("cluster: x\nslurm_version: '23.11'\nnode_types: {}\npartitions: {}\nbogus: 1\n")
    res = sk("docs", "build", "--site", str(bad), "-o", str(tmp_path / "out"))
    assert res.returncode == 2
    assert "bogus: unknown key" in res.stderr and "Traceback" not in res.stderr


def test_cli_refuses_to_replace_docs_it_did_not_write(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# my project\n")
    res = sk("docs", "build", "--site", str(ROOT / "site_config" / "devcluster.yaml"), "-o", str(tmp_path),
             "--no-html")
    assert res.returncode == 2 and "not written by sk docs build" in res.stderr
    assert (tmp_path / "docs" / "index.md").read_text() == "# my project\n"


def test_cli_rebuilds_its_own_output(tmp_path):
    args = ("docs", "build", "--site", str(ROOT / "site_config" / "devcluster.yaml"), "-o", str(tmp_path),
            "--no-html")
    assert sk(*args).returncode == 0
    (tmp_path / "docs" / "stale.md").write_text("old page\n")
    res = sk(*args)
    assert res.returncode == 0, res.stderr
    assert not (tmp_path / "docs" / "stale.md").exists()


def test_project_docs_build_strict(tmp_path):
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                          "-d", str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "site" / "architecture.html").is_file() or (tmp_path / "site" / "architecture").is_dir()


def test_project_docs_name_only_modules_that_exist():
    import re

    missing = []
    for md in (ROOT / "docs").rglob("*.md"):
        for path in re.findall(r"`((?:slurmkit|contrib|tests|examples|site_config|job_templates)/[^`\s*]+)`",
                               md.read_text()):
            if not (ROOT / path.rstrip("/")).exists():
                missing.append(f"{md.name}: {path}")
    assert missing == []


@pytest.mark.parametrize("site", SITES)
def test_long_jobs_page_shows_the_end_of_what_sk_render_prints_for_its_spec(guides, site, tmp_path):
    page = parse(guides[site] / "site" / "long-jobs.html")
    [spec] = [t for owner, t in page.blocks if owner.get("class", "").startswith("sk-longjob-spec")]
    [part] = [t for owner, t in page.blocks if owner.get("class", "") == "sk-longjob"]
    (tmp_path / "train.yaml").write_text(spec)
    real = sk("render", "train.yaml", "--site", str(ROOT / "site_config" / f"{site}.yaml"), cwd=tmp_path)
    assert real.returncode == 0, real.stderr
    assert real.stdout.endswith(part) and part.startswith("# Time limit / preemption")
    assert "trap sk_on_signal USR1" in part and "sk_agent torchrun" in part


def test_checkpoint_handler_on_the_long_jobs_page_saves_on_the_signal_and_resumes(guides, tmp_path):
    page = parse(guides["devcluster"] / "site" / "long-jobs.html")
    [handler] = [t for owner, t in page.blocks if owner.get("class", "") == "sk-handler"]
    (tmp_path / "train.py").write_text(handler)

    def run_until_signalled(restart: str) -> str:
        env = {**os.environ, "SLURM_RESTART_COUNT": restart}
        proc = subprocess.Popen([sys.executable, "train.py"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                text=True)
        first = proc.stdout.readline()
        proc.send_signal(signal.SIGUSR1)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        return first + rest

    out = run_until_signalled("0")
    assert out.startswith("starting at step 0 (restart 0)")
    saved = json.loads((tmp_path / "checkpoint.json").read_text())["step"]
    assert f"saved at step {saved}" in out and 0 < saved < 10_000
    assert not (tmp_path / "checkpoint.json.tmp").exists()
    again = run_until_signalled("1")
    assert again.startswith(f"starting at step {saved} (restart 1)")  # resumed where it stopped
    assert json.loads((tmp_path / "checkpoint.json").read_text())["step"] > saved


@pytest.mark.parametrize("site", SITES)
def test_gpu_use_page_shows_what_sk_report_job_prints_and_what_users_of_this_site_can_see(guides, site):
    from slurmkit.docs import gpu_use

    ex = gpu_use.example(load_site(ROOT / "site_config" / f"{site}.yaml"))
    page = parse(guides[site] / "site" / "gpu-use.html")
    [shown] = [t for owner, t in page.blocks if owner.get("class", "") == "sk-gpu-use"]
    assert shown.strip() == ex["text"].strip()
    assert "verdict: 3 of 4 GPUs were idle" in shown and "advice: 3 of 4 GPUs were idle: request gpus: 1" in shown
    md = (guides[site] / "docs" / "gpu-use.md").read_text()
    reads_own = "you read your own jobs' GPU figures" in md
    assert reads_own == (site == "devcluster")  # devcluster: spool+admin_comment; dgx-a100: spool
    assert ("which users cannot read" in md) == (site != "devcluster")


@pytest.mark.parametrize("site", SITES)
def test_admin_reports_page_shows_what_each_report_prints(guides, site, tmp_path):
    """Each sample on the admin reports page is what the installed `sk report ...` prints, run as a user would on
    the same made-up store; the usage total is the GPUs x hours of the sample jobs, added up here. The occupancy
    sample (Slurm's events made up, no sacctmgr here) has the capacity, the drained node's GPU-hours and the same
    allocated total, added up here too."""
    from slurmkit.docs import report_samples

    site_model = load_site(ROOT / "site_config" / f"{site}.yaml")
    db = tmp_path / "sample.db"
    report_samples.write_store(site_model, db)
    md = (guides[site] / "docs" / "admin" / "reports.md").read_text()
    blocks = re.findall(r"^### `(sk report [^`]+)`\n\n```text\n(.*?)\n```", md, flags=re.M | re.S)
    assert [c for c, _ in blocks] == [*("sk " + " ".join(report_samples.argv(c)) for c in report_samples.COMMANDS),
                                      "sk " + " ".join(report_samples.JOB),
                                      "sk " + " ".join(report_samples.argv(report_samples.OCCUPANCY))]
    env = {**os.environ, "COLUMNS": "100", "TZ": "UTC"}
    *blocks, (_, occupancy) = blocks
    for command, shown in blocks:
        extra = [] if command.startswith("sk report job ") else ["--no-freshness"]  # job: no window
        out = subprocess.run([SK, *command.split()[1:], "--db", str(db), *extra], capture_output=True,
                             text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        assert shown.strip() == out.stdout.strip(), command
    gpus = site_model.node_type_of(site_model.default_partition or next(iter(site_model.partitions))).gpu.count
    total = sum(min(want, gpus) * hours for _, _, want, _, hours, _ in report_samples.JOBS)
    usage = dict(blocks)["sk " + " ".join(report_samples.argv(report_samples.COMMANDS[0]))]
    assert re.search(rf"^TOTAL +{len(report_samples.JOBS)} +{total:.2f} ", usage, flags=re.M), usage
    assert "SIMULATED" in usage  # made-up figures say so
    assert "3 of 4 GPUs were idle" in dict(blocks)["sk " + " ".join(report_samples.JOB)]
    capacity = report_samples.SAMPLE_NODES * gpus * 7 * 24
    down = gpus * report_samples.DRAINED_HOURS
    assert re.search(rf"^TOTAL +{capacity:.2f} +{down:.2f} +0.00 +{capacity - down:.2f} +{total:.2f} +"
                     rf"{total / (capacity - down) * 100:.1f}$", occupancy, flags=re.M), occupancy
    assert len(re.findall(r"^2026-11-\d\d ", occupancy, flags=re.M)) == 7  # --by day: the week's days
