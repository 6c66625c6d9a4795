"""`sk hook jobcomp|prolog|epilog`: run by Slurm, dispatched without click (slurmkit/cli/__init__.py).

Fast config path: the hook never loads the YAML site config. It reads SK_SPOOL (spool directory) from the
environment, which the hook wrapper exports (contrib/devcluster/hook.in); default /var/spool/slurmkit.
Every recoverable problem is logged to stderr and the hook exits 0 (Slurm only logs the exit code, and a
failing Prolog/Epilog would drain the node). The record is never lost: if scontrol fails, the record is
written from the environment alone and flagged `no-scontrol`; `sk admin reconcile` completes it later.
"""

from __future__ import annotations

import os
import sys
import time

from slurmkit.accounting import record, scontrol, spool

DEFAULT_SPOOL = "/var/spool/slurmkit"


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v not in (None, "") else None
    except ValueError:
        return None


def jobcomp_record(env: dict[str, str], show: dict[str, str] | None) -> dict:
    """One complete job record from the jobcomp variables (Slurm 22.05) plus `scontrol show job -o`."""
    flags = []
    array_task = _int(env.get("ARRAYTASKID"))
    if array_task == record.NOT_ARRAY:
        array_task = None
    array_job = _int(env.get("ARRAYJOBID")) if array_task is not None else None
    rec = {
        "version": record.RECORD_VERSION, "kind": "job",
        "cluster": env.get("CLUSTER", ""), "job_id": _int(env.get("JOBID")),
        "array_job_id": array_job, "array_task_id": array_task,
        "het_job_id": _int(env.get("HETJOBID")), "het_job_offset": _int(env.get("HETJOBOFFSET")),
        "job_name": env.get("JOBNAME"), "user_name": env.get("USERNAME"), "uid": _int(env.get("UID")),
        "account": env.get("ACCOUNT"), "partition": env.get("PARTITION"), "qos": env.get("QOS"),
        "state": env.get("JOBSTATE"), "exit_code": record.exit_code(env.get("EXITCODE")),
        "submit_time": _int(env.get("SUBMIT")), "start_time": _int(env.get("START")),
        "end_time": _int(env.get("END")), "nodes": env.get("NODES"), "node_count": _int(env.get("NODECNT")),
        "cpus": _int(env.get("PROCS")), "gpus": 0, "gpu_types": None, "tres": None, "run": 0,
    }
    if show:
        rec["tres"] = show.get("TRES")
        rec["gpus"], types = record.parse_gpu_tres(show.get("TRES", ""))
        rec["gpu_types"] = ",".join(types) or None
        rec["run"] = _int(show.get("Restarts")) or 0
        rec["qos"] = rec["qos"] or show.get("QOS")
    else:
        flags.append("no-scontrol")
    if rec["start_time"] and rec["end_time"]:
        rec["elapsed_s"] = max(0, rec["end_time"] - rec["start_time"])
    rec["flags"] = ",".join(flags) or None
    rec["source"] = "jobcomp"
    return rec


def jobcomp(env: dict[str, str]) -> int:
    show = None
    job_id = _int(env.get("JOBID"))
    if job_id is None:
        print("sk hook jobcomp: JOBID is not set; not run by Slurm?", file=sys.stderr)
        return 0
    try:
        show = scontrol.show_job(job_id)
    except Exception as exc:
        print(f"sk hook jobcomp: scontrol show job {job_id} failed ({exc}); record flagged", file=sys.stderr)
    rec = jobcomp_record(env, show)
    name = f"job-{rec['cluster']}-{job_id}-{rec['run']}-{time.time_ns()}"
    spool.write(env.get("SK_SPOOL") or DEFAULT_SPOOL, name, rec)
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: sk hook jobcomp|prolog|epilog   (run by Slurm; see contrib/slurm/README.md)")
        return 0 if argv else 2
    env = dict(os.environ)
    try:
        if argv[0] == "jobcomp":
            return jobcomp(env)
        if argv[0] in ("prolog", "epilog"):
            # Node sampler not implemented yet (issue 4): succeed so the node is never drained.
            return 0
    except Exception as exc:
        print(f"sk hook {argv[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 0
    print(f"sk hook: unknown hook {argv[0]!r} (expected jobcomp, prolog or epilog)", file=sys.stderr)
    return 2
