"""Checks of the paths a spec names, made where the spec is checked (sk validate, sk submit), as warnings.

The planner cannot know the job's file system; the login node where a user validates or submits usually shares
it with the compute nodes, so a missing workdir, output directory or script found here would fail the job on
the node (Slurm opens the output file before the script starts: a missing directory ends the job at once,
with no log to read). They are warnings, not errors: a path may exist only on the nodes (node-local scratch)
or be created by an earlier job of the same submission.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from slurmkit.errors import Problem

if TYPE_CHECKING:
    from slurmkit.config.source import Source
    from slurmkit.plan import Plan

_PATTERN = re.compile(r"%[^%]")  # %x %j %A %a ...: Slurm fills them in, only the directory part is checked


def _missing_dir(path: str, base: Path) -> Path | None:
    d = (base / path).parent if not _PATTERN.search(str(Path(path).parent)) else None
    return d if d is not None and not d.is_dir() else None


def check_paths(plan: Plan, src: Source, cwd: Path | None = None) -> list[Problem]:
    """Warnings for a workdir, an output/error directory or a command script that does not exist here."""
    spec = plan.spec
    here = cwd or Path.cwd()
    out: list[Problem] = []
    if spec.container is not None:
        return out  # the paths are the container's
    workdir = here / spec.workdir if spec.workdir else here
    if spec.workdir and not workdir.is_dir():
        out.append(src.problem(("workdir",), f"{workdir} does not exist here", severity="warning",
                               hint="Slurm cannot start a job in a missing directory; create it, or check the path"))
        return out  # the other paths are relative to it
    for key in ("output", "error"):
        value = getattr(spec, key)
        if value and (d := _missing_dir(value, workdir)) is not None:
            out.append(src.problem((key,), f"the directory {d} does not exist here", severity="warning",
                                   hint="Slurm does not create it: the job would fail before it starts, with no "
                                        "log; mkdir -p it first"))
    argv = spec.argv
    # the program or the script it runs (python train.py, ./run.sh, /opt/app/bin/x); a sweep's {param} is per task
    script = next((a for a in argv[:2] if (a.endswith((".py", ".sh")) or "/" in a) and "{" not in a), None)
    if script:
        p = Path(script) if os.path.isabs(script) else workdir / script
        if not p.exists():
            out.append(src.problem(("command",), f"{script} does not exist in {p.parent}", severity="warning",
                                   hint="the job runs in its workdir (default: where you submit from)"))
    return out
