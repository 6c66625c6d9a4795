"""Spool -> store. Idempotent (upsert on (cluster, job_id, run)), under a lock, SIGKILL-safe.

A spool file is removed only after the transaction holding it committed; a kill before that leaves the file,
and the next run upserts it again (harmless). A file that cannot be stored (not JSON, a field of the wrong type or
out of range: slurmkit/record.py validates every field, or a row the store itself refuses) goes to quarantine/
with a reason, never deleted, and the others go on: one poison record never blocks the spool (`sk admin ingest`
exits 3 when it quarantined something). If the store cannot be opened or written, the records stay spooled.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from slurmkit import record
from slurmkit.accounting import spool
from slurmkit.store import gpus, jobs, rollup
from slurmkit.store.db import Store

EXIT_QUARANTINED = 3  # `sk admin ingest`: everything else was stored, but something was quarantined


@dataclass
class IngestResult:
    ingested: int = 0
    quarantined: int = 0
    remaining: int = 0


def ingest(store: Store, spool_dir: str | Path, batch: int = 500,
           node_types: dict[str, str] | None = None) -> IngestResult:
    """Move the spool's records into the store. `node_types`: the site's partition -> node type map (the hook
    does not read the site config), written as each job row's node_type."""
    d = Path(spool_dir)
    d.mkdir(parents=True, exist_ok=True)
    res = IngestResult()
    with open(d / ".ingest.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        files = spool.pending(d)
        for start in range(0, len(files), batch):
            good = []  # (path, jobs rows, gpu rows)
            for path in files[start:start + batch]:
                rec, reason = _load(path)
                if reason:
                    spool.quarantine(path, reason)
                    res.quarantined += 1
                elif record.is_gpus(rec):  # a node's per-GPU summary (slurmkit/store/gpus.py)
                    good.append((path, [], gpus.rows(rec)))
                else:
                    good.append((path, [jobs.row({**rec, "ingested_at": int(time.time())}, node_types)], []))
            if not good:
                continue
            try:
                _store(store, good)
            except _refused_errors():  # a row the store refuses: find it, one record per transaction
                for one in good:
                    try:
                        _store(store, [one])
                    except _refused_errors() as exc:
                        spool.quarantine(one[0], f"the store refused it: {type(exc).__name__}: {exc}")
                        res.quarantined += 1
                    else:
                        res.ingested += 1
                continue
            res.ingested += len(good)
        res.remaining = len(spool.pending(d))
        if res.ingested:
            rollup.refresh(store)  # the records are committed; a failure here leaves only stale (slower) days
    return res


def _load(path: Path) -> tuple[dict | None, str | None]:
    """(record, None), or (None, the reason it cannot be stored)."""
    try:
        rec = json.loads(spool.read(path))
    except spool.NotARecord as exc:
        return None, str(exc)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; RecursionError: [[[[...
        return None, f"not valid JSON: {type(exc).__name__}: {str(exc)[:200]}"
    return rec, record.validate(rec)


def _store(store: Store, good: list[tuple[Path, list[tuple], list[tuple]]]) -> None:
    """Upsert the records' rows in one transaction, then remove their files (only after COMMIT)."""
    rows = [r for _, job_rows, _ in good for r in job_rows]
    gpu_rows = [r for _, _, g in good for r in g]
    runs = {r[:3] for r in rows} | {r[:3] for r in gpu_rows}
    with store.transaction() as cur:
        rollup.mark(store, runs, cur)  # the hours the runs start in now (a re-ingest may move a run)
        if rows:
            cur.executemany(store.sql(jobs.upsert_sql()), rows)
        if gpu_rows:
            cur.executemany(store.sql(gpus.upsert_sql()), gpu_rows)
        rollup.mark(store, runs, cur)  # ... and after
    for path, _, _ in good:
        os.unlink(path)


def _refused_errors() -> tuple[type[BaseException], ...]:
    """Errors that say a row is bad (not that the store is down): the record is quarantined, not kept spooled."""
    import sqlite3

    errors: list[type[BaseException]] = [sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError,
                                         OverflowError]
    try:
        import psycopg
    except ImportError:  # pragma: no cover - depends on the installed extras
        pass
    else:
        errors += [psycopg.errors.DataError, psycopg.errors.IntegrityError]
    return tuple(errors)
