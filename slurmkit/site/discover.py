"""`sk site discover`: read a GPU node's topology off the machine and write it as a site-config node type.

Writing topology by hand is where sites get binding wrong (index/4 arithmetic instead of the real GPU -> NUMA
map), so the block comes from the node's own tools. Every source is a plain text file, so the same code runs
live on a node or offline on saved outputs (`--from DIR`, also how the tests run on real published outputs).

Files (live: the command in brackets is run; offline: the file is read from DIR; only topo-m.txt is required):

  topo-m.txt       nvidia-smi topo -m
  query-gpu.csv    nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,memory.total --format=csv
  lscpu.txt        lscpu -p      (plain `lscpu` output is accepted too)
  slurmd-C.txt     slurmd -C
  slurmd-G.txt     slurmd -G 2>&1
  meminfo.txt      cat /proc/meminfo
  pci.txt          one line per GPU: <bus id> <numa_node> <local_cpulist> from /sys/bus/pci/devices/<bdf>/
  infiniband.txt   one line per HCA port: <hca> <port> <state> <link_layer> from /sys/class/infiniband/

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
from slurmkit.site.topology import parse_topo

FILES = ("topo-m.txt", "query-gpu.csv", "lscpu.txt", "slurmd-C.txt", "slurmd-G.txt", "meminfo.txt", "pci.txt",
         "infiniband.txt")
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
    return Facts(texts, "live", missing)


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


def parse_infiniband(text: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for ln in text.splitlines():
        parts = ln.split()
        if len(parts) >= 4:
            out.setdefault(parts[0], {})[parts[1]] = f"{parts[2]} {parts[3]}"
    return out


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
             slurm_type: str | None = None, fabric: str | None = None) -> Discovery:
    """Turn the sources into a NodeType-shaped dict (validated) plus notes on what was inferred or missing."""
    notes: list[str] = []
    topo = parse_topo(facts.get("topo-m.txt") or "", source=_src(facts, "topo-m.txt"))
    gpus_q = {g["index"]: g for g in parse_query_gpu(facts.get("query-gpu.csv") or "")}
    pci = parse_pci(facts.get("pci.txt") or "")
    slurmd_c = parse_kv_line(facts.get("slurmd-C.txt") or "")
    gres = parse_slurmd_g(facts.get("slurmd-G.txt") or "")
    layout = parse_lscpu(facts.get("lscpu.txt")) if facts.get("lscpu.txt") else None
    need: list[Problem] = []

    if layout is None and slurmd_c:
        layout = CpuLayout(int(slurmd_c.get("SocketsPerBoard", 1)) * int(slurmd_c.get("Boards", 1)),
                           int(slurmd_c["CoresPerSocket"]), int(slurmd_c["ThreadsPerCore"]), {})
        notes.append("CPU layout from slurmd -C (no lscpu output)")
    if layout is None:
        need.append(Problem("sockets, cores and threads are unknown", file=_src(facts, "lscpu.txt"),
                            hint="save `lscpu -p > lscpu.txt` (or `slurmd -C > slurmd-C.txt`) on the node"))

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
    if need:
        raise InputError(need)
    assert layout is not None and model is not None
    gres_types = {g["type"] for g in gres if g["type"]}
    stype = slurm_type or (sorted(gres_types)[0] if len(gres_types) == 1 else slurm_type_from_model(model))
    if not slurm_type and not gres_types:
        notes.append(f"slurm_type {stype!r} is derived from the model name; it must equal gres.conf Type=")

    hcas = topo.assign_hcas()
    storage = topo.storage_nics()
    compute = topo.compute_nics()
    for n in topo.unnamed_nics:
        notes.append(f"{n} has no entry in the NIC Legend; its RDMA device name is unknown, fill it in")
    if topo.ignored_rows:
        notes.append(f"ignored rows that are not GPUs or NICs: {', '.join(topo.ignored_rows)}")

    gpu_entries = []
    for row in topo.gpus:
        q = gpus_q.get(row.index, {})
        bus = q.get("pci_bus_id")
        sys_numa, sys_cpus = pci.get(bus.upper(), (None, None)) if bus else (None, None)
        numa = row.numa_affinity if row.numa_affinity is not None else sys_numa
        cpus = row.cpu_affinity or sys_cpus
        if numa is None and cpus and layout.numa_cpus:
            numa = _numa_of(parse_cpulist(cpus), layout.numa_cpus)
            notes.append(f"GPU{row.index}: NUMA node inferred from its CPU affinity")
        if numa is None:
            numa = 0
            notes.append(f"GPU{row.index}: NUMA node unknown (N/A in topo -m, no sysfs); 0 written, check it")
        if cpus is None:
            cpus = format_cpulist(layout.numa_cpus.get(numa, [])) or None
        if cpus is None:
            raise InputError(Problem(f"GPU{row.index}: no CPU affinity in topo -m and no sysfs local_cpulist",
                                     file=_src(facts, "pci.txt"), hint="save pci.txt (see --help)"))
        entry: dict[str, Any] = {"index": row.index, "numa": numa, "cpus": cpus, "hca": hcas.get(row.index)}
        if bus:
            entry["pci_bus_id"] = bus
        gpu_entries.append(entry)

    numa_nodes = max(len(layout.numa_cpus), max(g["numa"] for g in gpu_entries) + 1)
    kind = fabric or _fabric_kind(facts, compute, notes)
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
        "compute_hcas": compute if kind != "tcp" else [],
        "storage_hcas": storage,
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


def _numa_of(cpus: list[int], numa_cpus: dict[int, list[int]]) -> int | None:
    best = max(numa_cpus.items(), key=lambda kv: len(set(kv[1]) & set(cpus)), default=None)
    return best[0] if best and set(best[1]) & set(cpus) else None


def _fabric_kind(facts: Facts, compute: list[str], notes: list[str]) -> str:
    ib = parse_infiniband(facts.get("infiniband.txt") or "")
    layers = {v.split()[-1] for ports in ib.values() for v in ports.values() if ports}
    if not compute:
        notes.append("no GPU-near RDMA NIC: fabric tcp (NCCL over sockets); pass --fabric if that is wrong")
        return "tcp"
    for profile in FABRICS.values():
        if profile.link_layer and layers == {profile.link_layer}:
            return profile.kind
    notes.append("fabric kind guessed as infiniband (no /sys/class/infiniband link_layer); pass --fabric roce "
                 "for RoCE")
    return "infiniband"


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
