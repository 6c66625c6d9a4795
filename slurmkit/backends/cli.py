"""The sbatch/squeue/scontrol/sacct/scancel backend: works with every Slurm; the fallback when pyslurm is unavailable.

jobs(): queued, running and recently ended jobs from the controller (squeue --states=all for a listing;
`scontrol show job -o` for given ids, which also expands the log paths), finished ones from accounting
(sacct -X). With accounting storage disabled, sacct refuses; the answer is then the controller's alone and
`limitations` says so (jobs that ended more than MinJobAge ago are missing).
"""

from __future__ import annotations

import dataclasses
import datetime
import shlex
import subprocess
import time
from collections.abc import Sequence

from slurmkit.backends.base import Backend, CancelResult, JobQuery, cancel_each
from slurmkit.errors import BackendUnavailable
from slurmkit.job import JobInfo
from slurmkit.request import SubmitRequest, SubmitResult
from slurmkit.slurm import errors as slurm_errors
from slurmkit.slurm import jobs as slurm_jobs

DEFAULT_SINCE_S = 86400  # finished jobs of the last day when the query names no `since`


def _comment(tag: str) -> str:
    return f"--comment=sk:{tag}"


def _slurm_time(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


class CliBackend(Backend):
    name = "cli"

    def __init__(self, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self.limitations: list[str] = []

    def _argv(self, request: SubmitRequest, test_only: bool) -> list[str]:
        argv = ["sbatch", "--test-only"] if test_only else ["sbatch", "--parsable"]
        return [*argv, _comment(request.tag)]

    def describe(self, request: SubmitRequest, *, test_only: bool = False) -> str:
        return shlex.join(self._argv(request, test_only)) + " < script  (the script below, on stdin)"

    def _run(self, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
        try:
            # Any user's job name reaches squeue's output and Slurm allows any bytes in it: decoded strictly, one
            # 0xff in another user's job name made every `sk status` and submit retry (find_by_tag) fail on the
            # devcluster. Undecodable bytes read as \xNN: display and lookup only; what is stored goes through the
            # accounting path (the spool-safety branch gives the store its own, recoverable text policy).
            return subprocess.run(argv, input=stdin, capture_output=True, encoding="utf-8",
                                  errors="backslashreplace", timeout=self.timeout_s, env=slurm_jobs.environment())
        except FileNotFoundError as exc:
            raise BackendUnavailable(f"{argv[0]} not found: Slurm's client commands are not installed here",
                                     hint="run on a login node, or choose --backend rest") from exc
        except subprocess.TimeoutExpired as exc:
            raise BackendUnavailable(f"{argv[0]} did not answer within {self.timeout_s:.0f}s") from exc

    def submit(self, request: SubmitRequest, *, test_only: bool = False) -> SubmitResult:
        proc = self._run(self._argv(request, test_only), request.script)
        if proc.returncode != 0:
            raise slurm_errors.error(proc.stderr.strip() or proc.stdout.strip(), "job")
        if test_only:  # sbatch --test-only answers on stderr: "Job N to start at T using C processors on nodes X"
            return SubmitResult(job_id=0, backend=self.name, test_only=proc.stderr.strip().removeprefix(
                "sbatch: "))
        text = proc.stdout.strip().splitlines()[-1]
        job, _, cluster = text.partition(";")  # --parsable prints "id" or "id;cluster"
        return SubmitResult(job_id=int(job), cluster=cluster or None, backend=self.name)

    def find_by_tag(self, tag: str) -> int | None:
        for job in self._squeue(JobQuery(user="*")):
            if job.comment == f"sk:{tag}":
                return int(job.unit)
        return None

    # -- jobs ------------------------------------------------------------------------------------------------
    def _note(self, unreadable: int, what: str) -> None:
        if unreadable:
            self.limitations.append(f"{unreadable} line(s) of {what} could not be read (a name or comment holds "
                                    "the field separator 0x1f) and are left out")

    def _squeue(self, query: JobQuery) -> list[JobInfo]:
        argv = ["squeue", "--noheader", "--states=all", f"--format={slurm_jobs.squeue_format()}",
                *_who(query, "--all")]  # squeue lists every user unless told --user; --all: hidden partitions too
        proc = self._run(argv)
        if proc.returncode != 0:
            raise slurm_errors.error(proc.stderr, "job list")
        parsed = slurm_jobs.parse_squeue(proc.stdout)
        self._note(parsed.unreadable, "squeue")
        return parsed.jobs

    def _show(self, job_id: str) -> list[JobInfo]:
        """The controller's records of one job (every task of an array), [] when it does not know it."""
        base = job_id.split("_[")[0]  # scontrol takes 12 or 12_3, not the range form 12_[3-5]
        proc = self._run(["scontrol", "show", "job", "-o", base])
        if proc.returncode != 0:
            if slurm_errors.classify(proc.stderr) == "not-found":
                return []
            raise slurm_errors.error(proc.stderr, f"job {job_id}")
        return slurm_jobs.parse_show_jobs(proc.stdout)

    def _sacct(self, query: JobQuery, ids: Sequence[str] = ()) -> list[JobInfo] | None:
        """Accounting's records; None when accounting storage is disabled."""
        argv = ["sacct", "--noheader", "--allocations", "--parsable2", f"--delimiter={slurm_jobs.SEP}",
                f"--format={slurm_jobs.sacct_format()}"]
        if ids:
            argv.append("--jobs=" + ",".join(i.split("_[")[0] for i in ids))  # -j searches all time
        else:
            assert query.since is not None  # jobs() fills in the default window
            argv += [f"--starttime={_slurm_time(query.since)}", "--endtime=now",
                     "--state=" + ",".join(slurm_jobs.ENDED_STATES)]
        argv += _who(query, "--allusers", by_id=bool(ids))
        proc = self._run(argv)
        if proc.returncode != 0:
            if slurm_errors.classify(proc.stderr + proc.stdout) == "accounting-off":
                self.limitations.append("accounting storage is disabled on this cluster: only jobs the "
                                        "controller still holds are shown (jobs that ended more than "
                                        "MinJobAge ago are missing)")
                return None
            raise slurm_errors.error(proc.stderr, "job accounting query")
        parsed = slurm_jobs.parse_sacct(proc.stdout)
        self._note(parsed.unreadable, "sacct")
        return parsed.jobs

    def jobs(self, query: JobQuery) -> list[JobInfo]:
        self.limitations = []
        if query.ids:
            found: list[JobInfo] = []
            unknown = []
            for job_id in query.ids:
                live = self._show(job_id)
                if job_id != job_id.split("_[")[0]:
                    live = [j for j in live if j.array_job_id]
                found += live
                if not live:
                    unknown.append(job_id)
            if unknown and query.finished:
                found += self._sacct(query, unknown) or []
            if not query.finished:
                found = [j for j in found if not j.terminal]
            return _unique(found)
        since = query.since if query.since is not None else int(time.time()) - DEFAULT_SINCE_S
        query = dataclasses.replace(query, since=since)
        # The controller still holds ended jobs for MinJobAge: only those that ended in the window count.
        live = [j for j in self._squeue(query) if not j.terminal or (query.finished and _ended_since(j, since))]
        ended = (self._sacct(query) or []) if query.finished else []
        done = {j.job_id for j in ended}
        # For a job both know, accounting has its exit code; the controller has the rest (and pending tasks).
        return _unique([*(j for j in live if not (j.terminal and j.job_id in done)), *ended])

    def cancel(self, ids: Sequence[str]) -> list[CancelResult]:
        return cancel_each(ids, lambda job_id: self.jobs(JobQuery(ids=(job_id,), user="*")), self._scancel)

    def _scancel(self, job_id: str) -> str | None:
        proc = self._run(["scancel", job_id])
        words = slurm_errors.strip(proc.stderr)
        return None if proc.returncode == 0 and not words else words or f"scancel exited {proc.returncode}"


def _who(query: JobQuery, everyone: str, *, by_id: bool = False) -> list[str]:
    """squeue/sacct options for whose jobs and which name: the caller's unless "*" (or ids alone: whoever's)."""
    mine = query.user != "*" and not (by_id and query.user is None)
    return [f"--user={query.user or slurm_jobs.me()}" if mine else everyone,
            *([f"--name={query.name}"] if query.name else [])]


def _ended_since(job: JobInfo, since: int) -> bool:
    """Whether an ended job's end (Slurm's local ISO time) is at or after `since`; unknown ends count."""
    if not job.end_time:
        return True
    try:
        return datetime.datetime.fromisoformat(job.end_time).timestamp() >= since
    except ValueError:
        return True


def _unique(jobs: list[JobInfo]) -> list[JobInfo]:
    seen: dict[str, JobInfo] = {}
    for j in jobs:
        seen.setdefault(j.job_id, j)
    return list(seen.values())
