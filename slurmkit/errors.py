"""One exception hierarchy. Library code raises these; only the CLI turns them into messages and exit codes.

Every user-facing error can say where the problem is (file, key path, YAML line), what was expected and how to
fix it, so the CLI can print it without a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EXIT_USAGE = 2  # bad input: spec, site config, command-line arguments
EXIT_FAILURE = 1  # something outside the user's input failed (Slurm, the store, the network)


@dataclass
class Problem:
    """One thing wrong with an input file, located as precisely as we can."""

    message: str
    file: str | None = None
    key: str | None = None  # dotted key path, e.g. "nccl.env.NCCL_TOPO"
    line: int | None = None
    hint: str | None = None
    severity: str = "error"  # "error" or "warning"

    def format(self) -> str:
        where = self.file or ""  # a command-line option has no file: "error: --tz: ..."
        if self.line is not None:
            where += f":{self.line}"
        head = f"{where}: {self.severity}" if where else self.severity
        if self.key:
            head += f": {self.key}"
        text = f"{head}: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class SlurmkitError(Exception):
    """Base of every error slurmkit raises on purpose."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def format(self) -> str:
        text = f"error: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class InputError(SlurmkitError):
    """The user's input (a spec, a site config, an option) is wrong. Exit status 2."""

    exit_code = EXIT_USAGE

    def __init__(self, problems: Sequence[Problem] | Problem | str, *, hint: str | None = None):
        if isinstance(problems, str):
            problems = [Problem(problems, hint=hint)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems = list(problems)
        errors = [p for p in self.problems if p.severity == "error"]
        super().__init__((errors or self.problems)[0].message if self.problems else "invalid input")

    def format(self) -> str:
        return "\n".join(p.format() for p in self.problems)


class SpecError(InputError):
    """A job spec is invalid or does not fit the site."""


class SiteConfigError(InputError):
    """A site configuration is invalid or cannot be found."""


class RenderError(InputError):
    """A value cannot be put into a script safely, or a template is broken."""


class BackendError(SlurmkitError):
    """Slurm (or its REST daemon, or pyslurm) refused or failed a request."""


class BackendUnavailable(BackendError):
    """The backend cannot be used here (daemon down, library missing, unsupported API version)."""


class JobNotFound(BackendError):
    """Slurm does not know the job id (any more)."""


class StoreError(SlurmkitError):
    """The accounting store cannot be read or written."""
