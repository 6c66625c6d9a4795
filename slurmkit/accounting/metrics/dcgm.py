"""The DCGM source: DCGM job statistics through `dcgmi`, for nodes that run NVIDIA's host engine (nv-hostengine).

Why a summary source and not a sampler: the host engine already watches the GPUs and keeps per-job statistics,
so slurmkit only tells it which GPUs belong to the job (prolog) and asks for the job's summary (epilog). The
commands are the ones of DCGM's "Job Statistics" documentation (dcgmi stats reference):

* start (in the detached sampler, so the prolog is not delayed):
  ``dcgmi group -c sk-<cluster>-<job>-<run>`` (prints ``Successfully created group "..." with a group ID of N``),
  ``dcgmi group -g N -a <gpu ids>``, ``dcgmi stats -g N -e`` (enable the watches),
  ``dcgmi stats -g N -s <dcgm job id>``;
* finish (epilog): ``dcgmi stats -x <dcgm job id>``, ``dcgmi stats -v -j <dcgm job id>`` (parsed per GPU), then
  ``dcgmi stats -r <dcgm job id>`` and ``dcgmi group -d N`` (clean-up; a failure there is only logged).

The DCGM job id is the job run's key (cluster/job/run, '-' separated), so a requeued run never reads its
predecessor's statistics. DCGM keeps job statistics in the host engine's memory only: a host-engine restart
during the job loses them, and the epilog then gives the flagged record without numbers (source-unavailable),
as it does when `dcgmi` is missing or the host engine is down. Numbers never come from anywhere else.

What the summary holds (same keys as gpusummary.summarize): util_mean / util_max are DCGM's "SM Utilization"
Avg / Max (DCGM's own averaging over its watch interval; NVIDIA/DCGM issue #305 reports that dcgmi labels the
graphics-engine activity this way); idle_fraction is None (DCGM gives no distribution); mem_max_mib from "Max GPU
Memory Used (bytes)"; energy_j from "Energy Consumed (Joules)", or, when DCGM reports 0 or blank while the GPU drew
power (seen in real output, tests/data/dcgm/), average power x execution time, flagged ``energy-from-power``;
samples is None (DCGM does not say how many readings it took). Critical XID errors are counted in the record's
note and flagged ``xid-errors``.

GPU identity: `dcgmi stats -v` prints DCGM's GPU ID only (no UUID, no PCI bus id), and DCGM numbers GPUs as NVML
enumerates them (PCI bus order), which is not Slurm's order on every machine (see metrics/nvml.py). So where
nvidia-ml-py works, Slurm's index is resolved exactly as the nvml source does (device-minor order or
SK_GPU_MAP), the record carries UUID and PCI bus id, and the GPU's NVML index is the DCGM GPU ID given to DCGM
(an assumption that holds for whole GPUs; MIG instances are not handled). Without NVML, Slurm's index is passed
as the DCGM GPU ID and every record is flagged ``gpu-identity-unverified`` (no UUID); with SK_GPU_MAP set and no
NVML the source refuses (SourceUnavailable) rather than guess.

Tested against recorded real `dcgmi` output and a FAKE `dcgmi` executable (tests/test_metrics_dcgm.py): there is
no GPU or host engine where this project is developed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

from slurmkit.accounting.metrics import Gpu, SourceUnavailable

MIB = 1024 * 1024
TIMEOUT_S = 20.0
INT64_BLANK = 0x7FFFFFFFFFFFFFF0  # DCGM_INT64_BLANK: values at or above it mean "no data"
INT32_BLANK = 0x7FFFFFF0
_GROUP_ID = re.compile(r"with a group ID of (\d+)")
_STAT = re.compile(r"(Avg|Max|Min):\s*([^,]+)")


def dcgm_job_id(key: str) -> str:
    """The DCGM job id of a job run (its key cluster/job/run): at most 64 characters, no '/'."""
    return ("sk-" + key.replace("/", "-"))[:64]


def _run(args: list[str], timeout_s: float = TIMEOUT_S) -> str:
    """stdout of `dcgmi ARGS`; SourceUnavailable (naming the command and dcgmi's message) on any failure.
    dcgmi prints its errors on stdout ("Error: Unable to ..."), so both streams are kept for the message."""
    exe = shutil.which("dcgmi")
    if exe is None:
        raise SourceUnavailable("DCGM: dcgmi is not on PATH (install datacenter-gpu-manager, or use nvml)")
    try:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceUnavailable(f"DCGM: dcgmi {' '.join(args)}: {exc}") from None
    out = proc.stdout or ""
    if proc.returncode != 0 or out.lstrip().startswith("Error"):
        msg = " ".join((out + " " + (proc.stderr or "")).split())[:300] or f"exit status {proc.returncode}"
        raise SourceUnavailable(f"DCGM: dcgmi {' '.join(args)} failed: {msg}")
    return out


class DcgmSource:
    """A summary source: open() starts DCGM's job recording; the epilog calls finish(meta['recording'])."""

    name = "dcgm"
    summary_only = True  # the sampler writes meta.json and waits; it takes no readings itself

    def __init__(self, key: str, gpu_map: dict[int, str] | None = None, nvml: Any = None) -> None:
        self._job = dcgm_job_id(key)
        self._group: int | None = None
        self._map = gpu_map or {}
        self._nvml = nvml
        self._ids: list[int] = []
        self._verified = False

    def _resolve(self, indices: list[int]) -> list[Gpu]:
        """Slurm indices -> GPUs with identity and their DCGM GPU IDs (NVML indices), through NVML when it works."""
        from slurmkit.accounting.metrics.nvml import NvmlSource

        mod = self._nvml
        if mod is None:
            try:
                import pynvml as mod
            except ImportError:
                mod = None
        problem = "nvidia-ml-py is not installed"
        if mod is not None:
            nv = NvmlSource(gpu_map=self._map, nvml=mod)
            try:
                gpus = nv.open(indices)
                self._ids = [int(mod.nvmlDeviceGetIndex(mod.nvmlDeviceGetHandleByUUID(g.uuid))) for g in gpus]
                self._verified = True
                return gpus
            except (SourceUnavailable, mod.NVMLError) as exc:
                problem = str(exc)
            finally:
                nv.close()
        if self._map:
            raise SourceUnavailable(f"DCGM: SK_GPU_MAP is set but NVML cannot resolve it ({problem}); the dcgm "
                                    "source does not guess DCGM GPU IDs")
        self._ids = list(indices)
        return [Gpu(index=i) for i in indices]

    def open(self, indices: list[int]) -> list[Gpu]:
        gpus = self._resolve(indices)
        out = _run(["group", "-c", self._job])
        m = _GROUP_ID.search(out)
        if not m:
            raise SourceUnavailable(f"DCGM: no group ID in the output of dcgmi group -c: {out.strip()[:200]!r}")
        self._group = int(m.group(1))
        try:
            _run(["group", "-g", str(self._group), "-a", ",".join(map(str, self._ids))])
            _run(["stats", "-g", str(self._group), "-e"])
            _run(["stats", "-g", str(self._group), "-s", self._job])
        except SourceUnavailable:
            _cleanup(self._job, self._group, remove_job=False)
            raise
        return gpus

    def recording(self) -> dict:
        """What the epilog needs to find the recording again (kept in the sampler's meta.json)."""
        return {"dcgm_job": self._job, "dcgm_group": self._group, "dcgm_gpu_ids": self._ids,
                "identity_verified": self._verified}

    def close(self) -> None:  # the recording outlives the sampler on purpose; finish() ends it
        pass


def _cleanup(job: str, group: int | None, remove_job: bool = True) -> list[str]:
    problems = []
    steps = ([["stats", "-r", job]] if remove_job else []) + ([["group", "-d", str(group)]] if group is not None
                                                               else [])
    for args in steps:
        try:
            _run(args)
        except SourceUnavailable as exc:
            problems.append(str(exc))
    return problems


def finish(meta: dict) -> tuple[list[dict], list[str], str | None]:
    """Stop the job's recording, read and parse it, clean up. Returns (per-GPU summaries in meta['gpus'] order,
    flags, note). Raises SourceUnavailable when there is nothing trustworthy to report."""
    rec = meta.get("recording") or {}
    job, group = rec.get("dcgm_job"), rec.get("dcgm_group")
    if not job:
        raise SourceUnavailable("DCGM: the sampler's state names no DCGM job")
    try:
        _run(["stats", "-x", job])
        text = _run(["stats", "-v", "-j", job])
    finally:
        cleanup_problems = _cleanup(job, group)
    try:
        by_id = {g["gpu_id"]: g for g in parse_job_stats(text)}
    except ValueError as exc:
        raise SourceUnavailable(f"DCGM: dcgmi stats -v -j {job}: {exc}") from None
    ids = rec.get("dcgm_gpu_ids") or [g["index"] for g in meta["gpus"]]
    gpus, notes = [], []
    flags = [] if rec.get("identity_verified") else ["gpu-identity-unverified"]
    for gpu, gpu_id in zip(meta["gpus"], ids, strict=True):
        stats = by_id.get(gpu_id)
        if stats is None:
            raise SourceUnavailable(f"DCGM: job {job} has no statistics for GPU ID {gpu_id} "
                                    f"(got {sorted(by_id)})")
        summary, gpu_flags = summarize(stats)
        flags += [f for f in gpu_flags if f not in flags]
        if stats["xid_errors"]:
            notes.append(f"GPU {gpu['index']}: {stats['xid_errors']} critical XID error(s)")
        gpus.append({**{k: gpu.get(k) for k in ("index", "uuid", "pci_bus_id", "model", "mem_total_mib")},
                     **summary})
    notes += cleanup_problems
    return gpus, flags, "; ".join(notes) or None


# ------------------------------------------------------------------ parsing `dcgmi stats -v -j`


def _number(text: str) -> float | None:
    """A dcgmi value: None for N/A, Not Supported, Not Found, blank sentinels; else the number."""
    try:
        value = float(text)
    except ValueError:
        return None
    return None if INT32_BLANK <= value < 2**31 or value >= INT64_BLANK else value


def _triple(text: str) -> dict[str, float | None]:
    """'Avg: 72, Max: 99, Min: 0' -> {'avg': 72.0, 'max': 99.0, 'min': 0.0} (None for N/A)."""
    return {k.lower(): _number(v.strip()) for k, v in _STAT.findall(text)}


def parse_job_stats(text: str) -> list[dict]:
    """Per-GPU statistics from `dcgmi stats -v -j JOB` output, in the order printed. Raises ValueError naming
    the line when the output is not that table (e.g. the non-verbose 'Summary' form, or an error message)."""
    gpus: list[dict] = []
    rows: dict[str, str] | None = None
    last_key = ""
    xid_times: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s.startswith("|") or s.startswith("|-"):
            continue  # borders, section titles ("|-----  Execution Stats  ---"), the "Successfully..." line
        cells = [c.strip() for c in s.strip("|").split("|")]
        if len(cells) == 1:
            if cells[0].startswith("GPU ID:"):
                rows, xid_times = {}, []
                gpus.append({"gpu_id": int(cells[0].split(":", 1)[1]), "_rows": rows, "_xid": xid_times})
            elif cells[0] == "Summary":
                raise ValueError(f"line {n}: non-verbose 'Summary' output; run dcgmi stats -v -j")
            continue
        if rows is None:
            raise ValueError(f"line {n}: a statistics row before any 'GPU ID:' header: {s[:80]!r}")
        key = cells[0].rstrip("* ").strip()  # '*' marks fields DCGM could not fully record (DCGM issue #268)
        if key:
            last_key = key
            rows[key] = cells[1]
        if last_key.startswith("XID (") and cells[1]:
            xid_times.append(cells[1])
    if not gpus:
        raise ValueError("no 'GPU ID:' block in the output (expected dcgmi stats -v -j)")
    return [_gpu_stats(g["gpu_id"], g["_rows"]) for g in gpus]


def _gpu_stats(gpu_id: int, rows: dict[str, str]) -> dict:
    def num(key: str) -> float | None:
        return _number(rows[key]) if key in rows else None

    def tri(key: str) -> dict[str, float | None]:
        return _triple(rows.get(key, ""))

    sm, memu, power = tri("SM Utilization (%)"), tri("Memory Utilization (%)"), tri("Power Usage (Watts)")
    xid = num("Critical XID Errors")
    return {"gpu_id": gpu_id, "start": rows.get("Start Time"), "end": rows.get("End Time"),
            "exec_s": num("Total Execution Time (sec)"), "processes": num("No. of Processes"),
            "energy_j": num("Energy Consumed (Joules)"), "power_avg_w": power.get("avg"),
            "power_max_w": power.get("max"), "mem_max_bytes": num("Max GPU Memory Used (bytes)"),
            "sm_util_avg": sm.get("avg"), "sm_util_max": sm.get("max"),
            "mem_util_avg": memu.get("avg"), "mem_util_max": memu.get("max"),
            "xid_errors": int(xid) if xid is not None else None,
            "ecc_dbe": num("Double Bit ECC Errors"), "health": rows.get("Overall Health")}


def summarize(stats: dict) -> tuple[dict, list[str]]:
    """One parsed GPU -> the gpusummary metric keys, and the flags it earned."""
    flags = []
    energy = stats["energy_j"]
    if not energy and stats["power_avg_w"] and stats["exec_s"]:
        energy = round(stats["power_avg_w"] * stats["exec_s"], 3)
        flags.append("energy-from-power")
    if stats["xid_errors"]:
        flags.append("xid-errors")
    mem = stats["mem_max_bytes"]
    return {"util_mean": stats["sm_util_avg"], "util_max": stats["sm_util_max"], "idle_fraction": None,
            "mem_max_mib": None if mem is None else round(mem / MIB), "energy_j": energy,
            "power_max_w": stats["power_max_w"], "samples": None}, flags


def make(*, key: str, node: str, interval_s: float, trace: str | None = None,
         gpu_map: dict[int, str] | None = None) -> DcgmSource:
    """The source for the registry (slurmkit/record.py METRIC_SOURCES; metrics.open_source calls it)."""
    return DcgmSource(key=key, gpu_map=gpu_map)
