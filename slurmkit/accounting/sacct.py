"""Job records from Slurm's accounting database: one record (slurmkit/record.py) per run of `sacct --duplicates
--allocations` rows (the command and its parsing: slurmkit/slurm/sacct.py).

Used by `sk admin reconcile` / `import-sacct` (slurmkit/accounting/reconcile.py) and `sk report --from-sacct`.
Standard library (plus python-hostlist) only: no pandas or click, so the report and admin paths stay light.

Requeued jobs: a requeue keeps the job id, and `--duplicates` shows one row per run, each with its own
DBIndex (slurmdbd's job_db_inx, increasing with every new run) and its own Submit (the requeue time). There is
no restart-count field in 22.05 sacct, so a row's `run` is its position among the job's rows in DBIndex order.
A time window (`-S`) can hide earlier runs of a job (a run ending before the window is not listed, verified
on 22.05.8: tests/data/accounting/sacct-window-119.txt), so run numbers come from a second query by job id
without a window. Only jobs whose first listed run was submitted before the window can have such a hidden run
(a requeued run's Submit is the requeue time, i.e. the end of the run before it), so only those are queried
again: a year-long import does not ask sacct twice for every job.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence

import hostlist

from slurmkit import record
from slurmkit.config import when
from slurmkit.slurm import fields, sacct
from slurmkit.slurm.sacct import parse_int, parse_time


def to_epoch(value: int | float | str | dt.datetime, *, now: float | None = None, what: str = "--since") -> int:
    """Epoch seconds from an epoch number, a datetime, or a time in slurmkit's one syntax (slurmkit/config/when.py;
    human times in local time, like Slurm's)."""
    if isinstance(value, dt.datetime):
        return int(value.timestamp())
    if isinstance(value, (int, float)):
        return int(value)
    return when.to_epoch(str(value), option=what, now=now)


def to_record(row: dict[str, str], run: int, source: str) -> dict:
    """One job record (slurmkit/record.py) from one sacct allocation row.

    A run that never started (Start Unknown/None, NodeList "None assigned") has no allocation, whatever
    NNodes/AllocCPUS say (22.05 prints the request there: 1 node, 1 CPU): 0 nodes, 0 CPUs, 0 GPUs, like the
    jobcomp hook's record of it.
    """
    array_job, array_task, het_job, het_offset = sacct.parse_job_id(row["JobID"])
    start, end = parse_time(row["Start"]), parse_time(row["End"])
    nodes = row["NodeList"] if row["NodeList"] not in ("", "None assigned") else None
    started = start is not None and nodes is not None
    node_count = parse_int(row["NNodes"])
    if node_count is None and nodes:
        node_count = len(hostlist.expand_hostlist(nodes))
    gpus, types = fields.parse_gpu_tres(row["AllocTRES"])
    elapsed = parse_int(row["ElapsedRaw"])
    if elapsed is None and start and end:
        elapsed = max(0, end - start)
    return record.storable({
        "version": record.JOB_VERSION, "kind": record.JOB_KIND, "cluster": row["Cluster"],
        "job_id": int(row["JobIDRaw"]), "run": run,
        "array_job_id": array_job, "array_task_id": array_task, "het_job_id": het_job, "het_job_offset": het_offset,
        "job_name": row["JobName"], "user_name": row["User"] or None, "uid": parse_int(row["UID"]),
        "account": row["Account"] or None, "partition": row["Partition"] or None, "qos": row["QOS"] or None,
        # "CANCELLED by 0" -> CANCELLED, like the jobcomp hook's JOBSTATE
        "state": row["State"].split()[0] if row["State"] else None,
        "exit_code": fields.exit_code(row["ExitCode"]),
        "submit_time": parse_time(row["Submit"]), "start_time": start if started else None, "end_time": end,
        "elapsed_s": elapsed if started else 0,
        "nodes": nodes, "node_count": node_count if started else 0,
        "cpus": parse_int(row["AllocCPUS"]) if started else 0,
        "gpus": gpus if started else 0, "gpu_types": (",".join(types) or None) if started else None,
        "node_type": None,  # sacct knows only the partition: the site's map names it (reconcile, --from-sacct)
        "tres": (row["AllocTRES"] or None) if started else None,
        "source": source, "flags": None,
    })


def number_runs(rows: list[dict[str, str]], source: str) -> list[dict]:
    """Records for every row, with `run` = position among the rows of the same (cluster, JobIDRaw) by DBIndex."""
    by_job: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        by_job.setdefault((row["Cluster"], row["JobIDRaw"]), []).append(row)
    out = []
    for job_rows in by_job.values():
        seen: set[str] = set()
        unique = []
        for row in sorted(job_rows, key=lambda r: (parse_int(r["DBIndex"]) or 0, parse_time(r["Submit"]) or 0)):
            if row["DBIndex"] not in seen:  # an array row can come back twice (queried by task and by array id)
                seen.add(row["DBIndex"])
                unique.append(row)
        out += [to_record(row, run, source) for run, row in enumerate(unique)]
    return out


def ended(rec: dict) -> bool:
    return rec["state"] in sacct.ENDED and rec["end_time"] is not None


def fetch_records(since: int | float | str | dt.datetime, until: int | float | str | dt.datetime | None = None, *,
                  users: Sequence[str] | None = None, cluster: str | None = None, source: str = "reconcile",
                  run: Callable[[list[str]], str] = sacct.run_sacct) -> list[dict]:
    """Records of every job run that ENDED in [since, until), from sacct, with correct run numbers.

    Two queries: one over the window finds the runs; one by job id (all time) lists every run of the jobs that
    may have an earlier run hidden by the window (first listed Submit before `since`), so that their runs are
    numbered as they are in Slurm. Sorted by (cluster, job_id, run). `run` executes a sacct command line.
    """
    start = to_epoch(since, what="since")
    stop = to_epoch(until, what="until") if until is not None else None
    window = sacct.parse(run(sacct.sacct_command(since=start, until=int(time.time()) + 1 if stop is None else stop,
                                                 users=users, cluster=cluster, states=sacct.ENDED)))
    first_submit: dict[int, int] = {}
    for r in window:
        job, submit = int(r["JobIDRaw"]), parse_time(r["Submit"])
        first_submit[job] = min(first_submit.get(job, submit or 0), submit or 0)
    again = sorted(j for j, submit in first_submit.items() if submit < start)
    requery = set(again)
    rows = [r for r in window if int(r["JobIDRaw"]) not in requery]
    for i in range(0, len(again), sacct.JOB_ID_CHUNK):
        chunk = again[i:i + sacct.JOB_ID_CHUNK]
        rows += sacct.parse(run(sacct.sacct_command(job_ids=chunk, users=users, cluster=cluster)))
    recs = [r for r in number_runs(rows, source) if r["job_id"] in first_submit and ended(r)
            and r["end_time"] >= start and (stop is None or r["end_time"] < stop)]
    return sorted(recs, key=lambda r: (r["cluster"], r["job_id"], r["run"]))


