"""The `sacct` command: build the call, run it, split its parsable output (Slurm 22.05 fields).

Generic Slurm accounting access, shared by reconcile and import-sacct (slurmkit/accounting/sacct.py
builds job records from these rows), `sk report --from-sacct` and the gres/gpuutil reader
(slurmkit/accounting/slurm_gpuutil.py). Standard library only: no pandas or click.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence

from slurmkit.errors import BackendError, BackendUnavailable

# Fields are separated by a delimiter made anew in every process: a user names their job (and JobName, like
# AdminComment, is free text that may hold '|', newlines and any byte Slurm accepts), and with a fixed '|' a name
# holding "\n<fields>" would read as a row of its own. Free text comes last: whatever it holds, the rows split
# unambiguously (parse()).
DELIMITER = f"|sk{os.urandom(6).hex()}|"
# JobName comes last: it is the only free-text field.
FIELDS = ("JobID", "JobIDRaw", "DBIndex", "Cluster", "User", "UID", "Account", "Partition", "QOS", "State",
          "ExitCode", "Submit", "Start", "End", "ElapsedRaw", "NodeList", "NNodes", "AllocCPUS", "AllocTRES",
          "JobName")
# States of a run that has ended (Slurm 22.05 job_state_string); RUNNING/PENDING/SUSPENDED rows are not records.
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE", "REQUEUED", "REVOKED"}
# 125_0 (array task), 131+1 (het job component), 129_[0-4] (an array's tasks that never started: one record).
_JOBID = re.compile(r"^(\d+)(?:_(\d+)|\+(\d+)|_\[([^\]]*)\])?$")
JOB_ID_CHUNK = 200  # job ids per `sacct -j` call (keeps the command line short)
# One job's allocation and step rows for `sk report job` from sacct (seff's figures); JobName last, as above.
USAGE_FIELDS = ("JobID", "JobIDRaw", "Cluster", "User", "Account", "Partition", "State", "Start", "End",
                "ElapsedRaw", "TimelimitRaw", "TotalCPU", "AllocCPUS", "MaxRSS", "ReqMem", "AllocTRES", "NodeList",
                "JobName")
_COMMENT_FIELDS = ("JobIDRaw", "AdminComment")
_MEM_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def _slurm_time(epoch: int) -> str:
    """sacct -S/-E take local time (SLURM_TIME_FORMAT does not apply to input)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def sacct_command(*, since: int | None = None, until: int | None = None, job_ids: Iterable[int] = (),
                  users: Sequence[str] | None = None, cluster: str | None = None,
                  states: Iterable[str] = ()) -> list[str]:
    """The sacct call. Without `states`, -S/-E select every run that overlapped the window (running ones too);
    with them, only runs that were in one of those states in the window: for end states, runs that ENDED in it,
    including runs that never started (cancelled while pending; 22.05.8, tests/data/accounting/README.md).
    sacct needs -E with -s (it lists nothing otherwise), so `until` must then be given."""
    cmd = ["sacct", "--duplicates", "--allocations", "-P", f"--delimiter={DELIMITER}", "-n", "-o", ",".join(FIELDS)]
    if states:
        if until is None:
            raise ValueError("sacct -s needs an end time (-E)")
        cmd += ["-s", ",".join(sorted(states))]
    ids = [str(int(j)) for j in job_ids]
    if ids:
        cmd += ["-j", ",".join(ids)]  # without -S, `-j` searches all time (22.05)
    if since is not None:
        cmd += ["-S", _slurm_time(since)]
    if until is not None:
        cmd += ["-E", _slurm_time(until)]
    if users:
        cmd += ["-u", ",".join(users)]
    else:
        cmd += ["-a"]
    if cluster:
        cmd += ["-M", cluster]
    return cmd


def run_sacct(cmd: list[str], timeout_s: float = 600.0) -> str:
    """Run sacct (or sacctmgr: any reader of slurmdbd) with epoch times in its output (SLURM_TIME_FORMAT=%s: no
    local-time parsing). The output is decoded as UTF-8 with surrogateescape: a byte that is not UTF-8 (a job
    name may hold one) stays recoverable and never stops the window; slurmkit.record.storable() writes it as
    \\xNN before a store sees it."""
    tool = cmd[0]
    env = {**os.environ, "SLURM_TIME_FORMAT": "%s"}
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", errors="surrogateescape",
                             timeout=timeout_s, env=env)
    except FileNotFoundError:
        raise BackendUnavailable(f"{tool} not found", hint="run this on a host with the Slurm client tools") from None
    except subprocess.TimeoutExpired:
        raise BackendUnavailable(f"{tool} did not answer in {timeout_s:.0f} s (is slurmdbd up?)") from None
    if res.returncode != 0:
        msg = res.stderr.strip() or f"exit status {res.returncode}"
        raise BackendError(f"{tool} failed: {msg}", hint="check slurmdbd (sacctmgr show cluster) and your rights "
                                                        "(other users' jobs need root or an operator)")
    return res.stdout


def parse_time(value: str) -> int | None:
    """Epoch from sacct output: `%s` epochs (our runs) or ISO local time (recorded default-format output)."""
    if value in ("", "Unknown", "None"):
        return None
    if value.isdigit():
        return int(value)
    try:
        return int(dt.datetime.fromisoformat(value).timestamp())
    except ValueError:
        return None


def parse_int(value: str) -> int | None:
    return int(value) if value.strip().isdigit() else None


def parse(text: str, fields: Sequence[str] = FIELDS, delimiter: str = DELIMITER) -> list[dict[str, str]]:
    """Rows of `sacct -P --delimiter=DELIMITER -n -o FIELDS` as dicts. Only the last field may hold newlines
    (free text): every other field is a Slurm-made value without one, so the text between one row's last
    delimiter and the next row's first is "<last field>\\n<first field>", split at its last newline."""
    n = len(fields)
    if not text.strip():
        return []
    parts = text.removesuffix("\n").split(delimiter)
    if n < 2 or (len(parts) - 1) % (n - 1):
        raise BackendError(f"unexpected sacct output: {len(parts) - 1} field delimiters do not make rows of "
                           f"{n} fields ({','.join(fields)}): {text[:200]!r}")
    rows, first = [], parts[0].lstrip("\n")
    count = (len(parts) - 1) // (n - 1)
    for r in range(count):
        chunk = parts[1 + r * (n - 1): 1 + (r + 1) * (n - 1)]
        if r == count - 1:
            last, nxt = chunk[-1], ""
        elif "\n" in chunk[-1]:
            last, nxt = chunk[-1].rsplit("\n", 1)
        else:
            last = nxt = None
        if last is None or "\n" in first or any("\n" in c for c in chunk[:-1]):
            raise BackendError(f"unexpected sacct output: row {r + 1} of {','.join(fields)} is not one line but "
                               f"its last field: {delimiter.join([first, *chunk])[:200]!r}")
        rows.append(dict(zip(fields, [first, *chunk[:-1], last], strict=True)))
        first = nxt
    return rows


def usage_command(ref: str, users: Sequence[str] | None = None) -> list[str]:
    """The allocation and every step of job `ref` (1234: the job, or every task of array 1234; 1234_7: one
    task), the latest run of each; only `users`' jobs when given (a non-admin: their own)."""
    cmd = ["sacct", "-P", f"--delimiter={DELIMITER}", "-n", "-j", ref, "-o", ",".join(USAGE_FIELDS)]
    return [*cmd, "-u", ",".join(users)] if users else [*cmd, "-a"]


def parse_mem(value: str) -> int | None:
    """Bytes in a sacct memory value: MaxRSS "3268K", AllocTRES "mem=16G", ReqMem "16G" (before 21.08: "4Gn"/"4Gc",
    per node or per CPU: the suffix is dropped); None when empty."""
    m = re.match(r"^([\d.]+)([KMGTP]?)[nc]?$", value.strip())
    return int(float(m.group(1)) * _MEM_UNITS[m.group(2)]) if m else None


def cpu_time_s(value: str) -> float | None:
    """Seconds in sacct's TotalCPU: [D-][HH:]MM:SS[.mmm] ("00:00.002", "01:02:03", "1-00:00:00")."""
    m = re.match(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$", value.strip())
    if not m:
        return None
    d, h, mi = (int(x) if x else 0 for x in m.groups()[:3])
    return ((d * 24 + h) * 60 + mi) * 60 + float(m.group(4))


def admin_comments(job_ids: Sequence[int], *, cluster: str | None = None, users: Sequence[str] | None = None,
                   run: Callable[[list[str]], str] = run_sacct) -> dict[int, str]:
    """AdminComment of each job (JobIDRaw -> text; runs of one job share it), for the AdminComment transport of
    node GPU summaries (slurmkit/accounting/admin_comment.py). A query of its own with AdminComment as the last
    field: it is free text, like JobName."""
    out: dict[int, str] = {}
    ids = sorted({int(j) for j in job_ids})
    for i in range(0, len(ids), JOB_ID_CHUNK):
        cmd = [*sacct_command(job_ids=ids[i:i + JOB_ID_CHUNK], cluster=cluster, users=users)]
        cmd[cmd.index("-o") + 1] = ",".join(_COMMENT_FIELDS)
        for row in parse(run(cmd), _COMMENT_FIELDS):
            if row["JobIDRaw"].isdigit() and row["AdminComment"].strip():
                out[int(row["JobIDRaw"])] = row["AdminComment"].strip()
    return out


def parse_job_id(text: str) -> tuple[int | None, int | None, int | None, int | None]:
    """(array job id, array task id, het job id, het job offset) of a JobID like 125_0, 131+1 or 129_[0-4]."""
    m = _JOBID.match(text)
    if not m:
        return None, None, None, None
    array_job = int(m.group(1)) if m.group(2) is not None or m.group(4) is not None else None
    array_task = int(m.group(2)) if m.group(2) is not None else None
    het_job = int(m.group(1)) if m.group(3) is not None else None
    het_offset = int(m.group(3)) if m.group(3) is not None else None
    return array_job, array_task, het_job, het_offset
