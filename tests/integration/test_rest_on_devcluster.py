"""The rest backend against the devcluster's real slurmrestd (22.05, openapi/v0.0.38), as the unprivileged alice.

rest_auth/local only serves the uid slurmrestd runs as, so alice talks to her own socket (rest-alice.sock), with a
clean login-like environment (what slurmrestd puts into the job is that environment).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.conftest import as_user
from tests.integration.jobs import DEVSITE, MIN_PATH, SK, SPEC

pytestmark = pytest.mark.integration

PY = str(Path(sys.executable))
SOCKET = "unix:/run/slurmkit-devcluster/rest-alice.sock"
ENV = ["env", "-i", f"PATH={MIN_PATH}", "HOME=/home/alice", "USER=alice", "LOGNAME=alice", "LANG=C.UTF-8",
       f"SK_REST_URL={SOCKET}"]


@pytest.fixture
def alice_dir():
    path = Path(tempfile.mkdtemp(prefix="be-rest-", dir="/tmp"))
    os.chown(path, pwd.getpwnam("alice").pw_uid, -1)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def alice(*cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return as_user("alice", [*ENV, *cmd], cwd=cwd, timeout=120)


def alice_py(code: str) -> subprocess.CompletedProcess:
    return alice(PY, "-c", code)


def scontrol(job_id: int) -> str:
    return subprocess.run(["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True).stdout


def test_detects_v0_0_38_on_the_real_daemon():
    run = alice_py(f"from slurmkit.backends.rest import RestBackend; print(RestBackend({SOCKET!r}).detect_version())")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "v0.0.38"


def test_a_version_the_real_daemon_lacks_is_refused_with_what_it_offers():
    code = ("from slurmkit.backends.rest import RestBackend\nfrom slurmkit.errors import BackendUnavailable\n"
            f"try:\n    RestBackend({SOCKET!r}, version='v0.0.41').find_by_tag('x')\n"
            "except BackendUnavailable as e:\n    print(e.message)\n")
    run = alice_py(code)
    assert run.returncode == 0, run.stderr
    assert "does not serve API v0.0.41 and offers API v0.0.36, v0.0.37, v0.0.38" in run.stdout


def test_submit_as_alice_status_and_cancel(alice_dir):
    name = f"be-rest-{uuid.uuid4().hex[:6]}"
    (alice_dir / "job.yaml").write_text(SPEC.format(name=name, cmd="echo started; sleep 120"))
    os.chown(alice_dir / "job.yaml", pwd.getpwnam("alice").pw_uid, -1)
    run = alice(SK, "submit", "job.yaml", "--site", DEVSITE, "--backend", "rest", "--json", cwd=alice_dir)
    assert run.returncode == 0, run.stderr
    [item] = json.loads(run.stdout)
    job_id, tag = item["job_id"], item["tag"]
    try:
        assert item["backend"] == "rest" and not item["reused"]
        shown = scontrol(job_id)
        # Owned by alice, the tag survived into the comment, the options came through as job properties
        # (slurmrestd ignores the script's #SBATCH lines), the environment is the one alice's sk sent.
        assert "UserId=alice(" in shown and f"Comment=sk:{tag}" in shown and f"JobName={name}" in shown
        assert "TresPerNode=gres:gpu:a100:1" in shown and "TimeLimit=00:02:00" in shown
        assert f"WorkDir={alice_dir}" in shown
        status = alice(SK, "status", str(job_id), "--json")
        assert status.returncode == 0, status.stderr
        [seen] = [j for j in json.loads(status.stdout) if str(j["job_id"]) == str(job_id)]
        assert seen["name"] == name and seen["user"] == "alice"
        # find_by_tag over REST finds it (what a retry after a timeout does before resubmitting).
        found = alice_py(f"from slurmkit.backends.rest import RestBackend; "
                         f"print(RestBackend({SOCKET!r}).find_by_tag({tag!r}))")
        assert found.stdout.strip() == str(job_id), found.stderr
    finally:
        cancel = alice_py(f"from slurmkit.backends.rest import RestBackend; "
                          f"print(RestBackend({SOCKET!r}).cancel(['{job_id}'])[0].outcome)")
    assert cancel.returncode == 0 and cancel.stdout.strip() == "cancelled", cancel.stderr
    state = alice_py(f"from slurmkit.backends.rest import RestBackend; "
                     f"print(RestBackend({SOCKET!r}).job('{job_id}')[0].state)")
    assert state.stdout.strip() in ("CANCELLED", "COMPLETING"), state.stderr + scontrol(job_id)


def test_invalid_account_over_rest_is_a_clear_exit_2(alice_dir):
    name = f"be-rest-acct-{uuid.uuid4().hex[:6]}"
    (alice_dir / "job.yaml").write_text(SPEC.format(name=name, cmd="true") + "account: nosuch\n")
    os.chown(alice_dir / "job.yaml", pwd.getpwnam("alice").pw_uid, -1)
    run = alice(SK, "submit", "job.yaml", "--site", DEVSITE, "--backend", "rest", cwd=alice_dir)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Invalid account or account/partition combination specified" in run.stderr
    assert "sacctmgr" in run.stderr and "Traceback" not in run.stderr
    assert subprocess.run(["squeue", "-h", "-n", name], capture_output=True, text=True).stdout == ""


def test_bob_is_refused_on_alices_socket_with_a_clear_message():
    bob_env = ["env", "-i", f"PATH={MIN_PATH}", "HOME=/home/bob", "USER=bob", "LANG=C.UTF-8"]
    code = ("from slurmkit.backends.rest import RestBackend\nfrom slurmkit.errors import BackendUnavailable\n"
            f"try:\n    RestBackend({SOCKET!r}).find_by_tag('x')\n"
            "except BackendUnavailable as e:\n    print(e.format())\n")
    run = as_user("bob", [*bob_env, PY, "-c", code], timeout=60)
    assert run.returncode == 0, run.stderr
    assert "HTTP 401" in run.stdout and "accepts only the uid the daemon runs as" in run.stdout
