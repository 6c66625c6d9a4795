"""What Slurm's error messages mean, for every backend that sees Slurm's own words.

sbatch/squeue/scancel print them on stderr ("sbatch: error: ..."), slurmrestd returns them in `errors[].error`,
pyslurm raises them as RPCError(slurm_strerror(...)): the same texts (slurm_errno.c), so one table decides for
all three whether a failure is the user's request (InputError, exit 2), an unreachable controller (retryable),
an unknown job, a job that had already ended, or something else.
"""

from __future__ import annotations

import re
from typing import Literal

from slurmkit.errors import BackendError, BackendUnavailable, InputError, JobNotFound, Problem

# Slurm's messages for a request Slurm refuses because of what the user asked for: (spec key, hint).
USER_ERRORS = {
    "Invalid account": ("account", "check your accounts with: sacctmgr show assoc user=$USER format=account"),
    "invalid partition": ("partition", "list partitions with: sinfo -s"),
    "Invalid qos": ("qos", "list your QOS with: sacctmgr show assoc user=$USER format=qos"),
    "Requested time limit is invalid": ("time", "use a shorter time, within the partition's MaxTime"),
    "Requested node configuration is not available": ("gpus_per_node", "ask for fewer GPUs/CPUs/memory per node"),
    "More processors requested than permitted": ("nodes", "ask for fewer nodes or CPUs"),
}
UNREACHABLE = ("Unable to contact slurm controller", "Socket timed out", "Connection refused",
               "Zero Bytes were transmitted or received")
NOT_FOUND = ("Invalid job id specified",)  # ESLURM_INVALID_JOB_ID
ALREADY_ENDED = ("already completing or completed",)  # ESLURM_ALREADY_DONE: "Job/step already completing ..."
REFUSED = ("Access/permission denied", "Permission denied")  # ESLURM_ACCESS_DENIED; another user's job
ACCOUNTING_OFF = ("accounting storage is disabled",)  # sacct with AccountingStorageType=accounting_storage/none

Kind = Literal["unreachable", "user", "not-found", "already-ended", "refused", "accounting-off", "other"]
_PREFIX = re.compile(r"^(?:sbatch|squeue|scancel|scontrol|sacct|slurm_load_jobs|srun)(?: error)?: (?:error: )?",
                     re.M)


def strip(message: str) -> str:
    """Slurm's message without the command's "sbatch: error: " prefixes."""
    return _PREFIX.sub("", message.strip()).strip()


def classify(message: str) -> Kind:
    low = message.lower()
    for kind, needles in (("unreachable", UNREACHABLE), ("not-found", NOT_FOUND), ("already-ended", ALREADY_ENDED),
                          ("refused", REFUSED), ("accounting-off", ACCOUNTING_OFF), ("user", tuple(USER_ERRORS))):
        if any(n.lower() in low for n in needles):
            return kind  # type: ignore[return-value]
    return "other"


def error(message: str, what: str = "request") -> BackendError | InputError:
    """Slurm's message as slurmkit's exception: a user mistake is an InputError (exit 2) with the spec key."""
    text = strip(message)
    kind = classify(text)
    if kind == "unreachable":
        return BackendUnavailable(f"Slurm controller unreachable: {text}",
                                  hint="the submission is tagged; retrying later will not create a duplicate")
    if kind == "user":
        key, hint = next(v for k, v in USER_ERRORS.items() if k.lower() in text.lower())
        return InputError(Problem(f"Slurm refused the job: {text}", key=key, hint=hint))
    if kind == "not-found":
        return JobNotFound(f"Slurm knows no job {what}", hint="see your jobs with: sk status")
    return BackendError(f"Slurm refused the {what}: {text}")
