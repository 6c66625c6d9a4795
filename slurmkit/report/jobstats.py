"""`sk report job JOBID` for the job's owner, from Slurm accounting alone (after Princeton's jobstats).

The admin store is readable only by the admin group, so an ordinary user's own job is read where Slurm keeps it:
the node epilogs' GPU summaries in the job's AdminComment (sk2 segments, slurmkit/accounting/admin_comment.py,
written by the ``admin_comment`` or ``spool+admin_comment`` transport) and seff's figures from sacct's
allocation and step rows. Slurm decides what sacct returns (PrivateData); slurmkit asks only for the caller's own
jobs (``-u <login>``) unless they are an admin, and drops any other user's row again, so without PrivateData=jobs
a user still never sees another's job here. The rows become the store path's JobRun (slurmkit/report/job.py), so
the GPU table, the verdict, arrays and totals read the same on both paths.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slurmkit.errors import JobNotFound
from slurmkit.record import GPU_FIELDS, IDLE_UTIL_PCT
from slurmkit.report.job import JobRun, parse_ref, verdict
from slurmkit.report.query import Scope
from slurmkit.slurm import fields, sacct

LOW_CPU_PCT = 50.0  # below this CPU efficiency the verdict says CPU use was low
LOW_MEM_PCT = 25.0  # ... memory use
LOW_TIME_PCT = 25.0  # ... the time limit was far above use
SOURCE_NOTE = "source: Slurm accounting (sacct; GPU figures from the job's AdminComment, written by the node epilogs)"


@dataclass
class Usage:
    """seff's figures of one job run, from sacct."""

    elapsed_s: int | None
    timelimit_s: int | None
    total_cpu_s: float | None
    alloc_cpus: int | None
    max_rss_bytes: int | None
    req_mem_bytes: int | None

    @staticmethod
    def _pct(num: float | None, den: float | None) -> float | None:
        return None if num is None or not den else 100.0 * num / den

    @property
    def cpu_pct(self) -> float | None:
        """TotalCPU / (Elapsed x AllocCPUS)."""
        core_s = None if self.elapsed_s is None or self.alloc_cpus is None else self.elapsed_s * self.alloc_cpus
        return self._pct(self.total_cpu_s, core_s)

    @property
    def mem_pct(self) -> float | None:
        """The largest MaxRSS of the job's steps / the memory allocated."""
        return self._pct(self.max_rss_bytes, self.req_mem_bytes)

    @property
    def time_pct(self) -> float | None:
        """Elapsed / Timelimit."""
        return self._pct(self.elapsed_s, self.timelimit_s)

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "cpu_efficiency_pct": self.cpu_pct, "memory_efficiency_pct": self.mem_pct,
                "time_efficiency_pct": self.time_pct}


@dataclass
class SacctRun(JobRun):
    usage: Usage | None = None


def gpu_rows(recs: list[dict]) -> list[dict[str, Any]]:
    """A job's AdminComment node records as report rows (the store's job_gpus columns, slurmkit/record.py), of its
    latest run only (a requeued job keeps earlier runs' segments)."""
    if not recs:
        return []
    last = max(int(r.get("run") or 0) for r in recs)
    out = []
    for rec in sorted((r for r in recs if int(r.get("run") or 0) == last), key=lambda r: str(r.get("node"))):
        for g in rec.get("gpus") or []:
            row = {"node": rec.get("node"), **{f.column: g.get(f.name) for f in GPU_FIELDS if f.report}}
            out.append({**row, "source": rec.get("source")})
    return sorted(out, key=lambda g: (str(g["node"]), g["gpu_index"] if g["gpu_index"] is not None else -1))


def _runs(rows: list[dict[str, str]], comments: dict[int, str], scope: Scope) -> list[SacctRun]:
    from slurmkit.accounting.admin_comment import parse_admin_comment

    allocs = [r for r in rows if "." not in r["JobIDRaw"] and (scope.everyone or r["User"] == scope.user)]
    runs = []
    for a in allocs:
        raw = int(a["JobIDRaw"])
        steps = [r for r in rows if r["JobIDRaw"].split(".")[0] == a["JobIDRaw"] and "." in r["JobIDRaw"]]
        array_job, array_task, _, _ = sacct.parse_job_id(a["JobID"])
        start, end = sacct.parse_time(a["Start"]), sacct.parse_time(a["End"])
        tres = a["AllocTRES"]
        gpus = fields.gpu_count(tres) or 0
        _, types = fields.parse_gpu_tres(tres) if tres else (0, [])
        mem = next((sacct.parse_mem(t[4:]) for t in tres.split(",") if t.startswith("mem=")), None)
        rss = [v for v in (sacct.parse_mem(s["MaxRSS"]) for s in steps) if v is not None]
        limit = sacct.parse_int(a["TimelimitRaw"])
        job = {"cluster": a["Cluster"], "job_id": raw, "run": 0, "array_job_id": array_job,
               "array_task_id": array_task, "job_name": a["JobName"], "user_name": a["User"],
               "account": a["Account"], "partition": a["Partition"], "state": fields.base_state(a["State"]),
               "submit_time": None, "start_time": start, "end_time": end, "gpus": gpus,
               "gpu_types": ",".join(types) or None, "nodes": fields.text(a["NodeList"])}
        try:
            gpu = gpu_rows(parse_admin_comment(comments.get(raw)))
        except ValueError:
            gpu = []  # a damaged segment: the job still reports, with no GPU metrics (the verdict says so)
        usage = Usage(elapsed_s=sacct.parse_int(a["ElapsedRaw"]), timelimit_s=None if limit is None else limit * 60,
                      total_cpu_s=sacct.cpu_time_s(a["TotalCPU"]), alloc_cpus=sacct.parse_int(a["AllocCPUS"]),
                      max_rss_bytes=max(rss) if rss else None,
                      req_mem_bytes=mem if mem is not None else sacct.parse_mem(a["ReqMem"]))
        runs.append(SacctRun(job, gpu, usage))
    return sorted(runs, key=lambda r: (r.job["array_task_id"] if r.job["array_task_id"] is not None else -1,
                                       r.job["job_id"]))


def load_job(ref: str, scope: Scope, run: Callable[[list[str]], str] = sacct.run_sacct) -> list[SacctRun]:
    """Every task (or the one task) of job `ref` that `scope` may see, from sacct."""
    ref = parse_ref(ref)
    users = None if scope.everyone else [scope.user]
    rows = sacct.parse(run(sacct.usage_command(ref, users)), sacct.USAGE_FIELDS)
    ids = [int(r["JobIDRaw"]) for r in rows if r["JobIDRaw"].isdigit()]
    comments = sacct.admin_comments(ids, users=users, run=run) if ids else {}
    runs = _runs(rows, comments, scope)
    if not runs:
        mine = "a job" if scope.everyone else f"one of your ({scope.user}) jobs"
        raise JobNotFound(f"job {ref} is not {mine} in Slurm accounting"
                          + ("" if scope.everyone else ": you see only your own jobs"),
                          hint="check the job id (sk history); an admin can report any job")
    return runs


def _gib(b: int | None) -> str:
    if b is None:
        return "-"
    return f"{b / (1 << 30):.2f} GiB" if b >= 1 << 30 else f"{b / (1 << 20):.1f} MiB"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} %"


def advice(run: SacctRun, idle_pct: float = IDLE_UTIL_PCT) -> list[str]:
    """What to change, in plain words: idle GPUs, low CPU or memory use, a time limit far above use."""
    out = []
    measured = [g for g in run.gpus if g["util_mean"] is not None]
    idle = sum(g["util_mean"] < idle_pct for g in measured)
    if idle and idle == len(measured):
        out.append(f"{idle} of {len(measured)} GPUs were idle: the program did not use them (does it run on the "
                   "GPU? CUDA_VISIBLE_DEVICES, the device in your code), or request none")
    elif idle and len(measured) == int(run.job["gpus"] or 0):
        out.append(f"{idle} of {len(measured)} GPUs were idle: request gpus: {len(measured) - idle}")
    u = run.usage
    if u is None:
        return out
    if u.cpu_pct is not None and u.cpu_pct < LOW_CPU_PCT and u.alloc_cpus:
        need = max(math.ceil(u.alloc_cpus * u.cpu_pct / 100), 1)
        out.append(f"CPU use was low ({u.cpu_pct:.1f} % of {u.alloc_cpus} CPUs): about {need} would do")
    if u.mem_pct is not None and u.mem_pct < LOW_MEM_PCT:
        out.append(f"memory use was low (at most {_gib(u.max_rss_bytes)} of {_gib(u.req_mem_bytes)}, "
                   f"{u.mem_pct:.1f} %)")
    if u.time_pct is not None and u.time_pct < LOW_TIME_PCT and u.elapsed_s is not None:
        suggest = fields.duration(max(math.ceil(u.elapsed_s * 1.5 / 60), 1) * 60)
        out.append(f"the time limit was far above use ({fields.duration(u.elapsed_s)} of "
                   f"{fields.duration(u.timelimit_s or 0)}, {u.time_pct:.1f} %): request time: {suggest}")
    return out


def usage_lines(run: JobRun) -> list[str]:
    """The seff lines and the advice of one run, for slurmkit.report.job.render."""
    u = getattr(run, "usage", None)
    if u is None:
        return []
    lines = [f"  CPU efficiency {_pct(u.cpu_pct)} ({u.total_cpu_s or 0:.0f} s CPU of "
             f"{u.elapsed_s or 0} s x {u.alloc_cpus or 0} CPUs); memory efficiency {_pct(u.mem_pct)} (max RSS "
             f"{_gib(u.max_rss_bytes)} of {_gib(u.req_mem_bytes)}); time efficiency {_pct(u.time_pct)} "
             f"({fields.duration(u.elapsed_s or 0)} of {fields.duration(u.timelimit_s or 0)})"]
    if run.job["gpus"] and not run.gpus:
        lines.append("  (no GPU summary in the job's AdminComment: the site's accounting.transport must be "
                     "admin_comment or spool+admin_comment for GPU figures here)")
    tips = advice(run)  # type: ignore[arg-type]
    lines.append("  advice: " + ("; ".join(tips) if tips else "none: the job used what it asked for"))
    return lines


def render(runs: list[SacctRun], fmt_time) -> str:
    from slurmkit.report.job import render as render_runs

    return f"{render_runs(runs, fmt_time, more=usage_lines)}\n{SOURCE_NOTE}"


def as_dict(runs: list[SacctRun]) -> list[dict[str, Any]]:
    return [{**r.job, "hours": r.hours, "verdict": verdict(r), "advice": advice(r), "gpus_detail": r.gpus,
             "usage": r.usage.as_dict() if r.usage else None, "source": "sacct"} for r in runs]
