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

from slurmkit.accounting import record, spool
from slurmkit.store import gpus, rollup
from slurmkit.store.db import Store

JOB_COLUMNS = ("cluster", "job_id", "run", "array_job_id", "array_task_id", "het_job_id", "het_job_offset",
               "job_name", "user_name", "uid", "account", "partition", "qos", "state", "exit_code",
               "submit_time", "start_time", "end_time", "elapsed_s", "nodes", "node_count", "cpus", "gpus",
               "gpu_types", "tres", "source", "flags", "ingested_at")


@dataclass
class IngestResult:
    ingested: int = 0
    quarantined: int = 0
    remaining: int = 0


# A hook record without a trustworthy allocation (scontrol failed, or answered about a later run) never replaces
# a row that has one: e.g. the same spool file ingested again after `sk admin reconcile` completed its row.
# '%%': psycopg reads a single % as a placeholder; to SQLite's LIKE, %% is two wildcards, i.e. the same pattern.
_INCOMPLETE = "(COALESCE({t}.flags, '') LIKE '%%no-scontrol%%' OR COALESCE({t}.flags, '') LIKE '%%run-uncertain%%')"


def _upsert_sql() -> str:
    cols = ", ".join(JOB_COLUMNS)
    marks = ", ".join("?" for _ in JOB_COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in JOB_COLUMNS[3:])
    return (f"INSERT INTO jobs ({cols}) VALUES ({marks}) "
            f"ON CONFLICT (cluster, job_id, run) DO UPDATE SET {updates} "
            f"WHERE NOT {_INCOMPLETE.format(t='excluded')} OR {_INCOMPLETE.format(t='jobs')}")


def ingest(store: Store, spool_dir: str | Path, batch: int = 500) -> IngestResult:
    d = Path(spool_dir)
    d.mkdir(parents=True, exist_ok=True)
    res = IngestResult()
    with open(d / ".ingest.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        files = spool.pending(d)
        sql = _upsert_sql()
        for start in range(0, len(files), batch):
            rows, gpu_rows, done = [], [], []
            for path in files[start:start + batch]:
                try:
                    rec = json.loads(path.read_bytes())
                    reason = gpus.validate(rec) if gpus.is_gpus(rec) else record.validate(rec)
                except (OSError, ValueError) as exc:
                    reason = f"not valid JSON: {exc}"
                if reason:
                    spool.quarantine(path, reason)
                    res.quarantined += 1
                    continue
                if gpus.is_gpus(rec):  # a node's per-GPU summary (slurmkit/store/gpus.py)
                    gpu_rows.extend(gpus.rows(rec))
                else:
                    rec = {**rec, "ingested_at": int(time.time())}
                    rows.append(tuple(rec.get(c) for c in JOB_COLUMNS))
                done.append(path)
            if not done:
                continue
            if store.dialect == "sqlite":
                store.conn.execute("BEGIN IMMEDIATE")
            cur = store.conn.cursor()
            runs = {r[:3] for r in rows} | {r[:3] for r in gpu_rows}
            rollup.mark(store, runs, cur)  # the days the runs start in now (a re-ingest may move a run)
            if rows:
                cur.executemany(store.sql(sql), rows)
            if gpu_rows:
                cur.executemany(store.sql(gpus.upsert_sql()), gpu_rows)
            rollup.mark(store, runs, cur)  # ... and after
            store.conn.commit() if store.dialect == "postgresql" else store.conn.execute("COMMIT")
            for path in done:  # only now, after COMMIT
                os.unlink(path)
            res.ingested += len(done)
        res.remaining = len(spool.pending(d))
        if res.ingested:
            rollup.refresh(store)  # the records are committed; a failure here leaves only stale (slower) days
    return res
