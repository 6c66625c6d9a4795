"""What Slurm actually did with rendered scripts: ranks, GPUs, bindings, sweeps, dependencies, requeue.

Every job here is a real job on the devcluster (contrib/devcluster). The devcluster's GPUs are pretend
(character devices), so the ranks report the GPU/NUMA/CPU/HCA they *would* bind to and the test compares it
with site_config/devcluster.yaml; the CPU binding itself is exercised for real with a site config describing
this machine's real CPUs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from slurmkit.config.units import parse_cpulist
from slurmkit.site.model import load_site
from tests.integration.jobs import DEVSITE, MIN_PATH, fields, render_and_sbatch, wait

pytestmark = pytest.mark.integration

PRINT = ('echo "RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE MASTER_ADDR=$MASTER_ADDR GPU=$SK_GPU '
         'CUDA_DEVICE=$SK_CUDA_DEVICE CVD=${CUDA_VISIBLE_DEVICES:-unset} JOB_GPUS=$SLURM_JOB_GPUS '
         'NUMA=$SK_NUMA CPUS=$SK_CPUS HCA=$SK_HCA HOST=$SLURMD_NODENAME AFF=$(taskset -cp $$ | cut -d: -f2 | tr -d '
         "' ') POLICY=$(numactl --show | awk '/^policy/ {print $2}')\"")


def _ranks(out_file) -> list[dict[str, str]]:
    return [fields(line) for line in out_file.read_text().splitlines() if line.startswith("RANK=")]


def test_two_node_sixteen_rank_job_binds_every_rank_per_site_config(tmp_path, devcluster):
    job = render_and_sbatch(f"""
name: ranks
launcher: srun
nodes: 2
gpus_per_node: 8
cpus_per_gpu: 1
mem_per_gpu: 1G
time: "00:03:00"
command: [bash, -c, {yaml.safe_dump(PRINT).strip()}]
""", tmp_path)
    assert wait(job) == "COMPLETED"
    ranks = _ranks(tmp_path / f"ranks-{job}.out")
    assert sorted(int(r["RANK"]) for r in ranks) == list(range(16))
    nt = load_site(DEVSITE).node_types["devnode"]
    hosts = {r["HOST"] for r in ranks}
    assert hosts == {"gpu01", "gpu02"}
    for r in ranks:
        g = nt.gpu_by_index(int(r["GPU"]))
        assert int(r["LOCAL_RANK"]) == int(r["RANK"]) % 8
        assert int(r["GPU"]) == int(r["LOCAL_RANK"])  # whole node: local rank i gets GPU i
        assert (int(r["NUMA"]), r["CPUS"], r["HCA"]) == (g.numa, g.cpus, g.hca)
        assert r["WORLD_SIZE"] == "16" and r["MASTER_ADDR"] == "gpu01"
        assert r["CVD"] == r["JOB_GPUS"] == "0,1,2,3,4,5,6,7"  # every rank sees all of its node's job GPUs
        assert r["CUDA_DEVICE"] == r["LOCAL_RANK"]


def _local_site(tmp_path) -> str:
    """A site whose node type has this machine's real CPUs, so numactl really binds."""
    ncpu = os.cpu_count() or 1
    site = yaml.safe_load(Path(DEVSITE).read_text())
    nt = site["node_types"]["devnode"]
    nt.update(sockets=1, cores_per_socket=ncpu, threads_per_core=1, numa_nodes=1)
    for g in nt["gpus"]:
        g.update(numa=0, cpus=str(g["index"] % ncpu))
    site["partitions"]["gpu"]["default_cpus_per_gpu"] = 1
    path = tmp_path / "local-site.yaml"
    path.write_text(yaml.safe_dump(site))
    return str(path)


def test_bind_step_really_execs_numactl_with_the_gpus_cpus(tmp_path, devcluster):
    ncpu = os.cpu_count() or 1
    job = render_and_sbatch(f"""
name: realbind
launcher: srun
gpus_per_node: 2
cpus_per_gpu: 1
mem_per_gpu: 1G
time: "00:03:00"
command: [bash, -c, {yaml.safe_dump(PRINT).strip()}]
""", tmp_path, site=_local_site(tmp_path))
    assert wait(job) == "COMPLETED"
    ranks = _ranks(tmp_path / f"realbind-{job}.out")
    assert len(ranks) == 2
    for r in ranks:
        expected = int(r["GPU"]) % ncpu
        assert parse_cpulist(r["AFF"]) == [expected], r  # the kernel's affinity of the rank's process
        assert r["POLICY"] == "preferred"  # binding auto = CPUs + preferred local memory


def test_partial_node_job_binds_to_the_gpus_it_was_given(tmp_path, devcluster):
    holder = subprocess.run(["sbatch", "--parsable", "--nodelist=gpu01", "--gpus-per-node=a100:2", "-n1", "-c1",
                             "--mem=1G", "-t", "5", "--wrap", "sleep 60", "-o", "/dev/null"],
                            capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()
    try:
        held_idx = None
        for _ in range(120):
            detail = subprocess.run(["scontrol", "show", "job", "-d", holder], capture_output=True, text=True).stdout
            m = re.search(r"GRES=gpu:a100:2\(IDX:([0-9,-]+)\)", detail)
            if "JobState=RUNNING" in detail and m:
                held_idx = set(parse_cpulist(m.group(1)))
                break
            time.sleep(0.5)
        assert held_idx, "the holder job did not start"
        job = render_and_sbatch(f"""
name: partial
launcher: srun
gpus_per_node: 2
cpus_per_gpu: 1
mem_per_gpu: 1G
time: "00:03:00"
sbatch_extra: {{nodelist: gpu01}}
command: [bash, -c, {yaml.safe_dump(PRINT).strip()}]
""", tmp_path)
        assert wait(job) == "COMPLETED"
    finally:
        subprocess.run(["scancel", holder])
    ranks = _ranks(tmp_path / f"partial-{job}.out")
    gpus = sorted(int(r["GPU"]) for r in ranks)
    assert len(gpus) == 2 and not set(gpus) & held_idx, (gpus, held_idx)  # not the GPUs the holder job has
    nt = load_site(DEVSITE).node_types["devnode"]
    for r in ranks:
        g = nt.gpu_by_index(int(r["GPU"]))
        assert (int(r["NUMA"]), r["CPUS"], r["HCA"]) == (g.numa, g.cpus, g.hca)
        # Both ranks see both job GPUs (and no other); the rank's CUDA ordinal is its GPU's place among them.
        visible = r["CVD"].split(",")
        assert r["CVD"] == r["JOB_GPUS"] and sorted(int(i) for i in visible) == gpus, r
        assert visible[int(r["CUDA_DEVICE"])] == r["GPU"], r


def test_hundred_task_sweep_is_one_array_and_each_task_gets_its_parameters(tmp_path, devcluster):
    job = render_and_sbatch("""
name: sweep
launcher: none
gpus_per_node: 1
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:02:00"
array: {grid: {lr: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], tag: ["a b", "c;d", "$(x)", "'q'", "e",
        "f", "g", "h", "i", "j"]}, max_parallel: 50}
command: [bash, -c, 'echo "TASK=$SLURM_ARRAY_TASK_ID LR=$1 TAG=$2" > "task-$SLURM_ARRAY_TASK_ID.txt"', sk, "{lr}",
          "{tag}"]
""", tmp_path)
    deadline = time.time() + 240
    while time.time() < deadline and len(list(tmp_path.glob("task-*.txt"))) < 100:
        time.sleep(1)
    from slurmkit.spec import load_spec

    spec, _ = load_spec(str(tmp_path / "job.yaml"))
    for i in range(100):
        p = spec.array.task(i)
        assert (tmp_path / f"task-{i}.txt").read_text() == f"TASK={i} LR={p['lr']} TAG={p['tag']}\n"
    array_ids = subprocess.run(["sacct", "-n", "-X", "-P", "-j", str(job), "-o", "JobID"], capture_output=True,
                               text=True).stdout.split()
    assert all(a.startswith(f"{job}_") for a in array_ids)  # one submission, one array job


def test_dependency_order_holds(tmp_path, devcluster):
    first = render_and_sbatch("""
name: first
launcher: none
gpus_per_node: 1
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:02:00"
command: [bash, -c, "sleep 3; date +%s.%N > first.txt"]
""", tmp_path, name="first.yaml")
    second = render_and_sbatch(f"""
name: second
launcher: none
gpus_per_node: 1
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:02:00"
dependency: {{afterok: [{first}]}}
command: [bash, -c, "date +%s.%N > second.txt"]
""", tmp_path, name="second.yaml")
    assert wait(second) == "COMPLETED"
    assert float((tmp_path / "second.txt").read_text()) > float((tmp_path / "first.txt").read_text())


def _wait_for_log(out: Path, text: str, timeout: float = 90) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if out.exists() and text in out.read_text():
            return
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not in {out}: {out.read_text() if out.exists() else '(no file)'}")


def test_preempt_signal_lets_the_step_checkpoint_then_requeues_once_with_restart_count(tmp_path, devcluster):
    # The program takes 3 s to "checkpoint" after the signal; the requeue must wait for it (a CI run once saw the
    # old template requeue at once and kill the step before its handler had printed anything).
    job = render_and_sbatch("""
name: requeue
launcher: srun
gpus_per_node: 1
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:05:00"
preempt: {signal: USR1, grace: 60, requeue: true, max_restarts: 1}
command: [bash, -c, 'trap "sleep 3; echo CHECKPOINT_SAVED restart=${SLURM_RESTART_COUNT:-0}; exit 0" USR1;
          echo START restart=${SLURM_RESTART_COUNT:-0}; for i in $(seq 300); do sleep 0.2; done']
""", tmp_path)
    out = tmp_path / f"requeue-{job}.out"
    _wait_for_log(out, "START restart=0")
    time.sleep(1)
    subprocess.run(["scancel", "--batch", "--signal=USR1", str(job)], check=True)
    _wait_for_log(out, "requeueing job")
    # requeued: same job id, log appended (--open-mode=append); Slurm holds it back for cred_expire (devcluster: 30 s)
    _wait_for_log(out, "START restart=1", timeout=150)
    text = out.read_text()
    assert "CHECKPOINT_SAVED restart=0" in text
    assert text.index("CHECKPOINT_SAVED restart=0") < text.index("requeueing job")  # checkpoint first, then requeue
    subprocess.run(["scancel", "--batch", "--signal=USR1", str(job)], check=True)
    _wait_for_log(out, "restart limit (1) reached")
    assert wait(job) == "COMPLETED"  # the step saved and exited 0; no third run
    assert out.read_text().count("START restart=") == 2


def test_preempt_requeues_a_step_that_outlives_its_grace(tmp_path, devcluster):
    # A program that ignores the signal must not take the job down with it at the time limit: the watchdog
    # requeues grace - max(5, grace/10) seconds after the signal (5 s for grace 10) while the step still runs.
    job = render_and_sbatch("""
name: stubborn
launcher: srun
gpus_per_node: 1
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:05:00"
preempt: {signal: USR1, grace: 10, requeue: true, max_restarts: 1}
command: [bash, -c, 'trap "echo IGNORED" USR1; echo START restart=${SLURM_RESTART_COUNT:-0};
          for i in $(seq 600); do sleep 0.2; done']
""", tmp_path)
    out = tmp_path / f"stubborn-{job}.out"
    _wait_for_log(out, "START restart=0")
    time.sleep(1)
    signalled = time.monotonic()
    subprocess.run(["scancel", "--batch", "--signal=USR1", str(job)], check=True)
    _wait_for_log(out, "IGNORED")
    _wait_for_log(out, "requeueing job", timeout=30)
    assert time.monotonic() - signalled >= 4.5  # the watchdog waited (5 s), it did not requeue at once
    _wait_for_log(out, "START restart=1", timeout=150)
    subprocess.run(["scancel", str(job)])


RANK_THAT_CHECKPOINTS = r"""
import os, signal, sys, time
rank, restart = os.environ["RANK"], os.environ.get("SLURM_RESTART_COUNT", "0")
def save(signum, frame):
    time.sleep(3)
    print(f"CHECKPOINT_SAVED rank={rank} restart={restart}", flush=True)
    sys.exit(0)
signal.signal(signal.SIGUSR1, save)
print(f"START rank={rank} restart={restart}", flush=True)
for _ in range(1500):
    time.sleep(0.2)
"""


def test_preempt_under_torchrun_keeps_the_agent_alive_while_every_rank_checkpoints(tmp_path, devcluster):
    # srun signals every process of the step, torchrun's agent included, and the agent does not handle USR1
    # (tests/integration/bin/torchrun stands in for it: no PyTorch here). Unless the agent ignores the signal it dies
    # at once: the step fails ("task 0: User defined signal 1") though every rank saved and exited 0, and the ranks
    # are orphans that live on only until Slurm cleans up the step.
    (tmp_path / "rank.py").write_text(RANK_THAT_CHECKPOINTS)
    bindir = Path(__file__).parent / "bin"
    job = render_and_sbatch(f"""
name: tr
launcher: torchrun
gpus_per_node: 2
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:05:00"
env: {{PATH: "{bindir}:{Path(sys.executable).parent}:{MIN_PATH}"}}
preempt: {{signal: USR1, grace: 60, requeue: true, max_restarts: 0}}
command: [{tmp_path / "rank.py"}]
""", tmp_path)
    out = tmp_path / f"tr-{job}.out"
    _wait_for_log(out, "START rank=1 restart=0")
    _wait_for_log(out, "START rank=0 restart=0")
    subprocess.run(["scancel", "--batch", "--signal=USR1", str(job)], check=True)
    assert wait(job) == "COMPLETED"  # the agent waited for its ranks, which saved and exited 0
    text = out.read_text()
    assert "CHECKPOINT_SAVED rank=0 restart=0" in text and "CHECKPOINT_SAVED rank=1 restart=0" in text, text
    assert "User defined signal" not in text and "restart limit (0) reached" in text, text


LEAKED = {"SLURM_GPU_BIND": "map_gpu:0", "SLURM_TRES_BIND": "gres/gpu:map_gpu:0"}


def test_binding_variables_of_the_submitting_shell_do_not_rebind_the_ranks(tmp_path, devcluster):
    """A shell inside another allocation (salloc --gpu-bind=...) carries binding variables that sbatch passes on
    to the job and srun reads (SLURM_TRES_BIND from 23.11): the script unsets them, so every rank keeps all GPUs."""
    env = {**os.environ, **LEAKED}
    control = render_and_sbatch("""
name: leak-control
launcher: none
gpus_per_node: 2
cpus_per_gpu: 1
mem_per_gpu: 1G
time: "00:02:00"
command: [srun, --ntasks=2, --cpus-per-task=1, --cpu-bind=none, bash, -c,
          'echo "RANK=$SLURM_PROCID CVD=$CUDA_VISIBLE_DEVICES"']
""", tmp_path, name="control.yaml", env=env)
    job = render_and_sbatch(f"""
name: leak
launcher: srun
gpus_per_node: 2
cpus_per_gpu: 1
mem_per_gpu: 1G
time: "00:02:00"
command: [bash, -c, {yaml.safe_dump(PRINT).strip()}]
""", tmp_path, env=env)
    assert wait(control) == "COMPLETED" and wait(job) == "COMPLETED"
    # The control step (launcher: none, a bare srun) shows the leaked variables really bind on this Slurm...
    seen = [r["CVD"].split(",") for r in _ranks(tmp_path / f"leak-control-{control}.out")]
    assert len(seen) == 2 and all(len(gpus) == 1 for gpus in seen), seen
    # ...and the rendered launcher step does not.
    ranks = _ranks(tmp_path / f"leak-{job}.out")
    assert len(ranks) == 2 and all(r["CVD"] == r["JOB_GPUS"] and len(r["CVD"].split(",")) == 2 for r in ranks), ranks


def test_single_task_jobs_see_all_their_gpus(tmp_path, devcluster):
    """25.11 applies GPU binding to single-task steps too: the batch shell (launcher: none) and torchrun's one
    task per node (its ranks are the agent's children) must still see every GPU the job got on its node."""
    bindir = Path(__file__).parent / "bin"
    none = render_and_sbatch("""
name: one
launcher: none
gpus_per_node: 4
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:02:00"
command: [bash, -c, 'echo "RANK=0 CVD=${CUDA_VISIBLE_DEVICES:-unset} JOB_GPUS=$SLURM_JOB_GPUS"']
""", tmp_path, name="none.yaml")
    tr = render_and_sbatch(f"""
name: tr
launcher: torchrun
gpus_per_node: 4
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:02:00"
env: {{PATH: "{bindir}:{Path(sys.executable).parent}:{MIN_PATH}"}}
command: [bash, -c, {yaml.safe_dump(PRINT).strip()}]
""", tmp_path)
    assert wait(none) == "COMPLETED" and wait(tr) == "COMPLETED"
    for name, job, n in (("one", none, 1), ("tr", tr, 4)):
        ranks = _ranks(tmp_path / f"{name}-{job}.out")
        assert len(ranks) == n, (name, ranks)
        for r in ranks:
            assert r["CVD"] == r["JOB_GPUS"] and len(r["CVD"].split(",")) == 4, (name, r)
