"""launcher: torchrun - one task per node runs torchrun, which starts one rank per GPU."""

from __future__ import annotations

from slurmkit.launchers.base import TORCHELASTIC_SIGNALS, Launcher, register_launcher


@register_launcher
class Torchrun(Launcher):
    name = "torchrun"
    summary = "one task per node starting one rank per GPU, each rank binds itself"
    explanation = (
        "srun starts one task per node with all of the node's CPUs for the job; in it torchrun (c10d rendezvous "
        "at MASTER_ADDR:MASTER_PORT, the first node) starts one rank per GPU. torchrun runs with `--no-python` "
        "so that every rank goes through the bind step (keyed by torchrun's LOCAL_RANK); a command ending in "
        "`.py` is run with `python`. torchrun handles only TERM, INT, HUP and QUIT: for a `preempt:` signal such "
        "as USR1 it starts with that signal ignored, so each rank must install its own handler.")
    task_per = "node"
    local_rank_var = "LOCAL_RANK"
    agent_signals = TORCHELASTIC_SIGNALS
    refused_commands = frozenset({"torchrun", "accelerate", "python", "python3", "srun"})
    refused_message = ("with launcher torchrun, command is what torchrun runs (e.g. train.py --lr 1), not "
                       "{program!r}")
    refused_hint = "slurmkit starts torchrun itself; drop the launcher from the command"
