"""The job record written by `sk hook jobcomp`: a plain dict with a version, serialised as JSON."""

from __future__ import annotations

RECORD_VERSION = 1
NOT_ARRAY = 4294967294  # Slurm 22.05 passes ARRAYTASKID=4294967294 (NO_VAL-1) for jobs that are not arrays

def parse_gpu_tres(tres: str) -> tuple[int, list[str]]:
    """(GPU count, sorted GPU types) from a TRES string like `cpu=16,gres/gpu=4,gres/gpu:a100=4`.

    The untyped `gres/gpu=N` is the total; typed entries name the types. When only typed entries are present
    (AccountingStorageTRES listing types only), the total is their sum.
    """
    total: int | None = None
    typed: dict[str, int] = {}
    # String methods, not a regex: `re` costs the jobcomp hook (python -S) ~6 ms per job.
    for item in (tres or "").split(","):
        name, eq, count = item.strip().partition("=")
        if not (eq and count.isascii() and count.isdigit()):
            continue
        if name == "gres/gpu":
            total = int(count)
        elif name.startswith("gres/gpu:") and len(name) > len("gres/gpu:"):
            kind = name[len("gres/gpu:"):]
            typed[kind] = typed.get(kind, 0) + int(count)
    if total is None:
        total = sum(typed.values())
    return total, sorted(typed)


def exit_code(value: str | None) -> int | None:
    """Slurm writes exit codes as `code:signal`; keep the code, or 128+signal when killed by a signal."""
    if not value:
        return None
    code, _, sig = value.partition(":")
    try:
        c, s = int(code), int(sig or 0)
    except ValueError:
        return None
    return 128 + s if s and not c else c


def validate(rec: dict) -> str | None:
    """A reason why `rec` cannot be ingested, or None when it can."""
    if not isinstance(rec, dict):
        return "record is not a JSON object"
    if rec.get("version") != RECORD_VERSION:
        return f"unknown record version {rec.get('version')!r} (this slurmkit reads {RECORD_VERSION})"
    for key in ("cluster", "job_id"):
        if rec.get(key) in (None, ""):
            return f"missing {key}"
    if not isinstance(rec["job_id"], int):
        return f"job_id is not an integer: {rec['job_id']!r}"
    return None
