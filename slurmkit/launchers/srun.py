"""launcher: srun - Slurm starts one task per GPU, and every task is a rank."""

from __future__ import annotations

from slurmkit.launchers.base import Launcher, register_launcher

# Launchers that start their own ranks: inside a step that already has one task per GPU they would start
# GPUs x GPUs processes.
RANK_STARTERS = frozenset({"srun", "mpirun", "mpiexec", "torchrun", "accelerate"})


@register_launcher
class Srun(Launcher):
    name = "srun"
    summary = "one task per GPU, each rank binds itself to its GPU's NUMA node and HCA"
    explanation = (
        "srun starts one task per GPU (`--ntasks-per-node` = GPUs per node, `--cpus-per-task` = CPUs per GPU); "
        "each task is a rank (RANK = SLURM_PROCID, LOCAL_RANK = SLURM_LOCALID) and goes through the bind step, "
        "which picks its GPU among the ones Slurm allocated and binds its CPUs and memory to that GPU's NUMA "
        "node. For DDP/FSDP/Megatron programs that read RANK/LOCAL_RANK/WORLD_SIZE and MASTER_ADDR/PORT.")
    task_per = "gpu"
    refused_commands = RANK_STARTERS
    refused_message = ("launcher {launcher} already starts one task per GPU; the command must not start its own "
                       "launcher ({program})")
    refused_hint = "remove it from the command, or use launcher: none"
