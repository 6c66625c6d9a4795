"""Slurm's units: memory sizes ("120G"), time limits ("1-12:00:00"), CPU lists ("48-63,176-191")."""

from __future__ import annotations

import re

_MEM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)
_MEM_FACTOR = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


def parse_mem_mib(value: str | int) -> int:
    """'120G' -> 122880 (MiB). Bare numbers are MiB, as in Slurm's --mem."""
    if isinstance(value, bool):
        raise ValueError("expected a memory size such as 16G")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError("memory must be positive")
        return value
    m = _MEM.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is not a memory size; use e.g. 16G, 512M or 1T")
    mib = float(m.group(1)) * _MEM_FACTOR[m.group(2).upper()]
    if mib < 1:
        raise ValueError(f"{value!r} is less than 1 MiB")
    return int(mib)


def format_mem(mib: int) -> str:
    """122880 -> '120G'; keeps Slurm's own suffixes, no rounding."""
    if mib % (1024 * 1024) == 0:
        return f"{mib // (1024 * 1024)}T"
    if mib % 1024 == 0:
        return f"{mib // 1024}G"
    return f"{mib}M"


_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_time_minutes(value: str | int) -> int:
    """Slurm time limit -> whole minutes (seconds round up, as Slurm does).

    Accepts the forms of sbatch --time: "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S"; an int is minutes.
    """
    if isinstance(value, bool):
        raise ValueError("expected a time such as 04:00:00")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError("time must be positive")
        return value
    text = str(value).strip()
    m = _TIME.match(text)
    if not m:
        raise ValueError(f"{value!r} is not a Slurm time; use e.g. 30, 04:00:00 or 2-00:00:00")
    days, a, b, c = m.groups()
    nums = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:  # D-H, D-H:M, D-H:M:S
        h, mi, s = [*nums, 0, 0][:3]
        total_s = int(days) * 86400 + h * 3600 + mi * 60 + s
    elif len(nums) == 1:
        total_s = nums[0] * 60
    elif len(nums) == 2:  # M:S
        total_s = nums[0] * 60 + nums[1]
    else:
        total_s = nums[0] * 3600 + nums[1] * 60 + nums[2]
    if total_s <= 0:
        raise ValueError("time must be positive")
    return -(-total_s // 60)


def format_time(minutes: int) -> str:
    """Minutes -> Slurm's D-HH:MM:SS (or HH:MM:SS under a day)."""
    d, rem = divmod(minutes, 1440)
    h, m = divmod(rem, 60)
    return f"{d}-{h:02d}:{m:02d}:00" if d else f"{h:02d}:{m:02d}:00"


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11] (the kernel's cpulist format, as in local_cpulist)."""
    cpus: list[int] = []
    text = text.strip()
    if not text:
        return cpus
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            if int(hi) < int(lo):
                raise ValueError(f"bad CPU range {part!r}")
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return sorted(set(cpus))


def format_cpulist(cpus: list[int] | set[int]) -> str:
    """[0,1,2,3,8] -> '0-3,8'."""
    out: list[str] = []
    items = sorted(set(cpus))
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)
