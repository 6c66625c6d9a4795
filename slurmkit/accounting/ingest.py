"""Spool -> store. Idempotent (upsert on (cluster, job_id, run)), under a lock, SIGKILL-safe.

A spool file is removed only after the transaction holding it committed; a kill before that leaves the file,
and the next run upserts it again (harmless). Malformed files go to quarantine/ with a reason, never deleted.
If the store cannot be opened or written, the records stay spooled.
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
        sql = jobs.upsert_sql()
        for start in range(0, len(files), batch):
            rows, gpu_rows, done = [], [], []
            for path in files[start:start + batch]:
                try:
                    rec = json.loads(path.read_bytes())
                    reason = record.validate(rec)
                except (OSError, ValueError) as exc:
                    reason = f"not valid JSON: {exc}"
                if reason:
                    spool.quarantine(path, reason)
                    res.quarantined += 1
                    continue
                if record.is_gpus(rec):  # a node's per-GPU summary (slurmkit/store/gpus.py)
                    gpu_rows.extend(gpus.rows(rec))
                else:
                    rows.append(jobs.row({**rec, "ingested_at": int(time.time())}, node_types))
                done.append(path)
            if not done:
                continue
            runs = {r[:3] for r in rows} | {r[:3] for r in gpu_rows}
            with store.transaction() as cur:
                rollup.mark(store, runs, cur)  # the hours the runs start in now (a re-ingest may move a run)
                if rows:
                    cur.executemany(store.sql(sql), rows)
                if gpu_rows:
                    cur.executemany(store.sql(gpus.upsert_sql()), gpu_rows)
                rollup.mark(store, runs, cur)  # ... and after
            for path in done:  # only now, after COMMIT
                os.unlink(path)
            res.ingested += len(done)
        res.remaining = len(spool.pending(d))
        if res.ingested:
            rollup.refresh(store)  # the records are committed; a failure here leaves only stale (slower) days
    return res
