"""The backend interface: how slurmkit talks to Slurm (submit, find by tag, cancel). One module per backend."""

from __future__ import annotations

from abc import ABC, abstractmethod

from slurmkit.request import SubmitRequest, SubmitResult


class Backend(ABC):
    name: str = ""

    @abstractmethod
    def submit(self, request: SubmitRequest, *, test_only: bool = False) -> SubmitResult:
        """Submit the request (or, with test_only, ask Slurm when it would start)."""

    @abstractmethod
    def find_by_tag(self, tag: str) -> int | None:
        """The job id a submission with this tag created, if Slurm has it (for idempotent retries)."""

    @abstractmethod
    def cancel(self, ids: list[int]) -> None:
        """Cancel jobs."""

    def describe(self, request: SubmitRequest, *, test_only: bool = False) -> str:
        """The exact submission, for --dry-run."""
        return f"{self.name} submission of {request.name!r} with tag sk:{request.tag}"
