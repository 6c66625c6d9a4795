"""launcher: accelerate - one task per node runs `accelerate launch`, which starts one rank per GPU.

Hugging Face accelerate's multi-GPU launch runs torch's elastic agent (torch.distributed.run) in-process: what
holds for torchrun holds here, its signal handling included (accelerate/commands/launch.py, multi_gpu_launcher).
`--num_processes` is the job's total; accelerate starts num_processes / num_machines ranks per node.
"""

from __future__ import annotations

from slurmkit.launchers.base import TORCHELASTIC_SIGNALS, Launcher, register_launcher


@register_launcher
class Accelerate(Launcher):
    name = "accelerate"
    summary = "one task per node running accelerate launch, which starts one rank per GPU, each rank binds itself"
    explanation = (
        "srun starts one task per node with all of the node's CPUs for the job; in it `accelerate launch "
        "--multi_gpu` (machine rank = the node's SLURM_NODEID, main process at MASTER_ADDR:MASTER_PORT, the "
        "first node) starts one rank per GPU. It runs with `--no_python` so that every rank goes through the "
        "bind step (keyed by LOCAL_RANK); a command ending in `.py` is run with `python`. accelerate runs "
        "torch's elastic agent, which handles only TERM, INT, HUP and QUIT: for a `preempt:` signal such as "
        "USR1 it starts with that signal ignored, so each rank must install its own handler. `--multi_gpu` fixes "
        "the distributed type: an accelerate config file's `distributed_type` (FSDP, DeepSpeed) is not used, its "
        "other defaults (mixed precision, for example) are.")
    task_per = "node"
    local_rank_var = "LOCAL_RANK"
    agent_signals = TORCHELASTIC_SIGNALS
    refused_commands = frozenset({"accelerate", "torchrun", "python", "python3", "srun"})
    refused_message = ("with launcher accelerate, command is what `accelerate launch` runs (e.g. train.py --lr 1), "
                       "not {program!r}")
    refused_hint = "slurmkit starts accelerate launch itself; drop the launcher from the command"
