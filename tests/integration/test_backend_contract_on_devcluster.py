"""The backend contract (slurmkit/backends/base.py) on the real devcluster, over every backend usable here, as
root and as the unprivileged alice: submit, jobs (an array with a failing task, queued/running, by name),
find_by_tag, cancel (queued/running -> cancelled, unknown -> not-found, ended -> already-ended, another user's
job -> refused for alice); and the job commands' exit statuses on top of it."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import as_user
from tests.integration.jobs import DEVSITE, SK

pytestmark = pytest.mark.integration

PROBE = str(Path(__file__).with_name("backend_probe.py"))
PY = sys.executable


def _usable(name: str) -> str | None:
    """Why `name` cannot be tested on this cluster, or None."""
    from slurmkit import inputs
    from slurmkit.backends import get_backend
    from slurmkit.errors import BackendUnavailable

    be = get_backend(name, inputs.load_site(DEVSITE))
    try:
        if name == "rest":
            be.detect_version()  # type: ignore[attr-defined]
        if name == "pyslurm":
            from slurmkit.backends.pyslurm import detect

            d = detect()
            if not d.usable:
                return d.reason
    except BackendUnavailable as exc:
        return exc.message
    return None


@pytest.fixture(params=["cli", "rest", "pyslurm"])
def backend(request):
    why = _usable(request.param)
    if why:
        pytest.skip(f"{request.param} backend not usable on this devcluster: {why}")
    return request.param


@pytest.fixture
def workdir():
    path = Path(tempfile.mkdtemp(prefix="sk-contract-", dir="/tmp"))
    os.chown(path, pwd.getpwnam("alice").pw_uid, -1)
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _root_job() -> str:
    out = subprocess.run(["sbatch", "--parsable", "-J", "ct-foreign", "--time=2", "--mem=100M",
                          "--gpus-per-node=a100:1", "-o", "/dev/null", "--wrap=sleep 100"],
                         capture_output=True, text=True, check=True).stdout
    return out.strip().split(";")[0]


@pytest.mark.parametrize("user", ["root", "alice"])
def test_the_contract(backend, user, workdir):
    foreign = _root_job() if user == "alice" else None
    cmd = [PY, PROBE, backend, str(workdir), *([foreign] if foreign else [])]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300) if user == "root" \
            else as_user("alice", cmd, timeout=300)
    finally:
        if foreign:
            subprocess.run(["scancel", foreign], check=False)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.splitlines()[-1])
    array_id, long_id = seen["array_id"], seen["long_id"]
    # submit + jobs: both jobs are the caller's, the array is one unit, queried by name only the named one.
    assert {array_id, long_id} <= set(seen["live_units"])
    assert seen["by_name"] == [long_id]
    assert seen["find_by_tag"] == [int(array_id), int(long_id), None]
    # An array with a failing task: one record per task, the failure kept.
    assert seen["array"] == [[f"{array_id}_0", "COMPLETED", "0:0", "0"], [f"{array_id}_1", "FAILED", "3:0", "1"],
                             [f"{array_id}_2", "COMPLETED", "0:0", "2"]]
    assert all(p and p.startswith(str(workdir)) and p.endswith(f"{array_id}_{t}.out")
               for t, p in seen["array_stdout"].items())
    assert {array_id, long_id} <= set(seen["mine_all"])
    # cancel tells the truth for each id.
    expected = [[long_id, "cancelled", True], ["999999999", "not-found", False], [array_id, "already-ended", False]]
    if foreign:
        expected.append([foreign, "refused", False])  # alice may not cancel root's job
    assert seen["cancel"] == expected
    assert seen["long_after"] == ["CANCELLED"]
    assert seen["cancel_again"] == [[long_id, "already-ended"]]
    assert Path(seen["array_stdout"]["1"]).read_text().endswith("\ntask 1\n")


def sk(*args: str, user: str = "root", env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [SK, *args, "--site", DEVSITE]
    if user == "root":
        return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300)
    return as_user(user, ["env", *(f"{k}={v}" for k, v in (env or {}).items()), *cmd], timeout=300)


def _submit(workdir: Path, body: str, user: str) -> str:
    spec = workdir / "s.yaml"
    spec.write_text(body)
    spec.chmod(0o644)
    run = sk("submit", str(spec), "--json", "--set", f"workdir={workdir}", user=user)
    assert run.returncode == 0, run.stderr
    return str(json.loads(run.stdout)[0]["job_id"])


ARRAY = """name: ct-cli-arr
launcher: none
gpus_per_node: 1
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:02:00"
array:
  tasks: [{code: 0}, {code: 3}, {code: 0}, {code: 0}]
command: [bash, -c, "echo task $SLURM_ARRAY_TASK_ID; exit {code}"]
"""


@pytest.mark.parametrize("user", ["root", "alice"])
def test_wait_status_logs_of_an_array_with_a_failed_task(user, workdir):
    array_id = _submit(workdir, ARRAY, user)
    wait = sk("wait", array_id, "--interval", "0.5", user=user)
    assert wait.returncode == 3, wait.stderr  # FAILED: one task failed, though three completed
    assert "3 COMPLETED, 1 FAILED" in wait.stderr and f"not completed: {array_id}_1" in wait.stderr
    status = sk("status", array_id, "--json", user=user)
    assert sorted(j["state"] for j in json.loads(status.stdout)) == ["COMPLETED"] * 3 + ["FAILED"]
    table = sk("status", array_id, user=user).stdout
    assert f"{array_id} (array)" in table and "4 tasks: 3 COMPLETED, 1 FAILED" in table
    assert sk("logs", array_id, "--task", "1", user=user).stdout.endswith("\ntask 1\n")
    which = sk("logs", array_id, user=user)
    assert which.returncode == 2 and f"{array_id}_1 (FAILED)" in which.stderr and "--task" in which.stderr


@pytest.mark.parametrize("user", ["root", "alice"])
def test_cancel_exit_statuses(user, workdir):
    unknown = sk("cancel", "999999999", user=user)
    assert unknown.returncode == 1 and "not found 999999999" in unknown.stderr
    nomatch = sk("cancel", "--name", "no-such-job-name-ct", user=user)
    assert nomatch.returncode == 1 and "no queued or running job of yours is named" in nomatch.stderr
    job = _submit(workdir, ARRAY.replace("ct-cli-arr", "ct-cli-long").split("array:")[0]
                  + 'command: [bash, -c, "sleep 100"]\n', user)
    named = sk("cancel", "--name", "ct-cli-long", "--json", user=user)
    assert named.returncode == 0 and json.loads(named.stdout) == [{"job_id": job, "outcome": "cancelled",
                                                                   "message": ""}]
    assert sk("wait", job, "--interval", "0.5", user=user).returncode == 5
    again = sk("cancel", job, "999999999", user=user)
    assert again.returncode == 1
    assert f"not cancelled {job}: it had already ended (CANCELLED)" in again.stderr
    assert "not found 999999999" in again.stderr


def test_status_with_accounting_storage_disabled_falls_back_to_squeue_and_says_so(tmp_path):
    """A client whose slurm.conf says accounting_storage/none: sacct refuses (real Slurm), squeue still answers."""
    conf = Path(os.environ.get("SLURM_CONF", "/run/slurmkit-devcluster/etc/slurm.conf"))
    for f in conf.parent.glob("*.conf"):
        shutil.copy(f, tmp_path / f.name)
    text = (tmp_path / "slurm.conf").read_text()
    (tmp_path / "slurm.conf").write_text("\n".join("AccountingStorageType=accounting_storage/none"
                                                   if line.startswith("AccountingStorageType=") else line
                                                   for line in text.split("\n")))
    job = _root_job()
    try:
        env = {"SLURM_CONF": str(tmp_path / "slurm.conf")}
        run = sk("status", "--json", env=env)
        assert run.returncode == 0, run.stderr
        assert job in [j["job_id"] for j in json.loads(run.stdout)]
        assert "accounting storage is disabled" in run.stderr and "MinJobAge" in run.stderr
        hist = sk("history", env=env)
        assert hist.returncode == 0 and "accounting storage is disabled" in hist.stderr
    finally:
        subprocess.run(["scancel", job], check=False)


def test_wait_stops_on_a_dependency_that_can_never_be_met_and_on_a_held_job(workdir):
    failed = _submit(workdir, ARRAY.split("array:")[0] + 'command: [bash, -c, "exit 1"]\n', "root")
    dep = _submit(workdir, ARRAY.split("array:")[0].replace("ct-cli-arr", "ct-dep")
                  + f'command: [bash, -c, "true"]\ndependency: {{afterok: [{failed}]}}\n', "root")
    held = _root_job_held()
    try:
        run = sk("wait", dep, "--interval", "0.5", "--timeout", "60")
        assert run.returncode == 9, run.stderr
        assert f"job {dep} will not start by itself: its dependency can never be satisfied" in run.stderr
        run = sk("wait", held, "--interval", "0.5", "--timeout", "60")
        assert run.returncode == 9 and "it is held" in run.stderr, run.stderr
    finally:
        subprocess.run(["scancel", dep, held], check=False)


def _root_job_held() -> str:
    out = subprocess.run(["sbatch", "--parsable", "--hold", "-J", "ct-held", "--time=1", "--mem=100M",
                          "-o", "/dev/null", "--wrap=true"], capture_output=True, text=True, check=True).stdout
    return out.strip().split(";")[0]


def test_logs_follow_of_a_pending_job_says_so_and_follows_once_it_starts(workdir):
    out = subprocess.run(["sbatch", "--parsable", "--hold", "-J", "ct-follow", "--time=1", "--mem=100M",
                          f"--output={workdir}/follow-%j.out", "--wrap=echo started-ok"],
                         capture_output=True, text=True, check=True).stdout
    job = out.strip().split(";")[0]
    follower = subprocess.Popen([SK, "logs", "-f", job, "--site", DEVSITE], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)
        subprocess.run(["scontrol", "release", job], check=True)
        stdout, stderr = follower.communicate(timeout=60)
    finally:
        follower.kill()
        subprocess.run(["scancel", job], check=False)
    assert f"job {job} is pending (JobHeldUser); waiting for it to start" in stderr
    assert stdout == "started-ok\n" and follower.returncode == 0


LIST = """import json, sys
from slurmkit import inputs
from slurmkit.backends import get_backend
from slurmkit.backends.base import JobQuery
be = get_backend(sys.argv[1], inputs.load_site(sys.argv[2]))
print(json.dumps([(j.job_id, j.name) for j in be.jobs(JobQuery(user="*", finished=False))], ensure_ascii=True))
"""


def test_a_job_name_that_is_not_utf8_stops_no_listing(backend):
    """Slurm lets a job name hold any byte; one user's such job must not break every other user's `sk status`
    (pyslurm's getter raised UnicodeDecodeError out of Jobs.load() for the whole listing)."""
    res = subprocess.run([b"sbatch", b"--parsable", b"--hold", b"-J", b"ct-bad\xffname", b"-t", b"1", b"-o",
                          b"/dev/null", b"--wrap", b"true"], capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    job = res.stdout.decode().strip().split(";")[0]
    try:
        run = subprocess.run([PY, "-c", LIST, backend, DEVSITE], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        names = dict(json.loads(run.stdout))
        assert job in names and names[job].startswith("ct-bad") and names[job].endswith("name")
    finally:
        subprocess.run(["scancel", job], check=False)
