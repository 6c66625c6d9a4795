"""Parse `scontrol show job -o JOBID` (one line of Key=Value pairs, Slurm 22.05)."""

from __future__ import annotations

import re
import subprocess

# Keys start a token after whitespace; values may contain spaces (Command=, WorkDir=), so split on ` Key=`.
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9/:_]*)=")


def parse_show_job(text: str) -> dict[str, str]:
    line = text.strip().splitlines()[0] if text.strip() else ""
    out: dict[str, str] = {}
    matches = list(_KEY.finditer(line))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out[m.group(1)] = line[m.end():end].strip()
    return out


def show_job(job_id: int, timeout_s: float = 10.0) -> dict[str, str]:
    """Raises OSError/subprocess errors; the hook catches them and flags the record."""
    res = subprocess.run(["scontrol", "show", "job", "-o", str(int(job_id))], capture_output=True,
                         text=True, timeout=timeout_s, check=True)
    return parse_show_job(res.stdout)
