"""`sk admin notify idle` on the real devcluster: alice's running job holds simulated GPUs, the node samplers that
Slurm's Prolog started write their live files, the real `sk admin notify idle` reads them, asks the real scontrol,
and mails a real SMTP server (aiosmtpd) started here on 127.0.0.1.

The simulated source picks each GPU's profile from (job run, node, GPU), so which of the job's GPUs idle is known
in advance (SimulatedSource's own seed): the test resubmits until the job has an "idle" GPU, and checks the
notice names exactly those. The devcluster's store is shared (and must not be migrated ahead of main): every
notify run here uses a private store, and the messages of other users' idle jobs that reach the server are told
apart by their X-Slurmkit-Job header.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from slurmkit.accounting import sampler
from slurmkit.accounting.metrics.simulated import gpu_seed, profile_of
from slurmkit.site.model import load_site
from slurmkit.store.db import open_store
from tests.conftest import as_user
from tests.integration.jobs import DEVSITE, SK, wait
from tests.smtp_server import smtp_server

pytestmark = pytest.mark.integration

IDLE_FOR = "6s"  # the devcluster samples every second


def _site(tmp_path: Path, port: int, store: str) -> str:
    data = yaml.safe_load(Path(DEVSITE).read_text())
    data["accounting"]["store"] = str(tmp_path / store)
    data["notify"] = {**data["notify"], "smtp_host": "127.0.0.1", "smtp_port": port, "idle_for": IDLE_FOR}
    path = tmp_path / f"site-{store}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _notify(site: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SK, "admin", "notify", "idle", "--site", site, *args], capture_output=True, text=True,
                          timeout=120)


def _run_dirs(state_dir: Path, job: int) -> list[Path]:
    return sorted(state_dir.glob(f"*/devcluster-{job}-0"))


def _submit_until_idle_gpu(state_dir: Path, tries: int = 8) -> tuple[int, set[tuple[str, int]]]:
    """alice's 4-GPU job, resubmitted until the simulated source gives at least one of its GPUs the idle profile.
    Returns (job id, {(node, GPU index)} of the idle-profile GPUs), once every GPU has 2 readings."""
    for _ in range(tries):
        res = as_user("alice", ["sbatch", "--parsable", "-J", f"sknotify-{uuid.uuid4().hex[:8]}", "-t", "3",
                                "--gpus=4", "-o", "/dev/null", "--chdir", "/tmp", "--wrap", "sleep 170"],
                      timeout=60)
        assert res.returncode == 0, res.stderr
        job = int(res.stdout.strip().split(";")[0])
        deadline = time.monotonic() + 90
        gpus: list[tuple[str, int]] = []
        while time.monotonic() < deadline:
            gpus = []
            for d in _run_dirs(state_dir, job):
                meta, lines, _ = sampler.read_state(str(d))
                if meta and len(lines) >= 2:
                    gpus += [(d.parent.name, g["index"]) for g in meta["gpus"]]
            if len(gpus) == 4:
                break
            time.sleep(0.5)
        assert len(gpus) == 4, f"job {job}: no sampler readings for its 4 GPUs under {state_dir}"
        idle = {(n, i) for n, i in gpus if profile_of(gpu_seed(f"devcluster/{job}/0", n, i)) == "idle"}
        if idle:
            return job, idle
        subprocess.run(["scancel", str(job)], timeout=30)
    raise AssertionError(f"{tries} jobs in a row without an idle-profile GPU")


def _ours(server, job: int) -> list:
    return [r for r in server.received if r.message["X-Slurmkit-Job"] == f"devcluster/{job}/0"]


def test_one_notice_per_running_job_and_a_refused_one_is_sent_by_the_next_run(devcluster, tmp_path):
    state_dir = Path(load_site(DEVSITE).accounting.state_dir)
    job, idle_gpus = _submit_until_idle_gpu(state_dir)
    try:
        time.sleep(8)  # let the idle stretch pass --idle-for (6 s at one reading per second)
        with smtp_server() as (server, port):
            site = _site(tmp_path, port, "a.db")
            first = _notify(site, "--json")
            assert first.returncode == 0, first.stderr
            [mine] = [j for j in json.loads(first.stdout)["jobs"] if j["job_id"] == job]
            assert (mine["status"], mine["phase"], mine["user"], mine["gpus"]) == ("sent", "running", "alice", 4)
            [got] = _ours(server, job)  # exactly one message for the job
            assert got.recipients == ["alice@devcluster.example"]
            assert got.message["To"] == "alice@devcluster.example"
            assert f"job {job}" in got.message["Subject"]
            text = got.message.get_content()
            named = {(line.split()[0], int(line.split()[1])) for line in text.splitlines()
                     if line.startswith("  gpu0")}
            assert named == idle_gpus, text  # the GPUs the simulated source keeps idle, and only those
            assert f"request gpus: {4 - len(idle_gpus)}" in " ".join(text.split()) or len(idle_gpus) == 4
            assert "SIMULATED" in text
            keys = [r.message["X-Slurmkit-Job"] for r in server.received]
            assert len(keys) == len(set(keys))  # one message per job, whoever's

            second = _notify(site)
            assert second.returncode == 0, second.stderr
            assert len(_ours(server, job)) == 1  # nothing sent again for the job
            again = [r.message["X-Slurmkit-Job"] for r in server.received[len(keys):]]
            assert not set(again) & set(keys)  # nor for any other job noticed by the first run

        with smtp_server(refuse=1, refuse_job=f"devcluster/{job}/0") as (server, port):
            site = _site(tmp_path, port, "b.db")  # a store that has sent nothing yet
            refused = _notify(site)
            assert refused.returncode == 1 and f"failed: job {job}" in refused.stderr and "451" in refused.stderr
            assert server.refused == 1 and _ours(server, job) == []
            with open_store(str(tmp_path / "b.db"), migrate=False) as store:
                assert store.execute("SELECT COUNT(*) FROM notices WHERE job_id = ?", (job,)).fetchone()[0] == 0
            retried = _notify(site)
            assert retried.returncode == 0, retried.stderr
            [got] = _ours(server, job)
            assert got.recipients == ["alice@devcluster.example"]
            assert _notify(site).returncode == 0 and len(_ours(server, job)) == 1
    finally:
        subprocess.run(["scancel", str(job)], timeout=30)
    assert wait(job) == "CANCELLED"
