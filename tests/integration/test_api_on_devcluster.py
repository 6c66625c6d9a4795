"""The Python API (slurmkit/api.py) and `sk submit --parsable`, as alice on the devcluster, backend cli."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.jobs import DEVSITE, MIN_PATH, SK, SPEC

pytestmark = pytest.mark.integration

# Run as alice, in her directory; prints one JSON line the test reads.
SCRIPT = r"""
import json, sys
import slurmkit
from slurmkit.api import JobFailed

site = sys.argv[1]
out = {}
job = slurmkit.submit("ok.yaml", site=site, overrides={"name": "api-ok"}, backend="cli")
out["ok_id"] = job.id
out["ok_wait"] = job.wait(timeout=120, interval=0.5)
out["ok_status"] = job.status()
out["ok_log"] = job.logs()
arr = slurmkit.submit("array.yaml", site=site, backend="cli")
try:
    arr.wait(timeout=120, interval=0.5)
    out["array"] = "no exception"
except JobFailed as exc:
    out["array"] = {"states": exc.states, "exit": exc.exit_status}
long = slurmkit.submit("ok.yaml", site=site, overrides=["name=api-long", "command=[sleep, '300']"], backend="cli")
out["cancel"] = long.cancel().outcome
out["cancel_again"] = long.cancel().outcome
print(json.dumps(out))
"""


@pytest.fixture
def home(tmp_path, devcluster):
    d = Path(f"/tmp/sk-api-{os.getpid()}")
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    (d / "ok.yaml").write_text(SPEC.format(name="api", cmd="echo hello from the api"))
    (d / "array.yaml").write_text(SPEC.format(name="api-array", cmd="exit {code}")
                                  + "array:\n  grid: {code: [0, 1, 0]}\n")
    (d / "run.py").write_text(SCRIPT)
    shutil.chown(d, "alice")
    for f in d.iterdir():
        shutil.chown(f, "alice")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _as_alice(home: Path, *cmd: str) -> subprocess.CompletedProcess:
    env = ["env", "-i", f"PATH={MIN_PATH}", "HOME=/tmp", "LANG=C.UTF-8"]
    return subprocess.run(["runuser", "-u", "alice", "--", *env, *cmd], capture_output=True, text=True, cwd=home)


def test_submit_wait_logs_cancel_from_python(home):
    res = _as_alice(home, sys.executable, "run.py", DEVSITE)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["ok_wait"] == "COMPLETED" and out["ok_status"] == {"COMPLETED": 1}
    assert "hello from the api" in out["ok_log"]
    assert out["array"] == {"states": {"COMPLETED": 2, "FAILED": 1}, "exit": 3}, out["array"]
    assert out["cancel"] == "cancelled" and out["cancel_again"] == "already-ended", out


def test_parsable_prints_only_the_job_id(home):
    res = _as_alice(home, SK, "submit", "--parsable", "ok.yaml", "--site", DEVSITE, "--backend", "cli")
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.strip()
    assert job_id.split(";")[0].isdigit() and "\n" not in job_id, res.stdout
    subprocess.run(["scancel", job_id.split(";")[0]], capture_output=True)
    bad = _as_alice(home, SK, "submit", "--parsable", "--json", "ok.yaml", "--site", DEVSITE)
    assert bad.returncode == 2 and "--parsable" in bad.stderr and not bad.stdout
