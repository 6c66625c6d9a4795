"""What every launcher declares, and the registry they register in (after ReFrame's `register_launcher`).

A launcher is how a job's ranks are started. The planner, the renderer, the templates and the docs ask the
launcher object instead of comparing launcher names, so a new launcher is one module in slurmkit/launchers/ plus
its template in job_templates/launchers/ (docs/architecture.md, "Adding a launcher").
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal, Protocol

TaskPer = Literal["gpu", "node", "job"]

# The signals torch's elastic agent (torchrun, and `accelerate launch`, which runs it) handles: the default of
# TORCHELASTIC_SIGNALS_TO_HANDLE (torch/distributed/elastic/multiprocessing/api.py). Any other signal kills it.
TORCHELASTIC_SIGNALS = frozenset({"TERM", "INT", "HUP", "QUIT"})

REGISTRY: dict[str, Launcher] = {}


class Site(Protocol):
    """What a launcher reads of the site config (slurmkit.site.model.Site): a protocol, so that launchers do not
    import the site model (which imports config/, which the job spec's launcher choices come through)."""

    mpi: str


class Launcher:
    """One way of starting ranks. Subclasses set the class attributes and, where needed, override a method."""

    name: ClassVar[str]
    #: One line: the script's header, `sk render --explain`, the docs' tables.
    summary: ClassVar[str]
    #: A paragraph for the site guide and `sk render --explain`: what runs where, and why.
    explanation: ClassVar[str]
    #: One Slurm task per GPU (each task is a rank), per node (its agent starts one rank per GPU), or one
    #: process in the batch shell for the whole job.
    task_per: ClassVar[TaskPer] = "gpu"
    #: Where the bind step finds a rank's local rank: SLURM_LOCALID when Slurm starts the ranks (the bind step
    #: then exports LOCAL_RANK and RANK from Slurm's), LOCAL_RANK when a per-node agent starts them.
    local_rank_var: ClassVar[str] = "SLURM_LOCALID"
    #: Signals the per-node agent handles itself; None when Slurm starts the ranks (no agent). A preempt signal
    #: outside this set would kill the agent, so the agent starts with it ignored (see `agent_ignores`).
    agent_signals: ClassVar[frozenset[str] | None] = None
    #: Each rank's UCX uses its GPU's nearest HCA (UCX_NET_DEVICES, set by the bind step).
    ucx_per_rank: ClassVar[bool] = False
    #: Programs the command must not start with (a second launcher inside this one), and why.
    refused_commands: ClassVar[frozenset[str]] = frozenset()
    refused_message: ClassVar[str] = ""
    refused_hint: ClassVar[str] = ""
    #: A directory of templates this launcher brings (a third-party launcher's `launchers/<name>.sh.j2`),
    #: searched after the site's templates_dir and before the built-in job_templates/.
    template_dir: ClassVar[Path | None] = None

    @property
    def template(self) -> str:
        """The partial that starts the ranks (site templates_dir may override it)."""
        return f"launchers/{self.name}.sh.j2"

    @property
    def distributed(self) -> bool:
        """Ranks started through srun (a rendezvous, NCCL, a bind step); false for one process in the batch shell."""
        return self.task_per != "job"

    def tasks_per_node(self, gpus_per_node: int) -> int:
        return gpus_per_node if self.task_per == "gpu" else 1

    def cpus_per_task(self, gpus_per_node: int, cpus_per_gpu: int) -> int:
        return cpus_per_gpu if self.task_per == "gpu" else gpus_per_node * cpus_per_gpu

    def sbatch_tasks(self, gpus_per_node: int) -> dict[str, str]:
        """The task-count option: per node for srun-started steps, one task for a batch-shell process."""
        if not self.distributed:
            return {"ntasks": "1"}
        return {"ntasks-per-node": str(self.tasks_per_node(gpus_per_node))}

    def world_size(self, nodes: int, gpus_per_node: int) -> int:
        return nodes * gpus_per_node if self.distributed else 1

    def srun_options(self, site: Site) -> list[str]:
        """Options this launcher adds to srun, after the planner's own."""
        return []

    def check_command(self, argv: list[str]) -> tuple[str, str] | None:
        """(message, hint) when the command starts a launcher of its own; None when it is fine."""
        if argv and argv[0] in self.refused_commands:
            return self.refused_message.format(launcher=self.name, program=argv[0]), self.refused_hint
        return None

    def agent_ignores(self, signal: str | None) -> bool:
        """Whether the agent must start with `signal` ignored: it does not handle it and would die of it."""
        return signal is not None and self.agent_signals is not None and signal not in self.agent_signals


def register_launcher(cls: type[Launcher]) -> type[Launcher]:
    """Class decorator: make `cls` (one instance of it) the launcher named `cls.name`."""
    if cls.name in REGISTRY:
        raise ValueError(f"launcher {cls.name!r} is registered twice")
    REGISTRY[cls.name] = cls()
    return cls
