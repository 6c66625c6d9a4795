"""The sbatch/squeue/scancel backend: works with every Slurm; the fallback when pyslurm is unavailable."""

from __future__ import annotations

import re
import shlex
import subprocess

from slurmkit.backends.base import Backend
from slurmkit.errors import BackendError, BackendUnavailable, InputError, Problem
from slurmkit.request import SubmitRequest, SubmitResult

# Slurm's messages for a request Slurm refuses because of what the user asked for (exit 1, "sbatch: error: ...").
_USER_ERRORS = {
    "Invalid account": ("account", "check your accounts with: sacctmgr show assoc user=$USER format=account"),
    "invalid partition": ("partition", "list partitions with: sinfo -s"),
    "Invalid qos": ("qos", "list your QOS with: sacctmgr show assoc user=$USER format=qos"),
    "Requested time limit is invalid": ("time", "use a shorter time, within the partition's MaxTime"),
    "Requested node configuration is not available": ("gpus_per_node", "ask for fewer GPUs/CPUs/memory per node"),
    "More processors requested than permitted": ("nodes", "ask for fewer nodes or CPUs"),
}
_UNREACHABLE = ("Unable to contact slurm controller", "Socket timed out", "Connection refused",
                "Zero Bytes were transmitted or received")


def _comment(tag: str) -> str:
    return f"--comment=sk:{tag}"


class CliBackend(Backend):
    name = "cli"

    def __init__(self, timeout_s: float = 60.0):
        self.timeout_s = timeout_s

    def _argv(self, request: SubmitRequest, test_only: bool) -> list[str]:
        argv = ["sbatch", "--test-only"] if test_only else ["sbatch", "--parsable"]
        return [*argv, _comment(request.tag)]

    def describe(self, request: SubmitRequest, *, test_only: bool = False) -> str:
        return shlex.join(self._argv(request, test_only)) + " < script  (the script below, on stdin)"

    def _run(self, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=self.timeout_s)
        except FileNotFoundError as exc:
            raise BackendUnavailable(f"{argv[0]} not found: Slurm's client commands are not installed here",
                                     hint="run on a login node, or choose --backend rest") from exc
        except subprocess.TimeoutExpired as exc:
            raise BackendUnavailable(f"{argv[0]} did not answer within {self.timeout_s:.0f}s") from exc

    def submit(self, request: SubmitRequest, *, test_only: bool = False) -> SubmitResult:
        proc = self._run(self._argv(request, test_only), request.script)
        if proc.returncode != 0:
            raise _error(proc.stderr.strip() or proc.stdout.strip())
        if test_only:  # sbatch --test-only answers on stderr: "Job N to start at T using C processors on nodes X"
            return SubmitResult(job_id=0, backend=self.name, test_only=proc.stderr.strip().removeprefix(
                "sbatch: "))
        text = proc.stdout.strip().splitlines()[-1]
        job, _, cluster = text.partition(";")  # --parsable prints "id" or "id;cluster"
        return SubmitResult(job_id=int(job), cluster=cluster or None, backend=self.name)

    def find_by_tag(self, tag: str) -> int | None:
        proc = self._run(["squeue", "--noheader", "--all", "--states=all", "--format=%i|%k"])
        if proc.returncode != 0:
            raise _error(proc.stderr.strip())
        for line in proc.stdout.splitlines():
            job, _, comment = line.partition("|")
            if comment.strip() == f"sk:{tag}":
                return int(job.split("_")[0])
        return None

    def cancel(self, ids: list[int]) -> None:
        proc = self._run(["scancel", *map(str, ids)])
        if proc.returncode != 0:
            raise _error(proc.stderr.strip())


def _error(message: str) -> Exception:
    text = re.sub(r"^(sbatch|squeue|scancel): error: ", "", message.strip(), flags=re.M)
    if any(m in text for m in _UNREACHABLE):
        return BackendUnavailable(f"Slurm controller unreachable: {text}",
                                  hint="the submission is tagged; retrying later will not create a duplicate")
    for needle, (key, hint) in _USER_ERRORS.items():
        if needle.lower() in text.lower():
            return InputError(Problem(f"Slurm refused the job: {text}", key=key, hint=hint))
    return BackendError(f"Slurm refused the request: {text}")
