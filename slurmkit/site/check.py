"""`sk site check`: compare the site config with what the live Slurm says, and say what to change where.

Why: the planner trusts the site config (GPU count and type, cores, memory, partition limits, GPU-to-CPU
affinity). When it disagrees with slurm.conf/gres.conf, jobs pend forever (a time or node limit above the
partition's), are refused ("Requested node configuration is not available"), or bind ranks to the wrong socket.

Sources, all read through Slurm's own commands (no parsing of slurm.conf itself, so includes, defaults and
`scontrol reconfigure` state are what Slurm really uses):
  scontrol show config        cluster name, version, the slurm.conf path (named in the fixes)
  scontrol show partition -o  nodes, MaxTime, DefaultTime, MaxNodes, AllowQos, JobDefaults, State
  scontrol show node -o       Gres (types, counts), Boards/Sockets/CoresPerSocket/ThreadsPerCore, CPUTot,
                              RealMemory, AvailableFeatures, State
  slurmd -f <slurm.conf> -G -N <node>   gres.conf as slurmd reads it: File= and Cores= per GPU (optional:
                              needs the slurmd binary; skipped with a note where it is missing)
`sinfo` is not used: it prints the same controller data as scontrol, less completely and not one object a line.

Severity: an *error* is a disagreement that makes jobs fail, pend forever or bind wrongly; a *warning* is one
that only wastes resources or confuses (the site config is more conservative than Slurm, a default differs).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import hostlist

from slurmkit.config.source import KeyPath, Source, dotted
from slurmkit.config.suggest import closest
from slurmkit.config.units import format_cpulist, format_mem, format_time, parse_mem_mib, parse_time_minutes
from slurmkit.errors import SlurmkitError
from slurmkit.site.discover import parse_slurmd_g
from slurmkit.site.model import NodeType, Site
from slurmkit.slurm.scontrol import parse_show_job

UNLIMITED = 10**9  # minutes / nodes: what Slurm's UNLIMITED compares as


class SlurmUnreachable(SlurmkitError):
    """scontrol cannot answer (not installed, controller down): nothing was compared. Exit status 3."""

    exit_code = 3


@dataclass
class Finding:
    """One disagreement. `key`/`file`/`line` locate it in the site config; `slurm_where` in Slurm's files."""

    severity: str  # "error" or "warning"
    check: str  # short id, e.g. "gres.count", "partition.max_time"
    message: str
    fix: str
    key: str | None = None
    file: str | None = None
    line: int | None = None
    config_value: str | None = None
    slurm_value: str | None = None
    nodes: str | None = None  # hostlist of the nodes concerned
    slurm_where: str | None = None  # e.g. "slurm.conf (/etc/slurm/slurm.conf): NodeName=gpu[01-02] Gres="

    def format(self) -> str:
        where = self.file or "<site config>"
        if self.line is not None:
            where += f":{self.line}"
        head = f"{self.severity.upper():<7} {where}" + (f": {self.key}" if self.key else "")
        return f"{head}: {self.message}\n        fix: {self.fix}"


@dataclass
class SlurmState:
    """What Slurm said, as text parsed into key=value dicts. Built live or from recorded outputs (tests)."""

    config: dict[str, str]
    partitions: dict[str, dict[str, str]]
    nodes: dict[str, dict[str, str]]
    gres_conf: dict[str, list[dict]] = field(default_factory=dict)  # node -> parse_slurmd_g() lines
    notes: list[str] = field(default_factory=list)

    @property
    def slurm_conf(self) -> str:
        return self.config.get("SLURM_CONF", "slurm.conf")

    @property
    def gres_conf_path(self) -> str:
        return str(Path(self.slurm_conf).parent / "gres.conf")


@dataclass
class Report:
    site_file: str
    cluster: str | None
    slurm_version: str | None
    checked: dict[str, list[str]]
    findings: list[Finding]
    notes: list[str]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def to_json(self) -> dict:
        return {"site_file": self.site_file, "cluster": self.cluster, "slurm_version": self.slurm_version,
                "checked": self.checked, "notes": self.notes, "errors": len(self.errors),
                "warnings": len(self.warnings), "findings": [asdict(f) for f in self.findings]}


# ---- reading Slurm -----------------------------------------------------------------------------------------

def parse_show_config(text: str) -> dict[str, str]:
    """`scontrol show config`: `Key   = value` lines."""
    out = {}
    for ln in text.splitlines():
        key, sep, value = ln.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def parse_show_lines(text: str, name_key: str) -> dict[str, dict[str, str]]:
    """`scontrol show node -o` / `show partition -o`: one object per line, keyed by NodeName/PartitionName."""
    out = {}
    for ln in text.splitlines():
        if ln.strip():
            kv = parse_show_job(ln)
            if name_key in kv:
                out[kv[name_key]] = kv
    return out


def _scontrol(*args: str, timeout: float = 30.0) -> str:
    cmd = ["scontrol", *args]
    if shutil.which("scontrol") is None:
        raise SlurmUnreachable("scontrol not found: Slurm's client commands are not installed here",
                               hint="run `sk site check` on a login node or the controller")
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise SlurmUnreachable(f"`{' '.join(cmd)}` did not answer within {timeout:.0f}s") from exc
    if res.returncode != 0:
        raise SlurmUnreachable(f"`{' '.join(cmd)}` failed: {(res.stderr or res.stdout).strip()[:300]}")
    return res.stdout


def slurmd_gres(node: str, slurm_conf: str, timeout: float = 30.0) -> tuple[list[dict] | None, str | None]:
    """gres.conf lines for `node` as slurmd parses them, or (None, why not)."""
    if shutil.which("slurmd") is None:
        return None, "slurmd not found here, gres.conf Cores= not compared (run on a node or the controller)"
    cmd = ["slurmd", "-f", slurm_conf, "-G", "-N", node]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"`{' '.join(cmd)}`: {exc}"
    text = res.stdout + res.stderr
    if "Can not stat gres.conf" in text:
        return [], f"slurmd found no gres.conf next to {slurm_conf}; GPU-CPU affinity (Cores=) is not configured"
    return parse_slurmd_g(text), None


def collect_live(site: Site | None = None) -> SlurmState:
    """Ask the running Slurm; with `site`, also read gres.conf (slurmd -G) for one node of each site partition."""
    config = parse_show_config(_scontrol("show", "config"))
    state = SlurmState(config=config,
                       partitions=parse_show_lines(_scontrol("show", "partition", "-o"), "PartitionName"),
                       nodes=parse_show_lines(_scontrol("show", "node", "-o"), "NodeName"))
    for node in gres_nodes_for(site, state) if site else []:
        lines, why = slurmd_gres(node, state.slurm_conf)
        if why:
            state.notes.append(why)
        if lines is not None:
            state.gres_conf[node] = lines
    return state


# ---- parsing Slurm values ----------------------------------------------------------------------------------

_GRES_ITEM = re.compile(r"^([^:(]+)(?::([^:(]+))?:(\d+)")


def parse_gres(value: str) -> list[tuple[str, str | None, int]]:
    """`gpu:a100:8(S:0-1),gpu:1g.10gb:16(S:0-1)` -> [(gpu, a100, 8), (gpu, 1g.10gb, 16)]; `(null)` -> []."""
    out = []
    depth, item = 0, ""
    for ch in f"{value},":
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            m = _GRES_ITEM.match(item.strip())
            if m:
                out.append((m.group(1), m.group(2), int(m.group(3))))
            item = ""
        else:
            item += ch
    return out


def _minutes(value: str | None) -> int | None:
    if value in (None, "", "NONE", "n/a"):
        return None
    if value == "UNLIMITED":
        return UNLIMITED
    try:
        return parse_time_minutes(value)
    except ValueError:
        return None


def _int(value: str | None) -> int | None:
    if value in (None, "", "UNLIMITED", "N/A"):
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _job_defaults(value: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in (value or "").split(","):
        k, sep, v = part.partition("=")
        if sep:
            out[k] = v
    return out


def _version(text: str | None) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


# ---- the comparison ----------------------------------------------------------------------------------------

class _Findings:
    def __init__(self, src: Source, slurm: SlurmState):
        self.src, self.slurm = src, slurm
        self.items: list[Finding] = []

    def add(self, severity: str, check: str, path: KeyPath | None, message: str, fix: str, *,
            config_value: object = None, slurm_value: object = None, nodes: list[str] | None = None,
            slurm_where: str | None = None) -> None:
        self.items.append(Finding(
            severity=severity, check=check, message=message, fix=fix,
            key=dotted(path) if path else None, file=self.src.file,
            line=self.src.line_of(path) if path else None,
            config_value=None if config_value is None else str(config_value),
            slurm_value=None if slurm_value is None else str(slurm_value),
            nodes=hostlist.collect_hostlist(nodes) if nodes else None, slurm_where=slurm_where))


def check_site(site: Site, src: Source, slurm: SlurmState) -> Report:
    """Every disagreement between `site` (parsed from `src`) and `slurm`."""
    f = _Findings(src, slurm)
    conf = f"slurm.conf ({slurm.slurm_conf})"
    _check_cluster(site, slurm, f, conf)
    checked_nodes: list[str] = []
    for pname, part in site.partitions.items():
        sp = slurm.partitions.get(pname)
        if sp is None:
            best = closest(pname, slurm.partitions)
            f.add("error", "partition.exists", ("partitions", pname),
                  f"partition {pname!r} does not exist in Slurm (Slurm has: {', '.join(sorted(slurm.partitions))})",
                  f"rename partitions.{pname} to {best!r}" if best else
                  f"rename partitions.{pname} to one of Slurm's partitions ({', '.join(sorted(slurm.partitions))}), "
                  f"or add PartitionName={pname} to {conf}",
                  config_value=pname, slurm_value=",".join(sorted(slurm.partitions)))
            continue
        nodes = hostlist.expand_hostlist(sp.get("Nodes", "")) if sp.get("Nodes") not in (None, "", "(null)") else []
        _check_partition(pname, part, sp, nodes, f, conf)
        nt_name = part.node_type
        known = [n for n in nodes if n in slurm.nodes]
        checked_nodes += [n for n in known if n not in checked_nodes]
        _check_nodes(pname, nt_name, site.node_types[nt_name], {n: slurm.nodes[n] for n in known}, f, conf)
        for node, lines in slurm.gres_conf.items():
            if node in known:
                _check_gres_conf(nt_name, site.node_types[nt_name], node, lines, f, slurm.gres_conf_path)
    for pname, sp in slurm.partitions.items():
        if pname not in site.partitions:
            f.add("warning", "partition.unlisted", ("partitions",),
                  f"Slurm partition {pname!r} ({sp.get('Nodes', '?')}) is not in the site config: `sk submit` "
                  "cannot use it", f"add partitions.{pname} (with its node_type) if users should run there",
                  slurm_value=pname)
    severity_order = {"error": 0, "warning": 1}
    findings = sorted(f.items, key=lambda x: (severity_order[x.severity], x.line or 0))
    return Report(site_file=src.file, cluster=slurm.config.get("ClusterName"),
                  slurm_version=slurm.config.get("SLURM_VERSION"),
                  checked={"partitions": [p for p in site.partitions if p in slurm.partitions],
                           "nodes": checked_nodes, "gres_conf_nodes": sorted(slurm.gres_conf)},
                  findings=findings, notes=list(slurm.notes))


def _check_cluster(site: Site, slurm: SlurmState, f: _Findings, conf: str) -> None:
    name = slurm.config.get("ClusterName")
    if name and name != site.cluster:
        f.add("warning", "cluster.name", ("cluster",),
              f"site config names the cluster {site.cluster!r}; Slurm's ClusterName is {name!r} (accounting "
              "records and reports carry the site's name)", f"set cluster: {name}",
              config_value=site.cluster, slurm_value=name, slurm_where=f"{conf}: ClusterName=")
    real = _version(slurm.config.get("SLURM_VERSION"))
    said = site.slurm_version_tuple
    if real and said != real:
        newer = said > real
        f.add("error" if newer else "warning", "cluster.slurm_version", ("slurm_version",),
              f"site config says Slurm {site.slurm_version}; the cluster runs {slurm.config['SLURM_VERSION']}"
              + (": slurmkit would use options this Slurm does not have (e.g. --gres-flags=allow-task-sharing, "
                 "23.11+)" if newer else ": slurmkit keeps workarounds this Slurm no longer needs"),
              f'set slurm_version: "{real[0]:02d}.{real[1]:02d}"',
              config_value=site.slurm_version, slurm_value=slurm.config["SLURM_VERSION"])
    default = [p for p, sp in slurm.partitions.items() if sp.get("Default") == "YES"]
    if site.default_partition and default and site.default_partition not in default:
        f.add("warning", "cluster.default_partition", ("default_partition",),
              f"site default_partition is {site.default_partition!r}; Slurm's default partition is {default[0]!r} "
              "(plain sbatch and sk disagree on where a job without a partition goes)",
              f"set default_partition: {default[0]}, or Default=YES on PartitionName={site.default_partition} in "
              f"{conf}", config_value=site.default_partition, slurm_value=default[0])


def _check_partition(pname: str, part, sp: dict[str, str], nodes: list[str], f: _Findings, conf: str) -> None:
    where = f"{conf}: PartitionName={pname}"
    total = _int(sp.get("TotalNodes")) or len(nodes)
    if part.nodes != total:
        more = part.nodes > total
        f.add("error" if more else "warning", "partition.nodes", ("partitions", pname, "nodes"),
              f"site config says {part.nodes} nodes; Slurm's partition {pname} has {total} "
              f"({sp.get('Nodes', '?')})" + (": jobs sized for the config would never start" if more else ""),
              f"set partitions.{pname}.nodes: {total}", config_value=part.nodes, slurm_value=total,
              slurm_where=f"{where} Nodes=")
    smax = _minutes(sp.get("MaxTime"))
    if smax is not None and part.max_minutes != smax:
        more = part.max_minutes > smax
        shown = sp.get("MaxTime")
        f.add("error" if more else "warning", "partition.max_time", ("partitions", pname, "max_time"),
              f"site max_time {part.max_time} vs Slurm MaxTime={shown}"
              + (": sk would accept jobs that then pend forever (Reason=PartitionTimeLimit)" if more else
                 ": users cannot ask for the partition's full limit through sk"),
              f'set partitions.{pname}.max_time: "{shown if smax < UNLIMITED else format_time(part.max_minutes)}"'
              + (f", or MaxTime={part.max_time} on PartitionName={pname} in {conf}" if more else ""),
              config_value=part.max_time, slurm_value=shown, slurm_where=f"{where} MaxTime=")
    sdef = _minutes(sp.get("DefaultTime"))
    if sdef is not None and sdef != parse_time_minutes(part.default_time):
        f.add("warning", "partition.default_time", ("partitions", pname, "default_time"),
              f"site default_time {part.default_time} vs Slurm DefaultTime={sp.get('DefaultTime')} (sk always "
              "passes --time; plain sbatch users get Slurm's)",
              f'set partitions.{pname}.default_time: "{sp.get("DefaultTime")}"', config_value=part.default_time,
              slurm_value=sp.get("DefaultTime"), slurm_where=f"{where} DefaultTime=")
    smaxn = UNLIMITED if sp.get("MaxNodes") == "UNLIMITED" else _int(sp.get("MaxNodes"))
    mine = part.max_nodes or part.nodes
    if smaxn is not None and mine != min(smaxn, total):
        limit = min(smaxn, total)
        more = mine > limit
        f.add("error" if more else "warning", "partition.max_nodes", ("partitions", pname, "max_nodes"),
              f"site allows {mine} nodes per job; Slurm's MaxNodes={sp.get('MaxNodes')} with {total} nodes allows "
              f"{limit}" + (": larger jobs would pend forever (Reason=PartitionNodeLimit)" if more else ""),
              f"set partitions.{pname}.max_nodes: {limit}", config_value=mine, slurm_value=sp.get("MaxNodes"),
              slurm_where=f"{where} MaxNodes=")
    jd = _job_defaults(sp.get("JobDefaults"))
    if part.default_cpus_per_gpu is not None and jd.get("DefCpuPerGPU") != str(part.default_cpus_per_gpu):
        f.add("warning", "partition.default_cpus_per_gpu", ("partitions", pname, "default_cpus_per_gpu"),
              f"site default_cpus_per_gpu {part.default_cpus_per_gpu} vs Slurm DefCpuPerGPU="
              f"{jd.get('DefCpuPerGPU', '(unset)')} (sk passes --cpus-per-task itself)",
              f"set partitions.{pname}.default_cpus_per_gpu: {jd['DefCpuPerGPU']}" if "DefCpuPerGPU" in jd else
              f"set DefCpuPerGPU={part.default_cpus_per_gpu} on PartitionName={pname} in {conf}",
              config_value=part.default_cpus_per_gpu, slurm_value=jd.get("DefCpuPerGPU"),
              slurm_where=f"{where} DefCpuPerGPU=")
    if part.default_mem_per_gpu is not None:
        mine_mib = parse_mem_mib(part.default_mem_per_gpu)
        if jd.get("DefMemPerGPU") != str(mine_mib):
            f.add("warning", "partition.default_mem_per_gpu", ("partitions", pname, "default_mem_per_gpu"),
                  f"site default_mem_per_gpu {part.default_mem_per_gpu} ({mine_mib} MiB) vs Slurm DefMemPerGPU="
                  f"{jd.get('DefMemPerGPU', '(unset)')} MiB (sk passes --mem-per-gpu itself)",
                  f"set partitions.{pname}.default_mem_per_gpu: {format_mem(int(jd['DefMemPerGPU']))}"
                  if jd.get("DefMemPerGPU", "").isdigit() else
                  f"set DefMemPerGPU={mine_mib} on PartitionName={pname} in {conf}",
                  config_value=part.default_mem_per_gpu, slurm_value=jd.get("DefMemPerGPU"),
                  slurm_where=f"{where} DefMemPerGPU=")
    allow = sp.get("AllowQos", "ALL")
    if allow != "ALL" and part.qos:
        allowed = set(allow.split(","))
        for i, q in enumerate(part.qos):
            if q not in allowed:
                f.add("error", "partition.qos", ("partitions", pname, "qos", i),
                      f"QOS {q!r} is listed for partition {pname} but Slurm's AllowQos={allow}: jobs with it are "
                      "refused", f"remove {q} from partitions.{pname}.qos, or add it to AllowQos= on "
                      f"PartitionName={pname} in {conf}", config_value=q, slurm_value=allow,
                      slurm_where=f"{where} AllowQos=")
    if sp.get("State", "UP") != "UP":
        f.add("warning", "partition.state", ("partitions", pname),
              f"Slurm partition {pname} is {sp.get('State')}: jobs will not start there",
              f"scontrol update PartitionName={pname} State=UP (when it should run jobs)",
              slurm_value=sp.get("State"))


def _group(nodes: dict[str, dict[str, str]], value) -> dict[object, list[str]]:
    """Nodes grouped by a derived value, so one finding names a hostlist instead of repeating per node."""
    groups: dict[object, list[str]] = defaultdict(list)
    for name, kv in nodes.items():
        groups[value(kv)].append(name)
    return groups


def _check_nodes(pname: str, nt_name: str, nt: NodeType, nodes: dict[str, dict[str, str]], f: _Findings,
                 conf: str) -> None:
    base: KeyPath = ("node_types", nt_name)

    def nodeline(names: list[str]) -> str:
        return f"{conf}: NodeName={hostlist.collect_hostlist(names)}"

    want_type = nt.gpu.slurm_type
    for gres, names in _group(nodes, lambda kv: tuple(parse_gres(kv.get("Gres", "")))).items():
        gpus = [(t, n) for name, t, n in gres if name == "gpu"]
        shown = ",".join(f"gpu:{t}:{n}" if t else f"gpu:{n}" for t, n in gpus) or "(no gpu gres)"
        if not gpus:
            f.add("error", "gres.missing", (*base, "gpu"),
                  f"nodes of partition {pname} have no GPUs in Slurm (Gres={shown}); the site says "
                  f"{nt.gpu.count}x {want_type}", f"add Gres=gpu:{want_type}:{nt.gpu.count} to the NodeName line "
                  f"(and GresTypes=gpu) in {conf}, or fix partitions.{pname}.node_type", nodes=names,
                  config_value=f"gpu:{want_type}:{nt.gpu.count}", slurm_value=shown, slurm_where=nodeline(names))
            continue
        types = {t for t, _ in gpus}
        if want_type not in types:
            typed = sorted(t for t in types if t)
            if typed:
                fix = (f"set node_types.{nt_name}.gpu.slurm_type: {typed[0]}" if len(typed) == 1 else
                       f"set node_types.{nt_name}.gpu.slurm_type to one of {', '.join(typed)}")
                fix += f" (or Type={want_type} in gres.conf and Gres=gpu:{want_type}:N in {conf})"
                msg = (f"site gres type {want_type!r} is not on the nodes of partition {pname}: Slurm has "
                       f"{shown}; `--gpus-per-node={want_type}:N` would be refused")
            else:
                fix = (f"add Type={want_type} to the GPU lines of gres.conf and write Gres=gpu:{want_type}:"
                       f"{nt.gpu.count} in {conf} (sk always asks for typed GPUs)")
                msg = (f"Slurm's GPUs on partition {pname} have no type (Gres={shown}); the site config asks "
                       f"for gpu:{want_type}, which untyped GPUs never satisfy")
            f.add("error", "gres.type", (*base, "gpu", "slurm_type"), msg, fix, config_value=want_type,
                  slurm_value=shown, nodes=names, slurm_where=nodeline(names))
            continue
        count = sum(n for t, n in gpus if t == want_type)
        if count != nt.gpu.count:
            f.add("error", "gres.count", (*base, "gpu", "count"),
                  f"site config says {nt.gpu.count} GPUs per node; Slurm has {count} gpu:{want_type} on "
                  f"{hostlist.collect_hostlist(names)}"
                  + (": jobs asking for all of them are refused" if nt.gpu.count > count else
                     f": sk never asks for more than {nt.gpu.count}, and a rank given GPU {nt.gpu.count} or above "
                     "finds no topology for it and runs unbound"),
                  f"set node_types.{nt_name}.gpu.count: {count} (and list {count} entries under gpus), or, if "
                  f"{nt.gpu.count} is right, Gres=gpu:{want_type}:{nt.gpu.count} in {conf} and gres.conf",
                  config_value=nt.gpu.count, slurm_value=count, nodes=names, slurm_where=nodeline(names))

    def shape(kv: dict[str, str]) -> tuple:
        sockets = (_int(kv.get("Sockets")) or 0) * (_int(kv.get("Boards")) or 1)
        return sockets, _int(kv.get("CoresPerSocket")), _int(kv.get("ThreadsPerCore")), _int(kv.get("CPUTot"))

    for (sockets, cores, threads, cputot), names in _group(nodes, shape).items():
        for key, mine, theirs, slurm_key in (("sockets", nt.sockets, sockets, "Sockets"),
                                             ("cores_per_socket", nt.cores_per_socket, cores, "CoresPerSocket"),
                                             ("threads_per_core", nt.threads_per_core, threads, "ThreadsPerCore")):
            if theirs is not None and mine != theirs:
                f.add("error", f"node.{key}", (*base, key),
                      f"site {key} {mine} vs Slurm {slurm_key}={theirs} on {hostlist.collect_hostlist(names)}: "
                      "CPU counts and binding would be planned for another machine",
                      f"set node_types.{nt_name}.{key}: {theirs} (check the node with `slurmd -C`; `sk site "
                      "discover` there writes the whole block)", config_value=mine, slurm_value=theirs, nodes=names,
                      slurm_where=f"{nodeline(names)} {slurm_key}=")
        if cputot is not None and cputot != nt.cpus and (sockets, cores, threads) == (
                nt.sockets, nt.cores_per_socket, nt.threads_per_core):
            f.add("warning", "node.cpus", (*base, "threads_per_core"),
                  f"Slurm schedules {cputot} CPUs per node (CPUTot) but sockets x cores x threads in the site config "
                  f"is {nt.cpus}", f"check CPUs= on NodeName={hostlist.collect_hostlist(names)} in {conf}",
                  config_value=nt.cpus, slurm_value=cputot, nodes=names)

    for mem, names in _group(nodes, lambda kv: _int(kv.get("RealMemory"))).items():
        if mem is None or mem == nt.memory_mib:
            continue
        more = nt.memory_mib > mem
        f.add("error" if more else "warning", "node.memory", (*base, "memory"),
              f"site memory {nt.memory} ({nt.memory_mib} MiB) vs Slurm RealMemory={mem} on "
              f"{hostlist.collect_hostlist(names)}"
              + (": jobs sized for the config are refused" if more else ": sk plans with less than Slurm allows"),
              f"set node_types.{nt_name}.memory: {format_mem(mem)}", config_value=nt.memory, slurm_value=mem,
              nodes=names, slurm_where=f"{nodeline(names)} RealMemory=")

    if nt.features:
        for feats, names in _group(nodes, lambda kv: frozenset(
                x for x in kv.get("AvailableFeatures", "").split(",") if x and x != "(null)")).items():
            for i, feat in enumerate(nt.features):
                if feat not in feats:
                    f.add("error", "node.features", (*base, "features", i),
                          f"feature {feat!r} is not on {hostlist.collect_hostlist(names)} (AvailableFeatures="
                          f"{','.join(sorted(feats)) or '(null)'}): --constraint={feat} would never match",
                          f"remove it from node_types.{nt_name}.features, or add Features={feat} to the NodeName "
                          f"line in {conf}", config_value=feat, slurm_value=",".join(sorted(feats)), nodes=names)

    bad = {n: kv.get("State", "") for n, kv in nodes.items()
           if re.search(r"DOWN|DRAIN|FAIL|NOT_RESPONDING|\*", kv.get("State", ""))}
    if bad:
        f.add("warning", "node.state", ("partitions", pname),
              f"nodes not usable now: {', '.join(f'{n} ({s})' for n, s in sorted(bad.items()))}",
              "see `scontrol show node <name>` Reason=; `scontrol update NodeName=<name> State=RESUME` once fixed",
              nodes=list(bad))


def site_cores(nt: NodeType, cpus: list[int]) -> set[int]:
    """Slurm core indices of kernel CPUs, assuming Linux numbers the first thread of every core 0..C-1 socket by
    socket and the SMT siblings C..2C-1 the same way (true on the DGX/HGX boards in tests/data; check `lscpu -p`
    on machines that interleave sockets)."""
    per_node = nt.sockets * nt.cores_per_socket
    return {c % per_node for c in cpus}


def _check_gres_conf(nt_name: str, nt: NodeType, node: str, lines: list[dict], f: _Findings, path: str) -> None:
    """gres.conf Cores= per GPU vs the site's CPU list; GPUs with the same disagreement make one finding."""
    where = f"gres.conf ({path}), lines for {node}"
    by_minor: dict[int, list[int] | None] = {}
    for ln in lines:
        for minor in ln["minors"]:
            by_minor[minor] = ln["cores"]
    unknown = [m for m in sorted(by_minor) if m >= len(nt.gpus)]
    if unknown:
        devs = hostlist.collect_hostlist([f"nvidia{m}" for m in unknown])
        f.add("warning", "gres_conf.file", ("node_types", nt_name, "gpus"),
              f"gres.conf on {node} has /dev/{devs}, which node_types.{nt_name}.gpus does not list (it has GPUs "
              f"0-{len(nt.gpus) - 1})", "check File= in gres.conf against `nvidia-smi -q | grep Minor` on the node, "
              f"or list every GPU under node_types.{nt_name}.gpus", nodes=[node], slurm_value=f"/dev/{devs}",
              slurm_where=where)
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for minor, cores in sorted(by_minor.items()):
        if minor in unknown:
            continue
        g = nt.gpu_by_index(minor)
        mine, theirs = site_cores(nt, g.cpu_list), set(cores or [])
        kind = "none" if not theirs else "disjoint" if not mine & theirs else "partial" if not mine <= theirs else ""
        if kind:
            groups[(kind, g.cpus, format_cpulist(theirs))].append(minor)
    for (kind, cpus, theirs), minors in groups.items():
        first = nt.gpus.index(nt.gpu_by_index(minors[0]))
        path_k: KeyPath = ("node_types", nt_name, "gpus", first, "cpus")
        gpus = f"GPU {minors[0]}" if len(minors) == 1 else f"GPUs {format_cpulist(minors)}"
        mine = format_cpulist(site_cores(nt, nt.gpu_by_index(minors[0]).cpu_list))
        entries = f"node_types.{nt_name}.gpus[{format_cpulist([nt.gpus.index(nt.gpu_by_index(m)) for m in minors])}]"
        if kind == "none":
            f.add("warning", "gres_conf.cores", path_k,
                  f"gres.conf on {node} gives {gpus} no Cores=: Slurm cannot keep a job's CPUs near its GPUs",
                  f"add Cores={mine} to the matching File= line(s) of {path}", config_value=cpus,
                  slurm_value="(none)", nodes=[node], slurm_where=where)
        elif kind == "disjoint":
            f.add("error", "gres_conf.cores", path_k,
                  f"{gpus}: the site config puts {'it' if len(minors) == 1 else 'them'} next to CPUs {cpus} (cores "
                  f"{mine}); gres.conf on {node} says Cores={theirs}: the two disagree on which socket the GPU is on",
                  "compare with `nvidia-smi topo -m` on the node (`sk site discover` prints both the block and the "
                  f"gres.conf lines) and fix whichever is wrong: {entries}.cpus or Cores= in {path}",
                  config_value=cpus, slurm_value=theirs, nodes=[node], slurm_where=where)
        else:
            f.add("warning", "gres_conf.cores", path_k,
                  f"{gpus}: site CPUs {cpus} (cores {mine}) are only partly inside gres.conf's Cores={theirs} on "
                  f"{node}", f"widen Cores= in {path} to the GPU's socket, or narrow {entries}.cpus",
                  config_value=cpus, slurm_value=theirs, nodes=[node], slurm_where=where)


def gres_nodes_for(site: Site, slurm: SlurmState) -> list[str]:
    """One node per site partition (the first): gres.conf is nearly always written per node range."""
    out = []
    for pname in site.partitions:
        sp = slurm.partitions.get(pname)
        if sp and sp.get("Nodes") not in (None, "", "(null)"):
            first = hostlist.expand_hostlist(sp["Nodes"])[0]
            if first not in out:
                out.append(first)
    return out

