"""Privacy, as real unprivileged users on the devcluster machine (alice, bob; group slurmkit-admin is the
site's accounting.admin_group, with only root in it): the OS keeps non-admins out of the store file, admins see
every job, and a non-admin who can read some store anyway sees only their own jobs.

The admin-member case runs alice with slurmkit-admin as a supplementary group through `setpriv`, so the test
never edits /etc/group on the shared machine. Files live in a 0755 directory under /tmp: pytest's tmp_path is
under a 0700 root directory the test users cannot enter.
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT, as_user
from report_store import scenario

pytestmark = pytest.mark.integration

SK = str(Path(sys.executable).parent / "sk")
ADMIN_GROUP = "slurmkit-admin"  # site_config/devcluster.yaml accounting.admin_group
DAY = ["--since", "2026-11-01", "--until", "2026-11-02"]


@pytest.fixture(scope="module")
def shared_dir():
    d = Path(tempfile.mkdtemp(prefix="sk-privacy-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)


@pytest.fixture(scope="module")
def admin_store(shared_dir) -> Path:
    """The store as `sk admin ingest` creates it from the site config, then filled with the test scenario."""
    spool, db = shared_dir / "spool", shared_dir / "accounting.db"
    spool.mkdir()
    out = subprocess.run([SK, "admin", "ingest", "--site", str(ROOT / "site_config/devcluster.yaml"),
                          "--spool", str(spool), "--store", str(db)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    scenario(db).close()
    return db


def as_admin_member(user: str, cmd: list[str]) -> subprocess.CompletedProcess:
    """`user` with the admin group as a supplementary group (what `usermod -aG slurmkit-admin` would give)."""
    home = os.path.expanduser(f"~{user}")
    return subprocess.run(["setpriv", f"--reuid={user}", f"--regid={user}", f"--groups={ADMIN_GROUP}", "--",
                           "env", f"HOME={home}", f"USER={user}", *cmd], capture_output=True, text=True)


def users_in(result: subprocess.CompletedProcess) -> set[str]:
    assert result.returncode == 0, result.stderr
    return {r["user"] for r in json.loads(result.stdout)["rows"]}


def test_store_file_is_0640_owned_by_the_admin_group(admin_store):
    st = admin_store.stat()
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert grp.getgrgid(st.st_gid).gr_name == ADMIN_GROUP


def test_non_member_cannot_read_the_store_at_all(admin_store):
    raw = as_user("bob", ["cat", str(admin_store)])
    assert raw.returncode != 0 and "Permission denied" in raw.stderr
    out = as_user("bob", [SK, "report", "usage", *DAY, "--db", str(admin_store)])
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"you (bob) cannot read the accounting store {admin_store}" in out.stderr
    assert "--from-sacct" in out.stderr  # the way to one's own figures


def test_admin_group_member_sees_every_user(admin_store):
    out = as_admin_member("alice", [SK, "report", "usage", *DAY, "--db", str(admin_store), "--format", "json"])
    assert users_in(out) == {"alice", "bob"}
    assert json.loads(out.stdout)["user_scope"] == "all"


def test_ordinary_user_with_a_readable_store_sees_only_own_jobs(admin_store, shared_dir):
    copy = shared_dir / "readable-copy.db"
    shutil.copy(admin_store, copy)
    copy.chmod(0o644)
    out = as_user("alice", [SK, "report", "usage", *DAY, "--db", str(copy), "--format", "json"])
    assert users_in(out) == {"alice"}
    data = json.loads(out.stdout)
    assert data["user_scope"] == "alice" and data["totals"]["gpu_hours"] == pytest.approx(9.0)  # not 18
    assert any("only your own jobs" in n for n in data["notes"])
    # bob's job 3 is invisible to alice, and the error says why it may be missing
    job = as_user("alice", [SK, "report", "job", "3", "--db", str(copy)])
    assert job.returncode == 1 and "belongs to another user" in job.stderr
    # the HTML page too: nothing of bob's (his account 'chem') appears anywhere in it
    denied = as_user("alice", [SK, "report", "top", *DAY, "--db", str(copy), "--format", "html",
                               "-o", str(shared_dir / "x.html")])  # root's directory: a clear error, exit 2
    assert denied.returncode == 2 and "cannot write the report to" in denied.stderr, denied.stderr
    mine = shared_dir / "alice"
    mine.mkdir()
    shutil.chown(mine, "alice")
    page = mine / "alice.html"
    html = as_user("alice", [SK, "report", "top", *DAY, "--db", str(copy), "--format", "html", "-o", str(page)])
    assert html.returncode == 0, html.stderr
    text = page.read_text()
    assert "alice" in text and "bob" not in text and "chem" not in text
