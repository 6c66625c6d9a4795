"""A submitted job as slurmkit reports it: what every backend's `jobs()` returns, and what an array adds up to.

Backends fill JobInfo from what Slurm says (cli: squeue/scontrol/sacct, slurmkit/slurm/; rest: slurmrestd's job
records; pyslurm: its Job objects); the commands (`sk status/wait/logs/history/cancel`) read only JobInfo, so they
work alike over every backend.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
            "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
# `sk wait` exit status by end state: 0 only for COMPLETED, so scripts can chain on it. For an array, the first
# of these states that any task ended in decides (a failed task outweighs a cancelled one).
EXIT_BY_STATE = {"COMPLETED": 0, "FAILED": 3, "TIMEOUT": 4, "CANCELLED": 5, "OUT_OF_MEMORY": 6, "NODE_FAIL": 7}
_SEVERITY = ("FAILED", "OUT_OF_MEMORY", "TIMEOUT", "NODE_FAIL", "CANCELLED")
EXIT_OTHER = 8
EXIT_STUCK = 9  # `sk wait`: the job can never start by itself (a dependency that can never be met, or held)
# Pending reasons (squeue/scontrol, the same over slurmrestd) after which waiting longer cannot help.
STUCK_REASONS = {"DependencyNeverSatisfied": "its dependency can never be satisfied",
                 "JobHeldUser": "it is held (release it with: scontrol release JOBID)",
                 "JobHeldAdmin": "it is held by an administrator"}


@dataclass
class JobInfo:
    job_id: str  # as Slurm prints it: 123, 123_4 (array task), 123_[5-9%2] (tasks not started yet), 123+1
    name: str
    user: str
    state: str  # Slurm's base state (RUNNING, PENDING, COMPLETED, ...), without "by 0" and flags
    reason: str = ""  # why it is pending (Priority, Dependency, ...), or None/"" when running
    exit_code: str = ""  # exit:signal, as scontrol/sacct print it
    partition: str = ""
    nodes: str = ""  # allocated node list
    elapsed: str = ""  # time used, [D-]HH:MM:SS
    stdout: str | None = None  # log paths with Slurm's %-patterns expanded; None when the backend cannot tell
    stderr: str | None = None
    comment: str | None = None
    array_job_id: str | None = None  # "123" for 123_4 and 123_[5-9]; None when not an array
    array_task: str | None = None  # "4", or "5-9%2" for the not-yet-started tasks
    gpus: int | None = None  # GPUs allocated (requested while pending), all nodes; None: unknown or none asked
    time_limit: str = ""  # [D-]HH:MM:SS, UNLIMITED, or "" when unknown
    time_left: str = ""
    submit_time: str | None = None  # local time, YYYY-MM-DDTHH:MM:SS as Slurm prints it
    start_time: str | None = None  # actual, or expected for a pending job when the scheduler has one
    end_time: str | None = None
    workdir: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def unit(self) -> str:
        """The id a user names this job by: an array task's array id, else the job id."""
        return self.array_job_id or self.job_id

    @property
    def tasks(self) -> int:
        """How many jobs this record stands for (a collapsed pending record 5-9%2 stands for five)."""
        return task_count(self.array_task) if self.array_task else 1

    def to_dict(self) -> dict:
        return asdict(self)


def task_count(spec: str) -> int:
    """Tasks in an array index expression as Slurm prints it: "4" -> 1, "5-9%2" -> 5, "1,3,7-8" -> 4, "0-9:2" -> 5."""
    total = 0
    for part in spec.strip("[]").split("%")[0].split(","):
        rng, _, step = part.partition(":")
        lo, _, hi = rng.partition("-")
        try:
            total += (int(hi) - int(lo)) // int(step or 1) + 1 if hi else 1
        except ValueError:
            total += 1
    return total


def state_counts(jobs: Iterable[JobInfo]) -> dict[str, int]:
    """Tasks per state, most frequent first (a collapsed pending record counts for each task it stands for)."""
    counts: Counter[str] = Counter()
    for j in jobs:
        counts[j.state] += j.tasks
    return dict(counts.most_common())


def wait_exit(jobs: Iterable[JobInfo]) -> int:
    """`sk wait`'s exit status once every task has ended: 0 only when all completed."""
    states = {j.state for j in jobs}
    if states <= {"COMPLETED"}:
        return 0
    worst = next((s for s in _SEVERITY if s in states), None)
    return EXIT_BY_STATE[worst] if worst else EXIT_OTHER


def stuck(jobs: Iterable[JobInfo]) -> str | None:
    """Why these jobs can never end without someone acting (every live one pending for a STUCK_REASONS reason)."""
    live = [j for j in jobs if not j.terminal]
    reasons = {j.reason for j in live}
    if live and all(j.state == "PENDING" for j in live) and reasons <= set(STUCK_REASONS):
        return "; ".join(STUCK_REASONS[r] for r in sorted(reasons))
    return None
