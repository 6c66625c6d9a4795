"""`sk doctor --json` run INSIDE real devcluster jobs with GPUs allocated: the allocated-vs-visible check and
the binding check must report exactly what Slurm (and the bind step) gave the rank, which each rank also
records independently (environment and /proc/self/status) next to the doctor's report.

The devcluster's GPUs are pretend (character devices, no driver), so the driver/NCCL checks SKIP here; the
GPU allocation, the environment and the CPU binding are real Slurm and kernel behaviour."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from slurmkit.config.units import parse_cpulist
from slurmkit.site.model import load_site
from tests.integration.jobs import DEVSITE, SK, render_and_sbatch, wait
from tests.integration.test_binding_on_devcluster import _local_site

pytestmark = pytest.mark.integration

# Each rank: the doctor's JSON, then what the rank itself sees, for the test to compare.
RECORD = (SK + " doctor --json --site {site} > doctor-$SLURM_PROCID.json; echo $? > rc-$SLURM_PROCID.txt; "
          "{{ echo STEP=$SLURM_STEP_GPUS JOB=$SLURM_JOB_GPUS CVD=$CUDA_VISIBLE_DEVICES LOCALID=$SLURM_LOCALID; "
          "grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status; }} > seen-$SLURM_PROCID.txt")


def _two_rank_spec(name: str, site: str) -> str:
    """Recipe A, 2 ranks on 2 GPUs, each running RECORD (so through the rendered script's bind step)."""
    return (f"name: {name}\nlauncher: srun\ngpus_per_node: 2\ncpus_per_gpu: 1\nmem_per_gpu: 200M\n"
            f'time: "00:03:00"\ncommand: [bash, -c, {json.dumps(RECORD.format(site=site))}]\n')


def _rank_files(workdir: Path, rank: int) -> tuple[dict, int, dict[str, str]]:
    report = json.loads((workdir / f"doctor-{rank}.json").read_text())
    rc = int((workdir / f"rc-{rank}.txt").read_text())
    seen: dict[str, str] = {}
    for line in (workdir / f"seen-{rank}.txt").read_text().splitlines():
        if line.startswith("STEP="):
            seen.update(kv.split("=", 1) for kv in line.split())
        else:
            k, _, v = line.partition(":")
            seen[k] = v.strip()
    return report, rc, seen


def _online() -> list[int]:
    return parse_cpulist(Path("/sys/devices/system/cpu/online").read_text().strip())


def _assert_gpus_check(gpus: dict, seen: dict[str, str]) -> None:
    """The allocated-vs-visible check says exactly what this rank's environment held."""
    allocated = (seen["STEP"] or seen["JOB"]).split(",")
    assert gpus["details"]["allocated"] == allocated
    assert gpus["details"]["allocated_from"] == ("SLURM_STEP_GPUS" if seen["STEP"] else "SLURM_JOB_GPUS")
    if seen["CVD"]:
        assert gpus["status"] == "PASS" and gpus["details"]["cuda_visible_devices"] == seen["CVD"], gpus
        assert f"CUDA_VISIBLE_DEVICES={seen['CVD']} ({len(allocated)} each)" in gpus["reason"]
    else:  # no nvidia-smi here, so whether a device cgroup confines the step cannot be told: a warning
        assert gpus["status"] == "WARN" and gpus["details"]["cuda_visible_devices"] is None, gpus
        assert "CUDA_VISIBLE_DEVICES is unset" in gpus["reason"]


def test_two_ranks_report_the_gpus_and_cpus_slurm_gave_them(tmp_path, devcluster):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --gpus-per-node=a100:2 --ntasks-per-node=2 --cpus-per-task=1\n"
                      "#SBATCH --mem-per-gpu=200M --time=3 --output=job-%j.out\n"
                      f"srun bash -c {shlex.quote(RECORD.format(site=DEVSITE))}\n")
    job = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout.strip()
    assert wait(job) == "COMPLETED"
    nt = load_site(DEVSITE).node_types["devnode"]
    online = _online()
    for rank in (0, 1):
        report, rc, seen = _rank_files(tmp_path, rank)
        by = {c["name"]: c for c in report["checks"]}
        # a plain srun step: Slurm sets SLURM_STEP_GPUS and CUDA_VISIBLE_DEVICES for both ranks
        assert seen["STEP"] and seen["CVD"], seen
        _assert_gpus_check(by["gpus"], seen)
        # the binding the rank has, and the one the site config gives it
        b = by["binding"]
        allocated = seen["STEP"].split(",")
        want_gpu = int(allocated[int(seen["LOCALID"]) % len(allocated)])
        assert b["details"]["cpus_allowed"] == seen["Cpus_allowed_list"]
        assert b["details"]["mems_allowed"] == seen["Mems_allowed_list"]
        assert b["details"]["gpu"] == want_gpu and b["details"]["local_rank"] == int(seen["LOCALID"])
        site_cpus = nt.gpu_by_index(want_gpu).cpu_list
        assert parse_cpulist(b["details"]["expected_cpus"]) == site_cpus
        # the devcluster's node type claims 64 CPUs; this machine has fewer, and the doctor must say so
        if not set(site_cpus) <= set(online):
            assert b["status"] == "FAIL" and "lists CPUs this machine does not have" in b["reason"]
        assert by["driver"]["status"] == "SKIP" and "no NVIDIA driver here" in by["driver"]["reason"]
        # inside the job step too, the node's interfaces are read for real: socket_ifname lo selects lo
        assert by["ifname"]["status"] == "PASS" and by["ifname"]["details"]["interfaces"]["lo"] is True
        assert rc == report["exit_status"] == 2  # the binding FAIL (and the absent HCAs) make it 2


def test_sk_rendered_step_gives_every_rank_the_jobs_gpus(tmp_path, devcluster):
    # sk's recipe A step has no --gpu-bind (with --gpu-bind=none, 22.05 unsets CUDA_VISIBLE_DEVICES in the tasks):
    # each rank sees the job's GPUs, and the doctor in each rank says so
    job = render_and_sbatch(_two_rank_spec("doctor", DEVSITE), tmp_path)
    assert wait(job) == "COMPLETED"
    for rank in (0, 1):
        report, _, seen = _rank_files(tmp_path, rank)
        by = {c["name"]: c for c in report["checks"]}
        assert seen["CVD"] and by["gpus"]["status"] == "PASS", by["gpus"]
        _assert_gpus_check(by["gpus"], seen)
        assert by["cuda_env"]["details"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # the script exports it
        assert by["binding"]["details"]["gpu"] == int(seen["JOB"].split(",")[int(seen["LOCALID"])])


def test_rank_bound_by_the_bind_step_passes_the_binding_check(tmp_path, devcluster):
    # A site whose node type is this machine's real CPUs, so the bind step really binds (numactl) and the
    # doctor inside the rank sees the kernel affinity it set.
    site = _local_site(tmp_path)
    ncpu = os.cpu_count() or 1
    job = render_and_sbatch(_two_rank_spec("doctorbound", site), tmp_path, site=site)
    assert wait(job) == "COMPLETED"
    for rank in (0, 1):
        report, _, seen = _rank_files(tmp_path, rank)
        b = {c["name"]: c for c in report["checks"]}["binding"]
        gpu = int((seen["STEP"] or seen["JOB"]).split(",")[int(seen["LOCALID"]) % 2])
        assert b["details"]["gpu"] == gpu
        assert parse_cpulist(seen["Cpus_allowed_list"]) == [gpu % ncpu]  # what numactl really set
        assert b["status"] == "PASS" and "as sk's bind step chose" in b["reason"], b
        assert b["details"]["cpus_allowed"] == seen["Cpus_allowed_list"]
        _assert_gpus_check({c["name"]: c for c in report["checks"]}["gpus"], seen)


def test_doctor_outside_a_job_on_the_login_host(devcluster):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CUDA_"))}
    res = subprocess.run([SK, "doctor", "--site", DEVSITE], capture_output=True, text=True, env=env, timeout=60)
    lines = res.stdout.splitlines()
    assert [ln.split()[1] for ln in lines] == ["site", "driver", "nccl", "gpus", "cuda_env", "hcas", "ifname",
                                               "nccl_env", "binding"]
    # the devcluster's fabric.socket_ifname is lo, which is up here
    assert any(ln.startswith("PASS  ifname    socket_ifname 'lo' selects lo (up)") for ln in lines), lines
    assert any(ln.startswith("SKIP  gpus      not inside a Slurm job") for ln in lines)
    assert res.returncode in (0, 1, 2) and "Traceback" not in res.stderr
