"""`sk site discover`: read a GPU node's topology off the machine and write it as a site-config node type.

Writing topology by hand is where sites get binding wrong (index/4 arithmetic instead of the real GPU -> NUMA
map), so the block comes from the node's own tools. Every source is a plain text file, so the same code runs
live on a node or offline on saved outputs (`--from DIR`, also how the tests run on real published outputs).

Files (live: the command is run or the file read; offline: read from DIR). topo-m.txt is always needed; what else
is needed, and the flag that stands in for each file, is listed once, in `sk site discover --help`):

  topo-m.txt       nvidia-smi topo -m
  query-gpu.csv    nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,memory.total --format=csv
  lscpu.txt        lscpu -p      (plain `lscpu` output is accepted too)
  slurmd-C.txt     slurmd -C
  slurmd-G.txt     slurmd -G 2>&1
  meminfo.txt      cat /proc/meminfo
  pci.txt          one line per GPU: <bus id> <numa_node> <local_cpulist> from /sys/bus/pci/devices/<bdf>/
  infiniband.txt   one line per HCA port: <hca> <port> <state> <link_layer> from /sys/class/infiniband/
                   (the output of `ibstat` or `ibstatus` is accepted too)
  cpuset.txt       "allowed <Cpus_allowed_list of /proc/self/status>" and "online <cpu/online>": whether the
                   CPU affinity nvidia-smi printed was read inside a restricted cpuset (a job, a container)

`sk site discover --save DIR` writes exactly these files on a node.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hostlist

from slurmkit.config.units import format_cpulist, format_mem, parse_cpulist
from slurmkit.errors import InputError, Problem, SlurmkitError
from slurmkit.nccl import FABRICS
from slurmkit.site.model import NodeType
from slurmkit.site.topology import Topology, parse_topo

FILES = ("topo-m.txt", "query-gpu.csv", "lscpu.txt", "slurmd-C.txt", "slurmd-G.txt", "meminfo.txt", "pci.txt",
         "infiniband.txt", "cpuset.txt")
QUERY_GPU = ["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id,name,memory.total", "--format=csv"]


class NotAGpuNode(SlurmkitError):
    """The tools discovery needs are missing here (no NVIDIA driver): exit 1 with what is missing."""


@dataclass
class Facts:
    """Raw text of each source, by file name; None where it was not available (with the reason)."""

    texts: dict[str, str | None]
    origin: str  # "live" or the directory
    missing: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> str | None:
        return self.texts.get(name)


# ---- collecting ------------------------------------------------------------------------------------------------

def run_command(cmd: list[str], *, stderr: bool = False, timeout: float = 30.0) -> tuple[str | None, str | None]:
    """(output, None), or (None, why it could not run): a missing tool is a reason, never an exception."""
    if shutil.which(cmd[0]) is None:
        return None, f"{cmd[0]} not found on PATH"
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{' '.join(cmd)}: {exc}"
    out = res.stdout + (res.stderr if stderr else "")
    if res.returncode != 0:
        return None, f"{' '.join(cmd)} exited {res.returncode}: {(res.stderr or res.stdout).strip()[:200]}"
    return out, None


def _sysfs_pci(bus_ids: list[str], root: Path = Path("/sys/bus/pci/devices")) -> str:
    lines = []
    for bid in bus_ids:
        d = root / short_bus_id(bid).lower()
        try:
            numa = (d / "numa_node").read_text().strip()
            cpus = (d / "local_cpulist").read_text().strip()
        except OSError:
            continue
        lines.append(f"{bid} {numa} {cpus}")
    return "\n".join(lines) + ("\n" if lines else "")


def read_infiniband(root: Path = Path("/sys/class/infiniband")) -> dict[str, dict[str, dict[str, str]]] | None:
    """{hca: {port: {state, phys_state, link_layer, rate}}} from sysfs (state reads '4: ACTIVE'); None when the
    class directory is absent (no RDMA driver loaded)."""
    if not root.is_dir():
        return None
    out: dict[str, dict[str, dict[str, str]]] = {}
    for hca in sorted(root.iterdir()):
        ports: dict[str, dict[str, str]] = {}
        for port in sorted((hca / "ports").glob("*")):
            info = {}
            for name in ("state", "phys_state", "link_layer", "rate"):
                try:
                    info[name] = (port / name).read_text().strip()
                except OSError:
                    continue
            ports[port.name] = info
        out[hca.name] = ports
    return out


def _sysfs_infiniband(root: Path = Path("/sys/class/infiniband")) -> str | None:
    hcas = read_infiniband(root)
    if hcas is None:
        return None
    lines = [f"{hca} {port} {info['state'].split(':')[-1].strip()} {info['link_layer']}"
             for hca, ports in hcas.items() for port, info in ports.items() if {"state", "link_layer"} <= set(info)]
    return "\n".join(lines) + "\n"


def collect_live() -> Facts:
    """Run the node's tools. Raises NotAGpuNode when nvidia-smi cannot answer (no driver, no GPU)."""
    texts: dict[str, str | None] = {}
    missing: dict[str, str] = {}

    def put(name: str, value: tuple[str | None, str | None]) -> None:
        texts[name], why = value
        if why:
            missing[name] = why

    put("topo-m.txt", run_command(["nvidia-smi", "topo", "-m"]))
    if texts["topo-m.txt"] is None:
        raise NotAGpuNode(
            f"cannot read the GPU topology here: {missing['topo-m.txt']}. This is not a GPU node, or the NVIDIA "
            "driver is not installed.",
            hint="run `sk site discover` on a GPU node, or `sk site discover --save DIR` there and "
                 "`sk site discover --from DIR` here (see `sk site discover --help` for the files)")
    put("query-gpu.csv", run_command(QUERY_GPU))
    put("lscpu.txt", run_command(["lscpu", "-p"]))
    put("slurmd-C.txt", run_command(["slurmd", "-C"]))
    put("slurmd-G.txt", run_command(["slurmd", "-G"], stderr=True))
    try:
        texts["meminfo.txt"] = Path("/proc/meminfo").read_text()
    except OSError as exc:
        texts["meminfo.txt"], missing["meminfo.txt"] = None, str(exc)
    bus = [g["pci_bus_id"] for g in parse_query_gpu(texts["query-gpu.csv"] or "")]
    texts["pci.txt"] = _sysfs_pci(bus) if bus else None
    texts["infiniband.txt"] = _sysfs_infiniband()
    if texts["infiniband.txt"] is None:
        missing["infiniband.txt"] = "/sys/class/infiniband does not exist (no RDMA devices)"
    texts["cpuset.txt"] = _cpuset_text()
    return Facts(texts, "live", missing)


def _cpuset_text(proc: Path = Path("/proc"), sys: Path = Path("/sys")) -> str | None:
    """The CPUs this process may use and the CPUs online: nvidia-smi's CPU Affinity is cut to the former."""
    try:
        status = (proc / "self" / "status").read_text()
        online = (sys / "devices" / "system" / "cpu" / "online").read_text().strip()
    except OSError:
        return None
    m = re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.MULTILINE)
    return f"allowed {m.group(1)}\nonline {online}\n" if m else None


def read_dir(path: str | Path) -> Facts:
    d = Path(path)
    if not d.is_dir():
        raise InputError(Problem("--from must name a directory of saved outputs", file=str(d),
                                 hint="files: " + ", ".join(FILES)))
    texts: dict[str, str | None] = {}
    missing: dict[str, str] = {}
    for name in FILES:
        f = d / name
        texts[name] = f.read_text() if f.is_file() else None
        if texts[name] is None:
            missing[name] = "not in the directory"
    if texts["topo-m.txt"] is None:
        raise InputError(Problem("topo-m.txt (the output of `nvidia-smi topo -m`) is missing", file=str(d),
                                 hint="save it with `nvidia-smi topo -m > topo-m.txt` on the node, or use "
                                      "`sk site discover --save DIR` there"))
    return Facts(texts, str(d), missing)


def save(facts: Facts, path: str | Path) -> list[Path]:
    d = Path(path)
    d.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in facts.texts.items():
        if text is not None:
            (d / name).write_text(text)
            written.append(d / name)
    return written


# ---- parsing the sources ---------------------------------------------------------------------------------------

def short_bus_id(bus_id: str) -> str:
    """nvidia-smi prints an 8-digit PCI domain (00000000:07:00.0); sysfs uses 4 (0000:07:00.0)."""
    dom, _, rest = bus_id.strip().partition(":")
    return f"{dom[-4:]}:{rest}" if rest else bus_id.strip()


def parse_query_gpu(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,memory.total --format=csv` (header line kept)."""
    rows = []
    for ln in text.splitlines():
        parts = [p.strip() for p in ln.split(",")]
        if len(parts) < 5 or not parts[0].isdigit():
            continue  # the header, or noise
        mem = re.match(r"(\d+)\s*MiB", parts[4])
        rows.append({"index": int(parts[0]), "uuid": parts[1], "pci_bus_id": short_bus_id(parts[2]),
                     "name": parts[3], "memory_mib": int(mem.group(1)) if mem else None})
    return rows


@dataclass
class CpuLayout:
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    numa_cpus: dict[int, list[int]]  # NUMA node -> CPUs (empty when unknown)
    core_of_cpu: dict[int, int] = field(default_factory=dict)  # CPU -> Slurm-style core index (lscpu -p only)


def parse_lscpu(text: str) -> CpuLayout:
    """`lscpu -p` (CPU,Core,Socket,Node,...) or plain `lscpu` ("Socket(s):   2")."""
    if any(ln.startswith("# CPU,Core,Socket") for ln in text.splitlines()):
        cpus: list[tuple[int, int, int, int]] = []
        for ln in text.splitlines():
            if ln.startswith("#") or not ln.strip():
                continue
            f = ln.split(",")
            node = int(f[3]) if len(f) > 3 and f[3].strip() else 0
            cpus.append((int(f[0]), int(f[1]), int(f[2]), node))
        sockets = len({c[2] for c in cpus})
        cores = sorted({(c[2], c[1]) for c in cpus})
        numa: dict[int, list[int]] = {}
        for cpu, _core, _sock, node in cpus:
            numa.setdefault(node, []).append(cpu)
        # Slurm numbers cores socket by socket, in order (gres.conf Cores= uses these indices).
        core_index = {sc: i for i, sc in enumerate(cores)}
        return CpuLayout(sockets=sockets, cores_per_socket=len(cores) // sockets,
                         threads_per_core=len(cpus) // len(cores), numa_cpus=numa,
                         core_of_cpu={c[0]: core_index[(c[2], c[1])] for c in cpus})
    kv = {}
    for ln in text.splitlines():
        key, sep, value = ln.partition(":")
        if sep:
            kv[key.strip()] = value.strip()
    try:
        sockets = int(kv["Socket(s)"])
        cores = int(kv["Core(s) per socket"])
        threads = int(kv["Thread(s) per core"])
    except (KeyError, ValueError) as exc:
        raise InputError(Problem(f"lscpu output lacks {exc}", file="lscpu.txt",
                                 hint="save `lscpu -p` (or plain `lscpu`) unchanged")) from None
    numa = {}
    for key, value in kv.items():
        m = re.match(r"NUMA node(\d+) CPU\(s\)", key)
        if m and value:
            numa[int(m.group(1))] = parse_cpulist(value)
    return CpuLayout(sockets, cores, threads, numa)


def parse_kv_line(text: str) -> dict[str, str]:
    """`slurmd -C`: NodeName=... CPUs=... SocketsPerBoard=... RealMemory=..."""
    out = {}
    for tok in text.split():
        k, sep, v = tok.partition("=")
        if sep:
            out[k] = v
    return out


_GRES = re.compile(r"Gres Name=(\S+)(?: Type=(\S+))? Count=(\d+).*?File=(\S+)(?: Cores=(\S+))?")


def parse_slurmd_g(text: str) -> list[dict[str, Any]]:
    """`slurmd -G`: one `Gres Name=gpu Type=a100 Count=4 ... File=/dev/nvidia[0-3] Cores=0-31` line per gres.conf
    line (Slurm 22.05 prints them on stderr with a `slurmd: ` prefix). Minor numbers come from File=."""
    out = []
    for ln in text.splitlines():
        m = _GRES.search(ln)
        if not m or m.group(1) != "gpu":
            continue
        files = hostlist.expand_hostlist(m.group(4))
        minors = [int(re.search(r"(\d+)$", f).group(1)) for f in files if re.search(r"(\d+)$", f)]
        cores = None if m.group(5) in (None, "(null)") else parse_cpulist(m.group(5))
        out.append({"type": m.group(2), "count": int(m.group(3)), "files": files, "minors": minors,
                    "cores": cores})
    return out


def parse_meminfo_mib(text: str) -> int | None:
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    return int(m.group(1)) // 1024 if m else None


def parse_pci(text: str) -> dict[str, tuple[int | None, str | None]]:
    out = {}
    for ln in text.splitlines():
        parts = ln.split()
        if len(parts) >= 3:
            numa = int(parts[1])
            out[short_bus_id(parts[0]).upper()] = (None if numa < 0 else numa, parts[2])
    return out


def parse_ibstatus(text: str) -> dict[tuple[str, str], dict[str, str]]:
    """`ibstatus` (which prints the sysfs port files): {(hca, port): {state, phys_state, rate, link_layer}}."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    cur: dict[str, str] | None = None
    for ln in text.splitlines():
        m = re.match(r"Infiniband device '(\S+)' port (\d+) status:", ln)
        if m:
            cur = out.setdefault((m.group(1), m.group(2)), {})
            continue
        k, sep, v = ln.partition(":")
        if cur is not None and sep:
            key = k.strip().replace(" ", "_")
            if key in ("state", "phys_state", "rate", "link_layer"):
                cur[key] = v.strip()
    return out


def parse_infiniband(text: str) -> dict[str, dict[str, dict[str, str]]]:
    """{hca: {port: {state, link_layer}}} from the sysfs dump (`<hca> <port> <state> <link_layer>` lines), `ibstat`
    or `ibstatus`; states are upper-cased names (ACTIVE, DOWN, INIT)."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    if re.search(r"^CA '", text, re.MULTILINE):  # ibstat
        hca = port = None
        for ln in text.splitlines():
            m = re.match(r"CA '(\S+)'", ln)
            if m:
                hca, port = m.group(1), None
                out.setdefault(hca, {})
                continue
            m = re.match(r"\s+Port (\d+):", ln)
            if m and hca:
                port = m.group(1)
                out[hca][port] = {}
                continue
            key, sep, value = ln.strip().partition(":")
            if sep and hca and port and key in ("State", "Link layer"):
                out[hca][port]["state" if key == "State" else "link_layer"] = value.strip()
    elif "Infiniband device '" in text:  # ibstatus
        for (hca, port), info in parse_ibstatus(text).items():
            out.setdefault(hca, {})[port] = {k: info[k] for k in ("state", "link_layer") if k in info}
    else:
        for ln in text.splitlines():
            parts = ln.split()
            if len(parts) >= 4:
                out.setdefault(parts[0], {})[parts[1]] = {"state": parts[2], "link_layer": parts[3]}
    for ports in out.values():
        for info in ports.values():
            if "state" in info:
                info["state"] = info["state"].split(":")[-1].strip().upper()
    return out


def parse_cpuset(text: str) -> tuple[list[int], list[int]] | None:
    """cpuset.txt: (allowed CPUs, online CPUs)."""
    kv = dict(ln.split(None, 1) for ln in text.splitlines() if len(ln.split(None, 1)) == 2)
    if "allowed" not in kv or "online" not in kv:
        return None
    return parse_cpulist(kv["allowed"].strip()), parse_cpulist(kv["online"].strip())


# ---- building the node type ------------------------------------------------------------------------------------

_ARCH = (("B200", "blackwell"), ("B100", "blackwell"), ("GB200", "blackwell"), ("H100", "hopper"),
         ("H200", "hopper"), ("H800", "hopper"), ("GH200", "hopper"), ("L40", "ada"), ("L4", "ada"),
         ("Ada", "ada"), ("A100", "ampere"), ("A800", "ampere"), ("A40", "ampere"), ("A30", "ampere"),
         ("A10", "ampere"), ("A6000", "ampere"), ("V100", "volta"), ("T4", "turing"), ("P100", "pascal"))


def gpu_arch(model: str) -> str | None:
    for key, arch in _ARCH:
        if key in model:
            return arch
    return None


def slurm_type_from_model(model: str) -> str:
    """A short gres type (a100, h100): what most sites write as Type= in gres.conf; check it against yours."""
    first = re.split(r"[\s-]", model.strip())[0].lower()
    return re.sub(r"[^a-z0-9_.]", "_", first) or "gpu"


@dataclass
class Discovery:
    name: str
    node_type: dict[str, Any]
    notes: list[str]
    gres_conf: list[str]

    def yaml(self) -> str:
        return to_yaml(self.name, self.node_type, self.notes, self.gres_conf)


def discover(facts: Facts, *, name: str = "gpunode", memory: str | None = None, gpu_model: str | None = None,
             slurm_type: str | None = None, fabric: str | None = None, sockets: int | None = None,
             cores_per_socket: int | None = None, threads_per_core: int | None = None,
             numa_nodes: int | None = None, storage_hcas: list[str] | None = None) -> Discovery:
    """Turn the sources into a NodeType-shaped dict (validated) plus notes on what was inferred or missing.

    Everything that cannot be known from the sources is a located problem (all of them at once), never a default
    written as if it had been read. `storage_hcas` names NICs that are not compute HCAs (`[]`: every tied NIC is).
    """
    notes: list[str] = []
    topo = parse_topo(facts.get("topo-m.txt") or "", source=_src(facts, "topo-m.txt"))
    gpus_q = {g["index"]: g for g in parse_query_gpu(facts.get("query-gpu.csv") or "")}
    pci = parse_pci(facts.get("pci.txt") or "")
    slurmd_c = parse_kv_line(facts.get("slurmd-C.txt") or "")
    gres = parse_slurmd_g(facts.get("slurmd-G.txt") or "")
    layout = parse_lscpu(facts.get("lscpu.txt")) if facts.get("lscpu.txt") else None
    need: list[Problem] = []

    flags = (sockets, cores_per_socket, threads_per_core)
    if any(f is not None for f in flags):
        if None in flags:
            need.append(Problem("--sockets, --cores-per-socket and --threads-per-core go together",
                                hint="pass all three (as `lscpu` prints them)"))
        else:
            assert sockets is not None and cores_per_socket is not None and threads_per_core is not None
            numa_map = layout.numa_cpus if layout else {}
            layout = CpuLayout(sockets, cores_per_socket, threads_per_core, numa_map,
                               layout.core_of_cpu if layout else {})
            notes.append("CPU layout from the command line (--sockets/--cores-per-socket/--threads-per-core)")
    if layout is None and slurmd_c:
        layout = CpuLayout(int(slurmd_c.get("SocketsPerBoard", 1)) * int(slurmd_c.get("Boards", 1)),
                           int(slurmd_c["CoresPerSocket"]), int(slurmd_c["ThreadsPerCore"]), {})
        notes.append("CPU layout from slurmd -C (no lscpu output)")
    if layout is None and all(f is None for f in flags):
        need.append(Problem("sockets, cores and threads are unknown", file=_src(facts, "lscpu.txt"),
                            hint="save `lscpu -p > lscpu.txt` (or `slurmd -C > slurmd-C.txt`) on the node, or pass "
                                 "--sockets, --cores-per-socket and --threads-per-core"))

    mem_mib = None
    if memory is None:
        if slurmd_c.get("RealMemory"):
            mem_mib = int(slurmd_c["RealMemory"])
            notes.append(f"memory is slurmd -C RealMemory ({mem_mib} MiB); sites usually schedule less, to "
                         "leave room for the OS")
        elif facts.get("meminfo.txt") and parse_meminfo_mib(facts.get("meminfo.txt") or ""):
            mem_mib = parse_meminfo_mib(facts.get("meminfo.txt") or "")
            notes.append(f"memory is MemTotal ({mem_mib} MiB); set it to the RealMemory your slurm.conf gives")
        else:
            need.append(Problem("the node's memory is unknown", file=_src(facts, "slurmd-C.txt"),
                                hint="pass --memory (e.g. --memory 1000G), or save `slurmd -C` or /proc/meminfo"))

    models = Counter(g["name"] for g in gpus_q.values())
    model = gpu_model or (models.most_common(1)[0][0].removeprefix("NVIDIA ").strip() if models else None)
    if model is None:
        need.append(Problem("the GPU model is unknown", file=_src(facts, "query-gpu.csv"),
                            hint="pass --gpu-model (e.g. A100-SXM4-80GB) or save query-gpu.csv"))

    numa_map = layout.numa_cpus if layout else {}
    gpu_entries: list[dict[str, Any]] = []
    unknown_numa: list[str] = []
    for row in topo.gpus:
        q = gpus_q.get(row.index, {})
        bus = q.get("pci_bus_id")
        sys_numa, sys_cpus = pci.get(bus.upper(), (None, None)) if bus else (None, None)
        numa = row.numa_affinity if row.numa_affinity is not None else sys_numa
        cpus = row.cpu_affinity or sys_cpus
        if numa is None and cpus and numa_map:
            numa, why = numa_of_cpus(parse_cpulist(cpus), numa_map)
            if numa is not None:
                notes.append(f"GPU{row.index}: NUMA node {numa} derived from its CPU affinity {cpus} and the lscpu "
                             "NUMA map (topo -m printed none)")
            else:
                unknown_numa.append(f"GPU{row.index} ({why})")
        elif numa is None:
            unknown_numa.append(f"GPU{row.index} (topo -m prints {'N/A' if topo_has_numa(topo) else 'no NUMA column'}"
                                f"{'' if cpus else ' and no CPU affinity'})")
        elif cpus and numa_map.get(numa) and not set(parse_cpulist(cpus)) & set(numa_map[numa]):
            notes.append(f"GPU{row.index}: topo -m says NUMA node {numa} but its CPU affinity {cpus} is not on that "
                         "node in lscpu; check both")
        if cpus is None and numa is not None:
            cpus = format_cpulist(numa_map.get(numa, [])) or None
        if cpus is None:
            need.append(Problem(f"GPU{row.index}: no CPU affinity in topo -m and no sysfs local_cpulist",
                                file=_src(facts, "pci.txt"), hint="save pci.txt (see --help)"))
            continue
        entry: dict[str, Any] = {"index": row.index, "numa": numa, "cpus": cpus, "hca": None}
        if bus:
            entry["pci_bus_id"] = bus
        gpu_entries.append(entry)
    if unknown_numa:
        need.append(Problem("the NUMA node of " + ", ".join(unknown_numa) + " is unknown; nothing is written in its "
                            "place", file=_src(facts, "topo-m.txt"),
                            hint="save pci.txt (sysfs numa_node per GPU), or lscpu.txt with its NUMA map (`lscpu -p` "
                                 "or plain `lscpu`) so the CPU affinity can be placed"))

    if numa_nodes is None and numa_map:
        numa_nodes = max(len(numa_map), max(numa_map) + 1)
    if numa_nodes is None:
        need.append(Problem("the number of NUMA nodes is unknown (topo -m names only the GPUs' nodes)",
                            file=_src(facts, "lscpu.txt"),
                            hint="save lscpu.txt (its NUMA map), or pass --numa-nodes"))

    ports = parse_infiniband(facts.get("infiniband.txt") or "") if facts.get("infiniband.txt") else None
    try:
        roles = classify_nics(topo, ports, storage_hcas)
    except InputError as exc:
        for p in exc.problems:
            p.file = p.file or _src(facts, "topo-m.txt")
        need.extend(exc.problems)
        roles = None
    if need:
        raise InputError(need)
    assert layout is not None and model is not None and roles is not None and numa_nodes is not None
    notes.extend(roles.notes)
    notes.extend(cpuset_notes(facts, gpu_entries, layout, numa_nodes))

    gres_types = {g["type"] for g in gres if g["type"]}
    stype = slurm_type or (sorted(gres_types)[0] if len(gres_types) == 1 else slurm_type_from_model(model))
    if not slurm_type and not gres_types:
        notes.append(f"slurm_type {stype!r} is derived from the model name; it must equal gres.conf Type=")
    for n in topo.unnamed_nics:
        notes.append(f"{n} has no entry in the NIC Legend; its RDMA device name is unknown, fill it in")
    if topo.ignored_rows:
        notes.append(f"ignored rows that are not GPUs or NICs: {', '.join(topo.ignored_rows)}")

    hcas = topo.assign_hcas(roles.compute)
    for g in gpu_entries:
        g["hca"] = hcas.get(g["index"])
    kind = fabric or fabric_kind(ports, roles.compute, notes)
    mem_gb = None
    mems = [g["memory_mib"] for g in gpus_q.values() if g.get("memory_mib")]
    if mems:
        mem_gb = round(min(mems) / 1024)
    nt: dict[str, Any] = {
        "description": f"discovered from {facts.origin}",
        "gpu": {"model": model, "slurm_type": stype, "count": len(gpu_entries),
                **({"memory_gb": mem_gb} if mem_gb else {}), "nvlink": topo.nvlink_kind(),
                **({"arch": gpu_arch(model)} if gpu_arch(model) else {})},
        "sockets": layout.sockets, "cores_per_socket": layout.cores_per_socket,
        "threads_per_core": layout.threads_per_core, "numa_nodes": numa_nodes,
        "memory": memory or format_mem(mem_mib or 1),
        "gpus": gpu_entries,
        "compute_hcas": roles.compute if kind != "tcp" else [],
        "storage_hcas": roles.storage,
        "fabric": {"kind": kind},
    }
    if kind == "tcp":
        for g in gpu_entries:
            g["hca"] = None
    try:
        NodeType.model_validate(nt)
    except ValueError as exc:
        raise InputError(Problem(f"the discovered node type does not validate: {exc}", file=facts.origin,
                                 hint="check the notes above; pass --fabric/--memory/--gpu-model to override")
                         ) from exc
    return Discovery(name, nt, notes, gres_conf_lines(nt, layout, gres))


def _src(facts: Facts, name: str) -> str:
    return name if facts.origin == "live" else str(Path(facts.origin) / name)


def topo_has_numa(topo: Topology) -> bool:
    """Whether topo -m printed a NUMA Affinity value for some GPU (N/A everywhere counts as none)."""
    return any(g.numa_affinity is not None for g in topo.gpus)


def numa_of_cpus(cpus: list[int], numa_cpus: dict[int, list[int]]) -> tuple[int | None, str]:
    """The one NUMA node holding all of `cpus`, or (None, why): affinity over two nodes names no single one."""
    nodes = sorted(n for n, members in numa_cpus.items() if set(members) & set(cpus))
    if len(nodes) == 1:
        return nodes[0], ""
    if not nodes:
        return None, f"its CPU affinity {format_cpulist(cpus)} is on no NUMA node of lscpu"
    return None, f"its CPU affinity {format_cpulist(cpus)} spans NUMA nodes {format_cpulist(nodes)}"


_BOND = re.compile(r"_bond_\d+$")


@dataclass
class NicRoles:
    compute: list[str]
    storage: list[str]
    notes: list[str]


def classify_nics(topo: Topology, ports: dict[str, dict[str, dict[str, str]]] | None,
                  storage_hcas: list[str] | None = None) -> NicRoles:
    """Which NICs are compute HCAs: a NIC is one only if it is some GPU's nearest candidate NIC.

    Candidates exclude, first, what the port files say cannot carry the job's traffic: ports whose link layer is
    Ethernet on an InfiniBand host (front-end/storage ports of a DGX H100), ports that are not ACTIVE, NICs with no
    RDMA port in the file, and bonds (`mlx5_bond_0`, a front-end bond) beside unbonded NICs. Bonds are kept when
    every NIC is one (RoCE link aggregation per GPU, tests/data/topo/a800-8x-all-bond-roce-lag.txt). Where the
    matrix cannot break a tie (`Topology.surplus_ties`) and no port file or `storage_hcas` says more, this raises.
    """
    notes: list[str] = []
    out_storage: list[str] = []
    down: list[str] = []
    cands = list(topo.nics)
    if storage_hcas:
        unknown = [n for n in storage_hcas if n not in topo.nics]
        if unknown:
            raise InputError(Problem(f"--storage-hcas names {', '.join(unknown)}, which topo -m does not list "
                                     f"(it lists {', '.join(topo.nics) or 'no NICs'})"))
        out_storage += [n for n in cands if n in storage_hcas]
        cands = [n for n in cands if n not in storage_hcas]
        notes.append(f"{', '.join(storage_hcas)}: not compute HCAs (--storage-hcas)")
    if ports is not None:
        def active(nic: str) -> list[dict[str, str]]:
            return [i for i in ports.get(nic, {}).values() if i.get("state") == "ACTIVE"]
        ib_host = any(i.get("link_layer") == "InfiniBand" for n in cands for i in active(n))
        for nic in list(cands):
            if nic in topo.unnamed_nics:
                notes.append(f"{nic}: no RDMA device name in topo -m, so its port state could not be looked up")
                continue
            if nic not in ports:
                cands.remove(nic)
                out_storage.append(nic)
                notes.append(f"{nic}: not in infiniband.txt (no RDMA port seen): not a compute HCA")
                continue
            layers = {i.get("link_layer") for i in ports[nic].values()}
            if ib_host and layers == {"Ethernet"}:
                cands.remove(nic)
                out_storage.append(nic)
                notes.append(f"{nic}: link layer Ethernet on an InfiniBand host (a front-end or storage port): "
                             "not a compute HCA")
            elif not active(nic):
                cands.remove(nic)
                down.append(nic)
                states = "/".join(i.get("state", "?") for i in ports[nic].values())
                notes.append(f"{nic}: port {states}, not ACTIVE: left out of compute_hcas and storage_hcas; bring the "
                             "link up and run discovery again")
    bonds = [n for n in cands if _BOND.search(n)]
    if bonds and len(bonds) < len(cands):
        cands = [n for n in cands if n not in bonds]
        out_storage += bonds
        notes.append(f"{', '.join(bonds)}: bonded device beside unbonded NICs (a front-end bond): not a compute HCA")
    elif bonds:
        notes.append(f"every RDMA device is a bond ({', '.join(bonds)}): RoCE link aggregation, kept as compute HCAs")
    far = topo.storage_nics(cands)
    if far:
        notes.append(f"{', '.join(far)}: no GPU's nearest NIC: storage_hcas (never in NCCL_IB_HCA)")
    compute = topo.compute_nics(cands)
    if ports is None and storage_hcas is None:
        ties = topo.surplus_ties(cands)
        if ties:
            what = "; ".join(f"GPU{','.join(map(str, g))} has {', '.join(n)} all at {d}" for g, d, n in ties)
            raise InputError(Problem(
                f"which NICs are compute HCAs cannot be told from topo -m: {what} (more equally-near NICs than GPUs "
                "sharing them, as where a storage card sits beside a GPU's rail NIC)",
                hint="save infiniband.txt (the ports' link layer and state, or `ibstat`), or pass --storage-hcas "
                     "with the NICs that are not compute HCAs (--storage-hcas none if all of them are)"))
    storage = [n for n in topo.nics if (n in out_storage or n in far) and n not in down]
    return NicRoles(compute=compute, storage=storage, notes=notes)


def fabric_kind(ports: dict[str, dict[str, dict[str, str]]] | None, compute: list[str], notes: list[str]) -> str:
    """From the compute HCAs' link layer (infiniband.txt), else from their RDMA device names (rdma-core names
    RoCE devices rocep*/roceP*, InfiniBand ones ibp*), else infiniband with a note."""
    if not compute:
        notes.append("no GPU-near RDMA NIC: fabric tcp (NCCL over sockets); pass --fabric if that is wrong")
        return "tcp"
    if ports is not None:
        layers = {i.get("link_layer") for n in compute for i in ports.get(n, {}).values() if i.get("state") == "ACTIVE"}
        for profile in FABRICS.values():
            if profile.link_layer and layers == {profile.link_layer}:
                return profile.kind
        notes.append("fabric kind guessed as infiniband: the compute HCAs' link layers in infiniband.txt are "
                     f"{', '.join(sorted(str(x) for x in layers)) or 'missing'}; pass --fabric")
        return "infiniband"
    if all(n.lower().startswith("rocep") for n in compute):
        notes.append("fabric roce from the RDMA device names (rocep*); infiniband.txt would confirm the link layer")
        return "roce"
    if all(n.startswith("ibp") for n in compute):
        notes.append("fabric infiniband from the RDMA device names (ibp*)")
        return "infiniband"
    notes.append("fabric kind guessed as infiniband: no infiniband.txt (link layer) and the RDMA device names do "
                 "not say; pass --fabric roce for RoCE")
    return "infiniband"


def cpuset_notes(facts: Facts, gpus: list[dict[str, Any]], layout: CpuLayout, numa_nodes: int) -> list[str]:
    """Warn when the CPU affinity looks read inside a restricted cpuset: nvidia-smi cuts it to the caller's CPUs,
    so a block discovered inside a job or container would bind every rank to a few CPUs."""
    out = []
    cpuset = parse_cpuset(facts.get("cpuset.txt") or "") if facts.get("cpuset.txt") else None
    if cpuset and set(cpuset[0]) != set(cpuset[1]):
        out.append(f"WARNING: read inside a restricted cpuset (allowed CPUs {format_cpulist(cpuset[0])} of online "
                   f"{format_cpulist(cpuset[1])}): the GPUs' CPU affinity is cut to it; run discovery outside any job "
                   "or container")
    total = layout.sockets * layout.cores_per_socket * layout.threads_per_core
    for g in gpus:
        cpus = set(parse_cpulist(g["cpus"]))
        node = set(layout.numa_cpus.get(g["numa"], []))
        if node and cpus < node:
            out.append(f"WARNING: GPU{g['index']}'s CPU affinity {g['cpus']} is {len(cpus)} of NUMA node {g['numa']}'s "
                       f"{len(node)} CPUs: read inside a restricted cpuset? (a job or container); check it")
        elif not node and len(cpus) < total // numa_nodes:
            out.append(f"WARNING: GPU{g['index']}'s CPU affinity {g['cpus']} has {len(cpus)} CPUs, fewer than one NUMA "
                       f"node's share ({total} CPUs / {numa_nodes} nodes): read inside a restricted cpuset? (a job "
                       "or container); check it")
    return out


def gres_conf_lines(nt: dict[str, Any], layout: CpuLayout, gres: list[dict[str, Any]]) -> list[str]:
    """gres.conf lines with Cores= from the real topology (needs lscpu -p for core indices).

    File=/dev/nvidiaN assumes the device minor equals the NVML index; that is not always so, which is why
    `sk site check` compares against `slurmd -G` on the node.
    """
    if not layout.core_of_cpu:
        return []
    out = []
    for g in nt["gpus"]:
        cores = sorted({layout.core_of_cpu[c] for c in parse_cpulist(g["cpus"]) if c in layout.core_of_cpu})
        out.append(f"Name=gpu Type={nt['gpu']['slurm_type']} File=/dev/nvidia{g['index']} "
                   f"Cores={format_cpulist(cores)}")
    return out


def to_yaml(name: str, nt: dict[str, Any], notes: list[str], gres_conf: list[str]) -> str:
    """The node type as a block to paste under `node_types:`, GPUs one per line like the shipped examples."""
    import yaml

    def scalar(v: Any) -> str:
        text = yaml.safe_dump(v, default_flow_style=True, width=10_000, sort_keys=False)
        return text.strip().removesuffix("...").strip()

    lines = ["# Discovered by `sk site discover`; paste under node_types: in the site config."]
    lines += [f"# note: {n}" for n in notes]
    if gres_conf:
        lines.append("# gres.conf lines matching this topology (Cores= from lscpu -p):")
        lines += [f"#   {g}" for g in gres_conf]
    lines.append(f"{name}:")
    for key, value in nt.items():
        if key == "gpus":
            lines.append("  gpus:")
            lines += [f"    - {scalar({k: v for k, v in g.items() if v is not None})}" for g in value]
        else:
            lines.append(f"  {key}: {scalar(value)}")
    return "\n".join(lines) + "\n"
