"""The site configuration: what an admin describes once about the cluster (partitions, node topology, fabric).

Topology is data, never a formula: every GPU names its NUMA node, its CPU list and its nearest compute HCA, as read
off the real machine (`sk site discover`). The planner and the docs both read this model.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from slurmkit.config.modeldata import GPUMixin, NodeTypeMixin, PartitionMixin, SiteMixin
from slurmkit.config.source import Source, load
from slurmkit.config.strict import Strict, validate
from slurmkit.config.units import parse_cpulist, parse_mem_mib, parse_time_minutes
from slurmkit.errors import SiteConfigError
from slurmkit.nccl import FABRIC_KINDS, FABRICS
from slurmkit.record import SOURCE_NAMES, TRANSPORTS
from slurmkit.site.lookup import find_site_file

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")

FabricKind = Literal[FABRIC_KINDS]  # type: ignore[valid-type]  # the fabric profiles in slurmkit/nccl.py
ContainerRuntime = Literal["pyxis", "apptainer", "none"]
# The registered metric sources (slurmkit/record.py), "auto" meaning nvml.
MetricSourceName = Literal[("auto", *SOURCE_NAMES)]  # type: ignore[valid-type]


class GPU(GPUMixin, Strict):
    """One GPU of a node type, by its NVML index (with CUDA_DEVICE_ORDER=PCI_BUS_ID, also CUDA's)."""

    index: int = Field(ge=0, description="NVML / nvidia-smi index of the GPU")
    numa: int = Field(ge=0, description="NUMA node the GPU is attached to")
    cpus: str = Field(description="CPUs local to the GPU, kernel cpulist format (e.g. 48-63,176-191)")
    hca: str | None = Field(None, description="nearest compute HCA (e.g. mlx5_0); None on TCP-only nodes")
    pci_bus_id: str | None = Field(None, description="PCI bus id, e.g. 0000:07:00.0 (informational)")

    @field_validator("cpus")
    @classmethod
    def _cpus(cls, v: str) -> str:
        try:
            if not parse_cpulist(v):
                raise ValueError("empty CPU list")
        except ValueError as exc:
            raise ValueError(f"{v!r} is not a CPU list such as 48-63,176-191 ({exc})") from None
        return v


class GPUModel(Strict):
    model: str = Field(description="marketing name, e.g. 'A100-SXM4-80GB'")
    slurm_type: str = Field(description="the gres type in Slurm (Gres=gpu:<type>:N), e.g. a100")
    count: int = Field(ge=1, le=64)
    memory_gb: int | None = Field(None, ge=1)
    nvlink: str = Field("none", description="NVLink kind as in nvidia-smi topo -m: NV12, NV18, or none (PCIe)")
    arch: str | None = Field(None, description="e.g. ampere, hopper (NVLS needs hopper+ with NVSwitch)")


_UCX_TLS = re.compile(r"\^?[a-z][a-z0-9_]*(,[a-z][a-z0-9_]*)*")


class Fabric(Strict):
    """The inter-node network and how NCCL should use it."""

    kind: FabricKind
    socket_ifname: str | None = Field(None, description="NCCL_SOCKET_IFNAME: bootstrap/TCP interface name or "
                                      "prefix, e.g. ibp (DGX OS names IPoIB ibp12s0, ...)")
    ib_gid_index: int | None = Field(None, ge=0, description="RoCE: NCCL_IB_GID_INDEX (unset: NCCL picks the RoCE "
                                     "v2 GID itself since 2.21)")
    ib_tc: int | None = Field(None, ge=0, le=255, description="RoCE: NCCL_IB_TC (the switch's QoS class; unset: "
                              "NCCL's -1 since 2.26, 0 before)")
    ib_sl: int | None = Field(None, ge=0, le=15, description="NCCL_IB_SL (unset: NCCL's -1 since 2.26, 0 before)")
    rail_optimized: bool = Field(False, description="rail-optimized fabric: NCCL_CROSS_NIC=0")
    sharp: bool = Field(False, description="InfiniBand with SHARP switches and a running aggregation manager")
    speed_gbps: int | None = Field(None, ge=1, description="per-NIC link speed (TCP tuning on >=100G)")
    ib_timeout: int | None = Field(None, ge=1, le=31, description="NCCL_IB_TIMEOUT for large/lossy fabrics")
    nccl_env: dict[str, str] = Field(default_factory=dict, description="extra NCCL_* settings for this fabric")
    ucx_tls: str | None = Field(
        None, description="UCX_TLS exported in `launcher: mpi` jobs: UCX's transport list, e.g. rc,sm,self,cuda_copy "
                    "(a leading ^ excludes); unset: UCX chooses")

    @field_validator("ucx_tls")
    @classmethod
    def _ucx_tls(cls, v: str | None) -> str | None:
        if v is not None and not _UCX_TLS.fullmatch(v):
            raise ValueError(f"{v!r} is not a UCX transport list: lower-case names separated by commas, optionally "
                             "after one leading ^ (e.g. rc,sm,self,cuda_copy or ^tcp)")
        return v


class NodeType(NodeTypeMixin, Strict):
    """One kind of node, with its real topology."""

    description: str = ""
    gpu: GPUModel
    sockets: int = Field(ge=1)
    cores_per_socket: int = Field(ge=1)
    threads_per_core: int = Field(1, ge=1, le=8)
    numa_nodes: int = Field(ge=1)
    memory: str = Field(description="schedulable memory per node (Slurm RealMemory), e.g. 1000G")
    gpus: list[GPU]
    compute_hcas: list[str] = Field(default_factory=list, description="HCAs NCCL may use (GPU-near)")
    storage_hcas: list[str] = Field(default_factory=list, description="HCAs for storage only; never in NCCL")
    fabric: Fabric
    features: list[str] = Field(default_factory=list, description="Slurm node features (for --constraint)")

    @field_validator("memory")
    @classmethod
    def _mem(cls, v: str) -> str:
        parse_mem_mib(v)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> NodeType:
        if len(self.gpus) != self.gpu.count:
            raise ValueError(f"gpu.count is {self.gpu.count} but {len(self.gpus)} entries are listed under gpus")
        idx = [g.index for g in self.gpus]
        if sorted(idx) != list(range(len(idx))):
            raise ValueError(f"gpus[].index must be 0..{len(idx) - 1} each once, got {idx}")
        for g in self.gpus:
            if g.numa >= self.numa_nodes:
                raise ValueError(f"GPU {g.index} is on NUMA node {g.numa} but numa_nodes is {self.numa_nodes}")
            if max(g.cpu_list) >= self.cpus:
                raise ValueError(f"GPU {g.index} lists CPU {max(g.cpu_list)} but the node has {self.cpus} CPUs")
            if g.hca is not None and g.hca in self.storage_hcas:
                raise ValueError(f"GPU {g.index} names storage HCA {g.hca} as its nearest compute HCA")
            if g.hca is not None and self.compute_hcas and g.hca not in self.compute_hcas:
                raise ValueError(f"GPU {g.index}'s HCA {g.hca} is not in compute_hcas")
        both = set(self.compute_hcas) & set(self.storage_hcas)
        if both:
            raise ValueError(f"HCAs listed as both compute and storage: {sorted(both)}")
        if FABRICS[self.fabric.kind].needs_compute_hcas and not self.compute_hcas:
            raise ValueError(f"fabric {self.fabric.kind} needs compute_hcas")
        return self


class Partition(PartitionMixin, Strict):
    node_type: str
    nodes: int = Field(ge=1, description="number of nodes in the partition")
    max_time: str = Field(description="partition MaxTime, e.g. 2-00:00:00")
    default_time: str = Field("01:00:00")
    max_nodes: int | None = Field(None, ge=1, description="MaxNodes per job (default: all nodes)")
    default_cpus_per_gpu: int | None = Field(None, ge=1)
    default_mem_per_gpu: str | None = None
    qos: list[str] = Field(default_factory=list, description="QOS allowed here (empty: any)")
    default_qos: str | None = None
    allow_task_sharing: bool = Field(False, description="Slurm >= 23.11 --gres-flags=allow-task-sharing")
    description: str = ""

    @field_validator("max_time", "default_time")
    @classmethod
    def _time(cls, v: str) -> str:
        parse_time_minutes(v)
        return v

    @field_validator("default_mem_per_gpu")
    @classmethod
    def _mem(cls, v: str | None) -> str | None:
        if v is not None:
            parse_mem_mib(v)
        return v


class Accounting(Strict):
    """Where the node and controller hooks put records, and where reports read them."""

    spool_dir: str = Field("/var/spool/slurmkit", description="durable spool (shared filesystem for nodes)")
    store: str = Field("/var/lib/slurmkit/accounting.db", description="SQLite path or postgresql:// URL")
    sample_interval_s: float = Field(10.0, gt=0, le=3600)
    transport: Literal[TRANSPORTS] = Field(  # type: ignore[valid-type]
        "spool", description="how node GPU summaries leave the nodes: spool, admin_comment (users read their own "
                             "through sacct: sk report job) or spool+admin_comment (both)")
    metric_source: MetricSourceName = "auto"
    simulated_trace: str | None = Field(None, description="trace file for the simulated source (tests, demo)")
    admin_group: str = Field("slurmkit-admin", description="Unix group whose members see every user's jobs")
    state_dir: str = Field("/var/lib/slurmkit/sampler", description="the node samplers' state directory (the "
                           "hooks' SK_STATE_DIR): where `sk admin notify idle` reads running jobs' readings")


_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
_HOST = re.compile(rf"^(\[[0-9A-Fa-f:.]+\]|{_LABEL}(\.{_LABEL})*)$")  # a DNS name, or [an IP literal]


def _address(value: str) -> str:
    """An RFC 5322 address (optionally with a display name) on one line, or ValueError."""
    from email.utils import parseaddr

    addr = parseaddr(value)[1]
    local, at, host = addr.rpartition("@")
    if any(c in value for c in "\r\n") or not (at and local and _HOST.match(host) and "." in host):
        raise ValueError(f"{value!r} is not a mail address such as 'HPC support <hpc-support@example.edu>' or "
                         "alice@example.edu")
    return value


def _user(value: str) -> str:
    if not re.match(r"^[A-Za-z0-9_.][A-Za-z0-9_.@-]*$", value):
        raise ValueError(f"{value!r} is not a user name")
    return value


MailAddress = Annotated[str, AfterValidator(_address)]
UserName = Annotated[str, AfterValidator(_user)]


class Notify(Strict):
    """Idle-GPU notices (`sk admin notify idle`): the SMTP server they go through, who sends them, who gets them.
    No password in here (users read this file): smtp_password_file names a file only the notifier can read."""

    smtp_host: str = Field("localhost", description="SMTP server (relay) host name or address")
    smtp_port: int | None = Field(None, ge=1, le=65535, description="default: 25, 587 with starttls, 465 with ssl")
    starttls: bool = Field(False, description="upgrade the connection with STARTTLS (port 587)")
    ssl: bool = Field(False, description="TLS from the first byte (SMTPS, port 465)")
    smtp_user: str | None = Field(None, min_length=1, description="log in as this user (needs smtp_password_file)")
    smtp_password_file: str | None = Field(None, min_length=1, description="file holding the SMTP password "
                                           "(relative to this config's directory; keep it mode 0600)")
    sender: MailAddress = Field(description="From: address, e.g. 'HPC support <hpc-support@example.edu>'")
    domain: str | None = Field(None, description="a job's owner gets mail at user@domain")
    addresses: dict[UserName, MailAddress] = Field(default_factory=dict, description="user -> address where "
                                                   "user@domain is not it (wins over domain)")
    idle_for: str = Field("1h", description="a GPU idle (below the accounting idle threshold) this long gets its "
                          "job a notice: 90m, 1h, 2d")
    timeout_s: float = Field(30.0, gt=0, le=600, description="SMTP connect/answer timeout")

    @field_validator("smtp_host", "domain")
    @classmethod
    def _host(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and not _HOST.match(v):
            what = "a host name or address such as smtp.example.edu" if info.field_name == "smtp_host" else \
                "a mail domain such as example.edu"
            raise ValueError(f"{v!r} is not {what}")
        return v

    @field_validator("idle_for")
    @classmethod
    def _idle_for(cls, v: str) -> str:
        from slurmkit.config.when import span_seconds

        if not span_seconds(v):
            raise ValueError(f"{v!r} is not a length of time such as 90m, 1h or 2d")
        return v

    @model_validator(mode="after")
    def _auth(self) -> Notify:
        if self.starttls and self.ssl:
            raise ValueError("starttls and ssl are both true: choose one (starttls for port 587, ssl for 465)")
        if (self.smtp_user is None) != (self.smtp_password_file is None):
            raise ValueError("smtp_user and smtp_password_file go together: give both to log in, neither to send "
                             "without logging in")
        return self


class Site(SiteMixin, Strict):
    cluster: str
    slurm_version: str = Field(description="e.g. 22.05 or 23.11: decides version-specific options")
    description: str = ""
    # Any registered name (built-ins or the slurmkit.backends entry points); checked when a backend is built,
    # so loading a site config (sk render) never scans the entry points.
    backend: str = Field("auto", pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$",
                         description="auto, cli, rest, pyslurm, or an installed slurmkit.backends entry point")
    rest_url: str | None = Field(None, description="slurmrestd: unix:/path/to.sock or http(s)://host:port")
    container_runtime: ContainerRuntime = "none"
    mpi: str = Field("pmix", description="srun --mpi plugin for launcher mpi (pmix, pmi2, ...)")
    templates_dir: str | None = Field(None, description="site templates that add to or override job_templates/")
    default_partition: str | None = None
    modules_init: str | None = Field(None, description="script sourced before `module load` (Lmod/Environment)")
    node_types: dict[str, NodeType]
    partitions: dict[str, Partition]
    accounting: Accounting = Field(default_factory=Accounting)
    notify: Notify | None = Field(None, description="idle-GPU notices by mail (sk admin notify idle)")
    source_file: str | None = Field(None, exclude=True, description="where this config was read from")

    @model_validator(mode="after")
    def _names(self) -> Site:
        # Names end up in scripts, comments and Slurm options: keep them to what Slurm itself accepts.
        for what, names in (("cluster", [self.cluster]), ("node type", list(self.node_types)),
                            ("partition", list(self.partitions)), ("mpi", [self.mpi])):
            for n in names:
                if not _NAME.match(n):
                    raise ValueError(f"{what} name {n!r} may only hold letters, digits, '_', '.' and '-'")
        for nt in self.node_types.values():
            for n in [nt.gpu.slurm_type, *nt.compute_hcas, *nt.storage_hcas]:
                if not _NAME.match(n):
                    raise ValueError(f"name {n!r} may only hold letters, digits, '_', '.' and '-'")
        return self

    @model_validator(mode="after")
    def _refs(self) -> Site:
        for name, p in self.partitions.items():
            if p.node_type not in self.node_types:
                raise ValueError(f"partition {name!r} names node type {p.node_type!r}, which is not under "
                                 f"node_types (have: {', '.join(self.node_types)})")
        if self.default_partition and self.default_partition not in self.partitions:
            raise ValueError(f"default_partition {self.default_partition!r} is not a partition")
        return self


def load_site(path: str | Path) -> Site:
    src = load(path)
    return site_from_source(src)


def site_from_source(src: Source) -> Site:
    site = validate(Site, src, SiteConfigError)
    site.source_file = src.file
    return site


def partition_node_types(site: Site) -> dict[str, str]:
    """partition -> node type: what the accounting store records as a job's node_type (Slurm knows only the
    partition), at ingest, reconcile and `sk report --from-sacct` alike."""
    return {name: p.node_type for name, p in site.partitions.items()}


def resolve_site(explicit: str | None = None) -> Site:
    """Find and load the site config by the documented lookup order."""
    return load_site(find_site_file(explicit))
