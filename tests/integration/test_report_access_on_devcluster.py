"""Who counts as an admin of the accounting store, tried as alice (an ordinary user of the devcluster).

A --site FILE alice wrote herself, naming her own group as admin_group, must not show her bob's jobs: only the
store file's group (SQLite) or a config only root can write decides that (slurmkit/report/access.py).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from report_store import scenario

from tests.integration.jobs import DEVSITE

pytestmark = pytest.mark.integration

SK = str(Path(sys.executable).parent / "sk")
DAY = ["--since", "2026-11-01", "--until", "2026-11-02"]


def _users(store: str, site: str) -> set[str]:
    out = subprocess.run(["runuser", "-u", "alice", "--", SK, "report", "usage", *DAY, "--by", "user", "--db", store,
                          "--site", site, "--format", "json"], capture_output=True, text=True, cwd="/tmp")
    assert out.returncode == 0, out.stderr
    return {r["user"] for r in json.loads(out.stdout)["rows"]}


@pytest.fixture
def shared(devcluster):
    """A world-readable directory holding a copy of the scenario store (alice and bob jobs) and alice's own site
    config (admin_group: her primary group), both as alice could have them."""
    d = Path(f"/tmp/sk-access-{os.getpid()}")
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    scenario(d / "store.db").close()
    (d / "store.db").chmod(0o644)  # a store readable by anyone: the scope must still hold
    alice = pwd.getpwnam("alice")
    site = yaml.safe_load(Path(DEVSITE).read_text())
    site["accounting"]["admin_group"] = grp.getgrgid(alice.pw_gid).gr_name
    (d / "site.yaml").write_text(yaml.safe_dump(site))
    os.chown(d / "site.yaml", alice.pw_uid, alice.pw_gid)
    yield d, alice
    shutil.rmtree(d, ignore_errors=True)


def test_a_users_own_site_config_makes_her_no_admin(shared):
    d, _alice = shared
    assert _users(str(d / "store.db"), str(d / "site.yaml")) == {"alice"}


def test_the_store_files_group_makes_its_members_admins(shared):
    d, alice = shared
    os.chown(d / "store.db", 0, alice.pw_gid)  # what ingest does with the site's admin_group
    assert _users(str(d / "store.db"), str(d / "site.yaml")) == {"alice", "bob"}
