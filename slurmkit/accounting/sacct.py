"""Job records from Slurm's accounting database: `sacct --duplicates --allocations -P` (Slurm 22.05 fields).

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
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence

import hostlist

from slurmkit.accounting import record
from slurmkit.config import when
from slurmkit.errors import BackendError, BackendUnavailable

# JobName comes last: it is the only free-text field and may contain the '|' delimiter.
FIELDS = ("JobID", "JobIDRaw", "DBIndex", "Cluster", "User", "UID", "Account", "Partition", "QOS", "State",
          "ExitCode", "Submit", "Start", "End", "ElapsedRaw", "NodeList", "NNodes", "AllocCPUS", "AllocTRES",
          "JobName")
# States of a run that has ended (Slurm 22.05 job_state_string); RUNNING/PENDING/SUSPENDED rows are not records.
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE", "REQUEUED", "REVOKED"}
# 125_0 (array task), 131+1 (het job component), 129_[0-4] (an array's tasks that never started: one record).
_JOBID = re.compile(r"^(\d+)(?:_(\d+)|\+(\d+)|_\[([^\]]*)\])?$")
JOB_ID_CHUNK = 200  # job ids per `sacct -j` call (keeps the command line short)


def to_epoch(value: int | float | str | dt.datetime, *, now: float | None = None, what: str = "--since") -> int:
    """Epoch seconds from an epoch number, a datetime, or a time in slurmkit's one syntax (slurmkit/config/when.py;
    human times in local time, like Slurm's)."""
    if isinstance(value, dt.datetime):
        return int(value.timestamp())
    if isinstance(value, (int, float)):
        return int(value)
    return when.to_epoch(str(value), option=what, now=now)


def _slurm_time(epoch: int) -> str:
    """sacct -S/-E take local time (SLURM_TIME_FORMAT does not apply to input)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def sacct_command(*, since: int | None = None, until: int | None = None, job_ids: Iterable[int] = (),
                  users: Sequence[str] | None = None, cluster: str | None = None,
                  states: Iterable[str] = ()) -> list[str]:
    """The sacct call. Without `states`, -S/-E select every run that overlapped the window (running ones too);
    with them, only runs that were in one of those states in the window: for end states, runs that ENDED in it,
    including runs that never started (cancelled while pending; 22.05.8, tests/data/accounting/README.md).
    sacct needs -E with -s (it lists nothing otherwise), so `until` must then be given."""
    cmd = ["sacct", "--duplicates", "--allocations", "-P", "-n", "-o", ",".join(FIELDS)]
    if states:
        if until is None:
            raise ValueError("sacct -s needs an end time (-E)")
        cmd += ["-s", ",".join(sorted(states))]
    ids = [str(int(j)) for j in job_ids]
    if ids:
        cmd += ["-j", ",".join(ids)]  # without -S, `-j` searches all time (22.05)
    if since is not None:
        cmd += ["-S", _slurm_time(since)]
    if until is not None:
        cmd += ["-E", _slurm_time(until)]
    if users:
        cmd += ["-u", ",".join(users)]
    else:
        cmd += ["-a"]
    if cluster:
        cmd += ["-M", cluster]
    return cmd


def run_sacct(cmd: list[str], timeout_s: float = 600.0) -> str:
    """Run sacct with epoch times in its output (SLURM_TIME_FORMAT=%s: no local-time parsing)."""
    env = {**os.environ, "SLURM_TIME_FORMAT": "%s"}
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except FileNotFoundError:
        raise BackendUnavailable("sacct not found", hint="run this on a host with the Slurm client tools") from None
    except subprocess.TimeoutExpired:
        raise BackendUnavailable(f"sacct did not answer in {timeout_s:.0f} s (is slurmdbd up?)") from None
    if res.returncode != 0:
        msg = res.stderr.strip() or f"exit status {res.returncode}"
        raise BackendError(f"sacct failed: {msg}", hint="check slurmdbd (sacctmgr show cluster) and your rights "
                                                        "(other users' jobs need root or an operator)")
    return res.stdout


def _time(value: str) -> int | None:
    """Epoch from sacct output: `%s` epochs (our runs) or ISO local time (recorded default-format output)."""
    if value in ("", "Unknown", "None"):
        return None
    if value.isdigit():
        return int(value)
    try:
        return int(dt.datetime.fromisoformat(value).timestamp())
    except ValueError:
        return None


def _int(value: str) -> int | None:
    return int(value) if value.strip().isdigit() else None


def parse(text: str) -> list[dict[str, str]]:
    """Rows of `sacct -P -n -o FIELDS` as dicts (JobName may contain '|': it is the last field)."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", len(FIELDS) - 1)
        if len(parts) != len(FIELDS):
            raise BackendError(f"unexpected sacct line ({len(parts)} fields, expected {len(FIELDS)}): {line!r}")
        rows.append(dict(zip(FIELDS, parts, strict=True)))
    return rows


def to_record(row: dict[str, str], run: int, source: str) -> dict:
    """One job record (the format of slurmkit/accounting/record.py) from one sacct allocation row.

    A run that never started (Start Unknown/None, NodeList "None assigned") has no allocation, whatever
    NNodes/AllocCPUS say (22.05 prints the request there: 1 node, 1 CPU): 0 nodes, 0 CPUs, 0 GPUs, like the
    jobcomp hook's record of it.
    """
    m = _JOBID.match(row["JobID"])
    array_job = int(m.group(1)) if m and (m.group(2) is not None or m.group(4) is not None) else None
    array_task = int(m.group(2)) if m and m.group(2) is not None else None
    het_job = int(m.group(1)) if m and m.group(3) is not None else None
    het_offset = int(m.group(3)) if m and m.group(3) is not None else None
    start, end = _time(row["Start"]), _time(row["End"])
    nodes = row["NodeList"] if row["NodeList"] not in ("", "None assigned") else None
    started = start is not None and nodes is not None
    node_count = _int(row["NNodes"])
    if node_count is None and nodes:
        node_count = len(hostlist.expand_hostlist(nodes))
    gpus, types = record.parse_gpu_tres(row["AllocTRES"])
    elapsed = _int(row["ElapsedRaw"])
    if elapsed is None and start and end:
        elapsed = max(0, end - start)
    return {
        "version": record.RECORD_VERSION, "kind": "job", "cluster": row["Cluster"],
        "job_id": int(row["JobIDRaw"]), "run": run,
        "array_job_id": array_job, "array_task_id": array_task, "het_job_id": het_job, "het_job_offset": het_offset,
        "job_name": row["JobName"], "user_name": row["User"] or None, "uid": _int(row["UID"]),
        "account": row["Account"] or None, "partition": row["Partition"] or None, "qos": row["QOS"] or None,
        # "CANCELLED by 0" -> CANCELLED, like the jobcomp hook's JOBSTATE
        "state": row["State"].split()[0] if row["State"] else None,
        "exit_code": record.exit_code(row["ExitCode"]),
        "submit_time": _time(row["Submit"]), "start_time": start if started else None, "end_time": end,
        "elapsed_s": elapsed if started else 0,
        "nodes": nodes, "node_count": node_count if started else 0, "cpus": _int(row["AllocCPUS"]) if started else 0,
        "gpus": gpus if started else 0, "gpu_types": (",".join(types) or None) if started else None,
        "tres": (row["AllocTRES"] or None) if started else None,
        "source": source, "flags": None,
    }


def number_runs(rows: list[dict[str, str]], source: str) -> list[dict]:
    """Records for every row, with `run` = position among the rows of the same (cluster, JobIDRaw) by DBIndex."""
    by_job: dict[tuple[str, str], list[dict[str, str]]] = {}
    for row in rows:
        by_job.setdefault((row["Cluster"], row["JobIDRaw"]), []).append(row)
    out = []
    for job_rows in by_job.values():
        seen: set[str] = set()
        unique = []
        for row in sorted(job_rows, key=lambda r: (_int(r["DBIndex"]) or 0, _time(r["Submit"]) or 0)):
            if row["DBIndex"] not in seen:  # an array row can come back twice (queried by task and by array id)
                seen.add(row["DBIndex"])
                unique.append(row)
        out += [to_record(row, run, source) for run, row in enumerate(unique)]
    return out


def ended(rec: dict) -> bool:
    return rec["state"] in ENDED and rec["end_time"] is not None


def fetch_records(since: int | float | str | dt.datetime, until: int | float | str | dt.datetime | None = None, *,
                  users: Sequence[str] | None = None, cluster: str | None = None, source: str = "reconcile",
                  run: Callable[[list[str]], str] = run_sacct) -> list[dict]:
    """Records of every job run that ENDED in [since, until), from sacct, with correct run numbers.

    Two queries: one over the window finds the runs; one by job id (all time) lists every run of the jobs that
    may have an earlier run hidden by the window (first listed Submit before `since`), so that their runs are
    numbered as they are in Slurm. Sorted by (cluster, job_id, run). `run` executes a sacct command line.
    """
    start = to_epoch(since, what="since")
    stop = to_epoch(until, what="until") if until is not None else None
    window = parse(run(sacct_command(since=start, until=int(time.time()) + 1 if stop is None else stop,
                                     users=users, cluster=cluster, states=ENDED)))
    first_submit: dict[int, int] = {}
    for r in window:
        job, submit = int(r["JobIDRaw"]), _time(r["Submit"])
        first_submit[job] = min(first_submit.get(job, submit or 0), submit or 0)
    again = sorted(j for j, submit in first_submit.items() if submit < start)
    requery = set(again)
    rows = [r for r in window if int(r["JobIDRaw"]) not in requery]
    for i in range(0, len(again), JOB_ID_CHUNK):
        rows += parse(run(sacct_command(job_ids=again[i:i + JOB_ID_CHUNK], users=users, cluster=cluster)))
    recs = [r for r in number_runs(rows, source) if r["job_id"] in first_submit and ended(r)
            and r["end_time"] >= start and (stop is None or r["end_time"] < stop)]
    return sorted(recs, key=lambda r: (r["cluster"], r["job_id"], r["run"]))


def admin_comments(job_ids: Sequence[int], *, cluster: str | None = None,
                   run: Callable[[list[str]], str] = run_sacct) -> dict[int, str]:
    """AdminComment of each job (JobIDRaw -> text; runs of one job share it), for the AdminComment transport of
    node GPU summaries (slurmkit/accounting/admin_comment.py). A query of its own with AdminComment as the last
    field: it is free text, like JobName."""
    out: dict[int, str] = {}
    ids = sorted({int(j) for j in job_ids})
    for i in range(0, len(ids), JOB_ID_CHUNK):
        cmd = [*sacct_command(job_ids=ids[i:i + JOB_ID_CHUNK], cluster=cluster)]
        cmd[cmd.index("-o") + 1] = "JobIDRaw,AdminComment"
        for line in run(cmd).splitlines():
            job, sep, text = line.partition("|")
            if sep and job.isdigit() and text.strip():
                out[int(job)] = text.strip()
    return out
