"""A submission request: what `sk render` produces and every backend consumes (torchx's dry-run model).

The batch script carries its options as #SBATCH lines (what the sbatch CLI reads); `options` holds the same
options structured, for backends that cannot read #SBATCH lines (slurmrestd, pyslurm). Both come from one plan,
so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SubmitRequest:
    name: str
    script: str
    # sbatch long option name (without "--") -> value; None means a flag without value (e.g. "exclusive").
    options: dict[str, str | None]
    # Idempotency tag: also written into the job comment, so a retried submission can find the job it created.
    tag: str
    workdir: str
    # Environment for the batch script when the backend needs it given explicitly (slurmrestd requires one).
    environment: dict[str, str] = field(default_factory=dict)
    source: str | None = None  # spec file it came from


@dataclass
class SubmitResult:
    job_id: int
    cluster: str | None = None
    backend: str = ""
    reused: bool = False  # True when a retry found the job an earlier, timed-out attempt had created
    test_only: str | None = None  # for --test-only: Slurm's answer (expected start, nodes)
