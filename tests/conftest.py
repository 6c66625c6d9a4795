"""Shared fixtures. Integration tests need the real devcluster; in CI (CI=true) a missing cluster FAILS them.

Start the cluster with `contrib/devcluster/up` (as root). PostgreSQL tests read SK_TEST_PG_URL.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _missing(what: str, how: str) -> None:
    if IN_CI:
        pytest.fail(f"{what} is not available in CI ({how})")
    pytest.skip(f"{what} not available; {how}")


def _cluster_ready() -> str | None:
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if out.returncode != 0:
        return out.stderr.strip() or f"sinfo exit {out.returncode}"
    states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
    if not {"gpu01", "gpu02"} <= set(states):
        return f"nodes gpu01/gpu02 not found in sinfo: {states}"
    # A trailing '*' means the node is not responding: not usable.
    bad = {n: s for n, s in states.items() if s not in ("idle", "mix", "alloc", "comp")}
    return f"nodes not usable: {bad}" if bad else None


def running_slurm_version() -> tuple[int, int, int] | None:
    """The version of the Slurm whose commands are on PATH (`sinfo -V`: "slurm 25.11.7"), or None."""
    try:
        out = subprocess.run(["sinfo", "-V"], capture_output=True, text=True, timeout=15).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = out[-1].split(".") if out else []
    return tuple(int(p) for p in parts[:3]) if len(parts) >= 3 and all(p.isdigit() for p in parts[:3]) else None


@pytest.fixture(scope="session")
def devcluster() -> Path:
    """The running devcluster (its state directory)."""
    problem = _cluster_ready()
    if problem:
        _missing("the devcluster", f"run contrib/devcluster/up as root: {problem}")
    return Path(os.environ.get("DEVCLUSTER_DIR", "/run/slurmkit-devcluster"))


@pytest.fixture(autouse=True)
def _integration_needs_cluster(request):
    if request.node.get_closest_marker("integration"):
        request.getfixturevalue("devcluster")


@pytest.fixture(scope="session")
def pg_url() -> str:
    url = os.environ.get("SK_TEST_PG_URL")
    if not url:
        _missing("PostgreSQL", "run contrib/devcluster/pg-up and export SK_TEST_PG_URL")
    return url  # type: ignore[return-value]


@pytest.fixture
def pg_schema_url(pg_url):
    """Factory of PostgreSQL URLs whose connections use a fresh schema (search_path), dropped after the test:
    the test database is shared by every test and helper."""
    import uuid
    from urllib.parse import quote

    import psycopg

    made: list[str] = []

    def new() -> str:
        name = f"sk_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        made.append(name)
        return pg_url + ("&" if "?" in pg_url else "?") + "options=" + quote(f"-csearch_path={name}")

    yield new
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for name in made:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (browser and driver):
        _missing("headless Chromium", "apt-get install chromium chromium-driver")
    return browser, driver  # type: ignore[return-value]


def as_user(user: str, cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run `cmd` as an unprivileged devcluster user (alice, bob) with their login environment."""
    return subprocess.run(["runuser", "-u", user, "--", *cmd], capture_output=True, text=True, **kwargs)


@pytest.fixture
def repo_root() -> Path:
    return ROOT
