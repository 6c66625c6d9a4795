"""The NCCL value each rank of a real job gets when the site profile, env:, nccl.env: and the submitting shell
disagree: the rendered script exports one value per variable, by site profile < env: < nccl: < --set, and that
value (not the submitting shell's, which sbatch passes on) is what every rank of every node sees."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from tests.integration.jobs import DEVSITE, SK, fields, render_and_sbatch, wait

pytestmark = pytest.mark.integration

PRINT = ('echo "RANK=$SLURM_PROCID HOST=$SLURMD_NODENAME IFNAME=$NCCL_SOCKET_IFNAME TIMEOUT=$NCCL_IB_TIMEOUT '
         'HCA=$NCCL_IB_HCA"')
SPEC = f"""name: nccl-env
launcher: srun
nodes: 2
gpus_per_node: 2
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:02:00"
env:
  NCCL_SOCKET_IFNAME: "=lo"
  NCCL_IB_TIMEOUT: 21
nccl:
  env: {{NCCL_IB_TIMEOUT: 22}}
command: [bash, -c, {yaml.safe_dump(PRINT).strip()}]
"""


def test_every_rank_gets_the_one_value_the_rule_picks(tmp_path, devcluster):
    # the devcluster's profile says socket_ifname lo and NCCL_IB_HCA==mlx5_0,...; the submitting shell says eth9
    env = {**os.environ, "NCCL_SOCKET_IFNAME": "eth9", "NCCL_IB_TIMEOUT": "7"}
    job = render_and_sbatch(SPEC, tmp_path, env=env)
    script = subprocess.run([SK, "render", str(tmp_path / "job.yaml"), "--site", DEVSITE], check=True,
                            capture_output=True, text=True)
    assert [script.stdout.count(f"export {n}=") for n in ("NCCL_SOCKET_IFNAME", "NCCL_IB_TIMEOUT")] == [1, 1]
    assert "'lo' in the site profile" in script.stderr and "'21' in the spec's env.NCCL_IB_TIMEOUT" in script.stderr
    assert wait(job) == "COMPLETED"
    ranks = [fields(ln) for ln in (tmp_path / f"nccl-env-{job}.out").read_text().splitlines()
             if ln.startswith("RANK=")]
    assert sorted(int(r["RANK"]) for r in ranks) == [0, 1, 2, 3] and {r["HOST"] for r in ranks} == {"gpu01", "gpu02"}
    assert all(r["IFNAME"] == "=lo" and r["TIMEOUT"] == "22" and r["HCA"].startswith("=") for r in ranks), ranks
