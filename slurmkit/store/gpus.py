"""Node GPU summaries ("gpus" records) -> job_gpus rows, upserted on (cluster, job_id, run, node, gpu_index).

job_gpus has no foreign key to jobs: a node summary may arrive before or after its job record (epilogs and the
jobcomp hook race, reconcile adds jobs later) and is never dropped for it; reports join the two. A summary without
metrics never replaces one with them, nor one with fewer samples one with more (a re-delivered or flagged copy
cannot erase measured numbers).
Used by ingest (spool files) and by reconcile (AdminComment segments, slurmkit/accounting/admin_comment.py).
"""

from __future__ import annotations

from slurmkit.accounting import gpusummary
from slurmkit.store import rollup
from slurmkit.store.db import Store

COLUMNS = ("cluster", "job_id", "run", "node", "gpu_index", "uuid", "pci_bus_id", "model", "util_mean", "util_max",
           "idle_fraction", "mem_max_mib", "mem_total_mib", "energy_j", "power_max_w", "samples", "interval_s",
           "source", "flags")
KEY = COLUMNS[:5]


def is_gpus(rec: object) -> bool:
    return isinstance(rec, dict) and rec.get("kind") == gpusummary.KIND


def validate(rec: dict) -> str | None:
    return gpusummary.validate(rec)


def rows(rec: dict) -> list[tuple]:
    """One row per GPU of a validated record."""
    out = []
    for g in rec["gpus"]:
        row = {**g, "cluster": rec["cluster"], "job_id": rec["job_id"], "run": rec["run"], "node": rec["node"],
               "gpu_index": g["index"], "interval_s": rec.get("interval_s"), "source": rec["source"],
               "flags": rec.get("flags")}
        out.append(tuple(row.get(c) for c in COLUMNS))
    return out


def upsert_sql() -> str:
    updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[len(KEY):])
    return (f"INSERT INTO job_gpus ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)}) "
            f"ON CONFLICT ({', '.join(KEY)}) DO UPDATE SET {updates} "
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
    if store.dialect == "sqlite":
        store.conn.execute("BEGIN IMMEDIATE")
    try:
        cur = store.conn.cursor()
        cur.executemany(store.sql(upsert_sql()), all_rows)
        rollup.mark(store, {r[:3] for r in all_rows}, cur)
    except Exception:
        store.conn.rollback()
        raise
    store.conn.commit() if store.dialect == "postgresql" else store.conn.execute("COMMIT")
    return len(all_rows)
