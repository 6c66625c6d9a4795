"""`sk report job` by the job's owner, from Slurm accounting (slurmkit/report/jobstats.py), as alice and bob.

Neither can read the accounting store (a root-only file named by a root-owned copy of the devcluster site
config), so their own job is read from sacct: the node GPU summary in the job's AdminComment and seff's CPU,
memory and time figures. The running devcluster's hooks (its etc/hook.env) may use the spool transport; then
the job's node hooks are run here once more, as root (Slurm's SlurmUser), with SK_TRANSPORT=admin_comment and a
pretend trace (the GPUs are simulated), exactly as an epilog on a site with that transport would: the
AdminComment and everything after it are real. contrib/devcluster/hook-settings.in sets spool+admin_comment for
the next `up`, where the real epilog writes it and this test only reads.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from slurmkit.accounting import admin_comment
from slurmkit.slurm import scontrol
from slurmkit.store.db import open_store
from tests.integration.jobs import DEVSITE, MIN_PATH, SK, wait

pytestmark = pytest.mark.integration

DC = Path(os.environ.get("DEVCLUSTER_DIR", "/run/slurmkit-devcluster"))
SPEC = """name: jobstats-{user}
launcher: none
gpus: {gpus}
cpus_per_gpu: 2
mem_per_gpu: 1G
time: "00:20:00"
command: [bash, -c, "sleep 8"]
"""
TRACE = {"alice": "0", "bob": "90"}  # alice's GPUs sit idle, bob's are busy (util_pct of every reading)
GPUS = {"alice": 2, "bob": 1}


def _cluster_transport() -> str:
    text = (DC / "etc" / "hook.env").read_text()
    return next((line.split(":-", 1)[1].rstrip('}"') for line in text.splitlines() if "SK_TRANSPORT=" in line),
                "spool")


def _as(user: str, cwd: Path, *cmd: str) -> subprocess.CompletedProcess:
    env = ["env", "-i", f"PATH={MIN_PATH}", "HOME=/tmp", "LANG=C.UTF-8"]
    return subprocess.run(["runuser", "-u", user, "--", *env, *cmd], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def _hand_hooks(job_id: int, gpus: int, trace: Path, state: Path) -> None:
    """The job's prolog and epilog as a node with the admin_comment transport runs them, while it runs."""
    deadline = time.monotonic() + 60
    while (info := scontrol.show_job(job_id)).get("JobState") != "RUNNING":
        assert time.monotonic() < deadline, info
        time.sleep(0.5)
    env = {**os.environ, "SK_TRANSPORT": "admin_comment", "SK_STATE_DIR": str(state), "SK_SPOOL": str(state / "spool"),
           "SK_METRIC_SOURCE": "simulated", "SK_SIM_TRACE": str(trace), "SK_SAMPLE_INTERVAL": "0.5",
           "SLURM_JOB_ID": str(job_id), "SLURM_CLUSTER_NAME": "devcluster", "SLURMD_NODENAME": info["NodeList"],
           "SLURM_JOB_GPUS": ",".join(str(i) for i in range(gpus))}
    subprocess.run([SK, "hook", "prolog"], env=env, check=True, timeout=60)
    time.sleep(3)
    subprocess.run([SK, "hook", "epilog"], env=env, check=True, timeout=60)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """One finished GPU job each of alice and bob, their summaries in the AdminComment; the site copy."""
    base = Path(f"/tmp/sk-jobstats-{os.getpid()}")
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(mode=0o755)
    base.chmod(0o755)
    with open_store(str(base / "store.db")):
        pass
    (base / "store.db").chmod(0o600)  # root's alone: no user can read it
    site = yaml.safe_load(Path(DEVSITE).read_text())
    site["accounting"]["store"] = str(base / "store.db")
    (base / "site.yaml").write_text(yaml.safe_dump(site))
    hand = "admin_comment" not in _cluster_transport().split("+")
    out = {}
    for user in ("alice", "bob"):
        pw = pwd.getpwnam(user)
        home = base / user
        home.mkdir(mode=0o755)
        os.chown(home, pw.pw_uid, pw.pw_gid)
        (home / "job.yaml").write_text(SPEC.format(user=user, gpus=GPUS[user]))
        (base / f"{user}.csv").write_text(f"util_pct,mem_used_mib,power_w\n{TRACE[user]},2048,100\n")
        res = _as(user, home, SK, "submit", "--parsable", "job.yaml", "--site", str(base / "site.yaml"))
        assert res.returncode == 0, res.stderr
        job_id = int(res.stdout.strip().split(";")[0])
        if hand:
            _hand_hooks(job_id, GPUS[user], base / f"{user}.csv", base / f"state-{user}")
        out[user] = job_id
    for job_id in out.values():
        assert wait(job_id, timeout=180) == "COMPLETED"
    deadline = time.monotonic() + 60
    for job_id in out.values():  # slurmdbd stores the comment asynchronously
        while admin_comment.PREFIX not in subprocess.run(["sacct", "-n", "-X", "-P", "-j", str(job_id), "-o",
                                                          "AdminComment"], capture_output=True, text=True).stdout:
            assert time.monotonic() < deadline, f"job {job_id}: no slurmkit segment in its AdminComment"
            time.sleep(1)
    yield base, out, hand
    shutil.rmtree(base, ignore_errors=True)


def _report(user: str, base: Path, job_id: int, *extra: str) -> subprocess.CompletedProcess:
    return _as(user, base, SK, "report", "job", str(job_id), "--site", str(base / "site.yaml"), *extra)


@pytest.mark.parametrize("user", ["alice", "bob"])
def test_owner_sees_her_own_gpu_figures_and_verdict_from_sacct(jobs, user):
    base, ids, hand = jobs
    assert _as(user, base, "cat", str(base / "store.db")).returncode != 0  # the store is not hers to read
    res = _report(user, base, ids[user], "--json")
    assert res.returncode == 0, res.stderr
    [run] = json.loads(res.stdout)
    assert run["source"] == "sacct" and run["user_name"] == user and run["state"] == "COMPLETED"
    assert len(run["gpus_detail"]) == GPUS[user]
    assert all(g["source"] == "simulated" and g["util_mean"] is not None for g in run["gpus_detail"])
    assert "SIMULATED metrics" in run["verdict"]  # pretend GPUs are never passed off as measured
    usage = run["usage"]
    assert usage["alloc_cpus"] == 2 * GPUS[user] and usage["timelimit_s"] == 1200
    assert 0 <= usage["cpu_efficiency_pct"] < 50 and usage["time_efficiency_pct"] < 25
    assert any(a.startswith("the time limit was far above use") for a in run["advice"])
    if hand:  # the trace decides the figures
        utils = {g["util_mean"] for g in run["gpus_detail"]}
        assert utils == {float(TRACE[user])}
        idle_advice = [a for a in run["advice"] if "GPUs were idle" in a]
        assert bool(idle_advice) == (user == "alice")
    text = _report(user, base, ids[user])
    assert text.returncode == 0, text.stderr
    assert "verdict: " in text.stdout and "CPU efficiency" in text.stdout and "simulated" in text.stdout
    if hand and user == "alice":
        assert "verdict: 2 of 2 GPUs were idle" in text.stdout


def test_nobody_sees_the_other_users_job(jobs):
    base, ids, _hand = jobs
    for user, other in (("alice", "bob"), ("bob", "alice")):
        res = _report(user, base, ids[other])
        assert res.returncode == 1 and not res.stdout, res.stdout
        assert f"job {ids[other]} is not one of your ({user}) jobs" in res.stderr and "Traceback" not in res.stderr
        assert other not in res.stderr  # not even whose it is


def test_the_guides_example_reads_like_what_alice_gets_for_her_own_job(jobs, tmp_path):
    """The "Is my job using its GPUs?" page shows an example printed by the report code; alice's real
    `sk report job` on the devcluster has the same lines in the same order (only the figures differ)."""
    from slurmkit.docs import gpu_use
    from slurmkit.site.model import load_site

    base, ids, _ = jobs
    guide = gpu_use.example(load_site(DEVSITE))["text"].splitlines()
    real = _report("alice", base, ids["alice"])
    assert real.returncode == 0, real.stderr
    lines = real.stdout.splitlines()

    def shape(text: list[str]) -> list[str]:
        return [re.sub(r"[\d.]+", "N", line.split()[0])  # job, N (GPUs), verdict:, CPU, advice:, node, source:
                for line in text if not re.match(r"\s+\S+\s+\d+\s+[\d.-]+\s", line)]  # GPU rows: one per GPU

    assert shape(lines) == shape(guide)
    header = next(line for line in guide if line.lstrip().startswith("node "))
    assert header in lines and lines[-1] == guide[-1]  # the table's columns and the source note
