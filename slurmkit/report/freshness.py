"""How fresh the store is, said by every report read from it: when it was last ingested, and how many finished
GPU jobs Slurm knows in the window that the store does not have yet (one sacct call over the window, the
allocations only), with the command that fixes it.

A store behind Slurm (hooks not installed everywhere, the ingest timer stopped, a spool on a full disk) otherwise
gives a report that looks complete and is not. Where sacct cannot answer (no Slurm client here, slurmdbd down, a
user who sees only their own jobs), the report says that it could not compare, never that nothing is missing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slurmkit.errors import SlurmkitError
from slurmkit.report.query import Scope
from slurmkit.report.window import Window
from slurmkit.slurm import fields, sacct
from slurmkit.store.jobs import last_ingest

FIX = "sk admin ingest, then sk admin reconcile --since {since} --until {until}"  # epoch seconds: one form


@dataclass
class Freshness:
    last_ingest: int | None  # epoch seconds of the newest ingested run, None for an empty store
    slurm_gpu_jobs: int | None  # finished GPU job runs sacct lists in the window; None: not compared
    missing: int | None  # ... of them, how many the store has no row for
    why_not: str | None = None  # why there was no comparison

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _stored(store: Any, ids: list[int]) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        marks = ",".join("?" for _ in chunk)
        out |= {(str(c), int(j)) for c, j in store.execute(
            f"SELECT DISTINCT cluster, job_id FROM jobs WHERE job_id IN ({marks})", chunk).fetchall()}
    return out


def check(store: Any, window: Window, scope: Scope, *, run: Callable[[list[str]], str] | None = None,
          timeout_s: float = 30.0) -> Freshness:
    """The store's freshness for `window`; sacct is asked for the jobs `scope` may see."""
    last = last_ingest(store)
    users = None if scope.everyone else [scope.user or ""]
    cmd = sacct.sacct_command(since=window.since, until=min(window.until, int(time.time()) + 1), users=users,
                              states=sacct.ENDED)
    try:
        text = run(cmd) if run else sacct.run_sacct(cmd, timeout_s=timeout_s)
    except SlurmkitError as exc:
        return Freshness(last, None, None, exc.message)
    runs = {(r["Cluster"], int(r["JobIDRaw"])) for r in sacct.parse(text)
            if r["JobIDRaw"].isdigit() and (fields.gpu_count(r["AllocTRES"]) or 0) > 0}
    have = _stored(store, sorted({j for _, j in runs}))
    return Freshness(last, len(runs), len(runs - have))


def notes(f: Freshness, window: Window) -> list[str]:
    when = "never" if f.last_ingest is None else \
        f"{window.fmt(f.last_ingest)} ({fields.duration(max(0, int(time.time()) - f.last_ingest))} ago)"
    out = [f"store last ingested: {when}"]
    if f.slurm_gpu_jobs is None:
        out.append(f"not compared with Slurm accounting ({f.why_not}): jobs the store lacks are not counted")
    elif f.missing:
        out.append(f"Slurm accounting lists {f.missing} of {f.slurm_gpu_jobs} finished GPU jobs of the window that "
                   f"the store does not have yet: this report leaves them out (fix: "
                   f"{FIX.format(since=window.since, until=window.until)})")
    else:
        out.append(f"the store has all {f.slurm_gpu_jobs} finished GPU jobs Slurm accounting lists for the window")
    return out
