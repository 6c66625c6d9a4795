"""Idempotent submission: a retry after a timeout must not create a second job.

Every request carries a tag that Slurm stores in the job comment (`sk:<tag>`). When an attempt fails because
Slurm could not be reached, the job may still have been created; before trying again we look the tag up.
"""

from __future__ import annotations

import sys
import time

from slurmkit.backends.base import Backend
from slurmkit.errors import BackendUnavailable
from slurmkit.request import SubmitRequest, SubmitResult


def submit(backend: Backend, request: SubmitRequest, *, test_only: bool = False, retries: int = 2,
           wait_s: float = 2.0) -> SubmitResult:
    attempt = 0
    while True:
        try:
            if attempt and not test_only:
                try:
                    found = backend.find_by_tag(request.tag)
                except BackendUnavailable:
                    found = None  # still unreachable: the next submit attempt will say so
                if found is not None:
                    return SubmitResult(job_id=found, backend=backend.name, reused=True)
            return backend.submit(request, test_only=test_only)
        except BackendUnavailable as exc:
            if attempt >= retries:
                raise
            attempt += 1
            print(f"sk: {exc.message}; retrying in {wait_s:.0f}s (attempt {attempt + 1} of {retries + 1})",
                  file=sys.stderr)
            time.sleep(wait_s)
