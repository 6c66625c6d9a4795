"""A submitted job as slurmkit reports it, read from Slurm (scontrol while it is known, sacct afterwards)."""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass

from slurmkit.errors import BackendUnavailable, JobNotFound
from slurmkit.slurm.scontrol import parse_show_job

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
            "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
# `sk wait` exit status by end state: 0 only for COMPLETED, so scripts can chain on it.
EXIT_BY_STATE = {"COMPLETED": 0, "FAILED": 3, "TIMEOUT": 4, "CANCELLED": 5, "OUT_OF_MEMORY": 6, "NODE_FAIL": 7}


@dataclass
class JobInfo:
    job_id: str
    name: str
    user: str
    state: str
    reason: str
    exit_code: str
    partition: str
    nodes: str
    elapsed: str
    stdout: str | None
    stderr: str | None
    comment: str | None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def to_dict(self) -> dict:
        return asdict(self)


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError as exc:
        raise BackendUnavailable(f"{argv[0]} not found: Slurm's client commands are not installed here") from exc
    except subprocess.TimeoutExpired as exc:
        raise BackendUnavailable(f"{argv[0]} did not answer within 60s") from exc


def from_scontrol(job_id: str) -> list[JobInfo]:
    proc = _run(["scontrol", "show", "job", "-o", job_id])
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return []
        raise BackendUnavailable(proc.stderr.strip())
    jobs = []
    for line in proc.stdout.splitlines():
        d = parse_show_job(line)
        if not d:
            continue
        jid = d.get("JobId", job_id)
        if d.get("ArrayTaskId"):
            jid = f"{d.get('ArrayJobId')}_{d['ArrayTaskId']}"
        jobs.append(JobInfo(jid, d.get("JobName", ""), d.get("UserId", "").split("(")[0],
                            d.get("JobState", ""), d.get("Reason", ""), d.get("ExitCode", ""),
                            d.get("Partition", ""), d.get("NodeList", ""), d.get("RunTime", ""),
                            d.get("StdOut"), d.get("StdErr"), d.get("Comment")))
    return jobs


SACCT_FIELDS = "JobID,JobName,User,State,Reason,ExitCode,Partition,NodeList,Elapsed,Comment,WorkDir"


def from_sacct(job_ids: list[str] | None = None, *, user: str | None = None, since: str | None = None) -> list[JobInfo]:
    argv = ["sacct", "-n", "-X", "-P", "--delimiter=\x1f", f"--format={SACCT_FIELDS}"]
    if job_ids:
        argv.append("--jobs=" + ",".join(job_ids))
    if user:
        argv.append(f"--user={user}")
    else:
        argv.append("--allusers")
    if since:
        argv.append(f"--starttime={since}")
    proc = _run(argv)
    if proc.returncode != 0:
        raise BackendUnavailable(proc.stderr.strip())
    jobs = []
    for line in proc.stdout.splitlines():
        f = line.split("\x1f")
        if len(f) < 11:
            continue
        jobs.append(JobInfo(f[0], f[1], f[2], f[3].split()[0], f[4], f[5], f[6], f[7], f[8], None, None,
                            f[9] or None))
    return jobs


def lookup(job_id: str) -> JobInfo:
    """One job: scontrol while the controller knows it (has the log paths), else accounting."""
    found = from_scontrol(job_id)
    if not found:
        found = from_sacct([job_id])
    if not found:
        raise JobNotFound(f"Slurm knows no job {job_id}", hint="see your jobs with: sk history")
    return found[0]
