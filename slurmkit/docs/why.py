""""Why these settings": the binding and NCCL decisions for one node type, derived from the real planner and the
node type's fabric profile (slurmkit/plan.py, slurmkit/nccl.py), with the reason for each.

The reasons are the facts in the project's notes (../shared/notes/binding-and-nccl.md, gathered from Slurm's
srun(1)/gres.conf(5) and NCCL 2.30's documentation and source). Every NCCL variable the fabric profile sets
must have a reason here: an unexplained one stops the build, so a new profile setting cannot ship undocumented.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from slurmkit import nccl
from slurmkit.errors import InputError, SlurmkitError
from slurmkit.plan import Plan, make_plan
from slurmkit.site.model import NodeType, Site
from slurmkit.spec import JobSpec

SOURCES = {
    "srun": "Slurm srun(1) and sbatch(1) man pages (--gpus-per-task, --gpu-bind, --cpu-bind, --mem-bind)",
    "gres": "Slurm gres.conf(5) and gres.shtml (Cores= affinity is per socket unless numa_node_as_socket)",
    "nccl": "NCCL 2.30 environment-variable documentation and source (defaults)",
    "numactl": "numactl(8): --physcpubind, --membind, --preferred",
    "notes": "slurmkit project notes: binding-and-nccl.md (the facts above, with the Slurm/NCCL versions)",
}

_Reason = Callable[[str, NodeType], str]

# What the fabric profile may set (slurmkit.nccl.fabric_env) -> why, for this node type.
NCCL_REASONS: dict[str, _Reason] = {
    "NCCL_SOCKET_IFNAME": lambda v, nt: (
        f"NCCL's bootstrap (and, on TCP fabrics, its data) goes over `{v}`, the interface the site config names; "
        "left to auto-detection NCCL may pick a docker or loopback interface."),
    "NCCL_IB_HCA": lambda v, nt: (
        "Exactly the compute HCAs of this node type. The leading `=` makes the list exact: without it "
        "`mlx5_1` would also select `mlx5_10`..`mlx5_19`."
        + (f" The storage HCAs ({', '.join(nt.storage_hcas)}) are left out so that NCCL traffic never shares "
           "the storage network." if nt.storage_hcas else "")),
    "NCCL_CROSS_NIC": lambda v, nt: (
        "`0`: the fabric is rail-optimized (NIC *n* of every node on the same leaf switch), so a ring must stay "
        "on one rail; NCCL's default (2) would let it cross rails." if v == "0" else
        "`1`: all NICs reach one switch fabric (Slingshot), so crossing NICs costs nothing."),
    "NCCL_IB_TIMEOUT": lambda v, nt: (
        f"Set by the site for a large or lossy fabric. Each retry waits 4.096 us x 2^{v}; NCCL's default is "
        f"{nccl.ib_timeout_default()} since NCCL 2.23 (18 in 2.14-2.22)."),
    "NCCL_IB_SL": lambda v, nt: f"InfiniBand service level {v}, as the site's fabric is configured.",
    "NCCL_IB_GID_INDEX": lambda v, nt: (
        f"RoCE: the GID table entry ({v}) that holds the NIC's RoCE v2 address on this fabric, as the site "
        "configured it; which entry that is depends on how the hosts' addresses are set up."),
    "NCCL_IB_TC": lambda v, nt: (
        f"RoCE: traffic class {v}, the QoS class the site's switches reserve for RDMA traffic (NCCL's default "
        "is 0)."),
    "NCCL_COLLNET_ENABLE": lambda v, nt: (
        "The InfiniBand switches support SHARP and an aggregation manager runs, so NCCL may offload reductions "
        "to the network (needs the SHARP plugin)."),
    "NCCL_IB_DISABLE": lambda v, nt: "A TCP-only fabric: NCCL must not look for InfiniBand/RoCE devices.",
    "NCCL_SOCKET_NTHREADS": lambda v, nt: (
        f"TCP at {nt.fabric.speed_gbps} Gb/s: more socket threads (4) with 4 sockets each, the usual setting for "
        "100G and faster TCP links, instead of NCCL's defaults."),
    "NCCL_NSOCKS_PERTHREAD": lambda v, nt: "See NCCL_SOCKET_NTHREADS: sockets per thread on a fast TCP link.",
    "NCCL_NET": lambda v, nt: "Slingshot: NCCL talks to the network through the AWS libfabric plugin.",
    "NCCL_NET_GDR_LEVEL": lambda v, nt: "Slingshot with libfabric: GPUDirect RDMA up to the host bridge (PHB).",
    "FI_PROVIDER": lambda v, nt: "Slingshot: libfabric's cxi provider.",
}


@dataclass
class NcclSetting:
    name: str
    value: str
    reason: str
    from_site: bool = False  # set by the admins in fabric.nccl_env rather than derived by slurmkit


@dataclass
class RecipePlan:
    launcher: str
    recipe: str
    sbatch: dict[str, str | None] = field(default_factory=dict)
    srun: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class NodeTypeWhy:
    name: str
    node_type: NodeType
    partition: str
    recipes: list[RecipePlan]
    nccl: list[NcclSetting]
    naive: list[tuple[int, int, int]]  # (gpu, numa by "index / GPUs per socket", real numa)
    partial_example: tuple[list[int], int, str, str] | None  # (allocated GPUs, numa, cpus, hca) of rank 0
    notes: list[str]


def nccl_settings(nt: NodeType) -> list[NcclSetting]:
    env = nccl.fabric_env(nt)
    out = []
    for name, value in env.items():
        if name in nt.fabric.nccl_env:
            out.append(NcclSetting(name, value, "Set by this site's admins (fabric.nccl_env in the site config).",
                                   from_site=True))
            continue
        reason = NCCL_REASONS.get(name)
        if reason is None:
            raise SlurmkitError(f"docs: no explanation for {name}, which slurmkit.nccl.fabric_env sets; add one "
                                "to slurmkit/docs/why.py NCCL_REASONS")
        out.append(NcclSetting(name, value, reason(value, nt)))
    return out


def _recipe(site: Site, partition: str, launcher: str, nt: NodeType) -> RecipePlan:
    command = ["train.py"] if launcher == "torchrun" else ["./app"]
    spec = JobSpec(name=f"{launcher}-example", launcher=launcher, nodes=1, command=command,
                   partition=partition, gpus_per_node=nt.gpu.count)
    try:
        plan: Plan = make_plan(spec, site)
    except InputError as exc:
        return RecipePlan(launcher, "", error=exc.format())
    keep = ("nodes", "ntasks", "ntasks-per-node", "gpus-per-node", "cpus-per-task", "mem-per-gpu")
    return RecipePlan(launcher, plan.recipe, {k: v for k, v in plan.sbatch.items() if k in keep}, plan.srun)


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
        recipes=[_recipe(site, partition, launcher, nt) for launcher in ("srun", "torchrun", "mpi")],
        nccl=nccl_settings(nt), naive=_naive(nt), partial_example=partial, notes=_notes(site, nt, partition))


def lint_tables() -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """(name, what the lint says, what to use) for folklore names; (name, why) for NCCL's debugging variables."""
    misnamed = [(k, msg, right) for k, (msg, right) in sorted(nccl.MISNAMED.items())]
    return misnamed, sorted(nccl.DEBUGGING.items())
