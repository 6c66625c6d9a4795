"""The Slurm CLI's views of jobs as JobInfo: `squeue -o` (queued, running, recently ended), `scontrol show job -o`
(one job with its expanded log paths), `sacct -X -P` (finished jobs, from accounting). Used by the cli backend.

Output is read with a delimiter that job names, comments and paths do not contain in practice: ASCII unit
separator (0x1f), the control character meant for separating fields, which no shell user types. A line whose
field count is wrong anyway (a name that does contain it) is skipped and counted, never misread.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from dataclasses import dataclass, field

from slurmkit.job import TERMINAL, JobInfo
from slurmkit.slurm import fields as f
from slurmkit.slurm.scontrol import parse_show_job

SEP = "\x1f"

# squeue -o letters (the same in 22.05 and 25.11, man squeue): name -> letter.
SQUEUE_FIELDS = {"job_id": "i", "array_job_id": "F", "array_task": "K", "name": "j", "user": "u", "state": "T",
                 "reason": "r", "partition": "P", "nodes": "N", "num_nodes": "D", "elapsed": "M",
                 "time_limit": "l", "time_left": "L", "submit_time": "V", "start_time": "S", "end_time": "e",
                 "tres_per_node": "b", "comment": "k", "workdir": "Z"}
SACCT_FIELDS = ("JobID", "JobName", "User", "State", "Reason", "ExitCode", "Partition", "NodeList", "NNodes",
                "Elapsed", "Timelimit", "Submit", "Start", "End", "AllocTRES", "ReqTRES", "Comment", "WorkDir")
# sacct -s for "jobs that ended" (sacct's state names; with -S/-E it lists the jobs that ended in the window).
ENDED_STATES = ("BF", "CA", "CD", "DL", "F", "NF", "OOM", "PR", "TO")


def squeue_format() -> str:
    return SEP.join("%" + letter for letter in SQUEUE_FIELDS.values())


def sacct_format() -> str:
    return ",".join(SACCT_FIELDS)


def environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for squeue/sacct/scontrol: a user's SQUEUE_ARRAY, SQUEUE_STATES, SACCT_FORMAT or
    SLURM_TIME_FORMAT would change what they print, so those are dropped and times are ISO ("standard")."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith(("SQUEUE_", "SACCT_", "SCONTROL_"))}
    env["SLURM_TIME_FORMAT"] = "standard"
    return env


def me() -> str:
    """The calling user's name (from the uid: $USER may be someone else's after su/runuser)."""
    return pwd.getpwuid(os.getuid()).pw_name


@dataclass
class Parsed:
    jobs: list[JobInfo] = field(default_factory=list)
    unreadable: int = 0  # lines with the wrong number of fields


def _array(job_id: str, array_job_id: str | None, task: str | None) -> tuple[str | None, str | None]:
    base, from_id = f.split_job_id(job_id)
    task = f.text(task) or from_id
    if base is None and not task:
        return None, None
    return (f.text(array_job_id) or base), task


def _rows(text: str, names: tuple[str, ...] | list[str], out: Parsed) -> Iterator[dict[str, str]]:
    """The SEP-separated lines of `text` as dicts; a line with the wrong field count is counted in `out`."""
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split(SEP)
        if len(parts) != len(names):
            out.unreadable += 1
            continue
        yield dict(zip(names, parts, strict=True))


def parse_squeue(text: str) -> Parsed:
    out = Parsed()
    for r in _rows(text, list(SQUEUE_FIELDS), out):
        array_job_id, task = _array(r["job_id"], r["array_job_id"], r["array_task"])
        nodes = int(r["num_nodes"]) if r["num_nodes"].isdigit() else 1
        state = f.base_state(r["state"])
        out.jobs.append(JobInfo(
            job_id=r["job_id"], name=r["name"], user=r["user"], state=state,
            reason=f.text(r["reason"]) or "", partition=r["partition"], nodes=f.text(r["nodes"]) or "",
            elapsed=r["elapsed"], comment=f.text(r["comment"]), array_job_id=array_job_id, array_task=task,
            gpus=f.gpu_count(f.text(r["tres_per_node"]), nodes), time_limit=f.text(r["time_limit"]) or "",
            time_left="" if state in TERMINAL else f.text(r["time_left"]) or "", submit_time=f.text(r["submit_time"]),
            start_time=f.text(r["start_time"]), end_time=f.text(r["end_time"]), workdir=f.text(r["workdir"])))
    return out


def from_show_job(d: dict[str, str]) -> JobInfo:
    """One record of `scontrol show job -o` (parse_show_job) as JobInfo; its StdOut/StdErr are expanded."""
    task = f.text(d.get("ArrayTaskId"))
    array_job_id = f.text(d.get("ArrayJobId")) if task else None
    job_id = d.get("JobId", "")
    if array_job_id:
        job_id = f"{array_job_id}_{task}" if task and task.isdigit() else f"{array_job_id}_[{task}]"
    nodes = int(d["NumNodes"].split("-")[0]) if d.get("NumNodes", "").split("-")[0].isdigit() else 1
    state = f.base_state(d.get("JobState", ""))
    # Allocated: TRES= (22.05) or AllocTRES= (25.11); requested: TresPerNode/TresPerJob, or ReqTRES= (25.11).
    gpus = (f.gpu_count(f.text(d.get("AllocTRES") or d.get("TRES"))) if state != "PENDING" else None) \
        or f.gpu_count(f.text(d.get("TresPerNode")), nodes) or f.gpu_count(f.text(d.get("TresPerJob"))) \
        or f.gpu_count(f.text(d.get("ReqTRES")))
    # A record of tasks not started yet has no log of its own (25.11 expands %a to NO_VAL, 4294967294).
    stdout = f.text(d.get("StdOut")) if not task or task.isdigit() else None
    stderr = (f.text(d.get("StdErr")) or stdout) if stdout else None  # 25.11 prints StdErr= when it is StdOut
    return JobInfo(
        job_id=job_id, name=d.get("JobName", ""), user=d.get("UserId", "").split("(")[0], state=state,
        reason=f.text(d.get("Reason")) or "", exit_code=d.get("ExitCode", ""), partition=d.get("Partition", ""),
        nodes=f.text(d.get("NodeList")) or "", elapsed=d.get("RunTime", ""), stdout=stdout,
        stderr=stderr, comment=f.text(d.get("Comment")), array_job_id=array_job_id,
        array_task=task, gpus=gpus, time_limit=f.text(d.get("TimeLimit")) or "",
        time_left="" if state in TERMINAL else f.time_left(d.get("TimeLimit", ""), d.get("RunTime", "")),
        submit_time=f.text(d.get("SubmitTime")), start_time=f.text(d.get("StartTime")),
        end_time=f.text(d.get("EndTime")), workdir=f.text(d.get("WorkDir")))


def parse_show_jobs(text: str) -> list[JobInfo]:
    """Every record of `scontrol show job -o ID` (an array prints one line per task)."""
    return [from_show_job(d) for line in text.splitlines() if line.strip() and (d := parse_show_job(line))]


def parse_sacct(text: str) -> Parsed:
    out = Parsed()
    for r in _rows(text, SACCT_FIELDS, out):
        array_job_id, task = _array(r["JobID"], None, None)
        nodes = int(r["NNodes"]) if r["NNodes"].isdigit() else 1
        out.jobs.append(JobInfo(
            job_id=r["JobID"], name=r["JobName"], user=r["User"], state=f.base_state(r["State"]),
            reason=f.text(r["Reason"]) or "", exit_code=r["ExitCode"], partition=r["Partition"],
            nodes=f.text(r["NodeList"]) or "", elapsed=r["Elapsed"], comment=f.text(r["Comment"]),
            array_job_id=array_job_id, array_task=task,
            gpus=f.gpu_count(f.text(r["AllocTRES"])) or f.gpu_count(f.text(r["ReqTRES"])) if nodes else None,
            time_limit=f.text(r["Timelimit"]) or "", submit_time=f.text(r["Submit"]), start_time=f.text(r["Start"]),
            end_time=f.text(r["End"]), workdir=f.text(r["WorkDir"])))
    return out
