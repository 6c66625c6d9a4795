"""Slurm's own GPU usage (gres/gpuutil, gres/gpumem in sacct's TRESUsageIn*): per-job figures, a last resort.

Slurm >= 23.02 built with NVML, with ``AccountingStorageTRES=gres/gpumem,gres/gpuutil``, records them per job
step. They are weaker than a node summary, so they are used only for a job that has none (no sampler, hook not
installed):

* TRESUsageInAve is NOT a runtime average: it is the mean over the step's tasks of the *last* poll, so a job
  that idled at the end reads 0 whatever it did before. Every result is flagged ``last-poll-not-average`` and
  the figure is named ``util_last_poll``.
* Since Slurm 24.05.1 the values are summed over the step's GPUs (4 busy GPUs read gpuutil=396), so they are
  divided by the step's GPU count (its AllocTRES, else the job's); older versions are taken as reported. Without
  a GPU count the value stays undivided and is flagged ``gpu-count-unknown``.
* Per job, not per GPU: Slurm keeps no per-GPU figure. The job's value is the highest of its steps' (the extern
  step holds no work and is skipped). gres/gpumem is converted to MiB (sacct --noconvert gives bytes).
* Sites whose GPUs NVML cannot read show zeros or infinite values (CU Boulder's documentation says so); an
  infinite or non-numeric value is None, a zero stays a zero.

Standard library only (plus slurmkit/slurm/: fields, sacct): callable from reconcile or a report.
"""

from __future__ import annotations

import math
import re

from slurmkit.slurm import fields

FIELDS = ("JobID", "TRESUsageInAve", "TRESUsageInMax", "AllocTRES")
FLAG = "last-poll-not-average"
SUMMED_SINCE = (24, 5, 1)
MIB = 1024 * 1024
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_NUMBER = re.compile(r"^([0-9.]+|inf|nan)([KMGTP]?)$", re.IGNORECASE)
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def command(job_id: int | str, cluster: str | None = None) -> list[str]:
    """The sacct query (bytes, not 38888M, through --noconvert)."""
    cmd = ["sacct", "-j", str(job_id), "-P", "-n", "--noconvert", "-o", ",".join(FIELDS)]
    return cmd + (["-M", cluster] if cluster else [])


def parse_rows(text: str, fields: tuple[str, ...] = FIELDS) -> list[dict[str, str]]:
    """Rows of `sacct -P` or `-p` (trailing '|'), with or without the header line. Raises ValueError naming the
    line when a row has another number of fields."""
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) == len(fields) + 1 and parts[-1] == "":
            parts.pop()  # -p ends every line with '|'
        if len(parts) != len(fields):
            raise ValueError(f"sacct line {n}: {len(parts)} fields, expected {len(fields)} ({','.join(fields)}): "
                             f"{line[:120]!r}")
        if parts[0] == fields[0]:
            continue  # the header
        rows.append(dict(zip(fields, parts, strict=True)))
    return rows


def tres_value(tres: str, name: str) -> float | None:
    """One entry of a TRES list in base units (gres/gpumem=38888M -> bytes); None when absent or not finite."""
    for item in (tres or "").split(","):
        key, eq, raw = item.strip().partition("=")
        if key != name or not eq:
            continue
        m = _NUMBER.match(raw.strip())
        if not m:
            return None
        try:
            value = float(m.group(1)) * _UNITS[m.group(2).upper()]
        except ValueError:
            return None
        return value if math.isfinite(value) else None
    return None


def sums_over_gpus(version: str) -> bool:
    """Whether this Slurm (`sacct --version`: 'slurm 24.05.1') sums gres/gpu* usage over a step's GPUs."""
    m = _VERSION.search(version or "")
    if not m:
        raise ValueError(f"cannot read a Slurm version from {version!r} (expected e.g. 'slurm 24.05.1')")
    return tuple(int(x) for x in m.groups()) >= SUMMED_SINCE


def job_usage(rows: list[dict[str, str]], *, summed_over_gpus: bool, gpus: int | None = None) -> dict | None:
    """Per-job figures from one job's sacct rows, or None when no step has gres/gpuutil (the site lacks it).

    `gpus`: the job's GPU count when the rows carry no AllocTRES. Result keys: util_last_poll, util_max (percent,
    per GPU), mem_max_mib (per GPU), gpus, steps (how many steps had figures), source 'slurm', flags."""
    job_gpus = gpus
    for row in rows:
        if "." not in row["JobID"] and row.get("AllocTRES"):
            job_gpus = fields.parse_gpu_tres(row["AllocTRES"])[0] or job_gpus
    flags = [FLAG]
    ave_best = max_best = mem_best = None
    steps = 0
    for row in rows:
        step = row["JobID"].partition(".")[2]
        if not step or step == "extern":
            continue
        u_max = tres_value(row.get("TRESUsageInMax", ""), "gres/gpuutil")
        u_ave = tres_value(row.get("TRESUsageInAve", ""), "gres/gpuutil")
        mem = tres_value(row.get("TRESUsageInMax", ""), "gres/gpumem")
        if u_max is None and u_ave is None:
            continue
        steps += 1
        n = 1
        if summed_over_gpus:
            n = (fields.parse_gpu_tres(row.get("AllocTRES", ""))[0] if row.get("AllocTRES") else 0) or job_gpus or 0
            if not n:
                n = 1
                if "gpu-count-unknown" not in flags:
                    flags.append("gpu-count-unknown")
        ave_best = _higher(ave_best, None if u_ave is None else u_ave / n)
        max_best = _higher(max_best, None if u_max is None else u_max / n)
        mem_best = _higher(mem_best, None if mem is None else mem / n / MIB)
    if not steps:
        return None
    return {"util_last_poll": _round(ave_best), "util_max": _round(max_best),
            "mem_max_mib": None if mem_best is None else round(mem_best), "gpus": job_gpus, "steps": steps,
            "source": "slurm", "flags": ",".join(flags)}


def _higher(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def fetch(job_id: int, *, cluster: str | None = None, slurm_version: str | None = None,
          timeout_s: float = 60.0) -> dict | None:
    """Run sacct for one job (and `sacct --version` when `slurm_version` is not given); job_usage() of it.
    Raises slurmkit.errors.BackendUnavailable / BackendError as slurmkit.slurm.sacct.run_sacct does."""
    from slurmkit.slurm.sacct import run_sacct

    version = slurm_version or run_sacct(["sacct", "--version"], timeout_s=timeout_s)
    rows = parse_rows(run_sacct(command(job_id, cluster), timeout_s=timeout_s))
    return job_usage(rows, summed_over_gpus=sums_over_gpus(version))
