"""The AdminComment transport: node GPU summaries kept in Slurm itself, for sites without a shared filesystem.

Format (versioned, compact): one segment per node, ``sk2:`` + base32(gzip(JSON of the "gpus" record)), all lower
case, segments separated by ``,``; other text in the comment (e.g. Princeton jobstats' ``JS1:``) is kept. Lower
case because Slurm 22.05's sacctmgr lower-cases every AdminComment it writes (``strip_quotes(..., 1)`` in
src/sacctmgr/job_functions.c of slurm-22-05-8-1; 23.02 keeps case), which destroyed the base64 of the first
format, ``SK1:``; that one is still read. ``,`` and not a space: ``scontrol show job -o`` separates its fields
with spaces. Slurm stores AdminComment in its accounting database, so `sk admin reconcile` can read it from sacct
later (parse_admin_comment).

The epilog runs after the job has finished in slurmctld, which then refuses ``scontrol update`` ("Job has already
finished", ESLURM_JOB_FINISHED, job_mgr.c of 22.05 and 25.11), so the segment goes to the accounting database:
``sacctmgr modify job ... set AdminComment=`` (AdminComment is one of the fields sacctmgr(1) may change after
job completion; Princeton jobstats' slurmctldepilog.sh does the same). Slurm can only replace AdminComment, so
each node's epilog reads it with sacct, merges and writes it, and then reads it back after a pause longer than
one read-write (so a concurrent writer that missed our segment has written by then) and retries when the
segment is gone. That narrows the race between nodes, it cannot close it; the spool transport has no such race
and stays the default. On a sacctmgr that lower-cases, a comment holding other tools' upper-case text is not
rewritten (it would corrupt theirs): the segment goes to the spool instead.
"""

from __future__ import annotations

import base64
import binascii
import functools
import gzip
import json
import random
import re
import time

from slurmkit.slurm import scontrol

PREFIX = "sk2:"  # written: base32, lower case
LEGACY_PREFIX = "SK1:"  # read only: base64, case-sensitive


def encode(rec: dict) -> str:
    raw = json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()
    return PREFIX + base64.b32encode(gzip.compress(raw, mtime=0)).decode().lower()


def is_segment(token: str) -> bool:
    """Whether a comma-separated token of an AdminComment is one of ours (either format, any case of sk2)."""
    return token.lower().startswith(PREFIX) or token.startswith(LEGACY_PREFIX)


def _tokens(text: str | None) -> list[str]:
    return [t for t in re.split(r"[,\s]+", text or "") if t]


def _decode(token: str) -> bytes:
    if token.startswith(LEGACY_PREFIX):
        return base64.b64decode(token[len(LEGACY_PREFIX):], validate=True)
    return base64.b32decode(token[len(PREFIX):], casefold=True)


def parse_admin_comment(text: str | None) -> list[dict]:
    """Every slurmkit node record in an AdminComment (foreign text is ignored). Raises ValueError naming a
    segment that starts with SK1: but does not decode."""
    out = []
    for token in _tokens(text):
        if not is_segment(token):
            continue
        try:
            rec = json.loads(gzip.decompress(_decode(token)))
        except (binascii.Error, OSError, EOFError, ValueError) as exc:
            raise ValueError(f"AdminComment segment {token[:24]}... does not decode ({exc})") from None
        if not isinstance(rec, dict):
            raise ValueError(f"AdminComment segment {token[:24]}... is not a JSON object")
        out.append(rec)
    return out


def merge(existing: str, rec: dict) -> str:
    """`existing` with the segment of rec's node and run replaced by rec's (a re-run epilog never duplicates)."""
    keep = []
    for token in filter(None, re.split(r",", existing or "")):
        token = token.strip()
        if is_segment(token):
            try:
                old = parse_admin_comment(token)[0]
                if (old.get("node"), old.get("run")) == (rec["node"], rec["run"]):
                    continue
            except ValueError:
                pass  # a segment we cannot read is kept: it is not ours to delete
        keep.append(token)
    return ",".join([*keep, encode(rec)])


def stored(job_id: int, timeout_s: float = 10.0) -> tuple[str, str] | None:
    """(the JobID sacctmgr selects it by, its AdminComment) of the job's latest run in Slurm's accounting
    database, or None while slurmdbd has no record of it. An array task is selected as ``<array>_<task>``: a
    plain id that is also the array's id would select every task (sacct/sacctmgr job conditions)."""
    status, out, err = scontrol.run(["sacct", "-j", str(int(job_id)), "-X", "-n", "-P",
                                     "-o", "JobIDRaw,JobID,AdminComment"], timeout_s)
    if status != 0:
        raise RuntimeError(f"sacct -j {int(job_id)} exited {status}: {err.strip()}")
    found = None
    for line in out.splitlines():
        raw, _, rest = line.partition("|")
        key, _, text = rest.partition("|")  # AdminComment last: free text
        if raw == str(int(job_id)):
            found = (key, text.strip())
    return found


def _holds(text: str, mine: str) -> bool:
    return mine in {t.lower() for t in _tokens(text)}


@functools.cache
def lowercases(timeout_s: float = 10.0) -> bool:
    """Whether this host's sacctmgr lower-cases the AdminComment it writes: Slurm before 23.02
    (`sacctmgr -V`: 'slurm-wlm 22.05.8', 'slurm 25.11.7')."""
    status, out, err = scontrol.run(["sacctmgr", "-V"], timeout_s)
    found = re.search(r"(\d+)\.(\d+)", out)
    if status != 0 or not found:
        raise RuntimeError(f"sacctmgr -V: cannot tell the Slurm version ({(err or out).strip()!r})")
    return (int(found[1]), int(found[2])) < (23, 2)


def deliver(rec: dict, attempts: int = 5, settle_s: float = 1.0, timeout_s: float = 10.0) -> None:
    """Add rec to its job's AdminComment in the accounting database (root or SlurmUser only). Raises
    RuntimeError when it did not stick, or when writing it would lower-case another tool's text."""
    job, mine = int(rec["job_id"]), encode(rec)
    cur = stored(job, timeout_s)
    for _ in range(attempts):
        if cur is not None:
            if _holds(cur[1], mine):
                return
            value = merge(cur[1], rec)
            if value != value.lower() and lowercases(timeout_s):
                raise RuntimeError(f"AdminComment of job {job} holds other text with upper case "
                                   f"({value[:40]!r}...), which this Slurm's sacctmgr would lower-case (fixed "
                                   "in Slurm 23.02): not rewritten")
            status, _, err = scontrol.run(["sacctmgr", "-i", "modify", "job", "where", f"jobid={cur[0]}", "set",
                                           f"AdminComment={value}"], timeout_s)
            if status != 0:
                raise RuntimeError(f"sacctmgr modify job where jobid={cur[0]} set AdminComment=...: "
                                   f"{err.strip()}")
        time.sleep(settle_s * (1 + random.random()))
        cur = stored(job, timeout_s)
    if cur is not None and _holds(cur[1], mine):
        return
    raise RuntimeError(f"AdminComment of job {job} lost our segment {attempts} times" if cur is not None
                       else f"job {job} is not in Slurm's accounting database after {attempts} tries")
