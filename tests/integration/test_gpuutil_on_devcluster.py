"""gres/gpuutil and gres/gpumem with the devcluster's pretend GPUs: absent from sacct, not 0, and slurmkit's reader
(slurmkit/accounting/slurm_gpuutil.py) gives no figure rather than an idle GPU.

Slurm records them only through gpu/nvml (real NVIDIA GPUs); 25.11 lists both in AccountingStorageTRES by itself,
22.05 has neither, so on both versions a real one-GPU step must show none of them (docs/backends.md).
"""

from __future__ import annotations

import subprocess
import time

import pytest

from slurmkit.accounting.slurm_gpuutil import FIELDS, job_usage, parse_rows
from tests.conftest import as_user

pytestmark = pytest.mark.integration


def test_a_gpu_step_on_pretend_gpus_has_no_gpuutil_or_gpumem_and_no_usage_figure(devcluster):
    sub = as_user("alice", ["sbatch", "--parsable", "--wait", "-J", "sk-gpuutil-it", "--gpus-per-node=a100:1",
                            "--mem-per-gpu=100M", "-t", "2", "-o", "/dev/null", "--wrap", "srun sleep 2"],
                  cwd="/tmp", timeout=180)
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip().split(";")[0]
    rows: list[dict[str, str]] = []
    for _ in range(60):  # slurmdbd writes the step a moment after the job ends
        out = subprocess.run(["sacct", "-j", job, "-P", "-n", "--noconvert", "-o", ",".join(FIELDS)],
                             capture_output=True, text=True).stdout
        rows = parse_rows(out)
        if any(r["JobID"] == f"{job}.0" for r in rows):
            break
        time.sleep(0.5)
    step = next(r for r in rows if r["JobID"] == f"{job}.0")
    assert "gres/gpu=1" in step["AllocTRES"]  # a GPU step it is
    for r in rows:
        for key in ("TRESUsageInAve", "TRESUsageInMax"):
            assert "gres/gpuutil" not in r[key] and "gres/gpumem" not in r[key], (r["JobID"], key, r[key])
    assert job_usage(rows, summed_over_gpus=True) is None
