"""Node GPU summaries ("gpus" records) -> job_gpus rows, upserted on (cluster, job_id, run, node, gpu_index).

job_gpus has no foreign key to jobs: a node summary may arrive before or after its job record (epilogs and the
jobcomp hook race, reconcile adds jobs later) and is never dropped for it; reports join the two. A summary without
metrics never replaces one with them, nor one with fewer samples one with more (a re-delivered or flagged copy
cannot erase measured numbers).
Used by ingest (spool files) and by reconcile (AdminComment segments, slurmkit/accounting/admin_comment.py); the
columns come from the record contract (slurmkit/record.py).
"""

from __future__ import annotations

from slurmkit.record import GPU_COLUMNS, GPU_FIELDS, GPU_KEY, GPU_RECORD_FIELDS, GPU_ROW_FIELDS, is_gpus, validate
from slurmkit.store import rollup
from slurmkit.store.db import Store


def rows(rec: dict) -> list[tuple]:
    """One row per GPU of a validated record, in GPU_COLUMNS order (slurmkit/record.py)."""
    common = [rec.get(f.name) for f in GPU_RECORD_FIELDS]
    tail = [rec.get(f.name) for f in GPU_ROW_FIELDS]
    return [(*common, *(g.get(f.name) for f in GPU_FIELDS), *tail) for g in rec["gpus"]]


def upsert_sql() -> str:
    updates = ", ".join(f"{c} = excluded.{c}" for c in GPU_COLUMNS if c not in GPU_KEY)
    return (f"INSERT INTO job_gpus ({', '.join(GPU_COLUMNS)}) VALUES ({', '.join('?' for _ in GPU_COLUMNS)}) "
            f"ON CONFLICT ({', '.join(GPU_KEY)}) DO UPDATE SET {updates} "
            # measured numbers are never replaced by a copy without them (a flagged re-delivery, a DCGM row has no
            # sample count); between two copies alike, the one with more samples wins
            "WHERE (excluded.util_mean IS NOT NULL OR job_gpus.util_mean IS NULL) "
            "AND (COALESCE(excluded.samples, 0) >= COALESCE(job_gpus.samples, 0) OR job_gpus.util_mean IS NULL)")


def upsert(store: Store, recs: list[dict]) -> int:
    """Validate and upsert records in one transaction (reconcile's entry point). Returns the GPU rows written;
    raises ValueError naming the first invalid record before anything is written."""
    all_rows = []
    for rec in recs:
        reason = validate(rec) if is_gpus(rec) else f"not a gpus record (kind {rec.get('kind')!r})"
        if reason:
            raise ValueError(f"gpus record of job {rec.get('job_id')!r} on {rec.get('node')!r}: {reason}")
        all_rows.extend(rows(rec))
    if not all_rows:
        return 0
    with store.transaction() as cur:
        cur.executemany(store.sql(upsert_sql()), all_rows)
        rollup.mark(store, {r[:3] for r in all_rows}, cur)
    return len(all_rows)
