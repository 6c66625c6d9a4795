"""slurmkit as a site installs it: a wheel built from this tree, in a fresh virtual environment outside the tree,
used by an unprivileged user (alice) from a directory that is not the checkout. It must render, list its
templates, build the user guide and submit a job that runs on the devcluster."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.jobs import wait

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed() -> Iterator[Path]:
    """A venv with the wheel and its [docs] extra, readable by alice (not under root's 0700 pytest tmp)."""
    base = Path(tempfile.mkdtemp(prefix="sk-wheel-", dir="/tmp"))
    base.chmod(0o755)
    try:
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT),
                        "-w", str(base / "dist")], check=True, capture_output=True, timeout=300)
        (whl,) = (base / "dist").glob("slurmkit-*.whl")
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(base / "venv")], check=True, timeout=300)
        pip = subprocess.run([str(base / "venv/bin/pip"), "install", "-q", f"{whl}[docs]"], capture_output=True,
                             text=True, timeout=900)
        assert pip.returncode == 0, pip.stderr[-3000:]
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _as_alice(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = ["env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/alice", "USER=alice", "LANG=C.UTF-8"]
    return subprocess.run(["runuser", "-u", "alice", "--", *env, str(installed / "venv/bin/sk"), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture
def workdir(installed: Path) -> Path:
    d = Path(tempfile.mkdtemp(prefix="work-", dir=installed))
    shutil.chown(d, "alice", "alice")
    return d


def _shipped(installed: Path, *parts: str) -> Path:
    (site_packages,) = (installed / "venv/lib").glob("python3*/site-packages")
    path = site_packages.joinpath("slurmkit", *parts)
    assert path.exists(), f"{path} is not in the installed package"
    return path


def test_installed_wheel_renders_from_its_own_data_not_the_checkout(installed, workdir):
    site = _shipped(installed, "site_config", "dgx-a100.yaml")
    spec = _shipped(installed, "examples", "torchrun-2node.yaml")
    run = _as_alice(installed, workdir, "render", str(spec), "--site", str(site))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("#!/bin/bash") and "--gpus-per-node=a100:8" in run.stdout
    assert str(ROOT) not in run.stdout
    listed = _as_alice(installed, workdir, "templates", "--site", str(site))
    assert listed.returncode == 0, listed.stderr
    assert "job.sh.j2" in listed.stdout and "launchers/torchrun.sh.j2" in listed.stdout


def test_installed_wheel_builds_the_user_guide(installed, workdir):
    site = _shipped(installed, "site_config", "dgx-a100.yaml")
    run = _as_alice(installed, workdir, "docs", "build", "--site", str(site), "-o", "guide", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["pages"] and (workdir / "guide" / "site" / "index.html").is_file()
    # [docs] without [report] (no pandas): the admin page says why it has no sample reports, and how to get them
    reports = (workdir / "guide" / "docs" / "admin" / "reports.md").read_text()
    assert "pip install 'slurmkit[report]'" in reports and "### `sk report usage" not in reports


def test_installed_wheel_submits_a_job_that_runs(installed, workdir):
    (workdir / "job.yaml").write_text('name: wheel-job\nlauncher: none\ngpus_per_node: 1\ncpus_per_gpu: 1\n'
                                      'mem_per_gpu: 100M\ntime: "00:02:00"\n'
                                      'command: [bash, -c, "echo from-the-wheel $CUDA_VISIBLE_DEVICES"]\n')
    shutil.chown(workdir / "job.yaml", "alice", "alice")
    site = ROOT / "site_config" / "devcluster.yaml"  # the devcluster's own site config, as its admins publish it
    run = _as_alice(installed, workdir, "submit", "job.yaml", "--site", str(site), "--backend", "cli", "--json")
    assert run.returncode == 0, run.stderr
    (job,) = json.loads(run.stdout)
    assert wait(job["job_id"]) == "COMPLETED"
    out = next(workdir.glob(f"*{job['job_id']}*.out"), None)
    assert out is not None, sorted(os.listdir(workdir))
    assert "from-the-wheel" in out.read_text()
