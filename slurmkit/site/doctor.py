"""`sk doctor`: what is wrong with this node, or with this rank inside a job, before NCCL says it cryptically.

Each check reads what the machine and Slurm actually gave (environment, /proc, /sys, nvidia-smi, the NCCL
library) and compares it with the site config and the facts in docs/binding-and-nccl.md. A missing
tool (no NVIDIA driver here) makes the checks that need it SKIP with the reason; the rest still run.

Everything read is behind `Inputs` (environment, /proc and /sys roots, command outputs), so tests feed real
published outputs and fake /sys trees with real layouts; the live path reads the real ones.

Statuses: PASS, WARN (works, but slower or fragile), FAIL (will break or silently misbehave), SKIP (cannot be
checked here, with why). Exit status: 0 no WARN/FAIL, 1 at least one WARN and no FAIL, 2 at least one FAIL.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from slurmkit.config.units import format_cpulist, parse_cpulist
from slurmkit.nccl import FABRICS, lint_env, select_ifnames
from slurmkit.site.discover import read_infiniband, run_command
from slurmkit.site.model import NodeType, Site

PASS, WARN, FAIL, SKIP = "PASS", "WARN", "FAIL", "SKIP"
EXIT = {PASS: 0, SKIP: 0, WARN: 1, FAIL: 2}

# CUDA toolkit (major, minor, update) -> minimum Linux driver, from the CUDA release notes (the project notes).
CUDA_MIN_DRIVER: list[tuple[tuple[int, int, int], str]] = [
    ((13, 1, 1), "590.48.01"), ((13, 1, 0), "590.44.01"), ((13, 0, 2), "580.95.05"), ((13, 0, 1), "580.82.07"),
    ((13, 0, 0), "580.65.06"), ((12, 9, 0), "575.51.03"), ((12, 8, 0), "570.26"), ((12, 6, 0), "560.28.03"),
    ((12, 4, 0), "550.54.14"), ((12, 0, 0), "525.60.13"),
]
# Minor-version compatibility: any 12.x runs (with limits: no PTX JIT of newer PTX, no newer-driver features)
# on >= the 12.0 minimum, any 13.x on >= 580.
COMPAT_FLOOR = {12: "525.60.13", 13: "580.65.06"}


@dataclass
class Check:
    name: str
    status: str
    reason: str
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name:<9} {self.reason}"
        return text + (f"  | fix: {self.fix}" if self.fix else "")


Runner = Callable[[list[str]], tuple[str | None, str | None]]


@dataclass
class Inputs:
    """What doctor reads. Defaults are the live machine; tests replace any part."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    proc: Path = Path("/proc")
    sys: Path = Path("/sys")
    run: Runner = run_command
    python_nccl: Callable[[], list[tuple[str, str]]] | None = None  # (version, source) from Python packages

    def read(self, path: Path) -> str | None:
        try:
            return path.read_text()
        except OSError:
            return None


# ---- parsers for what the tools print --------------------------------------------------------------------

def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


def parse_smi_banner(text: str) -> tuple[str | None, str | None]:
    """`nvidia-smi` (no options): '| NVIDIA-SMI 550.90.07  Driver Version: 550.90.07  CUDA Version: 12.4 |'."""
    drv = re.search(r"Driver Version:\s*([\d.]+)", text)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", text)
    return (drv.group(1) if drv else None), (cuda.group(1) if cuda else None)


def parse_proc_driver(text: str) -> str | None:
    """/proc/driver/nvidia/version: 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  <date>'."""
    m = re.search(r"Kernel Module\s+([\d.]+)", text)
    return m.group(1) if m else None


@dataclass
class SmiGpu:
    index: int
    name: str
    uuid: str
    migs: list[tuple[str, str]] = field(default_factory=list)  # (profile, MIG-uuid)


_L_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)")
_L_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+\d+: \(UUID: (MIG-[^)]+)\)")


def parse_smi_list(text: str) -> list[SmiGpu]:
    """`nvidia-smi -L`, MIG devices nested under their GPU."""
    gpus: list[SmiGpu] = []
    for ln in text.splitlines():
        m = _L_GPU.match(ln)
        if m:
            gpus.append(SmiGpu(int(m.group(1)), m.group(2), m.group(3)))
            continue
        m = _L_MIG.match(ln)
        if m and gpus:
            gpus[-1].migs.append((m.group(1), m.group(2)))
    return gpus


def parse_nvcc(text: str) -> str | None:
    m = re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else None


def parse_status(text: str) -> dict[str, str]:
    """/proc/<pid>/status 'Key:\\tvalue' lines."""
    out = {}
    for ln in text.splitlines():
        k, sep, v = ln.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


def parse_numactl_show(text: str) -> dict[str, str]:
    """`numactl --show`: 'policy: bind', 'preferred node: 0', 'membind: 0 1'."""
    return {k.strip(): v.strip() for k, sep, v in (ln.partition(":") for ln in text.splitlines()) if sep}


# ---- gathering ------------------------------------------------------------------------------------------

def read_hcas(sys_root: Path) -> dict[str, dict[str, dict[str, str]]] | None:
    return read_infiniband(sys_root / "class" / "infiniband")


def _state_name(value: str | None) -> str:
    """'4: ACTIVE' -> 'ACTIVE' (sysfs prints the number and the name)."""
    return (value or "?").split(":")[-1].strip()


def toolkit_version(inp: Inputs) -> tuple[str | None, str]:
    """The CUDA toolkit this environment would compile/run with, and where that was read."""
    out, _ = inp.run(["nvcc", "--version"])
    if out and parse_nvcc(out):
        return parse_nvcc(out), "nvcc --version"
    for home in (inp.env.get("CUDA_HOME"), inp.env.get("CUDA_PATH"), "/usr/local/cuda"):
        if not home:
            continue
        text = inp.read(Path(home) / "version.json")
        if text:
            try:
                return json.loads(text)["cuda"]["version"], f"{home}/version.json"
            except (ValueError, KeyError, TypeError):
                pass
        text = inp.read(Path(home) / "version.txt")  # CUDA <= 11.0: 'CUDA Version 11.0.221'
        if text and re.search(r"CUDA Version (\d+\.\d+)", text):
            return re.search(r"CUDA Version ([\d.]+)", text).group(1), f"{home}/version.txt"  # type: ignore[union-attr]
    for dist in ("nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11"):
        try:
            return importlib.metadata.version(dist), f"Python package {dist}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None, "no nvcc on PATH, no $CUDA_HOME/version.json or /usr/local/cuda, no nvidia-cuda-runtime wheel"


def python_nccl_versions() -> list[tuple[str, str]]:
    """NCCL bundled with Python packages: the nvidia-nccl wheels, and torch's own (imported only if installed)."""
    found = []
    for dist in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found.append((importlib.metadata.version(dist), f"Python package {dist}"))
    if importlib.util.find_spec("torch") is not None:
        try:
            import torch  # heavy (seconds); only when present

            if torch.cuda.is_available() or hasattr(torch.cuda, "nccl"):
                v = torch.cuda.nccl.version()
                found.append((".".join(map(str, v)) if isinstance(v, tuple) else str(v), "torch.cuda.nccl.version()"))
        except Exception as exc:  # a broken torch install must not stop the doctor
            found.append(("?", f"torch present but torch.cuda.nccl.version() failed: {exc}"))
    return found


def library_nccl_versions(inp: Inputs) -> list[tuple[str, str]]:
    """libnccl.so.X.Y.Z on LD_LIBRARY_PATH, $NCCL_HOME/lib or in the linker cache (`ldconfig -p`)."""
    dirs = [d for d in inp.env.get("LD_LIBRARY_PATH", "").split(":") if d]
    if inp.env.get("NCCL_HOME"):
        dirs.append(str(Path(inp.env["NCCL_HOME"]) / "lib"))
    paths: list[Path] = []
    for d in dirs:
        paths += sorted(Path(d).glob("libnccl.so*"))
    out, _ = inp.run(["ldconfig", "-p"])
    for ln in (out or "").splitlines():
        m = re.search(r"libnccl\.so\S*.*=>\s*(\S+)", ln)
        if m:
            paths.append(Path(m.group(1)))
    found: dict[str, str] = {}
    for p in paths:
        real = p.resolve() if p.exists() else p
        m = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)", real.name)
        if m and m.group(1) not in found:
            found[m.group(1)] = str(real)
    return list(found.items())


# ---- the checks -----------------------------------------------------------------------------------------

def check_driver(inp: Inputs) -> Check:
    banner, why = inp.run(["nvidia-smi"])
    driver, driver_cuda = parse_smi_banner(banner) if banner else (None, None)
    source = "nvidia-smi"
    if driver is None:
        driver = parse_proc_driver(inp.read(inp.proc / "driver" / "nvidia" / "version") or "")
        source = "/proc/driver/nvidia/version"
    toolkit, tk_source = toolkit_version(inp)
    details = {"driver": driver, "driver_source": source if driver else None, "driver_cuda": driver_cuda,
               "toolkit": toolkit, "toolkit_source": tk_source}
    if driver is None:
        return Check("driver", SKIP, f"no NVIDIA driver here ({why or 'nvidia-smi gave no driver version'}; "
                     "/proc/driver/nvidia/version absent)", details=details)
    if toolkit is None:
        return Check("driver", SKIP, f"driver {driver}; no CUDA toolkit found to compare ({tk_source})",
                     "load the CUDA module your jobs use, then run sk doctor again", details)
    status, reason, fix = driver_verdict(driver, toolkit, driver_cuda)
    return Check("driver", status, reason + f" [toolkit from {tk_source}]", fix, details)


def driver_verdict(driver: str, toolkit: str, driver_cuda: str | None = None) -> tuple[str, str, str | None]:
    """Driver vs CUDA toolkit, by the release-notes minimums; the driver's own "CUDA Version" settles cases
    the table does not cover (11.x, minors without an entry)."""
    d = version_tuple(driver)
    tk = (*version_tuple(toolkit), 0, 0, 0)[:3]
    head = f"driver {driver}, CUDA toolkit {toolkit}"
    supports = driver_cuda is not None and version_tuple(driver_cuda)[:2] >= tk[:2]
    exact = [(v, m) for v, m in CUDA_MIN_DRIVER if v[:2] == tk[:2] and v[2] <= tk[2]]
    if exact:
        v, need = max(exact)
        if d >= version_tuple(need):
            return PASS, f"{head}: meets CUDA {v[0]}.{v[1]}" + (f" Update {v[2]}" if v[2] else "") + \
                f"'s minimum {need}", None
    else:
        higher = [(v, m) for v, m in CUDA_MIN_DRIVER if v > tk]
        if higher and d >= version_tuple(min(higher)[1]):
            v, need = min(higher)
            return PASS, f"{head}: the exact minimum for {tk[0]}.{tk[1]} is not in slurmkit's table; the driver " \
                f"meets CUDA {v[0]}.{v[1]}'s ({need}), which is at least as high", None
        need = None
    if supports:
        return PASS, f"{head}: the driver supports CUDA up to {driver_cuda} (nvidia-smi)", None
    floor = COMPAT_FLOOR.get(tk[0])
    want = f">= {need}" if need else "a newer driver"
    if floor and d >= version_tuple(floor):
        return WARN, f"{head}: below CUDA {tk[0]}.{tk[1]}'s minimum {need or '(not in the table)'}; runs only " \
            f"under minor-version compatibility (driver >= {floor}): no PTX JIT of newer PTX, newer APIs fail", \
            f"update the driver to {want}, or use a toolkit the driver supports"
    if tk[0] not in COMPAT_FLOOR and not need:
        return SKIP, f"{head}: CUDA {tk[0]}.x is outside slurmkit's table (12.0+) and nvidia-smi gave no CUDA " \
            "version to compare", None
    return FAIL, f"{head}: CUDA {tk[0]}.{tk[1]} needs a driver {want}" + \
        (f" (minor-version compatibility needs >= {floor})" if floor else "") + \
        "; programs fail with cudaErrorInsufficientDriver", f"update the driver to {want}, or load an older CUDA"


def check_nccl(inp: Inputs, nt: NodeType | None) -> tuple[Check, tuple[int, int] | None]:
    py = (inp.python_nccl or python_nccl_versions)()
    lib = [(v, f"library {p}") for v, p in library_nccl_versions(inp)]
    found = [(v, s) for v, s in py + lib if v != "?"]
    details = {"found": [{"version": v, "source": s} for v, s in py + lib]}
    if not found:
        broken = [s for v, s in py if v == "?"]
        return Check("nccl", SKIP, "no NCCL found (no nvidia-nccl wheel, no torch, no libnccl.so on "
                     "LD_LIBRARY_PATH/$NCCL_HOME/ldconfig)" + (f"; {broken[0]}" if broken else ""),
                     "load the NCCL module or the framework environment your jobs use", details), None
    versions = sorted({v for v, _ in found}, key=version_tuple)
    newest = version_tuple(versions[-1])
    used = (newest[0], newest[1]) if len(newest) >= 2 else None
    text = "; ".join(f"{v} ({s})" for v, s in found)
    if len(versions) > 1:
        return Check("nccl", WARN, f"several NCCL versions: {text}", "a framework uses its bundled NCCL, other "
                     "programs the first libnccl on LD_LIBRARY_PATH; make sure the one you debug is the one loaded "
                     "(NCCL_DEBUG=VERSION prints it)", details), used
    v = version_tuple(versions[0])
    if nt is not None and nt.gpu.arch in ("hopper", "blackwell") and nt.gpu.nvlink != "none" and v < (2, 17):
        return Check("nccl", WARN, f"NCCL {versions[0]} on {nt.gpu.arch} with NVSwitch: NVLS (NVLink SHARP) needs "
                     f"NCCL >= 2.17 ({text})", "use a newer NCCL", details), used
    if v < (2, 14):
        return Check("nccl", WARN, f"NCCL {versions[0]} is older than 2.14 (2022): many fixes missing, "
                     f"NCCL_IB_TIMEOUT default 14 ({text})", "use a current NCCL", details), used
    return Check("nccl", PASS, f"NCCL {text}", None, details), used


@dataclass
class Devices:
    """What Slurm allocated and what this process may see, from the environment and nvidia-smi -L."""

    in_job: bool
    allocated: list[str]
    allocated_from: str | None
    cvd: str | None
    smi: list[SmiGpu] | None
    smi_why: str | None
    env: Mapping[str, str] = field(default_factory=dict)


def devices(inp: Inputs) -> Devices:
    env = inp.env
    alloc_from = next((k for k in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS") if env.get(k)), None)
    allocated = [x for x in env.get(alloc_from, "").split(",") if x] if alloc_from else []
    out, why = inp.run(["nvidia-smi", "-L"])
    return Devices(in_job="SLURM_JOB_ID" in env, allocated=allocated, allocated_from=alloc_from,
                   cvd=env.get("CUDA_VISIBLE_DEVICES"), smi=parse_smi_list(out) if out is not None else None,
                   smi_why=why, env=env)


def _cvd_list(cvd: str) -> list[str]:
    return [x.strip() for x in cvd.split(",")] if cvd.strip() else []


def check_gpus(dev: Devices) -> Check:
    details: dict[str, Any] = {"allocated": dev.allocated, "allocated_from": dev.allocated_from,
                               "cuda_visible_devices": dev.cvd}
    smi_note = ""
    visible_smi = None
    if dev.smi is not None:
        migs = [u for g in dev.smi for _, u in g.migs]
        visible_smi = sum(len(g.migs) or 1 for g in dev.smi)  # a MIG-mode GPU counts as its MIG devices (as in Slurm)
        details["nvidia_smi"] = {"gpus": [g.index for g in dev.smi], "mig_devices": migs}
    else:
        smi_note = f"; nvidia-smi not run ({dev.smi_why}), so the driver's view is not compared"
    if not dev.in_job:
        if visible_smi is None:
            return Check("gpus", SKIP, "not inside a Slurm job (SLURM_JOB_ID unset) and no nvidia-smi" + smi_note,
                         details=details)
        return Check("gpus", PASS, f"not inside a Slurm job; nvidia-smi sees {visible_smi} GPU(s)", None, details)
    if not dev.allocated:
        return Check("gpus", WARN, "inside a job without GPUs (SLURM_JOB_GPUS/SLURM_STEP_GPUS unset)",
                     "ask for GPUs per node (sk does: --gpus-per-node=<type>:N)", details)
    n = len(dev.allocated)
    if dev.cvd is None:
        # Seen on Slurm 22.05: a step launched with `srun --gpu-bind=none` gets neither SLURM_STEP_GPUS nor
        # CUDA_VISIBLE_DEVICES. Harmless where the device cgroup confines the step (CUDA then numbers the job's
        # GPUs 0..n-1); where it does not, a rank choosing "device LOCAL_RANK" can open another job's GPU.
        head = (f"Slurm allocated GPU(s) {','.join(dev.allocated)} ({dev.allocated_from}) but CUDA_VISIBLE_DEVICES "
                "is unset" + (" in this step (srun --gpu-bind=none steps get none on Slurm 22.05)"
                              if "SLURM_STEP_ID" in dev.env and not dev.env.get("SLURM_STEP_GPUS") else ""))
        fix = (f"export CUDA_VISIBLE_DEVICES={','.join(dev.allocated)} before the program on nodes without "
               "ConstrainDevices (admins: ConstrainDevices=yes in cgroup.conf)")
        if visible_smi is not None and visible_smi == n:
            return Check("gpus", PASS, f"{head}; nvidia-smi sees exactly the {n} allocated, so the device cgroup "
                         "confines this step (CUDA numbers them 0..n-1)", None, details)
        if visible_smi is not None:
            return Check("gpus", FAIL, f"{head}, and nvidia-smi sees {visible_smi} GPUs: CUDA device i is the node's "
                         "GPU i, other jobs' included, not the i-th GPU Slurm gave this job", fix, details)
        return Check("gpus", WARN, f"{head}; whether the device cgroup confines it cannot be told here "
                     f"({dev.smi_why}): if not, CUDA device i is the node's GPU i, not the i-th allocated", fix,
                     details)
    vis = _cvd_list(dev.cvd)
    if dev.cvd == "NoDevFiles":
        return Check("gpus", FAIL, "CUDA_VISIBLE_DEVICES=NoDevFiles: Slurm's gres.conf has no File= for these GPUs",
                     "admins: add File=/dev/nvidiaN (or AutoDetect=nvml) to gres.conf", details)
    if len(vis) > n:
        return Check("gpus", FAIL, f"CUDA_VISIBLE_DEVICES={dev.cvd} lists {len(vis)} devices but Slurm allocated {n} "
                     f"({dev.allocated_from}={','.join(dev.allocated)}): this rank may use GPUs of other jobs",
                     "do not set CUDA_VISIBLE_DEVICES by hand in Slurm jobs", details)
    if len(vis) < n:
        return Check("gpus", WARN, f"Slurm allocated {n} GPUs ({','.join(dev.allocated)}) but CUDA_VISIBLE_DEVICES="
                     f"{dev.cvd} shows {len(vis)}: narrowed by the script or per-task GPU binding; NCCL's CUDA IPC/"
                     "NVLink between ranks needs every job GPU visible to every rank",
                     "request GPUs per node, not per task (no --gpus-per-task/--gpu-bind on srun), and pick the "
                     "device by local rank (sk's bind step does)", details)
    if visible_smi is not None and visible_smi < n:
        return Check("gpus", FAIL, f"Slurm allocated {n} GPUs but nvidia-smi sees only {visible_smi} here",
                     "a GPU may have fallen off the bus (dmesg: Xid 79) or the device cgroup is wrong; drain the "
                     "node", details)
    if visible_smi is not None and visible_smi > n:
        return Check("gpus", WARN, f"Slurm allocated {n} GPU(s) ({','.join(dev.allocated)}) and CUDA_VISIBLE_DEVICES "
                     f"matches, but nvidia-smi sees {visible_smi}: devices are not confined to the job (no "
                     "ConstrainDevices), only CUDA_VISIBLE_DEVICES keeps ranks off other jobs' GPUs",
                     "admins: ConstrainDevices=yes in cgroup.conf", details)
    return Check("gpus", PASS, f"allocated {dev.allocated_from}={','.join(dev.allocated)}, CUDA_VISIBLE_DEVICES="
                 f"{dev.cvd} ({n} each)" + (f", nvidia-smi sees {visible_smi}" if visible_smi is not None else "")
                 + smi_note, None, details)


_CVD_TOKEN = re.compile(r"^(\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-zA-Z/-]+)$")


def check_cuda_env(inp: Inputs, dev: Devices) -> Check:
    order = inp.env.get("CUDA_DEVICE_ORDER")
    cvd = dev.cvd
    details = {"CUDA_VISIBLE_DEVICES": cvd, "CUDA_DEVICE_ORDER": order}
    problems: list[tuple[str, str, str]] = []  # (status, reason, fix)
    if cvd is not None and cvd != "NoDevFiles":
        toks = _cvd_list(cvd)
        if not toks:
            problems.append((FAIL if dev.allocated else WARN, "CUDA_VISIBLE_DEVICES is empty: CUDA sees no GPU",
                             "unset it outside jobs; inside jobs keep what Slurm set"))
        bad = [t for t in toks if not _CVD_TOKEN.match(t)]
        if bad:
            problems.append((FAIL, f"CUDA_VISIBLE_DEVICES={cvd}: {bad[0]!r} is not a device index or UUID; CUDA "
                             "ignores it and everything after it", "write indices (0,1) or UUIDs (GPU-..., MIG-...)"))
        dup = sorted({t for t in toks if toks.count(t) > 1})
        if dup:
            problems.append((FAIL, f"CUDA_VISIBLE_DEVICES={cvd} names {', '.join(dup)} twice",
                             "list each device once"))
        if any(t.isdigit() for t in toks) and any(not t.isdigit() for t in toks):
            problems.append((WARN, f"CUDA_VISIBLE_DEVICES={cvd} mixes indices and UUIDs",
                             "use one form (Slurm sets indices)"))
        if dev.smi is not None and not any(g.migs for g in dev.smi):
            # CUDA indices count the GPUs this process can open, which are the ones nvidia-smi lists (inside a
            # constrained job both renumber from 0).
            high = [t for t in toks if t.isdigit() and int(t) >= len(dev.smi)]
            if high:
                problems.append((FAIL, f"CUDA_VISIBLE_DEVICES names device {high[0]}, nvidia-smi lists only "
                                 f"{len(dev.smi)} GPU(s)", "use indices nvidia-smi -L shows"))
    visible = len(_cvd_list(cvd)) if cvd else (len(dev.smi) if dev.smi else len(dev.allocated))
    if order is None and visible > 1:
        problems.append((WARN, "CUDA_DEVICE_ORDER is unset: CUDA numbers GPUs fastest-first, so CUDA device i may "
                         "not be nvidia-smi's/Slurm's GPU i (wrong NUMA/HCA binding)",
                         "export CUDA_DEVICE_ORDER=PCI_BUS_ID (sk-rendered jobs do)"))
    elif order is not None and order not in ("PCI_BUS_ID", "FASTEST_FIRST"):
        problems.append((FAIL, f"CUDA_DEVICE_ORDER={order!r} is not a value CUDA knows", "set it to PCI_BUS_ID"))
    elif order == "FASTEST_FIRST" and visible > 1:
        problems.append((WARN, "CUDA_DEVICE_ORDER=FASTEST_FIRST: CUDA's numbering may differ from nvidia-smi's",
                         "set it to PCI_BUS_ID"))
    if not problems:
        if cvd is None and order is None:
            return Check("cuda_env", SKIP, "neither CUDA_VISIBLE_DEVICES nor CUDA_DEVICE_ORDER set (not in a GPU "
                         "job)", details=details)
        return Check("cuda_env", PASS, f"CUDA_VISIBLE_DEVICES={cvd if cvd is not None else '(unset)'}, "
                     f"CUDA_DEVICE_ORDER={order if order is not None else '(unset)'}", None, details)
    return _worst("cuda_env", problems, details)


def _worst(name: str, problems: list[tuple[str, str, str]], details: dict) -> Check:
    status = FAIL if any(p[0] == FAIL for p in problems) else WARN
    return Check(name, status, "; ".join(p[1] for p in problems),
                 "; ".join(dict.fromkeys(p[2] for p in problems if p[2])), details)


def check_hcas(inp: Inputs, nt: NodeType | None) -> Check:
    hcas = read_hcas(inp.sys)
    fabric = nt.fabric.kind if nt else None
    details: dict[str, Any] = {"hcas": hcas, "fabric": fabric}
    if hcas is None or not hcas:
        if fabric is not None and FABRICS[fabric].needs_compute_hcas:
            return Check("hcas", FAIL, f"no RDMA devices ({inp.sys}/class/infiniband is absent or empty) but the "
                         f"site's fabric is {fabric}: NCCL falls back to TCP sockets (or fails on NCCL_IB_HCA)",
                         "check the node (ibv_devinfo, the mlx5_ib module); `sk site check` for the node type",
                         details)
        if fabric is None:
            return Check("hcas", SKIP, f"no RDMA devices here ({inp.sys}/class/infiniband absent) and no site node "
                         "type to say whether there should be", details=details)
        return Check("hcas", PASS, f"fabric {fabric}: no RDMA devices needed, none present", None, details)
    summary = {h: {p: _state_name(i.get("state")) for p, i in ports.items()} for h, ports in hcas.items()}
    if nt is None:
        return Check("hcas", PASS, "RDMA devices: " + ", ".join(
            f"{h} {'/'.join(s for s in ps.values())}" for h, ps in summary.items()) + " (no site node type to "
            "compare)", None, details)
    if not nt.compute_hcas and not nt.storage_hcas:
        return Check("hcas", PASS, f"fabric {fabric}: the node type uses no HCAs; present: {', '.join(hcas)}", None,
                     details)
    problems: list[tuple[str, str, str]] = []
    for role, names, sev in (("compute", nt.compute_hcas, FAIL), ("storage", nt.storage_hcas, WARN)):
        missing = [h for h in names if h not in hcas]
        if missing:
            problems.append((sev, f"{role} HCA(s) {', '.join(missing)} not present (have: {', '.join(hcas)})",
                             "check the node, or the node type's HCA names (`sk site discover`)"))
        for h in names:
            for port, info in hcas.get(h, {}).items():
                st = _state_name(info.get("state"))
                if st != "ACTIVE":
                    phys = _state_name(info.get("phys_state"))
                    problems.append((sev, f"{role} HCA {h} port {port} is {st} (phys {phys})",
                                     "check the cable/switch port; `ibstat`"))
                layer = info.get("link_layer")
                want = FABRICS[fabric].link_layer if fabric else None
                if role == "compute" and layer and want and layer != want:
                    problems.append((WARN, f"{h} port {port} link layer is {layer}, the site says fabric "
                                     f"{fabric}", "fix fabric.kind in the site config (on RoCE with NCCL "
                                     "before 2.21 also fabric.ib_gid_index)"))
    if problems:
        return _worst("hcas", problems, details)
    return Check("hcas", PASS, "compute HCAs " + ", ".join(f"{h} {'/'.join(summary[h].values())}"
                                                          for h in nt.compute_hcas) +
                 (f"; storage {', '.join(nt.storage_hcas)} present" if nt.storage_hcas else ""), None, details)


IFF_UP = 0x1


def net_interfaces(inp: Inputs) -> dict[str, bool] | None:
    """{interface: up} from /sys/class/net, else `ip -o link`; None when neither can be read.

    Up means operstate "up", or "unknown" with the IFF_UP flag set: loopback and some virtual interfaces never
    report "up" though they carry traffic.
    """
    net = inp.sys / "class" / "net"
    if net.is_dir():
        out = {}
        for d in sorted(net.iterdir()):
            state = (inp.read(d / "operstate") or "").strip()
            flags = (inp.read(d / "flags") or "0").strip()
            try:
                flag_up = bool(int(flags, 16) & IFF_UP)
            except ValueError:
                flag_up = False
            out[d.name] = state == "up" or (state in ("unknown", "") and flag_up)
        return out
    text, _ = inp.run(["ip", "-o", "link"])
    return parse_ip_link(text) if text else None


def parse_ip_link(text: str) -> dict[str, bool]:
    """`ip -o link`: '4: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> ... state UP ...' -> {eth0: True}."""
    out = {}
    for ln in text.splitlines():
        m = re.match(r"\d+:\s+([^:@\s]+)(?:@\S+)?:\s+<([^>]*)>.*?\bstate\s+(\S+)", ln)
        if m:
            flags = m.group(2).split(",")
            out[m.group(1)] = m.group(3) == "UP" or (m.group(3) == "UNKNOWN" and "UP" in flags)
    return out


def check_ifname(inp: Inputs, nt: NodeType | None) -> Check:
    """The site's fabric.socket_ifname (NCCL_SOCKET_IFNAME, a prefix) must select an interface that is up here:
    NCCL bootstraps over it, and `ib0` on DGX OS 5+ (IPoIB named ibp12s0, ...) selects nothing."""
    if nt is None:
        return Check("ifname", SKIP, "no site node type to say which interface NCCL should use")
    spec = nt.fabric.socket_ifname
    if not spec:
        return Check("ifname", PASS, "fabric.socket_ifname not set: NCCL chooses an interface itself")
    ifaces = net_interfaces(inp)
    details: dict[str, Any] = {"socket_ifname": spec, "interfaces": ifaces}
    if ifaces is None:
        return Check("ifname", SKIP, f"cannot list network interfaces ({inp.sys}/class/net absent, no `ip`)",
                     details=details)
    have = ", ".join(f"{n} {'up' if up else 'down'}" for n, up in sorted(ifaces.items()))
    chosen = select_ifnames(spec, list(ifaces))
    up = [n for n in chosen if ifaces[n]]
    fix = ("set fabric.socket_ifname to what this node's interfaces are called (a prefix: `ibp` matches DGX OS "
           "IPoIB names such as ibp12s0), or bring the interface up")
    if not chosen:
        return Check("ifname", FAIL, f"socket_ifname {spec!r} selects no interface here (have: {have}): NCCL "
                     "cannot bootstrap", fix, details)
    if not up:
        return Check("ifname", FAIL, f"socket_ifname {spec!r} selects {', '.join(chosen)}, none of them up (have: "
                     f"{have})", fix, details)
    down = [n for n in chosen if not ifaces[n]]
    return Check("ifname", PASS, f"socket_ifname {spec!r} selects {', '.join(up)} (up)"
                 + (f"; also {', '.join(down)} (down)" if down else ""), None, details)


NCCL_PREFIXES = ("NCCL_", "TORCH_NCCL_")


def check_nccl_env(inp: Inputs, nt: NodeType | None, version: tuple[int, int] | None) -> Check:
    env = {k: v for k, v in inp.env.items() if k.startswith(NCCL_PREFIXES) or k == "NCCL_ASYNC_ERROR_HANDLING"}
    details: dict[str, Any] = {"set": env}
    kwargs: dict[str, Any] = {"storage_hcas": nt.storage_hcas if nt else [], "fabric": nt.fabric.kind if nt else None,
                              "rail_optimized": nt.fabric.rail_optimized if nt else None,
                              "sharp": nt.fabric.sharp if nt else None}
    if version:
        kwargs["nccl_version"] = version
    problems = [(FAIL if p.severity == "error" else WARN, f"{p.key}: {p.message}", p.hint or "")
                for p in lint_env(env, **kwargs)]
    hcas = read_hcas(inp.sys)
    ib_hca = env.get("NCCL_IB_HCA", "")
    if ib_hca and not ib_hca.startswith("^") and hcas is not None:
        names = [h.split(":")[0] for h in ib_hca.lstrip("=").split(",") if h]
        exact = ib_hca.startswith("=")
        absent = [n for n in names if not any(h == n or (not exact and h.startswith(n)) for h in hcas)]
        if absent:
            problems.append((FAIL, f"NCCL_IB_HCA names {', '.join(absent)}, which this node does not have (has: "
                             f"{', '.join(hcas) or 'none'})", "fix the node type's compute_hcas, or NCCL_IB_HCA"))
    ifname = env.get("NCCL_SOCKET_IFNAME", "")
    ifaces = net_interfaces(inp)
    if ifname and ifaces is not None and not select_ifnames(ifname, list(ifaces)):
        problems.append((FAIL, f"NCCL_SOCKET_IFNAME={ifname}: no interface matches it (have: "
                         f"{', '.join(sorted(ifaces))})", "set fabric.socket_ifname to an interface this node has"))
    if problems:
        return _worst("nccl_env", problems, details)
    if not env:
        return Check("nccl_env", PASS, "no NCCL variables set (NCCL's defaults)", None, details)
    return Check("nccl_env", PASS, f"{len(env)} NCCL variable(s) set, none suspicious: {', '.join(sorted(env))}",
                 None, details)


@dataclass
class Expected:
    gpu: int
    local_rank: int
    cpus: list[int]
    numa: int
    hca: str | None


def expected_binding(nt: NodeType, env: Mapping[str, str]) -> tuple[Expected | None, str | None]:
    """The placement sk's bind step gives this rank (job_templates partials/bind.sh.j2, same rule): the GPU at
    position local_rank % n among the GPUs Slurm allocated, that GPU's CPUs, NUMA node and HCA."""
    gpus = env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS") or env.get("CUDA_VISIBLE_DEVICES") or ""
    phys = [g for g in gpus.split(",") if g]
    if not phys:
        return None, "no GPUs allocated to this rank"
    lrank_text = env.get("LOCAL_RANK") or env.get("SLURM_LOCALID") or "0"
    if not lrank_text.isdigit() or not all(p.isdigit() for p in phys):
        return None, f"cannot map local rank {lrank_text!r} onto GPUs {gpus!r}"
    lrank = int(lrank_text)
    gpu = int(phys[lrank % len(phys)])
    try:
        g = nt.gpu_by_index(gpu)
    except KeyError:
        return None, f"GPU {gpu} is not in the node type's topology (it lists {len(nt.gpus)} GPUs)"
    return Expected(gpu, lrank, g.cpu_list, g.numa, g.hca), None


def check_binding(inp: Inputs, nt: NodeType | None, nt_name: str | None) -> Check:
    status_text = inp.read(inp.proc / "self" / "status") or ""
    st = parse_status(status_text)
    if "Cpus_allowed_list" not in st:
        return Check("binding", SKIP, f"cannot read Cpus_allowed_list from {inp.proc}/self/status")
    allowed = parse_cpulist(st["Cpus_allowed_list"])
    mems = parse_cpulist(st.get("Mems_allowed_list", "") or "")
    online_text = inp.read(inp.sys / "devices" / "system" / "cpu" / "online")
    online = parse_cpulist(online_text.strip()) if online_text else None
    numactl, _ = inp.run(["numactl", "--show"])
    policy = parse_numactl_show(numactl) if numactl else {}
    details: dict[str, Any] = {"cpus_allowed": format_cpulist(allowed), "mems_allowed": format_cpulist(mems),
                               "online": format_cpulist(online) if online is not None else None,
                               "policy": policy.get("policy"), "node_type": nt_name}
    actual = f"this rank runs on CPUs {format_cpulist(allowed)}, memory nodes {format_cpulist(mems) or '?'}"
    if nt is None:
        return Check("binding", SKIP, f"{actual}; no site node type to compare with", details=details)
    exp, why = expected_binding(nt, inp.env)
    if exp is None:
        return Check("binding", SKIP, f"{actual}; {why}", details=details)
    details.update(gpu=exp.gpu, local_rank=exp.local_rank, expected_cpus=format_cpulist(exp.cpus),
                   expected_numa=exp.numa, expected_hca=exp.hca)
    where = f"local rank {exp.local_rank} -> GPU {exp.gpu} (NUMA {exp.numa}, CPUs {format_cpulist(exp.cpus)})"
    if online is not None and not set(exp.cpus) <= set(online):
        return Check("binding", FAIL, f"{where}: node type {nt_name} lists CPUs this machine does not have (online: "
                     f"{format_cpulist(online)}); {actual}", "the node type does not describe this node: run "
                     "`sk site discover` here and `sk site check`", details)
    problems: list[tuple[str, str, str]] = []
    bound = inp.env.get("SK_BIND_CPUS")
    if bound:
        want = parse_cpulist(bound)
        if set(allowed) != set(want):
            problems.append((FAIL, f"{where}: sk's bind step chose CPUs {bound} but {actual}: something re-bound "
                             "the rank after it", "look for srun --cpu-bind, OMP_PLACES/GOMP_CPU_AFFINITY or a "
                             "framework setting CPU affinity"))
    else:
        near = set(allowed) & set(exp.cpus)
        if not near:
            problems.append((FAIL, f"{where}: {actual}, none of them local to the GPU: every host<->GPU copy "
                             "crosses the socket interconnect", "launch through sk's bind step (sk render/submit) "
                             f"or numactl --physcpubind={format_cpulist(exp.cpus)}"))
        elif not set(allowed) <= set(exp.cpus):
            far = sorted(set(allowed) - set(exp.cpus))
            problems.append((WARN, f"{where}: {actual}; {len(far)} of them are not the GPU's, so the rank may run "
                             "far from its GPU", f"bind with numactl --physcpubind={format_cpulist(sorted(near))} "
                             "(sk's bind step does)"))
    if mems and exp.numa not in mems:
        problems.append((WARN, f"{where}: memory may only come from NUMA node(s) {format_cpulist(mems)}, not the GPU's "
                         f"{exp.numa}", "check the job's cpuset (Slurm --mem-bind, cgroup cpuset.mems)"))
    pol = policy.get("policy")
    node = policy.get("preferred node") if pol == "preferred" else policy.get("membind") if pol == "bind" else None
    if node and node != "current" and exp.numa not in parse_cpulist(node.replace(" ", ",")):
        problems.append((FAIL, f"{where}: memory policy {pol} to node {node}, not the GPU's NUMA node {exp.numa}",
                         f"numactl --{'membind' if pol == 'bind' else 'preferred'}={exp.numa}"))
    if problems:
        return _worst("binding", problems, details)
    how = "as sk's bind step chose" if bound else "all local to the GPU"
    return Check("binding", PASS, f"{where}: {actual}, {how}" + (f"; memory policy {pol}" if pol else ""), None,
                 details)


# ---- running everything ---------------------------------------------------------------------------------

@dataclass
class SiteContext:
    site: Site | None
    node_type: NodeType | None
    node_type_name: str | None
    check: Check


def site_context(site: Site | None, error: str | None, env: Mapping[str, str],
                 partition: str | None = None) -> SiteContext:
    """Which node type this node is: the job's partition (SLURM_JOB_PARTITION), --partition, or the only one."""
    if site is None:
        return SiteContext(None, None, None, Check("site", FAIL if error and "no site configuration" not in error
                                                   else SKIP, error or "no site config", None if error and "no site "
                                                   "configuration" in error else "fix the site config (sk validate)"))
    part = partition or env.get("SLURM_JOB_PARTITION")
    if part and "," in part:
        part = part.split(",")[0]
    src = f"site config {site.source_file}"
    if part:
        if part not in site.partitions:
            return SiteContext(site, None, None, Check("site", FAIL, f"{src} has no partition {part!r} (this job's); "
                               "node-type checks skipped", "add the partition to the site config (sk site check)"))
        name = site.partitions[part].node_type
        return SiteContext(site, site.node_types[name], name, Check("site", PASS, f"{src}, partition {part} -> "
                                                                    f"node type {name}"))
    if len(site.node_types) == 1:
        name = next(iter(site.node_types))
        return SiteContext(site, site.node_types[name], name, Check("site", PASS, f"{src}, its only node type "
                                                                    f"{name}"))
    return SiteContext(site, None, None, Check("site", SKIP, f"{src} has node types {', '.join(site.node_types)}; "
                       "not in a job, so which one this node is is unknown", "pass --partition"))


def run_checks(inp: Inputs, ctx: SiteContext) -> list[Check]:
    nt, name = ctx.node_type, ctx.node_type_name
    dev = devices(inp)
    nccl, version = check_nccl(inp, nt)
    return [ctx.check, check_driver(inp), nccl, check_gpus(dev), check_cuda_env(inp, dev), check_hcas(inp, nt),
            check_ifname(inp, nt), check_nccl_env(inp, nt, version), check_binding(inp, nt, name)]


def exit_status(checks: list[Check]) -> int:
    return max((EXIT[c.status] for c in checks), default=0)


def to_json(checks: list[Check]) -> dict[str, Any]:
    counts = {s: sum(c.status == s for c in checks) for s in (PASS, WARN, FAIL, SKIP)}
    return {"checks": [asdict(c) for c in checks], "counts": counts, "exit_status": exit_status(checks)}

