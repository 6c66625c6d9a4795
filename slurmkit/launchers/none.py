"""launcher: none - the command runs once, in the batch shell, with all of the job's GPUs."""

from __future__ import annotations

from slurmkit.launchers.base import Launcher, register_launcher


@register_launcher
class NoLauncher(Launcher):
    name = "none"
    summary = "single process in the batch shell"
    explanation = (
        "No srun: the command runs once, in the batch shell on the first (only) node, and sees all of the job's "
        "GPUs. No rank variables, no bind step, no rendezvous; NCCL settings only when it has several GPUs. For "
        "single-GPU jobs, sweeps of them, and programs that start their own processes.")
    task_per = "job"
