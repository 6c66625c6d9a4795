"""The backend interface: the one door through which slurmkit talks to Slurm.

Every job command (`sk submit/status/wait/logs/cancel/history`, the Python API) goes through a Backend, so a
host that has only slurmrestd (or only pyslurm) can do everything a host with the Slurm CLI can. One module
per backend (cli.py, rest.py, pyslurm.py); the registry is in backends/__init__.py.

Contract (every backend, tested over all of them on the devcluster):
* `submit` returns the new job's id; Slurm's refusals of what the user asked for raise InputError (exit 2),
  an unreachable Slurm raises BackendUnavailable (the caller may retry: `find_by_tag` prevents a duplicate).
* `jobs` answers for queued, running and (where the backend can see accounting) finished jobs; an array job
  is returned one JobInfo per task (Slurm's own collapsed pending record `123_[4-9]` stays one entry), so
  callers can treat an array as one unit. An id Slurm does not know is simply absent from the answer.
* `cancel` says per id what happened; it never reports "cancelled" for a job that does not exist or had
  already ended.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from slurmkit.job import JobInfo
from slurmkit.request import SubmitRequest, SubmitResult


@dataclass(frozen=True)
class JobQuery:
    """Which jobs `Backend.jobs` returns. Empty `ids` with no `user` means the calling user's jobs; given `ids`
    with no `user` means those jobs, whoever's they are (as far as Slurm lets the caller see them)."""

    ids: tuple[str, ...] = ()  # "123", "123_4" (one array task), "123+1" (het component)
    user: str | None = None  # None: the calling user; "*": every user Slurm lets the caller see
    name: str | None = None  # exact job name
    since: int | None = None  # epoch seconds: finished jobs that ended after this (None: the backend's default)
    finished: bool = True  # include jobs that have ended (from accounting where the backend has it)


CancelOutcome = Literal["cancelled", "signalled", "not-found", "already-ended", "refused"]


@dataclass(frozen=True)
class CancelResult:
    job_id: str
    outcome: CancelOutcome
    message: str = ""  # Slurm's own words, or why it was refused

    @property
    def ok(self) -> bool:
        return self.outcome in ("cancelled", "signalled")


@dataclass(frozen=True)
class Choice:
    """Which backend a job command uses and why: what `sk submit --dry-run` and `sk render --explain` print."""

    name: str
    reason: str


class Backend(ABC):
    name: ClassVar[str] = ""
    # Set by `jobs`: sentences on what its last answer could not show, for the CLI to print (stderr).
    limitations: Sequence[str] = ()
    # Set by `get_backend`: which backend was picked and why, for the dry run.
    choice: Choice | None = None

    @abstractmethod
    def submit(self, request: SubmitRequest, *, test_only: bool = False) -> SubmitResult:
        """Submit the request (or, with test_only, ask Slurm when it would start)."""

    @abstractmethod
    def find_by_tag(self, tag: str) -> int | None:
        """The job id a submission with this tag created, if Slurm has it (for idempotent retries)."""

    @abstractmethod
    def jobs(self, query: JobQuery) -> list[JobInfo]:
        """The jobs matching `query`, one entry per array task (see the module docstring). What the answer
        could not include (e.g. finished jobs, with accounting storage disabled) is in `limitations`."""

    @abstractmethod
    def cancel(self, ids: Sequence[str]) -> list[CancelResult]:
        """Cancel jobs (an array id cancels every task); one result per id, in order."""

    def job(self, job_id: str) -> list[JobInfo]:
        """One job: its tasks if it is an array, else a one-element list; [] when Slurm does not know it."""
        return self.jobs(JobQuery(ids=(job_id,), user="*"))

    def describe(self, request: SubmitRequest, *, test_only: bool = False) -> str:
        """The exact submission, for --dry-run."""
        return f"{self.name} submission of {request.name!r} with tag sk:{request.tag}"


def cancel_each(ids: Sequence[str], known: Callable[[str], list[JobInfo]],
                send: Callable[[str], str | None]) -> list[CancelResult]:
    """The truthful cancel every backend shares: ask first whether Slurm knows the job and whether it is still
    queued or running (scancel and slurmrestd accept a finished job without complaint on some releases), then
    `send` the cancel, which returns Slurm's complaint or None; a race with the job's end is read from the
    complaint (slurmkit/slurm/errors.py)."""
    from slurmkit.slurm.errors import classify

    results = []
    for job_id in map(str, ids):
        records = known(job_id)
        if not records:
            results.append(CancelResult(job_id, "not-found", "Slurm knows no such job"))
            continue
        # COMPLETING: its processes are gone and its epilogs run; a cancel changes nothing (slurmrestd 22.05
        # answers 200 to it all the same), so saying "cancelled" would be untrue.
        if all(j.terminal or j.state == "COMPLETING" for j in records):
            states = ", ".join(sorted({j.state for j in records}))
            results.append(CancelResult(job_id, "already-ended", f"it had already ended ({states})"))
            continue
        complaint = send(job_id)
        if complaint is None:
            results.append(CancelResult(job_id, "cancelled"))
            continue
        kind = classify(complaint)
        results.append(CancelResult(job_id, kind if kind in ("not-found", "already-ended") else "refused",
                                    complaint))
    return results
