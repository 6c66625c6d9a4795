"""The Python API, for notebooks and workflow scripts: `sk submit/status/wait/logs/cancel` as one object.

    import slurmkit
    job = slurmkit.submit("train.yaml", site="/etc/slurmkit/site.yaml", overrides={"nodes": 2})
    job.wait(timeout=3600)      # "COMPLETED"; raises JobFailed (with the states) otherwise
    print(job.logs()[-2000:])

Everything goes through the same code as the commands (spec -> plan -> script -> backend, the tagged
idempotent submission, the backend's jobs()/cancel()), so a job submitted here is the job `sk` would submit,
and the backend chosen is the one `sk submit` would choose on this site.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmkit.errors import SlurmkitError

if TYPE_CHECKING:
    from slurmkit.backends.base import Backend, CancelResult
    from slurmkit.job import JobInfo


class JobFailed(SlurmkitError):
    """`Job.wait()`: the job (or a task of the array) did not complete; `.states` holds the tasks per state."""

    def __init__(self, message: str, states: dict[str, int], exit_status: int):
        super().__init__(message, hint="see its output with job.logs(), or sk logs JOBID")
        self.states = states
        self.exit_status = exit_status  # the exit status `sk wait` would give


@dataclass
class Job:
    """A submitted job (an array: all of its tasks), followed through the backend that submitted it."""

    id: str
    backend: Backend = field(repr=False)
    name: str = ""
    cluster: str | None = None
    spec: str | None = None

    def tasks(self) -> list[JobInfo]:
        """What Slurm says now: one record, or one per array task."""
        from slurmkit.errors import JobNotFound

        found = self.backend.job(self.id)
        if not found:
            raise JobNotFound(f"Slurm knows no job {self.id}", hint="the controller forgets finished jobs after "
                              "MinJobAge unless accounting is on")
        return found

    def status(self) -> dict[str, int]:
        """Tasks per state, e.g. {"RUNNING": 1} or {"COMPLETED": 18, "FAILED": 2}."""
        from slurmkit.job import state_counts

        return state_counts(self.tasks())

    def wait(self, timeout: float | None = None, interval: float = 2.0) -> str:
        """Block until every task has ended; returns "COMPLETED" or raises JobFailed, JobStuck or TimeoutError."""
        from slurmkit.job import EXIT_STUCK, state_counts, stuck, wait_exit

        start = time.monotonic()
        while True:
            tasks = self.tasks()
            if all(j.terminal for j in tasks):
                status = wait_exit(tasks)
                if status == 0:
                    return "COMPLETED"
                counts = state_counts(tasks)
                raise JobFailed(f"job {self.id} ended: " + ", ".join(f"{n} {s}" for s, n in counts.items()),
                                counts, status)
            why = stuck(tasks)
            if why:
                raise JobFailed(f"job {self.id} will not start by itself: {why}", state_counts(tasks), EXIT_STUCK)
            if timeout is not None and time.monotonic() - start > timeout:
                raise TimeoutError(f"job {self.id} still {state_counts(tasks)} after {timeout:.0f}s")
            time.sleep(interval)

    def logs(self, stderr: bool = False, task: int | None = None) -> str:
        """The job's output (or error) file as it is now; for an array, name the `task`."""
        from slurmkit.errors import InputError, JobNotFound

        tasks = self.tasks()
        if task is not None:
            tasks = [j for j in tasks if j.array_task == str(task)]
            if not tasks:
                raise JobNotFound(f"job {self.id} has no task {task} that Slurm still knows")
        if len(tasks) > 1:
            raise InputError(f"job {self.id} is an array of {len(tasks)} records", hint="pass task=N")
        path = tasks[0].stderr if stderr else tasks[0].stdout
        if not path or not Path(path).exists():
            raise JobNotFound(f"the log of job {tasks[0].job_id} is not there (yet): {path or 'path unknown'}")
        return Path(path).read_text(errors="replace")

    def cancel(self) -> CancelResult:
        """Cancel it (every task of an array); the result says whether Slurm did (see CancelResult.outcome)."""
        return self.backend.cancel([self.id])[0]

    def report(self, db: str | None = None) -> list[dict[str, Any]]:
        """`sk report job`: each run's GPUs and verdict from the accounting store, as the CLI's --json prints."""
        from slurmkit.report import job as jobreport
        from slurmkit.report.access import open_for_reports

        store, scope, _ = open_for_reports(db, None)
        with store:
            return jobreport.as_dict(jobreport.load_job(store, self.id, scope))


def submit(spec: str | Path | Sequence[str | Path], *, site: str | Path | None = None,
           overrides: Mapping[str, Any] | Sequence[str] = (), backend: str | None = None) -> Job | list[Job]:
    """Submit one spec file (a Job) or several (a list, dependencies by name resolved like `sk submit`).

    `overrides` are `--set` values: {"nodes": 2} or ["nodes=2"]. `site` defaults to the lookup `sk` uses.
    """
    from slurmkit.cli.actions import submit_specs

    sets = [f"{k}={v}" for k, v in overrides.items()] if isinstance(overrides, Mapping) else list(overrides)
    paths = [str(spec)] if isinstance(spec, (str, Path)) else [str(s) for s in spec]
    results, be = submit_specs(paths, str(site) if site else None, sets, backend)
    jobs = [Job(str(r["job_id"]), be, r["name"], r["cluster"], r["file"]) for r in results]
    return jobs[0] if isinstance(spec, (str, Path)) else jobs
