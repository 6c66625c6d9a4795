"""`sk status / wait / logs / cancel` on real jobs."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.integration.jobs import DEVSITE, SK, SPEC

pytestmark = pytest.mark.integration



def _submit(tmp_path, name: str, cmd: str) -> str:
    (tmp_path / f"{name}.yaml").write_text(SPEC.format(name=name, cmd=cmd))
    run = subprocess.run([SK, "submit", f"{name}.yaml", "--site", DEVSITE, "--json"], cwd=tmp_path,
                         capture_output=True, text=True, check=True)
    return str(json.loads(run.stdout)[0]["job_id"])


def sk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SK, *args], capture_output=True, text=True)


def test_wait_exit_status_and_logs_of_finished_jobs(tmp_path):
    ok = _submit(tmp_path, "ok", "echo hello from $SLURM_JOB_ID")
    bad = _submit(tmp_path, "bad", "exit 3")
    assert sk("wait", ok, "--interval", "0.5").returncode == 0
    assert sk("wait", bad, "--interval", "0.5").returncode == 3  # FAILED
    assert f"hello from {ok}" in sk("logs", ok).stdout
    data = json.loads(sk("status", ok, bad, "--json").stdout)
    assert [d["state"] for d in data] == ["COMPLETED", "FAILED"]


def test_cancel_and_follow(tmp_path):
    job = _submit(tmp_path, "long", "for i in 1 2 3; do echo tick $i; sleep 1; done; sleep 60")
    deadline = time.time() + 30
    follower = subprocess.Popen([SK, "logs", "-f", job], stdout=subprocess.PIPE, text=True)
    while time.time() < deadline and sk("status", job, "--json").stdout.count('"RUNNING"') == 0:
        time.sleep(0.5)
    time.sleep(4)
    assert sk("cancel", job).returncode == 0
    assert sk("wait", job, "--interval", "0.5").returncode == 5  # CANCELLED
    out, _ = follower.communicate(timeout=30)
    assert "tick 1" in out and "tick 3" in out


def test_unknown_job_is_a_clear_error():
    run = sk("status", "99999999")
    assert run.returncode == 1 and "knows no job" in run.stderr and "Traceback" not in run.stderr
