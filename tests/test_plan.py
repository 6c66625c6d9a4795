"""Planner decisions on the shipped site configs (topology values are the real DGX A100 map from the notes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmkit.config.source import loads
from slurmkit.errors import SpecError
from slurmkit.plan import make_plan
from slurmkit.site.model import load_site
from slurmkit.spec import spec_from_source

ROOT = Path(__file__).resolve().parents[1]


def plan_for(text: str, site: str = "dgx-a100.yaml"):
    src = loads(text, "t.yaml")
    return make_plan(spec_from_source(src), load_site(ROOT / "site_config" / site), src)


def test_dgx_a100_topology_gpu0_is_numa3_cpus_48_63_with_smt_and_mlx5_0():
    plan = plan_for("name: t\ncommand: [x]\n")
    g0 = plan.topology[0]
    assert (g0.numa, g0.cpus, g0.hca) == (3, "48-63,176-191", "mlx5_0")
    assert [g.numa for g in plan.topology] == [3, 3, 1, 1, 7, 7, 5, 5]


def test_srun_launcher_requests_gpus_per_node_and_one_task_per_gpu():
    plan = plan_for("name: t\nlauncher: srun\nnodes: 2\ncpus_per_gpu: 8\ncommand: [x]\n")
    assert plan.sbatch["gpus-per-node"] == "a100:8"
    assert plan.sbatch["ntasks-per-node"] == "8"
    assert plan.sbatch["cpus-per-task"] == "8"
    assert "gpus-per-task" not in plan.sbatch
    # no --gpu-bind on the step: Slurm 22.05 unsets CUDA_VISIBLE_DEVICES in the tasks of a --gpu-bind=none step
    assert not any(o.startswith("--gpu-bind") for o in plan.srun) and "--cpus-per-task=8" in plan.srun
    assert plan.world_size == 16


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_agent_launchers_are_one_task_per_node_with_all_cpus_of_its_gpus(launcher):
    plan = plan_for(f"name: t\nlauncher: {launcher}\nnodes: 2\ncpus_per_gpu: 16\ncommand: [train.py]\n")
    assert plan.sbatch["ntasks-per-node"] == "1"
    assert plan.sbatch["cpus-per-task"] == "128"
    assert "--cpus-per-task=128" in plan.srun and plan.world_size == 16


def test_accelerate_step_passes_accelerates_own_options_with_the_total_process_count():
    from slurmkit.render import render
    script = render(plan_for("name: t\nlauncher: accelerate\nnodes: 2\ncommand: [train.py, --lr, '1']\n"))
    step = next(line for line in script.splitlines() if line.startswith("srun "))
    # --num_processes is accelerate's total over all machines; the machine rank is read per node, in the step
    assert ("""bash -c 'exec accelerate launch --machine_rank="$SLURM_NODEID" "$@"' sk_agent --multi_gpu """
            """--num_machines=2 --num_processes=16 --main_process_ip="$MASTER_ADDR" """
            """--main_process_port="$MASTER_PORT" --no_python bash -c 'sk_bind "$@"' sk_bind python train.py --lr 1"""
            ) in step, step
    assert "lrank=$LOCAL_RANK  # set by accelerate" in script and "export WORLD_SIZE=16" in script


@pytest.mark.parametrize("launcher", ["srun", "mpi", "none", "torchrun", "accelerate"])
def test_a_py_command_runs_under_python_with_every_launcher(launcher):
    """One rule: a command whose first word ends in .py is run as `python <it>` under every launcher (under srun
    or mpi `train.py` alone would fail on the node; torchrun/accelerate run it with their no-python option)."""
    from slurmkit.render import render
    script = render(plan_for(f"name: t\nlauncher: {launcher}\ncommand: [train.py, --lr, '1']\n"))
    assert "python train.py --lr 1" in script
    assert " train.py" not in script.replace("python train.py", "")
    other = render(plan_for(f"name: t\nlauncher: {launcher}\ncommand: [./run.sh, x.py]\n"))
    assert "python" not in other.split("./run.sh")[1].split("\n")[0]


@pytest.mark.parametrize(("signal", "wrapped"), [("USR1", True), ("USR2", True), ("TERM", False)])
def test_torchrun_agent_ignores_a_user_preempt_signal_but_keeps_its_own_term_handler(signal, wrapped):
    # srun signals every process of the step; torchrun handles TERM itself but dies of USR1/USR2 (default action).
    from slurmkit.render import render
    script = render(plan_for(f"name: t\nlauncher: torchrun\npreempt: {{signal: {signal}}}\ncommand: [train.py]\n"))
    step = next(line for line in script.splitlines() if line.startswith("sk_run srun "))
    assert (f"bash -c 'trap \"\" {signal}; exec \"$@\"' sk_agent torchrun " in step) is wrapped
    assert "torchrun --nnodes" in step
    plain = render(plan_for("name: t\nlauncher: torchrun\ncommand: [train.py]\n"))
    assert "sk_agent" not in plain and "trap" not in plain


@pytest.mark.parametrize(("signal", "wrapped"), [("USR1", True), ("USR2", True), ("TERM", False)])
def test_accelerate_agent_ignores_a_user_preempt_signal_like_torchrun(signal, wrapped):
    # accelerate launch runs torch's elastic agent in its own process: the same signals kill it
    from slurmkit.render import render
    script = render(plan_for(f"name: t\nlauncher: accelerate\npreempt: {{signal: {signal}}}\ncommand: [t.py]\n"))
    step = next(line for line in script.splitlines() if line.startswith("sk_run srun "))
    assert (f"bash -c 'trap \"\" {signal}; exec accelerate launch " in step) is wrapped
    assert ("bash -c 'exec accelerate launch " in step) is not wrapped


@pytest.mark.parametrize(("launcher", "command"), [
    ("torchrun", "torchrun"), ("torchrun", "python"), ("accelerate", "accelerate"), ("accelerate", "python3"),
    ("srun", "mpirun"), ("srun", "accelerate"), ("mpi", "torchrun")])
def test_a_command_that_starts_its_own_launcher_is_refused(launcher, command):
    with pytest.raises(SpecError) as err:
        plan_for(f"name: t\nlauncher: {launcher}\ncommand: [{command}, train.py]\n")
    assert [p.key for p in err.value.problems] == ["command"] and command in err.value.problems[0].message


def test_mpi_launcher_uses_site_mpi_plugin_and_srun_does_not():
    assert "--mpi=pmix" in plan_for("name: t\nlauncher: mpi\ncommand: [osu]\n").srun
    assert not any(o.startswith("--mpi") for o in plan_for("name: t\nlauncher: srun\ncommand: [osu]\n").srun)


def test_nccl_env_lists_compute_hcas_exactly_and_never_storage():
    env = plan_for("name: t\ncommand: [x]\n").nccl_env
    # 12-port DGX A100: compute mlx5_0-3 and 6-9; the storage ports mlx5_4, 5, 10, 11 never
    assert env["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_{i}" for i in (0, 1, 2, 3, 6, 7, 8, 9))
    assert not {"mlx5_4", "mlx5_5", "mlx5_10", "mlx5_11"} & set(env["NCCL_IB_HCA"].lstrip("=").split(","))
    assert env["NCCL_CROSS_NIC"] == "0"  # rail-optimized fabric
    assert not {"NCCL_ALGO", "NCCL_PROTO", "NCCL_DEBUG"} & set(env)


def test_partition_defaults_fill_in_and_spec_wins():
    plan = plan_for("name: t\ncommand: [x]\ngpus_per_node: 2\nmem_per_gpu: 64G\n")
    assert plan.sbatch["cpus-per-task"] == "16"  # partition default_cpus_per_gpu
    assert plan.sbatch["mem-per-gpu"] == "64G"
    assert plan.sbatch["time"] == "04:00:00"  # partition default_time
    assert plan.sbatch["qos"] == "normal"


def test_total_gpus_split_over_nodes():
    plan = plan_for("name: t\ncommand: [x]\nnodes: 2\ngpus: 16\n")
    assert plan.gpus_per_node == 8


@pytest.mark.parametrize(("extra", "key", "fragment"), [
    ("partition: gpux", "partition", "did you mean 'gpu'"),
    ("gpus_per_node: 9", "gpus_per_node", "has 8"),
    ("gpu_type: h100", "gpu_type", "offers a100"),
    ("time: 3-00:00:00", "time", "exceeds the time limit of partition"),
    ("nodes: 17", "nodes", "at most 16"),
    ("cpus_per_gpu: 64", "cpus_per_gpu", "has 256"),
    ("mem_per_gpu: 200G", "mem_per_gpu", "has 1000G"),
    ("qos: gold", "qos", "not allowed"),
    ("sbatch_extra: {gpus-per-task: 1}", "sbatch_extra.gpus-per-task", "breaks"),
    ("sbatch_extra: {nodes: 3}", "sbatch_extra.nodes", "spec key `nodes`"),
    ("sbatch_extra: {constrant: hdr}", "sbatch_extra.constrant", "did you mean 'constraint'"),
    ("nccl: {env: {NCCL_TOPO: ring}}", "nccl.env.NCCL_TOPO", "no NCCL_TOPO"),
    ("dependency: {afterok: [prep]}", "dependency.afterok[0]", "same `sk submit`"),
])
def test_spec_that_does_not_fit_the_site_is_rejected_with_located_message(extra, key, fragment):
    with pytest.raises(SpecError) as err:
        plan_for(f"name: t\ncommand: [x]\n{extra}\n")
    problems = [p for p in err.value.problems if p.severity == "error"]
    assert any(p.key == key and fragment in (p.message + (p.hint or "")) for p in problems), \
        [p.format() for p in problems]
    assert all(p.file == "t.yaml" for p in problems)


def test_debugging_nccl_variables_and_low_ib_timeout_are_warnings_not_errors():
    plan = plan_for("name: t\ncommand: [x]\nnccl: {env: {NCCL_ALGO: Ring, NCCL_IB_TIMEOUT: 18}}\n")
    text = "\n".join(w.format() for w in plan.warnings)
    assert "debugging section" in text and "below NCCL's default of 20" in text
    assert plan.nccl_env["NCCL_IB_TIMEOUT"] == "18"  # the user's choice is kept, with the warning


def test_roce_and_tcp_profiles():
    from slurmkit.nccl import fabric_env
    from slurmkit.site.model import NodeType

    base = load_site(ROOT / "site_config" / "devcluster.yaml").node_types["devnode"].model_dump()
    base["fabric"] = {"kind": "roce", "socket_ifname": "eth0", "ib_gid_index": 3, "ib_tc": 106}
    env = fabric_env(NodeType.model_validate(base))
    assert env["NCCL_IB_GID_INDEX"] == "3" and env["NCCL_IB_TC"] == "106"
    base["fabric"] = {"kind": "tcp", "socket_ifname": "eth0", "speed_gbps": 100}
    base["compute_hcas"], base["storage_hcas"] = [], []
    for g in base["gpus"]:
        g["hca"] = None
    env = fabric_env(NodeType.model_validate(base))
    assert env == {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "1", "NCCL_SOCKET_NTHREADS": "4",
                   "NCCL_NSOCKS_PERTHREAD": "4"}
