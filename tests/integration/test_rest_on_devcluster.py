"""The rest backend against the devcluster's real slurmrestd, as the unprivileged alice, on either Slurm.

22.05 (Debian) serves openapi/v0.0.36-v0.0.38 with rest_auth/local only; 25.11 serves data_parser v0.0.41-v0.0.44
with rest_auth/local and, on 127.0.0.1:16820, rest_auth/jwt (contrib/devcluster/up). rest_auth/local only serves
the uid slurmrestd runs as, so alice talks to her own socket (rest-alice.sock), with a clean login-like
environment (what slurmrestd puts into the job is that environment). What differs by version is in `EXPECT`;
everything else is asserted on both.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import as_user, running_slurm_version
from tests.integration.jobs import DEVSITE, MIN_PATH, SK, SPEC

pytestmark = pytest.mark.integration

PY = str(Path(sys.executable))
SOCKET = "unix:/run/slurmkit-devcluster/rest-alice.sock"
JWT_URL = "http://127.0.0.1:16820"  # contrib/devcluster/lib.sh DC_REST_JWT_PORT (25.11 only)
OLD = (running_slurm_version() or (25, 11, 0)) < (23, 0, 0)  # Debian's 22.05
# What each Slurm's slurmrestd offers (its /openapi/v3), what slurmkit must pick, an offered version slurmkit does
# not speak, and how scontrol prints a GPU request.
EXPECT = {
    "offers": ["v0.0.36", "v0.0.37", "v0.0.38"] if OLD else ["v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44"],
    "picks": "v0.0.38" if OLD else "v0.0.44",
    "other_family": "v0.0.44" if OLD else "v0.0.38",  # a version remembered from the other Slurm
    "not_spoken": "v0.0.37" if OLD else "v0.0.41",
    "tres_per_node": "gres:gpu:a100:1" if OLD else "gres/gpu:a100:1",
}


@pytest.fixture
def alice_dir():
    path = Path(tempfile.mkdtemp(prefix="be-rest-", dir="/tmp"))
    os.chown(path, pwd.getpwnam("alice").pw_uid, -1)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def env_of(home: Path | str = "/home/alice", url: str = SOCKET, **extra: str) -> list[str]:
    more = [f"{k}={v}" for k, v in extra.items()]
    return ["env", "-i", f"PATH={MIN_PATH}", f"HOME={home}", "USER=alice", "LOGNAME=alice", "LANG=C.UTF-8",
            f"SK_REST_URL={url}", *more]


def alice(*cmd: str, cwd: Path | None = None, env: list[str] | None = None) -> subprocess.CompletedProcess:
    return as_user("alice", [*(env or env_of()), *cmd], cwd=cwd, timeout=180)


def alice_py(code: str, env: list[str] | None = None) -> subprocess.CompletedProcess:
    return alice(PY, "-c", code, env=env)


def scontrol(job_id: int | str) -> str:
    return subprocess.run(["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True).stdout


def fields(job_id: int | str) -> dict[str, str]:
    """`scontrol show job -o` as {key: value} (the first record: an array's parent or its pending tasks)."""
    line = scontrol(job_id).splitlines()[0].strip()
    # A value may hold spaces (SubmitLine=sbatch --parsable --comment=...): a field starts at " Key=".
    return dict(part.split("=", 1) for part in re.split(r" (?=[A-Za-z][\w/:]*=)", line))


def write_spec(directory: Path, text: str) -> None:
    (directory / "job.yaml").write_text(text)
    os.chown(directory / "job.yaml", pwd.getpwnam("alice").pw_uid, -1)


def submit(directory: Path, backend: str, env: list[str] | None = None) -> subprocess.CompletedProcess:
    return alice(SK, "submit", "job.yaml", "--site", DEVSITE, "--backend", backend, "--json", cwd=directory, env=env)


def cancel(*ids: int | str) -> None:
    subprocess.run(["scancel", *map(str, ids)], check=False)


def test_negotiates_the_newest_version_both_know(alice_dir):
    # A fresh cache: nothing remembered, so this is the first contact with the daemon.
    code = ("from slurmkit.backends.rest import RestBackend\n"
            f"be = RestBackend({SOCKET!r})\nprint(be.offered_versions())\nbe.find_by_tag('none')\n"
            "print(be.version)\nprint(be.detect_version())\n")
    run = alice_py(code, env=env_of(XDG_CACHE_HOME=str(alice_dir)))
    assert run.returncode == 0, run.stderr
    offered, used, detected = run.stdout.splitlines()
    assert offered == repr(EXPECT["offers"])
    assert used == detected == EXPECT["picks"]
    remembered = json.loads((alice_dir / "slurmkit" / "rest" / "versions.json").read_text())
    assert remembered == {SOCKET: EXPECT["picks"]}


def test_a_remembered_version_the_daemon_lacks_is_renegotiated(alice_dir):
    # What a user's cache holds after the site moved between 22.05 and 25.11.
    cache = alice_dir / "slurmkit" / "rest"
    cache.mkdir(parents=True)
    (cache / "versions.json").write_text(json.dumps({SOCKET: EXPECT["other_family"]}))
    for path in (alice_dir / "slurmkit", cache, cache / "versions.json"):
        os.chown(path, pwd.getpwnam("alice").pw_uid, -1)
    (alice_dir / "slurmkit").chmod(0o700)
    cache.chmod(0o700)
    code = (f"from slurmkit.backends.rest import RestBackend\nbe = RestBackend({SOCKET!r})\n"
            "print(be.find_by_tag('none'), be.version)\n")
    run = alice_py(code, env=env_of(XDG_CACHE_HOME=str(alice_dir)))
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["None", EXPECT["picks"]]
    assert json.loads((cache / "versions.json").read_text()) == {SOCKET: EXPECT["picks"]}


def test_a_version_the_real_daemon_lacks_is_refused_with_what_it_offers():
    code = ("from slurmkit.backends.rest import RestBackend\nfrom slurmkit.errors import BackendError\n"
            f"try:\n    RestBackend({SOCKET!r}, version='v0.0.39').find_by_tag('x')\n"
            "except BackendError as e:\n    print(type(e).__name__, e.message)\n")
    run = alice_py(code)
    assert run.returncode == 0, run.stderr
    assert f"does not serve API v0.0.39 and offers API {', '.join(EXPECT['offers'])};" in run.stdout
    assert "supports v0.0.38, v0.0.43, v0.0.44" in run.stdout
    assert run.stdout.startswith("BackendError ")  # not BackendUnavailable: a submission does not retry it


def test_an_offered_version_slurmkit_does_not_speak_is_refused():
    code = ("from slurmkit.backends.rest import RestBackend\nfrom slurmkit.errors import BackendError\n"
            f"try:\n    RestBackend({SOCKET!r}, version={EXPECT['not_spoken']!r}).find_by_tag('x')\n"
            "except BackendError as e:\n    print(e.message)\n")
    run = alice_py(code)
    assert run.returncode == 0, run.stderr
    assert f"serves API {EXPECT['not_spoken']}, which slurmkit does not speak" in run.stdout


def test_submit_as_alice_status_and_cancel(alice_dir):
    name = f"be-rest-{uuid.uuid4().hex[:6]}"
    write_spec(alice_dir, SPEC.format(name=name, cmd="echo started; sleep 120"))
    run = submit(alice_dir, "rest")
    assert run.returncode == 0, run.stderr
    [item] = json.loads(run.stdout)
    job_id, tag = item["job_id"], item["tag"]
    try:
        assert item["backend"] == "rest" and not item["reused"]
        shown = scontrol(job_id)
        # Owned by alice, the tag survived into the comment, the options came through as job properties
        # (slurmrestd ignores the script's #SBATCH lines), the environment is the one alice's sk sent.
        assert "UserId=alice(" in shown and f"Comment=sk:{tag}" in shown and f"JobName={name}" in shown
        assert f"TresPerNode={EXPECT['tres_per_node']}" in shown and "TimeLimit=00:02:00" in shown
        assert f"WorkDir={alice_dir}" in shown
        status = alice(SK, "status", str(job_id), "--json", "--backend", "rest")
        assert status.returncode == 0, status.stderr
        [seen] = [j for j in json.loads(status.stdout) if str(j["job_id"]) == str(job_id)]
        assert seen["name"] == name and seen["user"] == "alice"
        # find_by_tag over REST finds it (what a retry after a timeout does before resubmitting).
        found = alice_py(f"from slurmkit.backends.rest import RestBackend; "
                         f"print(RestBackend({SOCKET!r}).find_by_tag({tag!r}))")
        assert found.stdout.strip() == str(job_id), found.stderr
    finally:
        done = alice_py(f"from slurmkit.backends.rest import RestBackend; "
                        f"print(RestBackend({SOCKET!r}).cancel(['{job_id}'])[0].outcome)")
    assert done.returncode == 0 and done.stdout.strip() == "cancelled", done.stderr
    state = alice_py(f"from slurmkit.backends.rest import RestBackend; "
                     f"print(RestBackend({SOCKET!r}).job('{job_id}')[0].state)")
    assert state.stdout.strip() in ("CANCELLED", "COMPLETING"), state.stderr + scontrol(job_id)
    again = alice_py(f"from slurmkit.backends.rest import RestBackend; "
                     f"print(RestBackend({SOCKET!r}).cancel(['{job_id}', '4000000000'])[:2])")
    assert "'already-ended'" in again.stdout and "'not-found'" in again.stdout, again.stdout + again.stderr


# Every option the planner emits (array with throttle, dependency, preempt = B: signal + requeue + append,
# exclusive, mail, output/error paths, GPUs per node with type, tasks, CPUs, memory, time); held.
FULL = """name: {name}
launcher: srun
nodes: 2
gpus_per_node: 2
cpus_per_gpu: 2
mem_per_gpu: 100M
time: "00:03:00"
exclusive: true
array:
  grid: {{lr: [1, 2, 3]}}
  max_parallel: 2
dependency: {{afterany: [{dep}]}}
{preempt}mail: {{user: alice, type: [END, FAIL]}}
output: "%x-%A_%a.log"
error: "%x-%A_%a.err"
sbatch_extra: {{hold: null}}
command: [bash, -c, "echo {{lr}}"]
"""
PREEMPT = "preempt: {signal: USR1, grace: 60, requeue: true, max_restarts: 1}\n"
# Fields that name the submission itself, not what was asked for.
OWN = {"JobId", "ArrayJobId", "Comment", "SubmitTime", "LastSchedEval", "AllocNode:Sid", "SubmitLine", "StdOut",
       "StdErr", "Priority"}
# 22.05's v0.0.38 (no recording of a side-by-side comparison there): the fields its tests above and the recorded
# exchanges (tests/data/slurmrest/) establish.
OLD_FIELDS = {"JobName", "UserId", "NumNodes", "TimeLimit", "TresPerNode", "WorkDir", "ArrayTaskId", "Partition"}


def test_rest_and_cli_make_the_same_job(alice_dir):
    dep = as_user("alice", ["sbatch", "--parsable", "--hold", "-t", "1", "--wrap", "true"], timeout=60)
    assert dep.returncode == 0, dep.stderr
    dep_id = dep.stdout.strip().split(";")[0]
    name = f"be-rest-same-{uuid.uuid4().hex[:6]}"
    # 22.05's slurmrestd cannot take the B: signal (test below): compare the rest of the spec there.
    write_spec(alice_dir, FULL.format(name=name, dep=dep_id, preempt="" if OLD else PREEMPT))
    ids = []
    try:
        for backend in ("cli", "rest"):
            run = submit(alice_dir, backend)
            assert run.returncode == 0, run.stderr
            ids.append(json.loads(run.stdout)[0]["job_id"])
        cli, rest = (fields(i) for i in ids)
        assert cli["Dependency"].startswith(f"afterany:{dep_id}")
        compared = OLD_FIELDS if OLD else set(cli) | set(rest)
        differ = {k: (cli.get(k), rest.get(k)) for k in compared - OWN if cli.get(k) != rest.get(k)}
        assert differ == {}
        if not OLD:  # what the v0.0.44 mapping must produce, seen in scontrol
            assert (rest["NumNodes"], rest["NumTasks"], rest["CPUs/Task"], rest["ArrayTaskThrottle"]) == \
                ("2-2", "4", "2", "2")
            assert rest["TresPerNode"] == "gres/gpu:a100:2" and rest["MemPerTres"] == "gres/gpu:100"
            assert rest["OverSubscribe"] == "NO" and rest["Requeue"] == "1" and rest["MailType"] == "END,FAIL"
            assert rest["StdOut"].endswith(".log") and rest["StdErr"].endswith(".err")
    finally:
        cancel(dep_id, *ids)


def test_preempt_signal_reaches_the_batch_shell_over_rest(alice_dir):
    """The B: signal (slurmkit's preemption trap) through slurmrestd: 25.11 delivers it to the batch shell, which
    forwards it to the step; 22.05's v0.0.38 cannot express it, so sk refuses before anything is sent."""
    name = f"be-rest-sig-{uuid.uuid4().hex[:6]}"
    spec = (SPEC.format(name=name, cmd="trap 'echo GOT_USR1; exit 0' USR1; echo START; "
                                       "for i in $(seq 600); do sleep 0.2; done")
            .replace('time: "00:02:00"', 'time: "00:01:00"')
            + "preempt: {signal: USR1, grace: 50, requeue: false}\n")
    write_spec(alice_dir, spec)
    run = submit(alice_dir, "rest")
    if OLD:
        assert run.returncode == 2 and "rejects the B: prefix" in run.stderr and "Traceback" not in run.stderr
        return
    assert run.returncode == 0, run.stderr
    job_id = json.loads(run.stdout)[0]["job_id"]
    out = alice_dir / f"{name}-{job_id}.out"
    try:
        # slurmctld sends the warning signal at its first time-limit check after end - 50 s (checks every 30 s).
        deadline = time.monotonic() + 150  # the job may wait for GPUs on the shared cluster first
        while time.monotonic() < deadline and not (out.exists() and "GOT_USR1" in out.read_text()):
            time.sleep(1)
        text = out.read_text() if out.exists() else "(no output)"
        assert "START" in text and "sk: SIGUSR1 received" in text and "GOT_USR1" in text, text
    finally:
        cancel(job_id)


def test_invalid_account_over_rest_is_a_clear_exit_2(alice_dir):
    name = f"be-rest-acct-{uuid.uuid4().hex[:6]}"
    write_spec(alice_dir, SPEC.format(name=name, cmd="true") + "account: nosuch\n")
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


jwt_only = pytest.mark.skipif(OLD, reason="Debian's Slurm 22.05 has no auth/jwt: the devcluster runs no JWT "
                              "slurmrestd there (contrib/devcluster/up)")


def alice_token() -> str:
    run = as_user("alice", ["env", "-i", f"PATH={MIN_PATH}", "scontrol", "token", "lifespan=600"], timeout=30)
    assert run.returncode == 0 and run.stdout.startswith("SLURM_JWT="), run.stderr
    return run.stdout.strip().removeprefix("SLURM_JWT=")


@jwt_only
def test_jwt_submit_status_and_cancel_as_alice(alice_dir):
    name = f"be-rest-jwt-{uuid.uuid4().hex[:6]}"
    write_spec(alice_dir, SPEC.format(name=name, cmd="sleep 120"))
    env = env_of(url=JWT_URL, SLURM_JWT=alice_token())
    run = submit(alice_dir, "rest", env=env)
    assert run.returncode == 0, run.stderr
    job_id = json.loads(run.stdout)[0]["job_id"]
    try:
        # The daemon runs as the unprivileged slurmrest user; the job is alice's, as her token says.
        shown = scontrol(job_id)
        assert "UserId=alice(" in shown and f"JobName={name}" in shown
        status = alice(SK, "status", str(job_id), "--json", "--backend", "rest", env=env)
        assert status.returncode == 0, status.stderr
        assert [j["user"] for j in json.loads(status.stdout) if str(j["job_id"]) == str(job_id)] == ["alice"]
    finally:
        done = alice(SK, "cancel", str(job_id), "--backend", "rest", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert fields(job_id)["JobState"] in ("CANCELLED", "COMPLETING")


@jwt_only
def test_jwt_without_or_with_a_bad_token_fails_clearly(alice_dir):
    name = f"be-rest-jwt-bad-{uuid.uuid4().hex[:6]}"
    write_spec(alice_dir, SPEC.format(name=name, cmd="true"))
    missing = submit(alice_dir, "rest", env=env_of(url=JWT_URL))
    assert missing.returncode == 1 and "needs a JWT and $SLURM_JWT is not set" in missing.stderr
    assert "scontrol token" in missing.stderr and "Traceback" not in missing.stderr
    bad = submit(alice_dir, "rest", env=env_of(url=JWT_URL, SLURM_JWT="not-a-token"))
    assert bad.returncode == 1 and "Protocol authentication error" in bad.stderr, bad.stderr
    assert "renew the token" in bad.stderr and "retrying" not in bad.stderr and "Traceback" not in bad.stderr
    assert subprocess.run(["squeue", "-h", "-n", name], capture_output=True, text=True).stdout == ""
