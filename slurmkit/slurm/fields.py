"""Values as Slurm writes them, read once for all: the same words in squeue, scontrol and sacct output, TRES
strings, exit codes and NO_VAL in the hooks' environment.

No module-level `re`: the jobcomp hook (python -S, once per job) imports this module, and `re` costs it ~6 ms;
the functions that need a regex import it when called (re caches the compiled pattern).
"""

from __future__ import annotations

# Slurm job ids are uint32; 0xfffffffe (NO_VAL) and 0xffffffff (INFINITE) are reserved (slurm.h).
MAX_JOB_ID = 0xFFFFFFFD
NOT_ARRAY = 4294967294  # Slurm 22.05 passes ARRAYTASKID=4294967294 (NO_VAL-1) for jobs that are not arrays

_NONE = {"", "None", "none", "Unknown", "N/A", "(null)", "NONE", "None assigned"}
_DURATION = r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$"
_GPU = r"(?:^|[,/:])gpu(?::([^,=:]+))?(?:[:=](\d+))?(?=,|$)"


def text(value: str | None) -> str | None:
    """A value, or None for Slurm's words for nothing ("Unknown", "None", "N/A", "(null)")."""
    return None if value is None or value.strip() in _NONE else value.strip()


def base_state(state: str) -> str:
    """"CANCELLED by 0" -> CANCELLED, "COMPLETING+" -> COMPLETING (sacct and squeue decorate the state)."""
    return state.split()[0].rstrip("+") if state.strip() else ""


def duration_s(value: str) -> int | None:
    """Seconds in [D-][HH:]MM:SS (squeue %M/%L, scontrol RunTime/TimeLimit, sacct Elapsed); None otherwise."""
    import re

    m = re.match(_DURATION, value.strip())
    if not m:
        return None
    d, h, mi, s = (int(x) if x else 0 for x in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def duration(seconds: int) -> str:
    d, rem = divmod(max(seconds, 0), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def time_left(limit: str, used: str) -> str:
    """What scontrol does not print but squeue %L does: the limit minus the time used."""
    lim, use = duration_s(limit), duration_s(used)
    if limit.strip() == "UNLIMITED":
        return "UNLIMITED"
    return duration(lim - use) if lim is not None and use is not None else ""


def gpu_count(tres: str | None, per: int = 1) -> int | None:
    """GPUs in a TRES string: "cpu=1,gres/gpu=2,gres/gpu:a100=2" (allocated: the untyped count), "gres:gpu:a100:2"
    (22.05 TresPerNode/TresPerJob, squeue %b), "gres/gpu:a100=2" (later releases); times `per` (nodes, for a
    per-node request). None when it names no GPU."""
    import re

    if not tres:
        return None
    counts = [int(n if n else t if t and t.isdigit() else 1) for t, n in re.findall(_GPU, tres.strip())]
    if not counts:
        return None
    untyped = re.search(r"(?:^|,)gres/gpu=(\d+)", tres)  # TRES lists the total and each type: take the total
    return (int(untyped.group(1)) if untyped else counts[0]) * per


def split_job_id(job_id: str) -> tuple[str | None, str | None]:
    """(array job id, task) of "123_4" / "123_[5-9%2]"; (None, None) for a plain or het job id."""
    base, sep, task = job_id.partition("_")
    return (base, task.strip("[]")) if sep else (None, None)


def parse_gpu_tres(tres: str) -> tuple[int, list[str]]:
    """(GPU count, sorted GPU types) from an allocation TRES string like `cpu=16,gres/gpu=4,gres/gpu:a100=4`.

    The untyped `gres/gpu=N` is the total; typed entries name the types. When only typed entries are present
    (AccountingStorageTRES listing types only), the total is their sum. String methods: the hook's path.
    """
    total: int | None = None
    typed: dict[str, int] = {}
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
