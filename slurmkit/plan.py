"""The planner: job spec + site config -> Slurm options, launcher, NCCL environment and binding table.

The launcher (a registered object, one module each in slurmkit/launchers/) decides the task layout: one task per
GPU, one per node whose agent starts one rank per GPU, or one process in the batch shell; the facts behind these
choices are in docs/binding-and-nccl.md.
GPUs are always requested per node, never per task: per-task GPU binding (--gpus-per-task implies
--gpu-bind=per_task since Slurm 21.08) gives every task its own device cgroup and breaks CUDA IPC / NVLink peer
access between ranks. Steps pass no --gpu-bind at all: without a per-task request Slurm binds nothing and gives
every task CUDA_VISIBLE_DEVICES = all of the job's GPUs on its node, whereas an explicit `--gpu-bind=none` on a
multi-task step makes Slurm 22.05-23.02 *unset* CUDA_VISIBLE_DEVICES and SLURM_STEP_GPUS in every task (seen on
the devcluster; fixed in 23.11), leaving a rank that picks "device LOCAL_RANK" free to open another job's GPU
where devices are not confined. Which physical GPUs a job got is only known at run time, so the
binding is chosen at run time (the bind step in the script), from the node type's topology table rendered here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slurmkit import launchers
from slurmkit.config.source import Source, dotted
from slurmkit.config.suggest import did_you_mean
from slurmkit.config.units import format_mem, format_time, parse_mem_mib, parse_time_minutes
from slurmkit.errors import Problem, SpecError
from slurmkit.launchers import Launcher
from slurmkit.nccl import fabric_env, lint_env

if TYPE_CHECKING:  # the planner only reads them: sk render plans from plain copies (modeldata.py), no pydantic
    from slurmkit.site.model import NodeType, Partition, Site
    from slurmkit.spec import JobSpec

# Options the planner owns: users set them through spec keys, not sbatch_extra.
PLANNED = {
    "job-name": "name", "partition": "partition", "account": "account", "qos": "qos", "nodes": "nodes",
    "ntasks": "launcher", "ntasks-per-node": "launcher", "cpus-per-task": "cpus_per_gpu",
    "cpus-per-gpu": "cpus_per_gpu", "gpus": "gpus", "gpus-per-node": "gpus_per_node", "gres": "gpus_per_node",
    "mem": "mem_per_gpu", "mem-per-gpu": "mem_per_gpu", "mem-per-cpu": "mem_per_gpu", "time": "time",
    "exclusive": "exclusive", "output": "output", "error": "error", "chdir": "workdir", "array": "array",
    "dependency": "dependency", "signal": "preempt", "requeue": "preempt", "no-requeue": "preempt",
    "open-mode": "preempt", "mail-user": "mail", "mail-type": "mail", "comment": "(the submission tag)",
    "wrap": "command", "export": "env",
}
# Per-task GPU binding breaks NCCL's intra-node IPC (see module docstring); refused for NCCL launchers.
PER_TASK_GPU = {"gpus-per-task", "ntasks-per-gpu", "gpu-bind"}
EXTRA_ALLOWED = {
    "constraint", "reservation", "nice", "begin", "deadline", "licenses", "exclude", "nodelist", "switches",
    "network", "tmp", "wckey", "priority", "hold", "kill-on-invalid-dep", "gres-flags", "profile", "acctg-freq",
    "core-spec", "thread-spec", "time-min", "mcs-label", "clusters", "uid", "gid", "propagate", "get-user-env",
    "spread-job", "use-min-nodes", "delay-boot", "power", "bb", "bbf", "cluster-constraint", "prefer",
    "sockets-per-node", "threads-per-core", "hint", "distribution", "ntasks-per-core", "ntasks-per-socket",
    "extra-node-info", "mincpus", "oversubscribe", "exclusive-user", "gpu-freq", "cpu-freq", "resv-ports",
    "reboot", "verbose", "quiet", "container", "mem-bind",
} | PER_TASK_GPU


@dataclass
class GpuTopo:
    index: int
    numa: int
    cpus: str
    hca: str


@dataclass
class Plan:
    """Everything the templates need, already decided; templates only lay it out."""

    spec: JobSpec
    site: Site
    partition_name: str
    partition: Partition
    node_type_name: str
    node_type: NodeType
    launcher: Launcher
    gpus_per_node: int
    cpus_per_task: int
    tasks_per_node: int
    sbatch: dict[str, str | None]
    env: dict[str, str]
    nccl_env: dict[str, str]
    topology: list[GpuTopo]
    srun: list[str]
    warnings: list[Problem] = field(default_factory=list)
    container_runtime: str = "none"
    source_file: str | None = None

    @property
    def world_size(self) -> int:
        return self.launcher.world_size(self.spec.nodes, self.gpus_per_node)


class _Checker:
    """Collects located problems so the user sees every mistake at once."""

    def __init__(self, src: Source | None):
        self.src = src
        self.problems: list[Problem] = []

    def add(self, path: tuple, message: str, hint: str | None = None, severity: str = "error") -> None:
        if self.src is not None:
            self.problems.append(self.src.problem(path, message, hint=hint, severity=severity))
        else:
            self.problems.append(Problem(message, key=".".join(map(str, path)) or None, hint=hint,
                                         severity=severity))

    def raise_errors(self) -> None:
        if any(p.severity == "error" for p in self.problems):
            raise SpecError(self.problems)


def make_plan(spec: JobSpec, site: Site, src: Source | None = None,
              dependencies: dict[str, int] | None = None) -> Plan:
    """Check the spec against the site and decide every Slurm option. Raises SpecError with all problems."""
    chk = _Checker(src)
    pname = spec.partition or site.default_partition
    if pname is None:
        if len(site.partitions) == 1:
            pname = next(iter(site.partitions))
        else:
            chk.add(("partition",), "no partition given and the site has no default_partition",
                    hint=f"add `partition:` ({', '.join(site.partitions)})")
            chk.raise_errors()
    assert pname is not None
    if pname not in site.partitions:
        chk.add(("partition",), f"partition {pname!r} does not exist on cluster {site.cluster}",
                hint=did_you_mean(pname, site.partitions))
        chk.raise_errors()
    part = site.partitions[pname]
    nt = site.node_types[part.node_type]

    gpus_per_node = _gpus_per_node(spec, nt, chk)
    gpu_type = spec.gpu_type or nt.gpu.slurm_type
    if gpu_type != nt.gpu.slurm_type:
        offered = {n.gpu.slurm_type for p in site.partitions.values() for n in [site.node_types[p.node_type]]}
        chk.add(("gpu_type",), f"partition {pname!r} offers {nt.gpu.slurm_type} GPUs, not {gpu_type!r}",
                hint=did_you_mean(gpu_type, offered) if gpu_type not in offered else
                f"{gpu_type} is offered in partition(s) " + ", ".join(
                    n for n, p in site.partitions.items() if site.node_types[p.node_type].gpu.slurm_type ==
                    gpu_type))
    max_nodes = min(part.max_nodes or part.nodes, part.nodes)
    if spec.nodes > max_nodes:
        chk.add(("nodes",), f"{spec.nodes} nodes requested; partition {pname!r} allows at most {max_nodes}")

    cpus_per_gpu = spec.cpus_per_gpu or part.default_cpus_per_gpu or max(1, nt.cpus // nt.gpu.count)
    if gpus_per_node * cpus_per_gpu > nt.cpus:
        chk.add(("cpus_per_gpu",), f"{gpus_per_node} GPUs x {cpus_per_gpu} CPUs = "
                f"{gpus_per_node * cpus_per_gpu} CPUs per node; a {part.node_type} node has {nt.cpus}",
                hint=f"at most {nt.cpus // max(gpus_per_node, 1)} CPUs per GPU")
    mem_text = spec.mem_per_gpu or part.default_mem_per_gpu
    mem_per_gpu = parse_mem_mib(mem_text) if mem_text else nt.memory_mib // nt.gpu.count
    if gpus_per_node * mem_per_gpu > nt.memory_mib:
        chk.add(("mem_per_gpu",), f"{gpus_per_node} GPUs x {format_mem(mem_per_gpu)} = "
                f"{format_mem(gpus_per_node * mem_per_gpu)} per node; a {part.node_type} node has {nt.memory}",
                hint=f"at most {format_mem(nt.memory_mib // max(gpus_per_node, 1))} per GPU")
    minutes = parse_time_minutes(spec.time or part.default_time)
    if minutes > part.max_minutes:
        chk.add(("time",),
                f"time {format_time(minutes)} exceeds the time limit of partition {pname!r}, {part.max_time}",
                hint=f"use at most {part.max_time}, or another partition")
    qos = spec.qos or part.default_qos
    if qos and part.qos and qos not in part.qos:
        chk.add(("qos",), f"QOS {qos!r} is not allowed in partition {pname!r}", hint=did_you_mean(qos, part.qos))
    launcher = _launcher(spec, chk)
    runtime = "none"
    if spec.container:
        runtime = spec.container.runtime or site.container_runtime
        if runtime == "none":
            chk.add(("container",), f"cluster {site.cluster} has no container runtime configured",
                    hint="set container.runtime (pyxis or apptainer) if your site has one")
    extra = _check_extra(spec, part, launcher, chk)

    # NCCL: the fabric's profile, then the user's settings (linted), one rule for which value wins (_layer_nccl).
    site_nccl = fabric_env(nt) if launcher.distributed or gpus_per_node > 1 else {}
    if launcher.ucx_per_rank and nt.fabric.ucx_tls:
        # The MPI ranks' UCX transports: a site value, layered like the fabric profile (a user's env: wins).
        site_nccl["UCX_TLS"] = nt.fabric.ucx_tls
    user_nccl = {k: str(v) for k, v in spec.nccl.env.items()}
    user_env = {k: _env_str(v) for k, v in spec.env.items()}
    # The node type's fabric facts, so the site-aware warnings (CROSS_NIC on a rail-optimized fabric, COLLNET
    # without SHARP, an interface the node does not have) fire in validate/render/submit, not only in doctor.
    lint_args = dict(storage_hcas=nt.storage_hcas, fabric=nt.fabric.kind, allow_unknown=spec.nccl.allow_unknown,
                     rail_optimized=nt.fabric.rail_optimized, sharp=nt.fabric.sharp,
                     socket_ifname=nt.fabric.socket_ifname)
    for p in lint_env(user_nccl, **lint_args):
        chk.add(("nccl", "env", p.key or ""), p.message, p.hint, p.severity)
    for p in lint_env({k: v for k, v in user_env.items() if k.startswith(("NCCL_", "TORCH_NCCL"))
                       or k in ("NCCL_TOPO",)}, **lint_args):
        chk.add(("env", p.key or ""), p.message, p.hint, p.severity)
    nccl_spec = {k: (v, ("nccl", "env", k)) for k, v in user_nccl.items()}
    for name, key, value in (("NCCL_DEBUG", "debug", spec.nccl.debug),
                             ("NCCL_DEBUG_SUBSYS", "debug_subsys", spec.nccl.debug_subsys)):
        if value:
            if name in user_nccl and user_nccl[name] != value:
                chk.add(("nccl", key), f"nccl.{key} is {value!r} and nccl.env.{name} is {user_nccl[name]!r}; the "
                        f"script exports {name}={value}", hint=f"set it in one place (nccl.{key})",
                        severity="warning")
            nccl_spec[name] = (value, ("nccl", key))
    user_env, nccl_env = _layer_nccl(site_nccl, user_env, nccl_spec, part.node_type, src, chk)
    chk.raise_errors()

    tasks_per_node = launcher.tasks_per_node(gpus_per_node)
    cpus_per_task = launcher.cpus_per_task(gpus_per_node, cpus_per_gpu)

    sb: dict[str, str | None] = {"job-name": spec.name, "partition": pname}
    if spec.account:
        sb["account"] = spec.account
    if qos:
        sb["qos"] = qos
    sb["nodes"] = str(spec.nodes)
    sb.update(launcher.sbatch_tasks(gpus_per_node))
    sb["gpus-per-node"] = f"{gpu_type}:{gpus_per_node}"
    sb["cpus-per-task"] = str(cpus_per_task)
    sb["mem-per-gpu"] = format_mem(mem_per_gpu)
    sb["time"] = format_time(minutes)
    if spec.exclusive:
        sb["exclusive"] = None
    if spec.workdir:
        sb["chdir"] = spec.workdir
    default_out = "%x-%A_%a.out" if spec.array else "%x-%j.out"
    sb["output"] = spec.output or default_out
    if spec.error:
        sb["error"] = spec.error
    if spec.array:
        limit = f"%{spec.array.max_parallel}" if spec.array.max_parallel else ""
        sb["array"] = f"0-{spec.array.size - 1}{limit}"
    if spec.dependency:
        sb["dependency"] = _dependency(spec, dependencies or {}, chk)
    if spec.preempt:
        sb["signal"] = f"B:{spec.preempt.signal}@{spec.preempt.grace}"
        if spec.preempt.requeue:
            sb["requeue"] = None
            sb["open-mode"] = "append"
    if spec.mail:
        sb["mail-user"] = spec.mail.user
        sb["mail-type"] = ",".join(spec.mail.type)
    sb.update(extra)
    chk.raise_errors()

    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", **user_env}
    topology = [GpuTopo(g.index, g.numa, g.cpus, g.hca or "") for g in nt.gpus]
    srun = _srun_options(spec, site, launcher, cpus_per_task, runtime)
    return Plan(spec=spec, site=site, partition_name=pname, partition=part, node_type_name=part.node_type,
                node_type=nt, launcher=launcher, gpus_per_node=gpus_per_node, cpus_per_task=cpus_per_task,
                tasks_per_node=tasks_per_node, sbatch=sb, env=env, nccl_env=nccl_env, topology=topology,
                srun=srun, warnings=[p for p in chk.problems if p.severity != "error"],
                container_runtime=runtime, source_file=src.file if src else None)


def _layer_nccl(site_nccl: dict[str, str], user_env: dict[str, str],
                nccl_spec: dict[str, tuple[str, tuple[str, ...]]], node_type: str, src: Source | None,
                chk: _Checker) -> tuple[dict[str, str], dict[str, str]]:
    """The one precedence rule for a variable set in more than one place (docs/how-it-works.md): the site's
    fabric profile < the spec's `env:` < its `nccl:` section (nccl.env, nccl.debug) < a `--set` of either.
    Returns (env, nccl_env) with each variable in exactly one of them, so the script exports one value. A user
    value that differs from the site profile's, or env: from nccl:, is a warning naming both."""
    def by_set(path: tuple[str, ...]) -> bool:
        return src is not None and any(path[:n] in src.overridden for n in range(1, len(path) + 1))

    env = dict(user_env)
    nccl_env = dict(site_nccl)
    for name in [*nccl_spec, *(n for n in env if n in site_nccl and n not in nccl_spec)]:
        # (rank, value, spec path or None for the site); the highest rank wins.
        layers: list[tuple[int, str, tuple[str, ...] | None]] = []
        if name in site_nccl:
            layers.append((0, site_nccl[name], None))
        if name in env:
            path = ("env", name)
            layers.append((3 if by_set(path) else 1, env[name], path))
        if name in nccl_spec:
            value, path = nccl_spec[name]
            layers.append((4 if by_set(path) else 2, value, path))
        _rank, value, path = max(layers, key=lambda x: x[0])
        assert path is not None  # a site-only variable is not looped over
        for _r, other, opath in layers:
            if opath == path or other == value:
                continue
            where = (f"the site profile of node type {node_type!r}" if opath is None
                     else f"the spec's {dotted(opath)}")
            chk.add(path, f"{name} is {value!r} here and {other!r} in {where}; the script exports {value!r} (site "
                    "profile < env: < nccl: < --set)",
                    hint=f"remove one of them, or make them agree on the value that is right for {node_type}",
                    severity="warning")
        if path[0] == "env":
            nccl_env.pop(name, None)
        else:
            env.pop(name, None)
            nccl_env[name] = value
    return env, nccl_env


def _env_str(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _gpus_per_node(spec: JobSpec, nt: NodeType, chk: _Checker) -> int:
    have = nt.gpu.count
    if spec.gpus is not None:
        if spec.gpus % spec.nodes:
            chk.add(("gpus",), f"{spec.gpus} GPUs cannot be split evenly over {spec.nodes} nodes",
                    hint="use gpus_per_node, or a multiple of nodes")
            return have
        per = spec.gpus // spec.nodes
        if per > have:
            need = -(-spec.gpus // have)
            chk.add(("gpus",), f"{spec.gpus} GPUs on {spec.nodes} node(s) is {per} per node; a node has {have}",
                    hint=f"use nodes: {need} (or more)")
        return per
    per = spec.gpus_per_node or have
    if per > have:
        chk.add(("gpus_per_node",), f"{per} GPUs per node requested; a node of this partition has {have}",
                hint=f"use at most {have}, and more nodes")
    return per


def _launcher(spec: JobSpec, chk: _Checker) -> Launcher:
    """The spec's launcher; a command that starts a launcher of its own is refused (it would start ranks twice)."""
    try:
        launcher = launchers.get(spec.launcher)  # the spec's choices are the registry's names
    except KeyError:  # only a spec validated by other code (a stale cache entry) gets here
        chk.add(("launcher",), f"{spec.launcher!r} is not a launcher installed here",
                hint=did_you_mean(spec.launcher, launchers.launcher_names()))
        chk.raise_errors()
        raise
    refused = launcher.check_command(spec.argv)
    if refused:
        chk.add(("command",), refused[0], hint=refused[1])
    return launcher


def _check_extra(spec: JobSpec, part: Partition, launcher: Launcher, chk: _Checker) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for raw_key, value in spec.sbatch_extra.items():
        key = raw_key.lstrip("-")
        path = ("sbatch_extra", raw_key)
        if key in PLANNED:
            chk.add(path, f"--{key} is decided by slurmkit", hint=f"set it with the spec key `{PLANNED[key]}`")
        elif key in PER_TASK_GPU and not part.allow_task_sharing and launcher.distributed:
            chk.add(path, f"--{key} binds GPUs per task, which gives each rank its own device cgroup and breaks "
                    "CUDA IPC/NVLink between ranks (NCCL)",
                    hint="slurmkit already gives each rank its GPU at run time; remove this option")
        elif key not in EXTRA_ALLOWED:
            chk.add(path, f"--{key} is not an sbatch option slurmkit passes through",
                    hint=did_you_mean(key, EXTRA_ALLOWED))
        else:
            out[key] = None if value is None else str(value)
    return out


def _dependency(spec: JobSpec, resolved: dict[str, int], chk: _Checker) -> str:
    parts = []
    assert spec.dependency is not None
    for kind, refs in spec.dependency.items():
        ids = []
        for i, ref in enumerate(refs):
            if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
                ids.append(str(ref))
            elif ref in resolved:
                ids.append(str(resolved[ref]))
            else:
                chk.add(("dependency", kind, i), f"{ref!r} is neither a job id nor the name of a spec submitted "
                        "in the same `sk submit`", hint="submit both specs together: sk submit a.yaml b.yaml")
        if ids:
            parts.append(kind + ":" + ":".join(ids))
    return ",".join(parts)


def _srun_options(spec: JobSpec, site: Site, launcher: Launcher, cpus_per_task: int, runtime: str) -> list[str]:
    if not launcher.distributed:
        return []
    # -c again on srun: Slurm 22.05-23.02 srun does not inherit --cpus-per-task from the allocation.
    # No --gpu-bind: see the module docstring (22.05 unsets CUDA_VISIBLE_DEVICES in tasks of a --gpu-bind=none step).
    opts = ["--cpu-bind=none", f"--cpus-per-task={cpus_per_task}"]
    opts += launcher.srun_options(site)
    if spec.container and runtime == "pyxis":
        opts.append(f"--container-image={spec.container.image}")
        if spec.container.mounts:
            opts.append("--container-mounts=" + ",".join(spec.container.mounts))
        if spec.container.workdir:
            opts.append(f"--container-workdir={spec.container.workdir}")
    return opts

