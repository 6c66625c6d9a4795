"""What the devcluster's Slurm actually does (contrib/devcluster): nodes, GPU allocation, accounting, REST."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import as_user, running_slurm_version

pytestmark = pytest.mark.integration


def _run(cmd: list[str]) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60).stdout


def _wait_done(job_id: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _run(["squeue", "-h", "-j", job_id, "-o", "%T"]).strip()
        if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            return
        time.sleep(0.5)
    pytest.fail(f"job {job_id} did not finish in {timeout}s")


def test_both_nodes_idle_with_eight_a100(devcluster):
    lines = _run(["sinfo", "-h", "-N", "-p", "gpu", "-o", "%N %G"]).split("\n")
    gres = dict(line.split() for line in lines if line.strip())
    assert set(gres) == {"gpu01", "gpu02"}
    assert all(g.startswith("gpu:a100:8") for g in gres.values()), gres


def test_concurrent_two_gpu_jobs_on_one_node_get_different_gpus(devcluster):
    # alice's job must write its output: pytest's tmp_path lives under a root-only directory.
    outdir = Path(tempfile.mkdtemp(prefix="sk-devcluster-"))
    outdir.chmod(0o777)
    out = [outdir / f"job{i}.out" for i in range(2)]
    ids = []
    for path in out:
        res = as_user("alice", ["sbatch", "--parsable", "-w", "gpu01", "--gpus-per-node=a100:2", "-t", "1",
                                f"--output={path}", "--wrap",
                                'echo "CVD=$CUDA_VISIBLE_DEVICES JG=$SLURM_JOB_GPUS"; sleep 3'],
                      timeout=60)
        assert res.returncode == 0, res.stderr
        ids.append(res.stdout.strip().split(";")[0])
    for job_id in ids:
        _wait_done(job_id)
    seen = []
    for path in out:
        m = re.search(r"CVD=(\S+) JG=(\S+)", path.read_text())
        assert m, path.read_text()
        assert len(m.group(1).split(",")) == 2
        seen.append(set(m.group(2).split(",")))
    assert len(seen[0]) == 2 and not seen[0] & seen[1], seen
    tres = _run(["sacct", "-X", "-n", "-P", "-j", ids[0], "-o", "AllocTRES"])
    assert "gres/gpu:a100=2" in tres, tres


def test_rest_ping_as_alice(devcluster):
    # The newest API each Slurm serves: 22.05 openapi/v0.0.38 ("ping": "UP"), 25.11 data_parser v0.0.44
    # ("pinged": "UP", "responding": true).
    old = (running_slurm_version() or (25, 11, 0)) < (23, 0, 0)
    res = as_user("alice", ["curl", "-sf", "--unix-socket", str(devcluster / "rest.sock"),
                            f"http://localhost/slurm/{'v0.0.38' if old else 'v0.0.44'}/ping"], timeout=30)
    assert res.returncode == 0, res.stderr
    ping = json.loads(res.stdout)["pings"][0]
    assert (ping["ping"] == "UP") if old else (ping["pinged"] == "UP" and ping["responding"] is True), ping


def test_up_is_idempotent_on_running_cluster(devcluster, repo_root):
    res = subprocess.run([str(repo_root / "contrib/devcluster/up")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "starting" not in res.stdout, res.stdout
