"""Allocation-only report data straight from Slurm accounting, for sites without the slurmkit hook
(`sk report ... --from-sacct`).

sacct's allocation rows become store records (slurmkit.accounting.sacct: run numbering for requeues, GPU counts
from AllocTRES) and are loaded into a private in-memory SQLite store built by the real migrations; the report
then runs the very same SQL as on the hook's store, so the two paths cannot compute a figure differently.
sacct 22.05 has no per-GPU utilization (gres/gpuutil needs Slurm >= 23.02 built with NVML), so every run is a
job without GPU metrics: utilization, used and wasted GPU-hours are unknown ("no GPU metrics"), never 0 %.

Privacy: without PrivateData=jobs in slurm.conf (the devcluster, many sites) sacct shows every user's jobs to
everyone, so slurmkit does not rely on Slurm here: a non-admin's query always carries `-u <their login>`, and
rows of any other user are dropped again after parsing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from slurmkit.accounting import sacct
from slurmkit.report.query import Scope
from slurmkit.report.window import Window
from slurmkit.slurm import sacct as sacct_cmd
from slurmkit.store import jobs
from slurmkit.store.db import Store, apply_migrations

SOURCE = "sacct"
NOTE = ("source: Slurm accounting (sacct: AllocTRES GPUs x elapsed time) - allocation only, no GPU utilization "
        "metrics; jobs still running are not counted until they end")


def sacct_command(window: Window, scope: Scope, cluster: str | None = None) -> list[str]:
    """The sacct call for `window`: every allocation that overlapped it (sacct -S/-E select by overlap), and
    only the caller's own jobs unless they are an admin."""
    users = None if scope.everyone else [scope.user]
    return sacct_cmd.sacct_command(since=window.since, until=window.until, users=users, cluster=cluster)


def records(rows: Iterable[dict[str, str]], scope: Scope) -> list[dict]:
    """Store records of the ended runs among `rows` (dicts keyed by sacct field names) that `scope` may see."""
    rows = [r for r in rows if scope.everyone or r["User"] == scope.user]
    return [rec for rec in sacct.number_runs(rows, SOURCE) if sacct.ended(rec)]


def memory_store(recs: list[dict], node_types: dict[str, str] | None = None) -> Store:
    """A throw-away in-memory store (real schema) holding `recs`. `node_types` maps a partition to its
    site-config node type (sacct knows only the partition), so that `--by node_type` works as on the hook's
    store: the rows are written as ingest writes them (slurmkit/store/jobs.py)."""
    store = Store(":memory:", "sqlite", sqlite3.connect(":memory:", isolation_level=None))
    apply_migrations(store)
    with store.transaction() as cur:
        # The upsert never fires: number_runs gives every run its own (cluster, job_id, run).
        cur.executemany(jobs.upsert_sql(), [jobs.row(r, node_types) for r in recs])
    return store


def open_sacct(window: Window, scope: Scope, *, cluster: str | None = None, node_types: dict[str, str] | None = None,
               run: Callable[[list[str]], str] = sacct_cmd.run_sacct) -> tuple[Store, dict[str, Any]]:
    """Run sacct for `window` and return the in-memory store plus what was read (for the report's notes)."""
    rows = sacct_cmd.parse(run(sacct_command(window, scope, cluster)))
    recs = records(rows, scope)
    return memory_store(recs, node_types), {"sacct_rows": len(rows), "runs": len(recs)}
