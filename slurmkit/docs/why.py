""""Why these settings": the binding and NCCL decisions for one node type, derived from the real planner and the
node type's fabric profile (slurmkit/plan.py, slurmkit/nccl.py), with the reason for each.

The reasons are the facts in docs/binding-and-nccl.md (gathered from Slurm's srun(1)/gres.conf(5) and NCCL 2.30's
documentation and source). Every variable a fabric profile sets carries its reason (slurmkit.nccl.Rule), so a
new profile setting cannot ship undocumented.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurmkit import nccl
from slurmkit.errors import InputError
from slurmkit.launchers import Launcher, all_launchers
from slurmkit.plan import Plan, make_plan
from slurmkit.site.model import NodeType, Site
from slurmkit.spec import JobSpec

SOURCES = {
    "srun": "Slurm srun(1) and sbatch(1) man pages (--gpus-per-task, --gpu-bind, --cpu-bind, --mem-bind)",
    "gres": "Slurm gres.conf(5) and gres.shtml (Cores= affinity is per socket unless numa_node_as_socket)",
    "nccl": "NCCL 2.30 environment-variable documentation and source (defaults; the ones that changed by release "
            "from the NCCL_PARAM lines of src/transport/net_ib.cc at each release tag, slurmkit.nccl.AUTOMATIC_SINCE)",
    "numactl": "numactl(8): --physcpubind, --membind, --preferred",
    "notes": "slurmkit's documentation: binding-and-nccl.md (the facts above, with the Slurm/NCCL versions)",
}

@dataclass
class NcclSetting:
    name: str
    value: str
    reason: str
    from_site: bool = False  # set by the admins in fabric.nccl_env rather than derived by slurmkit
    source: str = ""  # the profile rule's citation, where NCCL's documentation alone does not justify the value


@dataclass
class LauncherPlan:
    launcher: Launcher
    sbatch: dict[str, str | None] = field(default_factory=dict)
    srun: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class NodeTypeWhy:
    name: str
    node_type: NodeType
    partition: str
    launchers: list[LauncherPlan]
    nccl: list[NcclSetting]
    naive: list[tuple[int, int, int]]  # (gpu, numa by "index / GPUs per socket", real numa)
    partial_example: tuple[list[int], int, str, str] | None  # (allocated GPUs, numa, cpus, hca) of rank 0
    notes: list[str]


def nccl_settings(nt: NodeType) -> list[NcclSetting]:
    """Each variable the job scripts export for this node type, with the fabric profile's reason for it."""
    rules = {rule.variable: rule for rule, _ in nccl.fabric_rules(nt)}
    out = []
    for name, value in nccl.fabric_env(nt).items():
        if name in nt.fabric.nccl_env:
            out.append(NcclSetting(name, value, "Set by this site's admins (fabric.nccl_env in the site config).",
                                   from_site=True))
        else:
            out.append(NcclSetting(name, value, rules[name].reason(value, nt), source=rules[name].source))
    return out


def _launcher_plan(site: Site, partition: str, launcher: Launcher, nt: NodeType) -> LauncherPlan:
    command = ["train.py"]
    spec = JobSpec(name=f"{launcher.name}-example", launcher=launcher.name, nodes=1, command=command,
                   partition=partition, gpus_per_node=nt.gpu.count)
    try:
        plan: Plan = make_plan(spec, site)
    except InputError as exc:
        return LauncherPlan(launcher, error=exc.format())
    keep = ("nodes", "ntasks", "ntasks-per-node", "gpus-per-node", "cpus-per-task", "mem-per-gpu")
    return LauncherPlan(launcher, {k: v for k, v in plan.sbatch.items() if k in keep}, plan.srun)


def _naive(nt: NodeType) -> list[tuple[int, int, int]]:
    per_socket = max(1, nt.gpu.count // nt.sockets)
    return [(g.index, g.index // per_socket, g.numa) for g in sorted(nt.gpus, key=lambda g: g.index)]


def _notes(site: Site, nt: NodeType, partition: str) -> list[str]:
    notes = []
    if site.slurm_version_tuple < (23, 11):
        notes.append(f"Slurm {site.slurm_version}: srun does not inherit `--cpus-per-task` from the allocation "
                     "(22.05-23.02), so every `srun` in the script passes it again.")
    if site.partitions[partition].allow_task_sharing:
        notes.append("This partition allows `--gres-flags=allow-task-sharing` (Slurm 23.11+), which keeps all job "
                     "GPUs visible to every task even with per-task GPU binding.")
    if nt.threads_per_core > 1:
        notes.append(f"SMT is on ({nt.threads_per_core} threads per core): each GPU's CPU list holds the cores "
                     "and their SMT siblings, and the bind step keeps both.")
    if nt.gpu.arch and nt.gpu.arch.lower() in ("hopper", "blackwell") and nt.gpu.nvlink != "none":
        notes.append("NCCL_NVLS_ENABLE is left to NCCL (auto): NVLink SHARP needs Hopper or newer with NVSwitch "
                     "and NCCL 2.17+, which NCCL detects itself.")
    return notes


def explain(site: Site, name: str) -> NodeTypeWhy:
    nt = site.node_types[name]
    partition = next(p for p, part in site.partitions.items() if part.node_type == name)
    gpus = sorted(nt.gpus, key=lambda g: g.index)
    partial = None
    if len(gpus) >= 2:
        # A 2-GPU job on a shared node may be given the last two GPUs: rank 0 then uses the first of those.
        got = [g.index for g in gpus[-2:]]
        g0 = nt.gpu_by_index(got[0])
        partial = (got, g0.numa, g0.cpus, g0.hca or "none")
    return NodeTypeWhy(
        name=name, node_type=nt, partition=partition,
        launchers=[_launcher_plan(site, partition, la, nt) for la in all_launchers() if la.distributed],
        nccl=nccl_settings(nt), naive=_naive(nt), partial_example=partial, notes=_notes(site, nt, partition))


def lint_tables() -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """(name, what the lint says, what to use) for folklore names; (name, why) for NCCL's debugging variables."""
    misnamed = [(k, msg, right) for k, (msg, right) in sorted(nccl.MISNAMED.items())]
    return misnamed, sorted(nccl.DEBUGGING.items())
