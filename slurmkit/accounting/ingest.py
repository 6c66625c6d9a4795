"""Spool -> store. Idempotent (upsert on (cluster, job_id, run)), under a lock, SIGKILL-safe.

A spool file is removed only after the transaction holding it committed; a kill before that leaves the file,
and the next run upserts it again (harmless). A file that cannot be stored (not JSON, a field of the wrong type or
out of range: slurmkit/record.py validates every field, or a row the store itself refuses) goes to quarantine/
with a reason, never deleted, and the others go on: one poison record never blocks the spool (`sk admin ingest`
exits 3 when it quarantined something). If the store cannot be opened or written, the records stay spooled.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from slurmkit import record
from slurmkit.accounting import spool
from slurmkit.errors import StoreError
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
    try:
        dfd = spool.open_dir(d, create=True)
    except spool.UnsafeSpool as exc:
        raise StoreError(str(exc), hint="nothing was ingested; the records stay where they are") from None
    try:
        return _ingest(store, d, dfd, batch, node_types)
    except spool.UnsafeSpool as exc:
        raise StoreError(str(exc), hint="what was ingested before is committed; the rest stays spooled") from None
    finally:
        os.close(dfd)


def _ingest(store: Store, d: Path, dfd: int, batch: int, node_types: dict[str, str] | None) -> IngestResult:
    res = IngestResult()
    lock = spool.lock(dfd, d)
    try:
        files = spool.names(dfd)
        for start in range(0, len(files), batch):
            good = []  # (name, jobs rows, gpu rows)
            for name in files[start:start + batch]:
                rec, reason = _load(dfd, name)
                if reason:
                    spool.quarantine_at(dfd, name, reason, d)
                    res.quarantined += 1
                elif record.is_gpus(rec):  # a node's per-GPU summary (slurmkit/store/gpus.py)
                    good.append((name, [], gpus.rows(rec)))
                else:
                    good.append((name, [jobs.row({**rec, "ingested_at": int(time.time())}, node_types)], []))
            if not good:
                continue
            try:
                _store(store, dfd, good)
            except _refused_errors():  # a row the store refuses: find it, one record per transaction
                for one in good:
                    try:
                        _store(store, dfd, [one])
                    except _refused_errors() as exc:
                        spool.quarantine_at(dfd, one[0], f"the store refused it: {type(exc).__name__}: {exc}", d)
                        res.quarantined += 1
                    else:
                        res.ingested += 1
                continue
            res.ingested += len(good)
        res.remaining = len(spool.names(dfd))
        if res.ingested:
            rollup.refresh(store)  # the records are committed; a failure here leaves only stale (slower) days
    finally:
        os.close(lock)
    return res


def _load(dfd: int, name: str) -> tuple[dict | None, str | None]:
    """(record, None), or (None, the reason it cannot be stored)."""
    try:
        rec = json.loads(spool.read(name, dir_fd=dfd))
    except spool.NotARecord as exc:
        return None, str(exc)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError; RecursionError: [[[[...
        return None, f"not valid JSON: {type(exc).__name__}: {str(exc)[:200]}"
    return rec, record.validate(rec)  # writers made it storable (record.storable); anything else is refused


def _store(store: Store, dfd: int, good: list[tuple[str, list[tuple], list[tuple]]]) -> None:
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
    for name, _, _ in good:
        os.unlink(name, dir_fd=dfd)


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
