"""Backend names come from the registry: the built-ins plus the `slurmkit.backends` entry points, found by
importlib.metadata in a real (temporary) installed distribution; every job command goes through the one chosen."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DGX = ROOT / "site_config" / "dgx-a100.yaml"
EXAMPLE = str(ROOT / "examples" / "single-gpu.yaml")
SK = str(Path(sys.executable).parent / "sk")

# A third-party backend as a plugin author would ship it: a module plus an entry point in its dist-info.
PLUGIN = '''
from slurmkit.backends.base import Backend, CancelResult
from slurmkit.job import JobInfo
from slurmkit.request import SubmitResult


class PortalBackend(Backend):
    name = "portal"

    def __init__(self, site=None):
        self.cluster = getattr(site, "cluster", None)

    def submit(self, request, *, test_only=False):
        return SubmitResult(job_id=77, backend=self.name)

    def find_by_tag(self, tag):
        return None

    def jobs(self, query):
        self.limitations = [f"portal of {self.cluster}"]
        return [JobInfo(job_id="77", name="from-portal", user="u", state="RUNNING", partition="p", gpus=3)]

    def cancel(self, ids):
        return [CancelResult(i, "cancelled" if i == "77" else "not-found") for i in ids]

    def describe(self, request, *, test_only=False):
        return f"portal submission for {self.cluster}"
'''


@pytest.fixture
def plugin(tmp_path):
    (tmp_path / "sk_portal.py").write_text(PLUGIN)
    dist = tmp_path / "sk_portal-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sk-portal\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[slurmkit.backends]\nportal = sk_portal:PortalBackend\n")
    return {"PYTHONPATH": str(tmp_path), "SK_SITE": "", "HOME": str(tmp_path), "SK_REST_URL": ""}


def sk(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SK, *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "SK_REST_URL": "", **(env or {})})


def site_with(tmp_path: Path, **keys: str) -> str:
    text = DGX.read_text()
    for key, value in keys.items():
        if f"\n{key}:" in text:
            text = "\n".join(f"{key}: {value}" if line.startswith(f"{key}:") else line for line in text.split("\n"))
        else:
            text += f"\n{key}: {value}\n"
    path = tmp_path / "site.yaml"
    path.write_text(text)
    return str(path)


def test_an_entry_point_backend_is_chosen_by_name_and_every_job_command_goes_through_it(plugin, tmp_path):
    status = sk("status", "--backend", "portal", "--json", env=plugin)
    assert status.returncode == 0, status.stderr
    assert [(j["job_id"], j["name"], j["gpus"]) for j in json.loads(status.stdout)] == [("77", "from-portal", 3)]
    assert "note: portal of " in status.stderr  # the backend's limitations are said
    assert sk("cancel", "77", "--backend", "portal", env=plugin).returncode == 0
    missing = sk("cancel", "78", "--backend", "portal", env=plugin)
    assert missing.returncode == 1 and "not found 78" in missing.stderr
    # The site's backend: names it too, and the backend is built with the site.
    site = site_with(tmp_path, backend="portal")
    dry = sk("submit", EXAMPLE, "--site", site, "--dry-run", env=plugin)
    assert dry.returncode == 0, dry.stderr
    assert "would run: portal submission for dgx" in dry.stdout
    assert "portal of dgx" in sk("status", "--site", site, env=plugin).stderr


def test_a_misspelt_backend_is_a_usage_error_with_a_suggestion_from_the_registry(plugin):
    run = sk("status", "--backend", "portl", env=plugin)
    assert run.returncode == 2 and "did you mean 'portal'?" in run.stderr and "Traceback" not in run.stderr
    run = sk("status", "--backend", "clli", env=plugin)
    assert run.returncode == 2 and "--backend" in run.stderr and "did you mean 'cli'?" in run.stderr


def test_a_misspelt_site_backend_is_located_in_the_site_file_but_render_does_not_need_it(tmp_path):
    site = site_with(tmp_path, backend="resst")
    line = Path(site).read_text().split("\n").index("backend: resst") + 1
    run = sk("status", "--site", site)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"{site}:{line}: error: backend: backend 'resst' is not a backend installed here" in run.stderr
    assert "did you mean 'rest'?" in run.stderr
    assert sk("submit", EXAMPLE, "--site", site, "--dry-run").returncode == 2
    render = sk("render", EXAMPLE, "--site", site)  # rendering never builds a backend
    assert render.returncode == 0 and "#SBATCH" in render.stdout


def test_a_backend_name_must_still_look_like_a_name(tmp_path):
    run = sk("render", EXAMPLE, "--site", site_with(tmp_path, backend="'rest; rm -rf /'"))
    assert run.returncode == 2 and "backend" in run.stderr and "Traceback" not in run.stderr


def test_dry_run_with_rest_shows_the_sites_rest_url(tmp_path):
    site = site_with(tmp_path, backend="rest", rest_url="unix:/run/elsewhere/slurmrestd.sock")
    run = sk("submit", EXAMPLE, "--site", site, "--dry-run")
    assert run.returncode == 0, run.stderr
    assert "would run: POST unix:/run/elsewhere/slurmrestd.sock /slurm/" in run.stdout


def test_registry_names_without_and_with_entry_points(plugin):
    code = "from slurmkit.backends import names; print(' '.join(names()))"
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert plain.stdout.split() == ["auto", "cli", "rest", "pyslurm"]
    more = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, **plugin})
    assert more.stdout.split() == ["auto", "cli", "rest", "pyslurm", "portal"]


def test_an_entry_point_never_replaces_a_builtin(tmp_path, plugin):
    dist = next(Path(plugin["PYTHONPATH"]).glob("*.dist-info"))
    (dist / "entry_points.txt").write_text("[slurmkit.backends]\ncli = sk_portal:PortalBackend\n")
    code = "from slurmkit.backends import get_backend; print(type(get_backend('cli')).__name__)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, **plugin})
    assert run.stdout.strip() == "CliBackend"


def test_backend_auto_says_which_backend_it_picked_and_why(tmp_path):
    from slurmkit.backends.pyslurm import detect

    found = detect()  # this machine: pyslurm in the venv, and the devcluster's Slurm (or not)
    expected = "pyslurm" if found.usable else "cli"
    site = site_with(tmp_path, backend="auto")
    dry = sk("submit", EXAMPLE, "--site", site, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    [item] = json.loads(dry.stdout)
    assert item["backend"] == expected and item["backend_reason"].startswith("backend: auto: ")
    assert found.reason in item["backend_reason"]
    text = sk("submit", EXAMPLE, "--site", site, "--dry-run")
    assert f"backend {expected} (backend: auto: " in text.stdout
    explain = json.loads(sk("render", EXAMPLE, "--site", site, "--explain").stdout)
    assert (explain["backend"], explain["backend_reason"]) == (expected, item["backend_reason"])
    # No sinfo on PATH: auto cannot tell which Slurm runs, so cli, and it says so (where pyslurm is installed:
    # CI's unit stage runs before the Slurm 25.11 stage builds it).
    bare = {"PATH": str(Path(sys.executable).parent)}
    explain = json.loads(sk("render", EXAMPLE, "--site", site, "--explain", env=bare).stdout)
    assert explain["backend"] == "cli"
    why = ("sinfo -V failed: cannot tell which Slurm is running" if importlib.util.find_spec("pyslurm")
           else "pyslurm is not installed")
    assert explain["backend_reason"] == f"backend: auto: cli (sbatch), because {why}"
    named = json.loads(sk("submit", EXAMPLE, "--site", site, "--dry-run", "--json", "--backend", "cli").stdout)
    assert (named[0]["backend"], named[0]["backend_reason"]) == ("cli", "named by --backend")
    configured = json.loads(sk("render", EXAMPLE, "--site", site_with(tmp_path, backend="rest"), "--explain").stdout)
    assert configured["backend_reason"] == f"backend: rest in {tmp_path / 'site.yaml'}"
